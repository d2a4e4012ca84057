//go:build !purego

#include "textflag.h"
#include "q_amd64.h"

// The AVX-512 rows kernel for Q2_0 weights (DotQ2_0ActsRows on the CPUs
// of the AVX-512 Q1_0 kernel, whose activation layout Acts.bq4 it reads:
// see Acts.setQuad). A step takes eight Q2_0 blocks (144 bytes, 512
// weights) against sixteen activation blocks L = 0..15; block L is half
// L%2 of weight block L/2. Activation vector r = 0..7 holds at bytes
// 4L+b code 4r+b of block L, whose weight code is field b (bits 2b, 2b+1)
// of code byte 8(L%2)+r of weight block L/2. Qword Q of P0 holds code
// bytes 0-3 and 8-11 of weight block Q, of P1 bytes 4-7 and 12-15; per r,
// VPMULTISHIFTQB picks the fields out of P0 (r < 4) or P1 and an AND
// keeps their two bits: a vector of codes q in 0..3. VPDPBUSD of it
// with activation codes r adds Σ q·x of every block into its own int32
// lane; starting the lanes at −Σx gives Σ(q−1)·x, exact. The float32
// steps are dotQ2_0Go's, lane for lane: l[i%8] += float32(s) · (d0 · d1),
// blocks 0..7 of the step, then 8..15.

// VPERMT2B indexes gathering the 16 code bytes of each of four 18-byte
// blocks from bytes 0..63 and (bit 6 set) 8..71 of their 72 bytes (the
// same gather as the Q1_0 kernel's qsel, whose blocks are 18 bytes too).
DATA q2cidx<>+0(SB)/8, $0x0908070605040302
DATA q2cidx<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA q2cidx<>+16(SB)/8, $0x1b1a191817161514
DATA q2cidx<>+24(SB)/8, $0x232221201f1e1d1c
DATA q2cidx<>+32(SB)/8, $0x2d2c2b2a29282726
DATA q2cidx<>+40(SB)/8, $0x3534333231302f2e
DATA q2cidx<>+48(SB)/8, $0x3f3e3d3c3b3a3938
DATA q2cidx<>+56(SB)/8, $0x7f7e7d7c7b7a7978
GLOBL q2cidx<>(SB), RODATA|NOPTR, $64

// VPERMT2B indexes making P0 and P1 from the code bytes of blocks 0..3
// (first table) and 4..7 (second): qword Q holds bytes 0-3, 8-11 (P0) or
// 4-7, 12-15 (P1) of block Q.
DATA q2p0idx<>+0(SB)/8, $0x0b0a090803020100
DATA q2p0idx<>+8(SB)/8, $0x1b1a191813121110
DATA q2p0idx<>+16(SB)/8, $0x2b2a292823222120
DATA q2p0idx<>+24(SB)/8, $0x3b3a393833323130
DATA q2p0idx<>+32(SB)/8, $0x4b4a494843424140
DATA q2p0idx<>+40(SB)/8, $0x5b5a595853525150
DATA q2p0idx<>+48(SB)/8, $0x6b6a696863626160
DATA q2p0idx<>+56(SB)/8, $0x7b7a797873727170
GLOBL q2p0idx<>(SB), RODATA|NOPTR, $64
DATA q2p1idx<>+0(SB)/8, $0x0f0e0d0c07060504
DATA q2p1idx<>+8(SB)/8, $0x1f1e1d1c17161514
DATA q2p1idx<>+16(SB)/8, $0x2f2e2d2c27262524
DATA q2p1idx<>+24(SB)/8, $0x3f3e3d3c37363534
DATA q2p1idx<>+32(SB)/8, $0x4f4e4d4c47464544
DATA q2p1idx<>+40(SB)/8, $0x5f5e5d5c57565554
DATA q2p1idx<>+48(SB)/8, $0x6f6e6d6c67666564
DATA q2p1idx<>+56(SB)/8, $0x7f7e7d7c77767574
GLOBL q2p1idx<>(SB), RODATA|NOPTR, $64

