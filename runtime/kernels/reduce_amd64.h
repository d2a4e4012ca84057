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

// SPLIT moves Z0, Z1 into the AVX2 layout Y0..Y3 (lane j of Yk is l[8k+j])
// for the shared tail and REDUCE.
#define SPLIT \
	VEXTRACTF64X4 $1, Z1, Y3 \
	VMOVAPS       Y1, Y2     \
	VEXTRACTF64X4 $1, Z0, Y1

// SUMZ stores at D the result of the row whose partial sums are in A, B
// (l[0..15], l[16..31]).
#define SUMZ(A, B, D) \
	VMOVAPS A, Z0 \
	VMOVAPS B, Z1 \
	SPLIT         \
	REDUCE        \
	VMOVSS  X0, D

// ROWPAIRS is a whole decode rows kernel, func(w unsafe.Pointer, rowBytes,
// pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut
// int): for i < pairs, rows i and i+far/rowBytes of w (rowBytes apart),
// results to out[i] and out[i+farOut/4]. PAIRDOT(W) leaves the partial sums
// of the row at SI in Y0..Y3 and of the row at DX in Y12..Y15 (the AVX2
// layout) from DI (x, float32) and CX (n32, a multiple of 32), the
// weights widened by W (WIDENF16, WIDENBF16). Two rows
// side by side give the additions two independent chains per register,
// and two rows far apart (the first and second half of a call's rows) make
// two memory streams, which read faster here than one.
#define ROWPAIRS(PAIRDOT, W) \
	MOVQ w+0(FP), R8          \
	MOVQ rowBytes+8(FP), R9   \
	MOVQ pairs+16(FP), R10    \
	MOVQ x+24(FP), R11        \
	MOVQ n32+32(FP), R12      \
	MOVQ out+40(FP), AX       \
	MOVQ far+48(FP), R13      \
	MOVQ farOut+56(FP), R14   \
pair:                         \
	MOVQ    R8, SI            \
	LEAQ    (R8)(R13*1), DX   \
	MOVQ    R11, DI           \
	MOVQ    R12, CX           \
	PAIRDOT(W)                \
	REDUCE                    \
	VMOVSS  X0, (AX)          \
	VMOVAPS Y12, Y0           \
	VMOVAPS Y13, Y1           \
	VMOVAPS Y14, Y2           \
	VMOVAPS Y15, Y3           \
	REDUCE                    \
	VMOVSS  X0, (AX)(R14*1)   \
	ADDQ    $4, AX            \
	NEXTROWS(pair)

// WIDENF16 and WIDENBF16 widen the 8 or 16 binary16 or bfloat16 values at
// m to float32 in the ymm or zmm register d, exactly: the one place the
// F16 and BF16 forms of a kernel differ (bfloat16 is the top half of a
// float32).
#define WIDENF16(m, d) VCVTPH2PS m, d
#define WIDENBF16(m, d) VPMOVZXWD m, d; VPSLLD $16, d, d

// QUADARGS loads the arguments of the four-row kernels, func(w
// unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out
// unsafe.Pointer, far, farOut int, ...), into R8, R9, R10, R11, R12, AX,
// R13, R14.
#define QUADARGS \
	MOVQ w+0(FP), R8          \
	MOVQ rowBytes+8(FP), R9   \
	MOVQ quads+16(FP), R10    \
	MOVQ x+24(FP), R11        \
	MOVQ n32+32(FP), R12      \
	MOVQ out+40(FP), AX       \
	MOVQ far+48(FP), R13      \
	MOVQ farOut+56(FP), R14

// NEXTROWS(lbl) ends the loop of a rows kernel over its groups of rows:
// the next group (R8 += rowBytes) while R10 groups remain, then returns.
#define NEXTROWS(lbl) \
	ADDQ R9, R8 \
	DECQ R10    \
	JNZ  lbl    \
	VZEROUPPER  \
	RET

// WIDEN4Z widens (by W) 32 weights of each of the four rows at SI,
// SI+R13, DX and DX+R13 into Z0..Z7 (row k's halves in Z2k, Z2k+1).
#define WIDEN4Z(W) \
	W((SI), Z0)          \
	W(32(SI), Z1)        \
	W((SI)(R13*1), Z2)   \
	W(32(SI)(R13*1), Z3) \
	W((DX), Z4)          \
	W(32(DX), Z5)        \
	W((DX)(R13*1), Z6)   \
	W(32(DX)(R13*1), Z7)
