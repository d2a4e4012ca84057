// Macros shared by the package's assembly files (#include "reduce_amd64.h").

// REDUCE leaves in X0 ((l0+l8)+(l16+l24)) … combined as the package documents.
#define REDUCE \
	VADDPS       Y1, Y0, Y0 \
	VADDPS       Y3, Y2, Y2 \
	VADDPS       Y2, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVHLPS     X0, X0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVSHDUP    X0, X1     \
	VADDSS       X1, X0, X0

// ZEROY4 and ZEROZ4 clear four ymm or zmm registers (partial sums before a
// dot product).
#define ZEROY4(A, B, C, D) \
	VXORPS A, A, A \
	VXORPS B, B, B \
	VXORPS C, C, C \
	VXORPS D, D, D

#define ZEROZ4(A, B, C, D) \
	VPXORD A, A, A \
	VPXORD B, B, B \
	VPXORD C, C, C \
	VPXORD D, D, D

// MULACC adds the product of W and the vector at off(P) to A, the product
// rounded first (T is scratch).
#define MULACC(off, P, W, T, A) \
	VMULPS off(P), W, T \
	VADDPS T, A, A

// ROWPAIRS is a whole decode rows kernel, func(w unsafe.Pointer, rowBytes,
// rows int, x unsafe.Pointer, n32 int, out unsafe.Pointer): the rows
// (rowBytes apart from w) go two at a time, PAIRDOT leaving the partial
// sums of the row at SI in Y0..Y3 and of the row at DX in Y12..Y15 (the
// AVX2 layout) from DI (x, float32) and CX (n32, a multiple of 32); a last
// odd row goes through PAIRDOT as both rows. Two rows side by side give
// the additions two independent chains per register.
#define ROWPAIRS(PAIRDOT) \
	MOVQ w+0(FP), R8          \
	MOVQ rowBytes+8(FP), R9   \
	MOVQ rows+16(FP), R10     \
	MOVQ x+24(FP), R11        \
	MOVQ n32+32(FP), R12      \
	MOVQ out+40(FP), AX       \
pair:                         \
	MOVQ    R8, SI            \
	LEAQ    (R8)(R9*1), DX    \
	CMPQ    R10, $2           \
	JAE     pairgo            \
	MOVQ    R8, DX            \
pairgo:                       \
	MOVQ    R11, DI           \
	MOVQ    R12, CX           \
	PAIRDOT                   \
	REDUCE                    \
	VMOVSS  X0, (AX)          \
	CMPQ    R10, $2           \
	JB      pairsdone         \
	VMOVAPS Y12, Y0           \
	VMOVAPS Y13, Y1           \
	VMOVAPS Y14, Y2           \
	VMOVAPS Y15, Y3           \
	REDUCE                    \
	VMOVSS  X0, 4(AX)         \
	ADDQ    $8, AX            \
	LEAQ    (R8)(R9*2), R8    \
	SUBQ    $2, R10           \
	JNZ     pair              \
pairsdone:                    \
	VZEROUPPER                \
	RET
