//go:build !purego

#include "textflag.h"
#include "q_amd64.h"

// Byte j of a Q1_0 sub-block's 32 sign bits lives in byte j/8, bit j%8.
DATA q1shuf<>+0(SB)/8, $0x0000000000000000
DATA q1shuf<>+8(SB)/8, $0x0101010101010101
DATA q1shuf<>+16(SB)/8, $0x0202020202020202
DATA q1shuf<>+24(SB)/8, $0x0303030303030303
GLOBL q1shuf<>(SB), RODATA|NOPTR, $32

DATA q1bit<>+0(SB)/8, $0x8040201008040201
DATA q1bit<>+8(SB)/8, $0x8040201008040201
DATA q1bit<>+16(SB)/8, $0x8040201008040201
DATA q1bit<>+24(SB)/8, $0x8040201008040201
GLOBL q1bit<>(SB), RODATA|NOPTR, $32

DATA ones8<>+0(SB)/8, $0x0101010101010101
DATA ones8<>+8(SB)/8, $0x0101010101010101
DATA ones8<>+16(SB)/8, $0x0101010101010101
DATA ones8<>+24(SB)/8, $0x0101010101010101
GLOBL ones8<>(SB), RODATA|NOPTR, $32

DATA ones16<>+0(SB)/8, $0x0001000100010001
DATA ones16<>+8(SB)/8, $0x0001000100010001
DATA ones16<>+16(SB)/8, $0x0001000100010001
DATA ones16<>+24(SB)/8, $0x0001000100010001
GLOBL ones16<>(SB), RODATA|NOPTR, $32

// Q2_0: the 8 code bytes of a sub-block hold elements 4i+s at bits 2s.
// Lane L of the expanded vector holds, at byte 4s+i, the code of element
// 16L+4i+s (code byte 4L+i shifted right by 2s); the activations are
// permuted within each lane to the same order.
DATA q2shuf<>+0(SB)/8, $0x0302010003020100
DATA q2shuf<>+8(SB)/8, $0x0302010003020100
DATA q2shuf<>+16(SB)/8, $0x0706050407060504
DATA q2shuf<>+24(SB)/8, $0x0706050407060504
GLOBL q2shuf<>(SB), RODATA|NOPTR, $32

DATA q2shift<>+0(SB)/8, $0x0000000200000000
DATA q2shift<>+8(SB)/8, $0x0000000600000004
DATA q2shift<>+16(SB)/8, $0x0000000200000000
DATA q2shift<>+24(SB)/8, $0x0000000600000004
GLOBL q2shift<>(SB), RODATA|NOPTR, $32

DATA q2mask<>+0(SB)/8, $0x0303030303030303
DATA q2mask<>+8(SB)/8, $0x0303030303030303
DATA q2mask<>+16(SB)/8, $0x0303030303030303
DATA q2mask<>+24(SB)/8, $0x0303030303030303
GLOBL q2mask<>(SB), RODATA|NOPTR, $32

DATA q2xshuf<>+0(SB)/8, $0x0d0905010c080400
DATA q2xshuf<>+8(SB)/8, $0x0f0b07030e0a0602
DATA q2xshuf<>+16(SB)/8, $0x0d0905010c080400
DATA q2xshuf<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL q2xshuf<>(SB), RODATA|NOPTR, $32

// VPERMPS indexes repeating each weight block's scale for its activation
// blocks: two Q1_0 blocks of four, four Q2_0 blocks of two.
DATA q1perm<>+0(SB)/8, $0x0000000000000000
DATA q1perm<>+8(SB)/8, $0x0000000000000000
DATA q1perm<>+16(SB)/8, $0x0000000100000001
DATA q1perm<>+24(SB)/8, $0x0000000100000001
GLOBL q1perm<>(SB), RODATA|NOPTR, $32

DATA q2perm<>+0(SB)/8, $0x0000000000000000
DATA q2perm<>+8(SB)/8, $0x0000000100000001
DATA q2perm<>+16(SB)/8, $0x0000000200000002
DATA q2perm<>+24(SB)/8, $0x0000000300000003
GLOBL q2perm<>(SB), RODATA|NOPTR, $32

