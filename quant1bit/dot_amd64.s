#include "textflag.h"

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

// Q1SUB computes the int32 partial sums of Σ±x for sub-block k:
// 2·Σ_{bit set} x − Σ x, pairs summed in int16 (|value| ≤ 512) and then
// to eight int32 lanes in dst.
#define Q1SUB(bits, xq, dst) \
	VPBROADCASTD bits, Y0     \
	VPSHUFB      Y12, Y0, Y0  \
	VPAND        Y13, Y0, Y0  \
	VPMINUB      Y14, Y0, Y0  \
	VMOVDQU      xq, Y1       \
	VPMADDUBSW   Y1, Y0, Y0   \
	VPMADDUBSW   Y1, Y14, Y1  \
	VPADDW       Y0, Y0, Y0   \
	VPSUBW       Y1, Y0, Y0   \
	VPMADDWD     Y15, Y0, dst

// func dotQ1_0Asm(w, x unsafe.Pointer, nb int) float32
//
// Same float32 operations, in the same order, as dotQ1_0Go.
TEXT ·dotQ1_0Asm(SB), NOSPLIT, $0-28
	MOVQ    w+0(FP), SI
	MOVQ    x+8(FP), DI
	MOVQ    nb+16(FP), CX
	VMOVDQU q1shuf<>(SB), Y12
	VMOVDQU q1bit<>(SB), Y13
	VMOVDQU ones8<>(SB), Y14
	VMOVDQU ones16<>(SB), Y15
	VXORPS  X6, X6, X6        // sum

loop:
	Q1SUB(2(SI), 2(DI), Y8)
	Q1SUB(6(SI), 36(DI), Y9)
	Q1SUB(10(SI), 70(DI), Y10)
	Q1SUB(14(SI), 104(DI), Y11)

	// [s0 s1 s2 s3], exact.
	VPHADDD      Y9, Y8, Y8
	VPHADDD      Y11, Y10, Y10
	VPHADDD      Y10, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8

	// t_k = s_k · dx_k; the four fp16 scales are gathered in a GPR.
	MOVWQZX   0(DI), AX
	MOVWQZX   34(DI), BX
	SHLQ      $16, BX
	ORQ       BX, AX
	MOVWQZX   68(DI), BX
	SHLQ      $32, BX
	ORQ       BX, AX
	MOVWQZX   102(DI), BX
	SHLQ      $48, BX
	ORQ       BX, AX
	VMOVQ     AX, X4
	VCVTPH2PS X4, X4
	VMULPS    X4, X8, X8

	// acc = ((0 + t0) + t1) + t2) + t3
	VXORPS    X5, X5, X5
	VADDSS    X8, X5, X5
	VMOVSHDUP X8, X9
	VADDSS    X9, X5, X5
	VMOVHLPS  X8, X8, X9
	VADDSS    X9, X5, X5
	VPSHUFD   $3, X8, X9
	VADDSS    X9, X5, X5

	// sum += dw · acc
	MOVWLZX   0(SI), AX
	VMOVD     AX, X4
	VCVTPH2PS X4, X4
	VMULSS    X5, X4, X4
	VADDSS    X4, X6, X6

	ADDQ $18, SI
	ADDQ $136, DI
	DECQ CX
	JNZ  loop

	VZEROUPPER
	VMOVSS X6, ret+24(FP)
	RET

// Q2SUB computes the int32 partial sums of Σ(q−1)·x for one sub-block:
// Σ q·x − Σ x, pairs in int16 (|value| ≤ 1024), then eight int32 lanes.
#define Q2SUB(codes, xq, dst) \
	VPBROADCASTQ codes, Y0    \
	VPSHUFB      Y10, Y0, Y0  \
	VPSRLVD      Y11, Y0, Y0  \
	VPAND        Y12, Y0, Y0  \
	VMOVDQU      xq, Y1       \
	VPSHUFB      Y13, Y1, Y2  \
	VPMADDUBSW   Y2, Y0, Y0   \
	VPMADDUBSW   Y1, Y14, Y1  \
	VPSUBW       Y1, Y0, Y0   \
	VPMADDWD     Y15, Y0, dst

// func dotQ2_0Asm(w, x unsafe.Pointer, nb int) float32
//
// Same float32 operations, in the same order, as dotQ2_0Go.
TEXT ·dotQ2_0Asm(SB), NOSPLIT, $0-28
	MOVQ    w+0(FP), SI
	MOVQ    x+8(FP), DI
	MOVQ    nb+16(FP), CX
	VMOVDQU q2shuf<>(SB), Y10
	VMOVDQU q2shift<>(SB), Y11
	VMOVDQU q2mask<>(SB), Y12
	VMOVDQU q2xshuf<>(SB), Y13
	VMOVDQU ones8<>(SB), Y14
	VMOVDQU ones16<>(SB), Y15
	VXORPS  X6, X6, X6        // sum

loop:
	Q2SUB(2(SI), 2(DI), Y8)
	Q2SUB(10(SI), 36(DI), Y9)

	// [s0 s1 s0 s1], exact.
	VPHADDD      Y9, Y8, Y8
	VPHADDD      Y8, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8

	MOVWLZX   0(DI), AX
	VMOVD     AX, X4
	VPINSRW   $1, 34(DI), X4, X4
	VCVTPH2PS X4, X4
	VMULPS    X4, X8, X8

	// acc = (0 + t0) + t1
	VXORPS    X5, X5, X5
	VADDSS    X8, X5, X5
	VMOVSHDUP X8, X9
	VADDSS    X9, X5, X5

	MOVWLZX   0(SI), AX
	VMOVD     AX, X4
	VCVTPH2PS X4, X4
	VMULSS    X5, X4, X4
	VADDSS    X4, X6, X6

	ADDQ $18, SI
	ADDQ $68, DI
	DECQ CX
	JNZ  loop

	VZEROUPPER
	VMOVSS X6, ret+24(FP)
	RET
