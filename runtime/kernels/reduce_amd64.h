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

// ROWSKERNEL is a whole decode rows kernel, func(w unsafe.Pointer,
// rowBytes, rows int, x unsafe.Pointer, n32 int, x16, out unsafe.Pointer):
// it stores x (n32 float32 values, each a binary16 value) exactly as
// binary16 bits in x16, vb bytes of x at a time through the vector
// register V and its half H; then for each row (rowBytes apart from w)
// ROWDOT leaves the row's partial sums in Y0..Y3 from SI (the row), DI
// (x16) and CX (n32), and REDUCE's result goes to out.
#define ROWSKERNEL(ROWDOT, V, H, vb) \
	MOVQ w+0(FP), R8          \
	MOVQ rowBytes+8(FP), R9   \
	MOVQ rows+16(FP), R10     \
	MOVQ x+24(FP), SI         \
	MOVQ n32+32(FP), R12      \
	MOVQ x16+40(FP), R11      \
	MOVQ out+48(FP), AX       \
	MOVQ R11, DI              \
	MOVQ R12, CX              \
tof16:                        \
	VMOVUPS   (SI), V         \
	VCVTPS2PH $0, V, H        \
	VMOVDQU   H, (DI)         \
	ADDQ      $vb, SI         \
	ADDQ      $(vb/2), DI     \
	SUBQ      $(vb/4), CX     \
	JNZ       tof16           \
row:                          \
	MOVQ   R8, SI             \
	MOVQ   R11, DI            \
	MOVQ   R12, CX            \
	ROWDOT                    \
	REDUCE                    \
	VMOVSS X0, (AX)           \
	ADDQ   $4, AX             \
	ADDQ   R9, R8             \
	DECQ   R10                \
	JNZ    row                \
	VZEROUPPER                \
	RET