// VPERMT2W indexes repeating each block's fp16 scale for its two
// activation blocks: words 0, 9, 18, 27 of bytes 0..63 and (32+) of
// bytes 72..135.
DATA q2widx<>+0(SB)/8, $0x0009000900000000
DATA q2widx<>+8(SB)/8, $0x001b001b00120012
DATA q2widx<>+16(SB)/8, $0x0029002900200020
DATA q2widx<>+24(SB)/8, $0x003b003b00320032
DATA q2widx<>+32(SB)/8, $0x0000000000000000
DATA q2widx<>+40(SB)/8, $0x0000000000000000
DATA q2widx<>+48(SB)/8, $0x0000000000000000
DATA q2widx<>+56(SB)/8, $0x0000000000000000
GLOBL q2widx<>(SB), RODATA|NOPTR, $64

// VPMULTISHIFTQB controls for r%4 = 0..3: byte 4k+b of a qword takes the
// bits from 8(r%4+4k)+2b on, field b of code byte r%4 (k = 0) or of the
// byte four on (k = 1); then the mask of the low two bits.
DATA q2ctl<>+0(SB)/8, $0x2624222006040200
DATA q2ctl<>+8(SB)/8, $0x2e2c2a280e0c0a08
DATA q2ctl<>+16(SB)/8, $0x3634323016141210
DATA q2ctl<>+24(SB)/8, $0x3e3c3a381e1c1a18
DATA q2ctl<>+32(SB)/8, $0x0303030303030303
GLOBL q2ctl<>(SB), RODATA|NOPTR, $40

#define Q2CONSTS \
	VMOVDQU64    q2cidx<>(SB), Z23   \
	VMOVDQU64    q2p0idx<>(SB), Z24  \
	VMOVDQU64    q2p1idx<>(SB), Z25  \
	VMOVDQU64    q2widx<>(SB), Z26   \
	VPBROADCASTQ q2ctl<>+0(SB), Z27  \
	VPBROADCASTQ q2ctl<>+8(SB), Z28  \
	VPBROADCASTQ q2ctl<>+16(SB), Z29 \
	VPBROADCASTQ q2ctl<>+24(SB), Z30 \
	VPBROADCASTQ q2ctl<>+32(SB), Z31

// Q2EXPAND turns the eight Q2_0 blocks at SI into the scales Z9 (float32,
// one per activation block) and the code vectors Z10..Z17 (r = 0..7).
// Every load stays inside the 144 bytes.
#define Q2EXPAND \
	VMOVDQU64      0(SI), Z8        \
	VMOVDQU64      72(SI), Z18      \
	VMOVDQA64      Z26, Z9          \
	VPERMI2W       Z18, Z8, Z9      \
	VCVTPH2PS      Y9, Z9           \
	VPERMT2B       8(SI), Z23, Z8   \
	VPERMT2B       80(SI), Z23, Z18 \
	VMOVDQA64      Z24, Z19         \
	VPERMI2B       Z18, Z8, Z19     \
	VPERMT2B       Z18, Z25, Z8     \
	VPMULTISHIFTQB Z19, Z27, Z10    \
	VPANDD         Z31, Z10, Z10    \
	VPMULTISHIFTQB Z19, Z28, Z11    \
	VPANDD         Z31, Z11, Z11    \
	VPMULTISHIFTQB Z19, Z29, Z12    \
	VPANDD         Z31, Z12, Z12    \
	VPMULTISHIFTQB Z19, Z30, Z13    \
	VPANDD         Z31, Z13, Z13    \
	VPMULTISHIFTQB Z8, Z27, Z14     \
	VPANDD         Z31, Z14, Z14    \
	VPMULTISHIFTQB Z8, Z28, Z15     \
	VPANDD         Z31, Z15, Z15    \
	VPMULTISHIFTQB Z8, Z29, Z16     \
	VPANDD         Z31, Z16, Z16    \
	VPMULTISHIFTQB Z8, Z30, Z17     \
	VPANDD         Z31, Z17, Z17

