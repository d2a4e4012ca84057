//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// MulF16's panel kernels (mulf16.go). A panel (laid out by internal/panel's
// F16) holds eight weight rows of n = 32·m elements as float32, element i
// of the rows at vector ((i%8)·m + i/32)·4 + (i%32)/8: for each lane class
// j%8, the four lanes j, j+8, j+16, j+24 of every 32-element group in a
// row.

// MACQ adds lane group q's products for the three tokens: the panel
// vector at q·32(SI) times each token's element at q·4 from DI, R8, R9.
// The fused multiply-add gives DotF16F32's bits (product rounded, then
// added): the product of two binary16 values is exact in float32, so
// only the add rounds.
#define MACQ(Q, A0, A1, A2) \
	VMOVUPS      (Q*32)(SI), Y12   \
	VBROADCASTSS (Q*4)(DI), Y13    \
	VFMADD231PS  Y12, Y13, A0      \
	VBROADCASTSS (Q*4)(R8), Y14    \
	VFMADD231PS  Y12, Y14, A1      \
	VBROADCASTSS (Q*4)(R9), Y15    \
	VFMADD231PS  Y12, Y15, A2

// R8STORE stores token T's r8[j] = (l[j]+l[j+8]) + (l[j+16]+l[j+24]) from
// its four lane sums at T·32(DX).
#define R8STORE(T, L0, L1, L2, L3) \
	VADDPS  L1, L0, L0    \
	VADDPS  L3, L2, L2    \
	VADDPS  L2, L0, L0    \
	VMOVUPS L0, (T*32)(DX)

// R4 adds r8[J] and r8[J+4] of one token (at J·S from SI and DI) into D.
#define R4(OJ, D) \
	VMOVUPS OJ(SI), D    \
	VADDPS  OJ(DI), D, D

// func mulF16PanelAsm(panel unsafe.Pointer, m int, x unsafe.Pointer, tokenBytes, groups int, r8, out unsafe.Pointer)
//
// The panel's eight rows against groups·3 activation rows (F16Batch's
// order, tokenBytes apart): for each lane class, every token group passes
// over the class's part of the panel while it is in L1, and leaves its
// r8 values in r8 ([class][token][8]); then each token's result goes to
// out ([token][8]).
TEXT ·mulF16PanelAsm(SB), NOSPLIT, $0-56
	MOVQ panel+0(FP), R13
	MOVQ m+8(FP), BX
	SHLQ $4, BX // one class of one token: m·16 bytes
	MOVQ x+16(FP), AX
	MOVQ tokenBytes+24(FP), R10
	MOVQ r8+40(FP), DX
	MOVQ $8, R11

fclass:
	MOVQ groups+32(FP), R12
	MOVQ AX, DI

ftokens:
	LEAQ   (DI)(R10*1), R8
	LEAQ   (R8)(R10*1), R9
	MOVQ   R13, SI
	ZEROY4(Y0, Y1, Y2, Y3)
	ZEROY4(Y4, Y5, Y6, Y7)
	ZEROY4(Y8, Y9, Y10, Y11)
	MOVQ   BX, CX

fgroup:
	MACQ(0, Y0, Y4, Y8)
	MACQ(1, Y1, Y5, Y9)
	MACQ(2, Y2, Y6, Y10)
	MACQ(3, Y3, Y7, Y11)
	ADDQ $128, SI
	ADDQ $16, DI
	ADDQ $16, R8
	ADDQ $16, R9
	SUBQ $16, CX
	JNZ  fgroup

	R8STORE(0, Y0, Y1, Y2, Y3)
	R8STORE(1, Y4, Y5, Y6, Y7)
	R8STORE(2, Y8, Y9, Y10, Y11)
	ADDQ $96, DX
	// The next group's first token: three tokens on from this one.
	LEAQ (R9)(R10*1), DI
	SUBQ BX, DI
	DECQ R12
	JNZ  ftokens

	LEAQ (R13)(BX*8), R13 // the next class: m·128 bytes of panel
	ADDQ BX, AX
	DECQ R11
	JNZ  fclass

	// out[t] = (r4[0]+r4[2]) + (r4[1]+r4[3]), r4[j] = r8[j]+r8[j+4].
	MOVQ groups+32(FP), CX
	LEAQ (CX)(CX*2), CX
	MOVQ CX, R10
	SHLQ $5, R10          // one class of r8: tokens·32 bytes
	LEAQ (R10)(R10*2), R8
	MOVQ r8+40(FP), SI
	LEAQ (SI)(R10*4), DI
	MOVQ out+48(FP), AX

fout:
	R4(0, Y0)
	VMOVUPS (SI)(R10*1), Y1
	VADDPS  (DI)(R10*1), Y1, Y1
	VMOVUPS (SI)(R10*2), Y2
	VADDPS  (DI)(R10*2), Y2, Y2
	VMOVUPS (SI)(R8*1), Y3
	VADDPS  (DI)(R8*1), Y3, Y3
	VADDPS  Y2, Y0, Y0
	VADDPS  Y3, Y1, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS Y0, (AX)
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, AX
	DECQ    CX
	JNZ     fout
	VZEROUPPER
	RET
