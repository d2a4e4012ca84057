//go:build !purego

#include "textflag.h"
#include "q_amd64.h"
#include "vnni_amd64.h"

// The AVX2 rows kernel for Q2_0 weights (DotQ2_0ActsRows without the
// AVX-512 one), on the activation layout Acts.bq2 (see Acts.setQ2). A step
// takes four Q2_0 blocks (72 bytes) against eight activation blocks
// D = 0..7, one per int32 lane: G0 holds the code bytes of weight blocks 0
// and 2, G1 of 1 and 3, and their even (odd) dwords are code bytes 0-3
// (4-7) of each activation block's half, lane D. A shift by 2s and a mask
// make the codes that activation vector 4h+s multiplies; VPMADDUBSW (codes
// 0..3, so no pair saturates) and int16 adds over the eight vectors (|sum|
// ≤ 8·768) then VPMADDWD give Σ q·x per block, less the code sum Σ(q−1)·x,
// exact. The float32 steps are dotQ2_0Go's, lane for lane. One or two
// tokens share the expanded codes; the sixteen registers hold no more.

DATA q2ymask<>+0(SB)/8, $0x0303030303030303
DATA q2ymask<>+8(SB)/8, $0x0303030303030303
DATA q2ymask<>+16(SB)/8, $0x0303030303030303
DATA q2ymask<>+24(SB)/8, $0x0303030303030303
GLOBL q2ymask<>(SB), RODATA|NOPTR, $32

DATA q2yones<>+0(SB)/8, $0x0001000100010001
DATA q2yones<>+8(SB)/8, $0x0001000100010001
DATA q2yones<>+16(SB)/8, $0x0001000100010001
DATA q2yones<>+24(SB)/8, $0x0001000100010001
GLOBL q2yones<>(SB), RODATA|NOPTR, $32

// VPERMPS indexes repeating each weight block's scale for its two
// activation blocks.
DATA q2yperm<>+0(SB)/8, $0x0000000000000000
DATA q2yperm<>+8(SB)/8, $0x0000000100000001
DATA q2yperm<>+16(SB)/8, $0x0000000200000002
DATA q2yperm<>+24(SB)/8, $0x0000000300000003
GLOBL q2yperm<>(SB), RODATA|NOPTR, $32

// Q2YFIELDS makes the four code vectors of H (clobbered) in V0..V3:
// fields s = 0..3 of each byte.
#define Q2YFIELDS(H, V0, V1, V2, V3) \
	VPSRLW $2, H, V1     \
	VPAND  Y6, V1, V1    \
	VPSRLW $4, H, V2     \
	VPAND  Y6, V2, V2    \
	VPSRLW $6, H, V3     \
	VPAND  Y6, V3, V3    \
	VPAND  Y6, H, V0

// Q2YEXPAND turns the four Q2_0 blocks at SI into the code vectors
// Y8..Y15 (u = 0..7) and their scales, float32 per activation block, into
// Y0 (AX, BX clobbered).
#define Q2YEXPAND \
	VMOVDQU     2(SI), X4                 \
	VINSERTI128 $1, 38(SI), Y4, Y4        \
	VMOVDQU     20(SI), X5                \
	VINSERTI128 $1, 56(SI), Y5, Y5        \
	VSHUFPS     $0xdd, Y5, Y4, Y12        \
	VSHUFPS     $0x88, Y5, Y4, Y4         \
	Q2YFIELDS(Y4, Y8, Y9, Y10, Y11)       \
	Q2YFIELDS(Y12, Y12, Y13, Y14, Y15)    \
	F16X4(0(SI), 18(SI), 36(SI), 54(SI), AX, BX) \
	VMOVQ       AX, X5                    \
	VCVTPH2PS   X5, X5                    \
	VMOVDQU     q2yperm<>(SB), Y0         \
	VPERMPS     Y5, Y0, Y0

// Q2YTOK adds the step to token P's float32 lanes F (T0, T1 clobbered).
#define Q2YTOK(P, T0, T1, F) \
	VPMADDUBSW 0(P)(DX*1), Y8, T0     \
	VPMADDUBSW 32(P)(DX*1), Y9, T1    \
	VPADDW     T1, T0, T0             \
	VPMADDUBSW 64(P)(DX*1), Y10, T1   \
	VPADDW     T1, T0, T0             \
	VPMADDUBSW 96(P)(DX*1), Y11, T1   \
	VPADDW     T1, T0, T0             \
	VPMADDUBSW 128(P)(DX*1), Y12, T1  \
	VPADDW     T1, T0, T0             \
	VPMADDUBSW 160(P)(DX*1), Y13, T1  \
	VPADDW     T1, T0, T0             \
	VPMADDUBSW 192(P)(DX*1), Y14, T1  \
	VPADDW     T1, T0, T0             \
	VPMADDUBSW 224(P)(DX*1), Y15, T1  \
	VPADDW     T1, T0, T0             \
	VPMADDWD   q2yones<>(SB), T0, T0  \
	VPSUBD     288(P)(DX*1), T0, T0   \
	VCVTDQ2PS  T0, T0                 \
	VMULPS     256(P)(DX*1), Y0, T1   \
	VMULPS     T1, T0, T0             \
	VADDPS     T0, F, F

#define Q2YSTEP_1 Q2YEXPAND ; Q2YTOK(R8, Y4, Y5, Y7)
#define Q2YSTEP_2 Q2YSTEP_1 ; Q2YTOK(R9, Y1, Y2, Y3)