// Q1BITS expands the 32 sign bits at bits to 0/1 bytes in Y0.
#define Q1BITS(bits) \
	VPBROADCASTD bits, Y0     \
	VPSHUFB      Y12, Y0, Y0  \
	VPAND        Y13, Y0, Y0  \
	VPMINUB      Y14, Y0, Y0

// Q1SUB computes the int32 partial sums of Σ±x for sub-block k:
// 2·Σ_{bit set} x − Σ x, pairs summed in int16 (|value| ≤ 512) and then
// to eight int32 lanes in dst.
#define Q1SUB(bits, xq, dst) \
	Q1BITS(bits)              \
	VMOVDQU      xq, Y1       \
	VPMADDUBSW   Y1, Y0, Y0   \
	VPMADDUBSW   Y1, Y14, Y1  \
	VPADDW       Y0, Y0, Y0   \
	VPSUBW       Y1, Y0, Y0   \
	VPMADDWD     Y15, Y0, dst

// Q1SUMS4 reduces the four sub-block vectors Y8..Y11 to [s0 s1 s2 s3] in dst.
#define Q1SUMS4(dst) \
	VPHADDD      Y9, Y8, Y8   \
	VPHADDD      Y11, Y10, Y10 \
	VPHADDD      Y10, Y8, Y8  \
	VEXTRACTI128 $1, Y8, X9   \
	VPADDD       X9, X8, dst

// Q1SUMS8 reduces the eight sub-blocks of the Q1_0 blocks at SI and
// SI+18 (activation codes at DI+xo, spaced by step) to [s0 .. s7] in Y3,
// computing each sub-block with SUB.
#define Q1SUMS8(SUB, xo, step) \
	SUB(2(SI), xo(DI), Y8)            \
	SUB(6(SI), xo+step(DI), Y9)       \
	SUB(10(SI), xo+2*step(DI), Y10)   \
	SUB(14(SI), xo+3*step(DI), Y11)   \
	Q1SUMS4(X3)                       \
	SUB(20(SI), xo+4*step(DI), Y8)    \
	SUB(24(SI), xo+5*step(DI), Y9)    \
	SUB(28(SI), xo+6*step(DI), Y10)   \
	SUB(32(SI), xo+7*step(DI), Y11)   \
	Q1SUMS4(X8)                       \
	VINSERTI128 $1, X8, Y3, Y3

// Q1PAIR adds the eight activation blocks of the Q1_0 blocks at SI, SI+18
// (activations at DI) to the lanes in Y7: l[i] += s_i · (d0·d1_i).
#define Q1PAIR \
	Q1SUMS8(Q1SUB, 2, 34)        \
	VCVTDQ2PS   Y3, Y3           \
	Q8SCALES8                    \
	Q1SCALES2(X5, AX, BX)                \
	VPERMPS     Y5, Y6, Y5       \
	VMULPS      Y5, Y4, Y4       \
	VMULPS      Y4, Y3, Y3       \
	VADDPS      Y3, Y7, Y7

// RETSUM8 returns the lanes of Y7 combined as sum8 does (at ret).
#define RETSUM8(ret) HSUM8(Y7, X7, X1, X0) ; VZEROUPPER ; VMOVSS X0, ret ; RET

// DOTX is the body of dotQ1_0Asm and dotQ2_0Asm,
//
//	func(w, x unsafe.Pointer, steps int, tw, tx unsafe.Pointer) float32
//
// CONSTS loads the constants and clears the lanes Y7, STEP adds WBYTES
// of weights at SI and eight Q8_0 activation blocks at DI to them. After
// steps steps comes the zero-padded last one at tw and tx, if tw is not
// nil: its padding adds +0 to lanes that can never be −0.
#define DOTX(CONSTS, STEP, WBYTES) \
	MOVQ  w+0(FP), SI     \
	MOVQ  x+8(FP), DI     \
	MOVQ  steps+16(FP), CX \
	CONSTS                \
	TESTQ CX, CX          \
	JE    tail            \
loop:                         \
	STEP                  \
	ADDQ  $WBYTES, SI     \
	ADDQ  $272, DI        \
	DECQ  CX              \
	JNZ   loop            \
