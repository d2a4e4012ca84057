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

DATA q4ones16<>+0(SB)/8, $0x0001000100010001
DATA q4ones16<>+8(SB)/8, $0x0001000100010001
DATA q4ones16<>+16(SB)/8, $0x0001000100010001
DATA q4ones16<>+24(SB)/8, $0x0001000100010001
GLOBL q4ones16<>(SB), RODATA|NOPTR, $32
