// Macros shared by the package's assembly files (#include "q_amd64.h").

// HSUM8 adds the eight float32 lanes of F (X its low half) into the low
// lane of D as sum8 does: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). T is
// clobbered.
#define HSUM8(F, X, T, D) \
	VEXTRACTF128 $1, F, T \
	VADDPS       T, X, D  \
	VMOVHLPS     D, D, T  \
	VADDPS       T, D, D  \
	VMOVSHDUP    D, T     \
	VADDSS       T, D, D

// Q1SCALES2 loads the fp16 scales of the Q1_0 blocks at SI and SI+18 into
// the low two lanes of X as float32 (AX and BX clobbered).
#define Q1SCALES2(X) \
	MOVWLZX   0(SI), AX  \
	MOVWLZX   18(SI), BX \
	SHLL      $16, BX    \
	ORL       BX, AX     \
	VMOVD     AX, X      \
	VCVTPH2PS X, X

// Q8SCALES8 loads the fp16 scales of the eight Q8_0 activation blocks at
// DI (34 bytes apart) into Y4 as float32 (AX, BX and DX clobbered).
#define Q8SCALES8 \
	MOVWQZX   0(DI), AX    \
	MOVWQZX   34(DI), BX   \
	SHLQ      $16, BX      \
	ORQ       BX, AX       \
	MOVWQZX   68(DI), BX   \
	SHLQ      $32, BX      \
	ORQ       BX, AX       \
	MOVWQZX   102(DI), BX  \
	SHLQ      $48, BX      \
	ORQ       BX, AX       \
	MOVWQZX   136(DI), DX  \
	MOVWQZX   170(DI), BX  \
	SHLQ      $16, BX      \
	ORQ       BX, DX       \
	MOVWQZX   204(DI), BX  \
	SHLQ      $32, BX      \
	ORQ       BX, DX       \
	MOVWQZX   238(DI), BX  \
	SHLQ      $48, BX      \
	ORQ       BX, DX       \
	VMOVQ     AX, X4       \
	VPINSRQ   $1, DX, X4, X4 \
	VCVTPH2PS X4, Y4