tail:                         \
	MOVQ  tw+24(FP), SI   \
	TESTQ SI, SI          \
	JE    reduce          \
	MOVQ  tx+32(FP), DI   \
	STEP                  \
reduce:                       \
	RETSUM8(ret+40(FP))

// DOTACTS is DOTX for prepared activations (dotQ1_0ActsAsm,
// dotQ2_0ActsAsm),
//
//	func(w, codes, d, sum unsafe.Pointer, steps int, tw unsafe.Pointer) float32
//
// with the codes at DI (32 per block), the scales as float32 at R8 and
// the code sums at R9, the arrays zero-padded to whole steps. Weight rows
// stream from memory when decoding: it fetches 2 KiB ahead.
#define DOTACTS(CONSTS, STEP, WBYTES) \
	MOVQ  w+0(FP), SI      \
	MOVQ  codes+8(FP), DI  \
	MOVQ  d+16(FP), R8     \
	MOVQ  sum+24(FP), R9   \
	MOVQ  steps+32(FP), CX \
	CONSTS                 \
	TESTQ CX, CX           \
	JE    tail             \
loop:                          \
	PREFETCHT0 2048(SI)    \
	STEP                   \
	ADDQ  $WBYTES, SI      \
	ADDQ  $256, DI         \
	ADDQ  $32, R8          \
	ADDQ  $32, R9          \
	DECQ  CX               \
	JNZ   loop             \
tail:                          \
	MOVQ  tw+40(FP), SI    \
	TESTQ SI, SI           \
	JE    reduce           \
	STEP                   \
reduce:                        \
	RETSUM8(ret+48(FP))

#define Q1CONSTS \
	VMOVDQU q1shuf<>(SB), Y12 \
	VMOVDQU q1bit<>(SB), Y13  \
	VMOVDQU ones8<>(SB), Y14  \
	VMOVDQU ones16<>(SB), Y15 \
	VMOVDQU q1perm<>(SB), Y6  \
	VXORPS  Y7, Y7, Y7

// Q1SUBACTS computes the int32 partial sums of Σ_{bit set} x for one
// sub-block whose codes are in memory at xq.
#define Q1SUBACTS(bits, xq, dst) \
	Q1BITS(bits)              \
	VPMADDUBSW   xq, Y0, Y0   \
	VPMADDWD     Y15, Y0, dst

// Q1PAIRACTS is Q1PAIR with the codes at DI (32 per block), the scales as
// float32 at R8 and the code sums at R9.
#define Q1PAIRACTS \
	Q1SUMS8(Q1SUBACTS, 0, 32)        \
	VPSLLD      $1, Y3, Y3           \
	VPSUBD      0(R9), Y3, Y3        \
	VCVTDQ2PS   Y3, Y3               \
	Q1SCALES2(X5, AX, BX)                    \
	VPERMPS     Y5, Y6, Y5           \
	VMULPS      0(R8), Y5, Y4        \
	VMULPS      Y4, Y3, Y3           \
	VADDPS      Y3, Y7, Y7

// Q2PROD puts the int16 pair sums of Σ q·x for one sub-block in Y0
// (the activations in Y1).
#define Q2PROD(codes, xq) \
	VPBROADCASTQ codes, Y0    \
	VPSHUFB      Y10, Y0, Y0  \
	VPSRLVD      Y11, Y0, Y0  \
	VPAND        Y12, Y0, Y0  \
	VMOVDQU      xq, Y1       \
	VPSHUFB      Y13, Y1, Y2  \
	VPMADDUBSW   Y2, Y0, Y0

// Q2SUB computes the int32 partial sums of Σ(q−1)·x for one sub-block:
// Σ q·x − Σ x, pairs in int16 (|value| ≤ 1024), then eight int32 lanes.
#define Q2SUB(codes, xq, dst) \
	Q2PROD(codes, xq)         \
	VPMADDUBSW   Y1, Y14, Y1  \
	VPSUBW       Y1, Y0, Y0   \
	VPMADDWD     Y15, Y0, dst

