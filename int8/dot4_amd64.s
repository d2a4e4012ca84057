//go:build !purego

#include "textflag.h"

// Q4TREE reduces the eight int32 partial sums of each of P0..P3 to
// [s0 s1 s2 s3] in X(P0), converted to float32 (the sums are exact in
// any order).
#define Q4TREE(P0, P1, P2, P3, XP0, XP1) \
	VPHADDD      P1, P0, P0   \
	VPHADDD      P3, P2, P2   \
	VPHADDD      P2, P0, P0   \
	VEXTRACTI128 $1, P0, XP1  \
	VPADDD       XP1, XP0, XP0 \
	VCVTDQ2PS    XP0, XP0

// func dotQ8_0SymTokens4Asm(w, x unsafe.Pointer, xstride, nb int, out *[4]float32)
//
// Lane i: sum_i += float32(s_i)·(dw·dx_i) per block, in block order, with
// s_i the exact block sum of w against activation row i (the
// |w|·(x·sign w) form of dotQ8_0SymAsm).
TEXT ·dotQ8_0SymTokens4Asm(SB), NOSPLIT, $0-40
	MOVQ    w+0(FP), SI
	MOVQ    x+8(FP), DI
	MOVQ    xstride+16(FP), R10
	MOVQ    nb+24(FP), CX
	LEAQ    (R10)(R10*2), R11
	VMOVDQU q4ones16<>(SB), Y15
	VXORPS  X7, X7, X7

t4loop:
	VMOVDQU    2(SI), Y0
	VPABSB     Y0, Y1
	VMOVDQU    2(DI), Y2
	VPSIGNB    Y0, Y2, Y2
	VPMADDUBSW Y2, Y1, Y2
	VPMADDWD   Y15, Y2, Y2
	VMOVDQU    2(DI)(R10*1), Y3
	VPSIGNB    Y0, Y3, Y3
	VPMADDUBSW Y3, Y1, Y3
	VPMADDWD   Y15, Y3, Y3
	VMOVDQU    2(DI)(R10*2), Y4
	VPSIGNB    Y0, Y4, Y4
	VPMADDUBSW Y4, Y1, Y4
	VPMADDWD   Y15, Y4, Y4
	VMOVDQU    2(DI)(R11*1), Y5
	VPSIGNB    Y0, Y5, Y5
	VPMADDUBSW Y5, Y1, Y5
	VPMADDWD   Y15, Y5, Y5
	Q4TREE(Y2, Y3, Y4, Y5, X2, X3)

	// d_i = dw·dx_i (exact), then sum_i += s_i·d_i.
	VPBROADCASTW 0(SI), X8
	VCVTPH2PS    X8, X8
	MOVWLZX      0(DI), AX
	VMOVD        AX, X9
	VPINSRW      $1, 0(DI)(R10*1), X9, X9
	VPINSRW      $2, 0(DI)(R10*2), X9, X9
	VPINSRW      $3, 0(DI)(R11*1), X9, X9
	VCVTPH2PS    X9, X9
	VMULPS       X9, X8, X8
	VMULPS       X8, X2, X2
	VADDPS       X2, X7, X7

	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  t4loop

	MOVQ    out+32(FP), AX
	VMOVUPS X7, (AX)
	VZEROUPPER
	RET

// Q8SUB sets P to the eight int32 partial sums of |w|·(x·sign w) for the
// activation block at X (w in Y0, |w| in Y1).
#define Q8SUB(X, P) \
	VMOVDQU    X, P       \
	VPSIGNB    Y0, P, P   \
	VPMADDUBSW P, Y1, P   \
	VPMADDWD   Y15, P, P

// func dotQ8_0SymTokens8Asm(w, x unsafe.Pointer, xstride int, xd unsafe.Pointer, nb int, out *[8]float32)
//
// dotQ8_0SymTokens4Asm for eight activation rows, whose scales are read
// as float32 from xd (eight per block); the lanes start from out and end
// there.
TEXT ·dotQ8_0SymTokens8Asm(SB), NOSPLIT, $0-48
	MOVQ    w+0(FP), SI
	MOVQ    x+8(FP), DI
	MOVQ    xstride+16(FP), R10
	MOVQ    xd+24(FP), R8
	MOVQ    nb+32(FP), CX
	LEAQ    (R10)(R10*2), R11
	LEAQ    (DI)(R10*4), R9
	VMOVDQU q4ones16<>(SB), Y15
	MOVQ    out+40(FP), AX
	VMOVUPS (AX), Y14 // the sums so far

t8loop:
	VMOVDQU 2(SI), Y0
	VPABSB  Y0, Y1
	Q8SUB(2(DI), Y2)
	Q8SUB(2(DI)(R10*1), Y3)
	Q8SUB(2(DI)(R10*2), Y4)
	Q8SUB(2(DI)(R11*1), Y5)
	Q8SUB(2(R9), Y6)
	Q8SUB(2(R9)(R10*1), Y7)
	Q8SUB(2(R9)(R10*2), Y8)
	Q8SUB(2(R9)(R11*1), Y9)

	// [s0 … s7], exact.
	VPHADDD    Y3, Y2, Y2
	VPHADDD    Y5, Y4, Y4
	VPHADDD    Y7, Y6, Y6
	VPHADDD    Y9, Y8, Y8
	VPHADDD    Y4, Y2, Y2
	VPHADDD    Y8, Y6, Y6
	VPERM2I128 $0x20, Y6, Y2, Y10
	VPERM2I128 $0x31, Y6, Y2, Y11
	VPADDD     Y11, Y10, Y10
	VCVTDQ2PS  Y10, Y10

	// d_i = dw·dx_i (exact), then sum_i += s_i·d_i.
	VPBROADCASTW 0(SI), X12
	VCVTPH2PS    X12, Y12
	VMULPS       (R8), Y12, Y12
	VMULPS       Y12, Y10, Y10
	VADDPS       Y10, Y14, Y14

	ADDQ $34, SI
	ADDQ $34, DI
	ADDQ $34, R9
	ADDQ $32, R8
	DECQ CX
	JNZ  t8loop

	MOVQ    out+40(FP), AX
	VMOVUPS Y14, (AX)
	VZEROUPPER
	RET

DATA q4ones16<>+0(SB)/8, $0x0001000100010001
DATA q4ones16<>+8(SB)/8, $0x0001000100010001
DATA q4ones16<>+16(SB)/8, $0x0001000100010001
DATA q4ones16<>+24(SB)/8, $0x0001000100010001
GLOBL q4ones16<>(SB), RODATA|NOPTR, $32
