//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// MulF16's AVX-512 panel kernels: sixteen weight rows per panel, one zmm
// lane each. Vector v of a panel (64 bytes) holds the sixteen rows' element
// i at v = ((i%8)·m + i/32)·4 + (i%32)/8, the 8-row panel's order with
// twice the rows, so every lane still forms DotF16F32's partial sums in
// sequence and each output is the same bits. internal/panel's F16 lays
// it out in two calls, rows 0-7 in each vector's lower half, 8-15 upper.

// ZMACQ adds lane group q's products for the four tokens: the panel
// vector at q·64(SI) times each token's element at q·4 from DI, DI+R10,
// DI+2·R10 and R8 (DI+3·R10), broadcast. Token k's sum for lane group q
// is in Z(4k+q). One fused multiply-add gives DotF16F32's bits (product
// rounded, then added): a binary16 weight times a binary16 activation is
// exact in float32 (11+11 significant bits), so the fused add's one
// rounding is the add's. It halves the arithmetic of a product against
// VMULPS and VADDPS.
#define ZMACQ(Q, A0, A1, A2, A3) \
	VMOVUPS          (Q*64)(SI), Z24            \
	VFMADD231PS.BCST (Q*4)(DI), Z24, A0         \
	VFMADD231PS.BCST (Q*4)(DI)(R10*1), Z24, A1  \
	VFMADD231PS.BCST (Q*4)(DI)(R10*2), Z24, A2  \
	VFMADD231PS.BCST (Q*4)(R8), Z24, A3

// ZR8STORE stores a token's r8 = (l0+l1)+(l2+l3) for the sixteen rows at
// T·64(DX).
#define ZR8STORE(T, L0, L1, L2, L3) \
	VADDPS  L1, L0, L0    \
	VADDPS  L3, L2, L2    \
	VADDPS  L2, L0, L0    \
	VMOVUPS L0, (T*64)(DX)

// func mulF16PanelAsm512(panel unsafe.Pointer, m int, x unsafe.Pointer, tokenBytes, groups int, r8, out unsafe.Pointer)
//
// mulF16PanelAsm for a sixteen-row panel and groups of four tokens: r8 is
// [class][token][16]float32 and out [token][16]float32. Four tokens per
// pass (16 accumulators) leave no token of a 32- or 64-token batch padded,
// where six (24 accumulators, one panel load per six products) computed
// 36 for 32: on Intel the fused multiply-adds bound the loop, not the
// panel loads, and four per pass took 4-9% less CPU per product.
TEXT ·mulF16PanelAsm512(SB), NOSPLIT, $0-56
	MOVQ panel+0(FP), R13
	MOVQ m+8(FP), BX
	SHLQ $4, BX // one class of one token: m·16 bytes
	MOVQ BX, R14
	SHLQ $4, R14 // one class of the panel: m·256 bytes
	MOVQ x+16(FP), AX
	MOVQ tokenBytes+24(FP), R10
	MOVQ r8+40(FP), DX
	MOVQ $8, R11

zclass:
	MOVQ groups+32(FP), R12
	MOVQ AX, DI

ztokens:
	LEAQ   (DI)(R10*2), R8
	ADDQ   R10, R8
	MOVQ   R13, SI
	ZEROZ4(Z0, Z1, Z2, Z3)
	ZEROZ4(Z4, Z5, Z6, Z7)
	ZEROZ4(Z8, Z9, Z10, Z11)
	ZEROZ4(Z12, Z13, Z14, Z15)
	MOVQ   BX, CX

zgroup:
	ZMACQ(0, Z0, Z4, Z8, Z12)
	ZMACQ(1, Z1, Z5, Z9, Z13)
	ZMACQ(2, Z2, Z6, Z10, Z14)
	ZMACQ(3, Z3, Z7, Z11, Z15)
	ADDQ $256, SI
	ADDQ $16, DI
	ADDQ $16, R8
	SUBQ $16, CX
	JNZ  zgroup

	ZR8STORE(0, Z0, Z1, Z2, Z3)
	ZR8STORE(1, Z4, Z5, Z6, Z7)
	ZR8STORE(2, Z8, Z9, Z10, Z11)
	ZR8STORE(3, Z12, Z13, Z14, Z15)
	ADDQ $256, DX
	// The next group's first token: four tokens on from this one.
	LEAQ (R8)(R10*1), DI
	SUBQ BX, DI
	DECQ R12
	JNZ  ztokens

	ADDQ R14, R13 // the next class of the panel
	ADDQ BX, AX
	DECQ R11
	JNZ  zclass

	// out[t] = (r4[0]+r4[2]) + (r4[1]+r4[3]), r4[j] = r8[j]+r8[j+4].
	MOVQ groups+32(FP), CX
	SHLQ $2, CX
	MOVQ CX, R10
	SHLQ $6, R10          // one class of r8: tokens·64 bytes
	LEAQ (R10)(R10*2), R8
	MOVQ r8+40(FP), SI
	LEAQ (SI)(R10*4), DI
	MOVQ out+48(FP), AX

zout:
	VMOVUPS (SI), Z0
	VADDPS  (DI), Z0, Z0
	VMOVUPS (SI)(R10*1), Z1
	VADDPS  (DI)(R10*1), Z1, Z1
	VMOVUPS (SI)(R10*2), Z2
	VADDPS  (DI)(R10*2), Z2, Z2
	VMOVUPS (SI)(R8*1), Z3
	VADDPS  (DI)(R8*1), Z3, Z3
	VADDPS  Z2, Z0, Z0
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, AX
	DECQ    CX
	JNZ     zout
	VZEROUPPER
	RET