// Q2SUMS reduces the sub-blocks of the Q2_0 blocks at SI+bo and SI+bo+18
// (activation codes at DI+xo, spaced by step) to [s0 s1 s2 s3] in dst,
// computing each sub-block with SUB.
#define Q2SUMS(SUB, bo, xo, step, dst) \
	SUB(bo+2(SI), xo(DI), Y8)              \
	SUB(bo+10(SI), xo+step(DI), Y9)        \
	VPHADDD      Y9, Y8, Y8                \
	SUB(bo+20(SI), xo+2*step(DI), Y9)      \
	SUB(bo+28(SI), xo+3*step(DI), Y4)      \
	VPHADDD      Y4, Y9, Y9                \
	VPHADDD      Y9, Y8, Y8                \
	VEXTRACTI128 $1, Y8, X9                \
	VPADDD       X9, X8, dst

// Q2D0 loads the scales of the four Q2_0 blocks at SI, each repeated for
// its two activation blocks, into Y5.
#define Q2D0 \
	F16X4(0(SI), 18(SI), 36(SI), 54(SI), AX, BX) \
	VMOVQ     AX, X5       \
	VCVTPH2PS X5, X5       \
	VPERMPS   Y5, Y6, Y5

// Q2GROUP adds the eight activation blocks of the four Q2_0 blocks at SI
// (activations at DI) to the lanes in Y7: l[i] += s_i · (d0·d1_i).
#define Q2GROUP \
	Q2SUMS(Q2SUB, 0, 2, 34, X3)     \
	Q2SUMS(Q2SUB, 36, 138, 34, X8)  \
	VINSERTI128 $1, X8, Y3, Y3      \
	VCVTDQ2PS   Y3, Y3              \
	Q8SCALES8                       \
	Q2D0                            \
	VMULPS      Y5, Y4, Y4          \
	VMULPS      Y4, Y3, Y3          \
	VADDPS      Y3, Y7, Y7

#define Q2CONSTS \
	VMOVDQU q2shuf<>(SB), Y10   \
	VMOVDQU q2shift<>(SB), Y11  \
	VMOVDQU q2mask<>(SB), Y12   \
	VMOVDQU q2xshuf<>(SB), Y13  \
	VMOVDQU ones8<>(SB), Y14    \
	VMOVDQU ones16<>(SB), Y15   \
	VMOVDQU q2perm<>(SB), Y6    \
	VXORPS  Y7, Y7, Y7

// Q2SUBACTS computes the int32 partial sums of Σ q·x for one sub-block
// whose codes are in memory at xq.
#define Q2SUBACTS(codes, xq, dst) \
	Q2PROD(codes, xq)         \
	VPMADDWD     Y15, Y0, dst

// Q2GROUPACTS is Q2GROUP with the codes at DI (32 per block), the scales
// as float32 at R8 and the code sums at R9.
#define Q2GROUPACTS \
	Q2SUMS(Q2SUBACTS, 0, 0, 32, X3)    \
	Q2SUMS(Q2SUBACTS, 36, 128, 32, X8) \
	VINSERTI128 $1, X8, Y3, Y3         \
	VPSUBD      0(R9), Y3, Y3          \
	VCVTDQ2PS   Y3, Y3                 \
	Q2D0                               \
	VMULPS      0(R8), Y5, Y4          \
	VMULPS      Y4, Y3, Y3             \
	VADDPS      Y3, Y7, Y7

// The kernels make the same float32 operations, in the same order, as
// dotQ1_0Go and dotQ2_0Go: pairs of Q1_0 blocks (36 bytes) or groups of
// four Q2_0 blocks (72 bytes) per step, each step eight activation blocks.
TEXT ·dotQ1_0Asm(SB), NOSPLIT, $0-44; DOTX(Q1CONSTS, Q1PAIR, 36)
TEXT ·dotQ1_0ActsAsm(SB), NOSPLIT, $0-52; DOTACTS(Q1CONSTS, Q1PAIRACTS, 36)
TEXT ·dotQ2_0Asm(SB), NOSPLIT, $0-44; DOTX(Q2CONSTS, Q2GROUP, 72)
TEXT ·dotQ2_0ActsAsm(SB), NOSPLIT, $0-52; DOTACTS(Q2CONSTS, Q2GROUPACTS, 72)
