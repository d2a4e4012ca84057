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