// Q2SCALE converts token P's int32 sums A and adds them to its float32
// lanes F (Y): blocks 0..7, then 8..15.
#define Q2SCALE(P, A, AY, F) \
	VCVTDQ2PS     A, A                 \
	VMULPS        512(P)(DX*1), Z9, Z21 \
	VMULPS        Z21, A, A            \
	VADDPS        AY, F, F             \
	VEXTRACTF64X4 $1, A, Y22           \
	VADDPS        Y22, F, F

// Q2TOK adds the step to token P: int32 lanes A, float32 lanes F.
#define Q2TOK(P, A, AY, F) \
	VMOVDQU32 576(P)(DX*1), A       \
	VPDPBUSD  0(P)(DX*1), Z10, A    \
	VPDPBUSD  64(P)(DX*1), Z11, A   \
	VPDPBUSD  128(P)(DX*1), Z12, A  \
	VPDPBUSD  192(P)(DX*1), Z13, A  \
	VPDPBUSD  256(P)(DX*1), Z14, A  \
	VPDPBUSD  320(P)(DX*1), Z15, A  \
	VPDPBUSD  384(P)(DX*1), Z16, A  \
	VPDPBUSD  448(P)(DX*1), Z17, A  \
	Q2SCALE(P, A, AY, F)

// Q2TOK1 is Q2TOK for one token (decoding) in two chains of VPDPBUSD
// (r even, odd), added at the end: the same int32 sums, half the chain.
#define Q2TOK1 \
	VMOVDQU32 576(R8)(DX*1), Z4     \
	VPXORD    Z5, Z5, Z5            \
	VPDPBUSD  0(R8)(DX*1), Z10, Z4  \
	VPDPBUSD  64(R8)(DX*1), Z11, Z5 \
	VPDPBUSD  128(R8)(DX*1), Z12, Z4 \
	VPDPBUSD  192(R8)(DX*1), Z13, Z5 \
	VPDPBUSD  256(R8)(DX*1), Z14, Z4 \
	VPDPBUSD  320(R8)(DX*1), Z15, Z5 \
	VPDPBUSD  384(R8)(DX*1), Z16, Z4 \
	VPDPBUSD  448(R8)(DX*1), Z17, Z5 \
	VPADDD    Z5, Z4, Z4            \
	Q2SCALE(R8, Z4, Y4, Y0)

#define Q2STEP_1 Q2EXPAND ; Q2TOK1
#define Q2STEP_2 Q2EXPAND ; Q2TOK(R8, Z4, Y4, Y0) ; Q2TOK(R9, Z5, Y5, Y1)
#define Q2STEP_3 Q2STEP_2 ; Q2TOK(R10, Z6, Y6, Y2)
#define Q2STEP_4 Q2STEP_3 ; Q2TOK(R11, Z7, Y7, Y3)

// q2QuadRowsK are ROWS (q_amd64.h) for K tokens (each &Acts.bq4[0]):
// the weights stream from memory and a step spans up to three cache
// lines, so each step fetches a second line 2 KiB ahead besides ROWS'
// one (the hardware prefetcher takes the rest).
#define Q2FETCH PREFETCHT0 2120(SI)
#define Q2ROWSTEP_4 Q2FETCH ; Q2STEP_4
#define Q2ROWSTEP_3 Q2FETCH ; Q2STEP_3
#define Q2ROWSTEP_2 Q2FETCH ; Q2STEP_2
#define Q2ROWSTEP_1 Q2FETCH ; Q2STEP_1

TEXT ·q2QuadRows4(SB), NOSPLIT, $0-56; ROWS(TOKS_4, Q2CONSTS, ZERO_4, Q2ROWSTEP_4, 144, 640, SUMS_4)
TEXT ·q2QuadRows3(SB), NOSPLIT, $0-56; ROWS(TOKS_3, Q2CONSTS, ZERO_3, Q2ROWSTEP_3, 144, 640, SUMS_3)
TEXT ·q2QuadRows2(SB), NOSPLIT, $0-56; ROWS(TOKS_2, Q2CONSTS, ZERO_2, Q2ROWSTEP_2, 144, 640, SUMS_2)
TEXT ·q2QuadRows1(SB), NOSPLIT, $0-56; ROWS(TOKS_1, Q2CONSTS, ZERO_1, Q2ROWSTEP_1, 144, 640, SUMS_1)
