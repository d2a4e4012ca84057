//go:build !purego

#include "textflag.h"
#include "q_amd64.h"

// The AVX-512 batch kernel (DotQ1_0ActsBatch on CPUs with AVX-512 BW,
// VL, VBMI, VNNI and BITALG). It takes a quad of Q1_0 blocks (512
// weights, sixteen activation blocks L = 0..15) per step, with the
// activations in Acts.bq4 (see Acts.setQuad): vector r = 0..7 holds at
// bytes 4L..4L+3 codes 4r..4r+3 of block L. Mask r selects, for byte
// 4L+b, sign bit 4r+b of block L (VPSHUFBITQMB); the mask makes a vector
// of 2s and 0s, and VPDPBUSD of it with codes r adds 2·Σ_{bit set} x of
// every block into its own int32 lane. Starting the lanes at −Σx gives
// each block's exact Σ±x, with no horizontal reduction. The float32
// steps are q1Batch's, lane for lane: l[i%8] += float32(s) · (d0 · d1),
// blocks 0..7 of the quad, then 8..15.

// Sign bit 4r+b of block L: with the quad's 64 sign bytes in order,
// block L's 32 bits are dword L, so byte j = 4(L%2)+b of qword L/2 takes
// bit 32(j/4) + 4r + j%4 of that qword. One qword per r, broadcast.
DATA qctl<>+0(SB)/8, $0x2322212003020100
DATA qctl<>+8(SB)/8, $0x2726252407060504
DATA qctl<>+16(SB)/8, $0x2b2a29280b0a0908
DATA qctl<>+24(SB)/8, $0x2f2e2d2c0f0e0d0c
DATA qctl<>+32(SB)/8, $0x3332313013121110
DATA qctl<>+40(SB)/8, $0x3736353417161514
DATA qctl<>+48(SB)/8, $0x3b3a39381b1a1918
DATA qctl<>+56(SB)/8, $0x3f3e3d3c1f1e1d1c
DATA qctl<>+64(SB)/8, $0x0202020202020202
GLOBL qctl<>(SB), RODATA|NOPTR, $72

// VPERMT2B indexes gathering the sign bytes of the four 18-byte blocks
// from bytes 0..63 and (bit 6 set) 8..71 of the quad.
DATA qsel<>+0(SB)/8, $0x0908070605040302
DATA qsel<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA qsel<>+16(SB)/8, $0x1b1a191817161514
DATA qsel<>+24(SB)/8, $0x232221201f1e1d1c
DATA qsel<>+32(SB)/8, $0x2d2c2b2a29282726
DATA qsel<>+40(SB)/8, $0x3534333231302f2e
DATA qsel<>+48(SB)/8, $0x3f3e3d3c3b3a3938
DATA qsel<>+56(SB)/8, $0x7f7e7d7c7b7a7978
GLOBL qsel<>(SB), RODATA|NOPTR, $64

// VPERMW indexes repeating each block's fp16 scale (words 0, 9, 18, 27)
// for its four activation blocks.
DATA qwsel<>+0(SB)/8, $0x0000000000000000
DATA qwsel<>+8(SB)/8, $0x0009000900090009
DATA qwsel<>+16(SB)/8, $0x0012001200120012
DATA qwsel<>+24(SB)/8, $0x001b001b001b001b
DATA qwsel<>+32(SB)/8, $0x0000000000000000
DATA qwsel<>+40(SB)/8, $0x0000000000000000
DATA qwsel<>+48(SB)/8, $0x0000000000000000
DATA qwsel<>+56(SB)/8, $0x0000000000000000
GLOBL qwsel<>(SB), RODATA|NOPTR, $64

// QSEL makes the 0/2 vector for r in V from the signs in Z8.
#define QSEL(ctl, V) \
	VPSHUFBITQMB ctl, Z8, K1 \
	VMOVDQU8.Z   Z18, K1, V

// QTOK adds the quad to token P: int32 lanes A, float32 lanes F (Y).
#define QTOK(P, A, AY, F) \
	VMOVDQU32     576(P)(DX*1), A \
	VPDPBUSD      0(P)(DX*1), Z10, A \
	VPDPBUSD      64(P)(DX*1), Z11, A \
	VPDPBUSD      128(P)(DX*1), Z12, A \
	VPDPBUSD      192(P)(DX*1), Z13, A \
	VPDPBUSD      256(P)(DX*1), Z14, A \
	VPDPBUSD      320(P)(DX*1), Z15, A \
	VPDPBUSD      384(P)(DX*1), Z16, A \
	VPDPBUSD      448(P)(DX*1), Z17, A \
	VCVTDQ2PS     A, A \
	VMULPS        512(P)(DX*1), Z9, Z21 \
	VMULPS        Z21, A, A \
	VADDPS        AY, F, F \
	VEXTRACTF64X4 $1, A, Y22 \
	VADDPS        Y22, F, F

// QUAD expands the quad of Q1_0 blocks at SI and runs TOKS on it.
#define QUAD(TOKS) \
	VMOVDQU64 0(SI), Z8 \
	VPERMW    Z8, Z20, Z9 \
	VCVTPH2PS Y9, Z9 \
	VPERMT2B  8(SI), Z19, Z8 \
	QSEL(Z24, Z10) \
	QSEL(Z25, Z11) \
	QSEL(Z26, Z12) \
	QSEL(Z27, Z13) \
	QSEL(Z28, Z14) \
	QSEL(Z29, Z15) \
	QSEL(Z30, Z16) \
	QSEL(Z31, Z17) \
	TOKS