#define Q2YZERO_1 VXORPS Y7, Y7, Y7
#define Q2YZERO_2 Q2YZERO_1 ; VXORPS Y3, Y3, Y3

// Q2YSUMS reduces the lanes as sum8 does and stores at DI (and DI+R12).
#define Q2YSUMS_1 HSUM8(Y7, X7, X4, X5) ; VMOVSS X5, (DI)
#define Q2YSUMS_2 Q2YSUMS_1 ; ADDQ R12, DI ; HSUM8(Y3, X3, X4, X5) ; VMOVSS X5, (DI)

// The rows kernels q2RowsAVX2K (K = 1, 2 tokens, each &Acts.bq2[0]):
// ROWS, with the rows counted in R11 since Q2YEXPAND takes BX.
#define Q2YCONSTS VMOVDQU q2ymask<>(SB), Y6

TEXT ·q2RowsAVX2_2(SB), NOSPLIT, $0-56; ROWSIN(R11, TOKS_2, Q2YCONSTS, Q2YZERO_2, Q2YSTEP_2, 72, 320, Q2YSUMS_2)
TEXT ·q2RowsAVX2_1(SB), NOSPLIT, $0-56; ROWSIN(R11, TOKS_1, Q2YCONSTS, Q2YZERO_1, Q2YSTEP_1, 72, 320, Q2YSUMS_1)

// With AVX-VNNI (q2RowsVNNI1, 2), VPDPBUSD of code vector u and
// activation vector u adds Σ q·x straight into the int32 lanes, in place
// of the VPMADDUBSW, int16 adds and VPMADDWD: the same exact sums. The
// token pointers point 128 bytes into each step's entry (Q2VTOKS), so
// that the vectors (32u − 128) take 8-bit displacements; the scales are
// at 128, the code sums at 160. One token sums even and odd u in two
// chains (T0, T1), added at the end.
#define Q2VTOKS_1 TOKS_1 ; ADDQ $128, R8
#define Q2VTOKS_2 TOKS_2 ; ADDQ $128, R8 ; ADDQ $128, R9

// Q2VDOTS adds the eight products of token P to the int32 lanes E (even
// u) and O (odd u) with DOT (VEXDOT or EVEXDOT, vnni_amd64.h), which
// takes each register by name and by number (p, e, o).
#define Q2VDOTS(DOT, P, p, E, e, O, o) \
	DOT(-128, P, p, Y8, 8, E, e)  \
	DOT(-96, P, p, Y9, 9, O, o)   \
	DOT(-64, P, p, Y10, 10, E, e) \
	DOT(-32, P, p, Y11, 11, O, o) \
	DOT(0, P, p, Y12, 12, E, e)   \
	DOT(32, P, p, Y13, 13, O, o)  \
	DOT(64, P, p, Y14, 14, E, e)  \
	DOT(96, P, p, Y15, 15, O, o)

// Q2VFIN finishes token P's int32 lanes T0 into its float32 lanes F as
// Q2YTOK does (T1 clobbered).
#define Q2VFIN(P, T0, T1, F) \
	VPSUBD    160(P)(DX*1), T0, T0 \
	VCVTDQ2PS T0, T0               \
	VMULPS    128(P)(DX*1), Y0, T1 \
	VMULPS    T1, T0, T0           \
	VADDPS    T0, F, F

#define Q2VSTEP_1(DOT) \
	Q2YEXPAND                          \
	VPXOR     Y4, Y4, Y4               \
	VPXOR     Y5, Y5, Y5               \
	Q2VDOTS(DOT, R8, 8, Y4, 4, Y5, 5)  \
	VPADDD    Y5, Y4, Y4               \
	Q2VFIN(R8, Y4, Y5, Y7)

#define Q2VSTEP_2(DOT) \
	Q2YEXPAND                          \
	VPXOR     Y4, Y4, Y4               \
	VPXOR     Y1, Y1, Y1               \
	Q2VDOTS(DOT, R8, 8, Y4, 4, Y4, 4)  \
	Q2VDOTS(DOT, R9, 9, Y1, 1, Y1, 1)  \
	Q2VFIN(R8, Y4, Y5, Y7)             \
	Q2VFIN(R9, Y1, Y2, Y3)

TEXT ·q2RowsVNNI2(SB), NOSPLIT, $0-56; ROWSIN(R11, Q2VTOKS_2, Q2YCONSTS, Q2YZERO_2, Q2VSTEP_2(VEXDOT), 72, 320, Q2YSUMS_2)
TEXT ·q2RowsVNNI1(SB), NOSPLIT, $0-56; ROWSIN(R11, Q2VTOKS_1, Q2YCONSTS, Q2YZERO_1, Q2VSTEP_1(VEXDOT), 72, 320, Q2YSUMS_1)

// The same with the EVEX VPDPBUSD (AVX512_VNNI + AVX512VL).
TEXT ·q2RowsEVNNI2(SB), NOSPLIT, $0-56; ROWSIN(R11, Q2VTOKS_2, Q2YCONSTS, Q2YZERO_2, Q2VSTEP_2(EVEXDOT), 72, 320, Q2YSUMS_2)
TEXT ·q2RowsEVNNI1(SB), NOSPLIT, $0-56; ROWSIN(R11, Q2VTOKS_1, Q2YCONSTS, Q2YZERO_1, Q2VSTEP_1(EVEXDOT), 72, 320, Q2YSUMS_1)
