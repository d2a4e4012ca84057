// Macros shared by this package's assembly files.

// HSUM8 sums the eight int32 lanes of Y (X its low half) into the low
// lane of X, using T.
#define HSUM8(Y, X, T) \
	VEXTRACTI128 $1, Y, T  \
	VPADDD       T, X, X   \
	VPSHUFD      $0x4e, X, T \
	VPADDD       T, X, X   \
	VPSHUFD      $0xb1, X, T \
	VPADDD       T, X, X

// BLOCK1 finishes one block of a dot product: it sums the eight int32
// partial sums in Y8 to the block sum s, scales it by dw·dx (the fp16
// scales at 0(SI) and 0(DI); the product is exact in float32) and adds
// the term to the sum in X7: sum += float32(s)·(dw·dx).
#define BLOCK1 \
	HSUM8(Y8, X8, X9)       \
	VCVTDQ2PS    X8, X8     \
	MOVWLZX      0(SI), AX  \
	VMOVD        AX, X12    \
	MOVWLZX      0(DI), AX  \
	VMOVD        AX, X13    \
	VCVTPH2PS    X12, X12   \
	VCVTPH2PS    X13, X13   \
	VMULSS       X13, X12, X12 \
	VMULSS       X12, X8, X8   \
	VADDSS       X8, X7, X7

// PANELARGS loads the arguments the panel kernels share (their contract
// is mulQ8_0KernelAsm's) and the steps between token groups: per group,
// x moves on by 4·xstride and xd by 16·xdBlocks, less what the block
// loop advanced them (R13 and R12). DI = x, R10 = xstride, R11 =
// 3·xstride, R9 = xd, BX = nb, DX = groups, AX = sums.
#define PANELARGS \
	MOVQ x+16(FP), DI          \
	MOVQ xstride+24(FP), R10   \
	MOVQ xd+32(FP), R9         \
	MOVQ nb+48(FP), BX         \
	MOVQ groups+56(FP), DX     \
	MOVQ sums+64(FP), AX       \
	LEAQ (R10)(R10*2), R11     \
	MOVQ BX, R12               \
	SHLQ $6, R12               \
	LEAQ (R10*4), R13          \
	SUBQ R12, R13              \
	MOVQ xdBlocks+40(FP), R12  \
	SUBQ BX, R12               \
	SHLQ $4, R12

// PANELNEXT moves the panel kernels on to the next block (SI: panel
// codes, R8: panel scales, DI: activation codes, R9: activation scales)
// and counts it down in CX.
#define PANELNEXT \
	ADDQ $1024, SI \
	ADDQ $64, R8   \
	ADDQ $64, DI   \
	ADDQ $16, R9   \
	DECQ CX

// PANELNEXTGROUP moves the panel kernels on to the next token group and
// counts it down in DX.
#define PANELNEXTGROUP \
	ADDQ R13, DI   \
	ADDQ R12, R9   \
	ADDQ $256, AX  \
	DECQ DX