#define QTOKS_1 QTOK(R8, Z4, Y4, Y0)
#define QTOKS_2 QTOKS_1 ; QTOK(R9, Z5, Y5, Y1)
#define QTOKS_3 QTOKS_2 ; QTOK(R10, Z6, Y6, Y2)
#define QTOKS_4 QTOKS_3 ; QTOK(R11, Z7, Y7, Y3)

#define QSTEP_4 QUAD(QTOKS_4)
#define QSTEP_3 QUAD(QTOKS_3)
#define QSTEP_2 QUAD(QTOKS_2)
#define QSTEP_1 QUAD1

// QMASK adds block L's 2·Σ x over the codes r whose sign bits are set
// (mask ctl) to lane L of A, for token R8: the codes are loaded under
// the mask, zeroing the others, and VPDPBUSD multiplies them by 2s.
#define QMASK(ctl, r, V, A) \
	VPSHUFBITQMB ctl, Z8, K1 \
	VMOVDQU8.Z   r(R8)(DX*1), K1, V \
	VPDPBUSD     V, Z18, A

// QUAD1 is QUAD(QTOKS_1) for one token (decoding): the codes load under
// the sign mask (no 0/2 vector per r) and the sums grow in two int32
// chains (r even, odd) added at the end, so the chain of dependent
// VPDPBUSD is half as long; the same int32 sums, so the same bits.
// Interleaved in one process it takes 11-18% less CPU time than
// QUAD(QTOKS_1) on 256 rows of 2048 or 5632 columns (load 28-31); the
// two chains make the gain (the masked load alone is on par with the
// 0/2 vector, and four chains gain nothing more).
#define QUAD1 \
	VMOVDQU64     0(SI), Z8 \
	VPERMW        Z8, Z20, Z9 \
	VCVTPH2PS     Y9, Z9 \
	VPERMT2B      8(SI), Z19, Z8 \
	VMOVDQU32     576(R8)(DX*1), Z4 \
	VPXORD        Z5, Z5, Z5 \
	QMASK(Z24, 0, Z10, Z4) \
	QMASK(Z25, 64, Z11, Z5) \
	QMASK(Z26, 128, Z12, Z4) \
	QMASK(Z27, 192, Z13, Z5) \
	QMASK(Z28, 256, Z14, Z4) \
	QMASK(Z29, 320, Z15, Z5) \
	QMASK(Z30, 384, Z16, Z4) \
	QMASK(Z31, 448, Z17, Z5) \
	VPADDD        Z5, Z4, Z4 \
	VCVTDQ2PS     Z4, Z4 \
	VMULPS        512(R8)(DX*1), Z9, Z21 \
	VMULPS        Z21, Z4, Z4 \
	VADDPS        Y4, Y0, Y0 \
	VEXTRACTF64X4 $1, Z4, Y22 \
	VADDPS        Y22, Y0, Y0

#define QCONSTS \
	VPBROADCASTQ qctl<>+0(SB), Z24  \
	VPBROADCASTQ qctl<>+8(SB), Z25  \
	VPBROADCASTQ qctl<>+16(SB), Z26 \
	VPBROADCASTQ qctl<>+24(SB), Z27 \
	VPBROADCASTQ qctl<>+32(SB), Z28 \
	VPBROADCASTQ qctl<>+40(SB), Z29 \
	VPBROADCASTQ qctl<>+48(SB), Z30 \
	VPBROADCASTQ qctl<>+56(SB), Z31 \
	VPBROADCASTQ qctl<>+64(SB), Z18 \
	VMOVDQU64    qsel<>(SB), Z19    \
	VMOVDQU64    qwsel<>(SB), Z20

// q1QuadK is BATCH and q1QuadRowsK ROWS for K tokens (each &Acts.bq4[0]),
// a step a quad of Q1_0 blocks.

// func q1QuadRows1..4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
TEXT ·q1QuadRows4(SB), NOSPLIT, $0-56; ROWS(TOKS_4, QCONSTS, ZERO_4, QSTEP_4, 72, 640, SUMS_4)
TEXT ·q1QuadRows3(SB), NOSPLIT, $0-56; ROWS(TOKS_3, QCONSTS, ZERO_3, QSTEP_3, 72, 640, SUMS_3)
TEXT ·q1QuadRows2(SB), NOSPLIT, $0-56; ROWS(TOKS_2, QCONSTS, ZERO_2, QSTEP_2, 72, 640, SUMS_2)
TEXT ·q1QuadRows1(SB), NOSPLIT, $0-56; ROWS(TOKS_1, QCONSTS, ZERO_1, QSTEP_1, 72, 640, SUMS_1)

// func q1Quad1..4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
TEXT ·q1Quad4(SB), NOSPLIT, $0-48; BATCH(TOKS_4, QCONSTS, ZERO_4, QSTEP_4, 72, 640, SUMS_4)
TEXT ·q1Quad3(SB), NOSPLIT, $0-48; BATCH(TOKS_3, QCONSTS, ZERO_3, QSTEP_3, 72, 640, SUMS_3)
TEXT ·q1Quad2(SB), NOSPLIT, $0-48; BATCH(TOKS_2, QCONSTS, ZERO_2, QSTEP_2, 72, 640, SUMS_2)
TEXT ·q1Quad1(SB), NOSPLIT, $0-48; BATCH(TOKS_1, QCONSTS, ZERO_1, QSTEP_1, 72, 640, SUMS_1)
