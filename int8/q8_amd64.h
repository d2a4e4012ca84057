// Macros shared by this package's assembly files.

// BLOCK1 finishes one block of a dot product: it sums the eight int32
// partial sums in Y8 to the block sum s, scales it by dw·dx (the fp16
// scales at 0(SI) and 0(DI); the product is exact in float32) and adds
// the term to the sum in X7: sum += float32(s)·(dw·dx).
#define BLOCK1 \
	VEXTRACTI128 $1, Y8, X9     \
	VPADDD       X9, X8, X8     \
	VPSHUFD      $0x4e, X8, X9  \
	VPADDD       X9, X8, X8     \
	VPSHUFD      $0xb1, X8, X9  \
	VPADDD       X9, X8, X8     \
	VCVTDQ2PS    X8, X8         \
	MOVWLZX      0(SI), AX      \
	VMOVD        AX, X12        \
	MOVWLZX      0(DI), AX      \
	VMOVD        AX, X13        \
	VCVTPH2PS    X12, X12       \
	VCVTPH2PS    X13, X13       \
	VMULSS       X13, X12, X12  \
	VMULSS       X12, X8, X8    \
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
