// The AVX2 2-3-token decoding kernel (dotRows2Multi2Asm in
// multi2_amd64.s, dotRows2MultiVNNIAsm in vnni_amd64.s; multi2_amd64.s
// describes both), less the products: the including file defines
// XPROD(M, YW, YA, ACC, NA, NACC), which adds to ACC (Y register number
// NACC) the int32 sums of the products of the weight vector in YW
// (absolute values in YA, number NA) and the activation vector at M,
// using Y8 and Y15 only besides, and XONES, which loads what XPROD
// keeps in Y15.

// WHALF loads the four blocks from byte O of the group at BASE (O: 2
// for blocks 0-3, 138 for 4-7) into Y0..Y3, dword j of block b in lane b
// of Yj and dword 4+j in lane 4+b, using Y4..Y7: a 4×4 dword transpose
// within the 128-bit lanes.
#define WHALF(BASE, O) \
	VMOVDQU     (O)(BASE), Y0              \
	VMOVDQU     (O+34)(BASE), Y1           \
	VMOVDQU     (O+68)(BASE), Y2           \
	VMOVDQU     (O+102)(BASE), Y3          \
	VPUNPCKLDQ  Y1, Y0, Y4                 \
	VPUNPCKHDQ  Y1, Y0, Y5                 \
	VPUNPCKLDQ  Y3, Y2, Y6                 \
	VPUNPCKHDQ  Y3, Y2, Y7                 \
	VPUNPCKLQDQ Y6, Y4, Y0                 \
	VPUNPCKHQDQ Y6, Y4, Y1                 \
	VPUNPCKLQDQ Y7, Y5, Y2                 \
	VPUNPCKHQDQ Y7, Y5, Y3

// WABS sets Y4..Y7 to the absolute values of the weight codes in
// Y0..Y3, VPMADDUBSW's unsigned operands (−128 gives 128, right as
// unsigned).
#define WABS \
	VPABSB Y0, Y4 \
	VPABSB Y1, Y5 \
	VPABSB Y2, Y6 \
	VPABSB Y3, Y7

// XHALF adds token K's products with the four weight blocks in Y0..Y7
// (blocks 4H..4H+3) to ACC (Y register number NACC).
#define XHALF(K, H, ACC, NACC) \
	XPROD((256*K+128*H)(DI), Y0, Y4, ACC, 4, NACC)    \
	XPROD((256*K+128*H+32)(DI), Y1, Y5, ACC, 5, NACC) \
	XPROD((256*K+128*H+64)(DI), Y2, Y6, ACC, 6, NACC) \
	XPROD((256*K+128*H+96)(DI), Y3, Y7, ACC, 7, NACC)

// SCALES8 sets Y10 to the eight fp16 scales of the group at BASE as
// float32: each pair 34 bytes apart from one 32-bit load and one 16-bit
// load into its low half, through AX.
#define SCALES8(BASE) \
	MOVL      32(BASE), AX         \
	MOVW      (BASE), AX           \
	VMOVD     AX, X10              \
	MOVL      100(BASE), AX        \
	MOVW      68(BASE), AX         \
	VPINSRD   $1, AX, X10, X10     \
	MOVL      168(BASE), AX        \
	MOVW      136(BASE), AX        \
	VPINSRD   $2, AX, X10, X10     \
	MOVL      236(BASE), AX        \
	MOVW      204(BASE), AX        \
	VPINSRD   $3, AX, X10, X10     \
	VCVTPH2PS X10, Y10

// XJOIN sets ACC to the block sums in order from the two accumulators
// of blocks 0-3 (ACC) and 4-7 (B), each block's in lanes b and 4+b.
#define XJOIN(ACC, B) \
	VPERM2I128 $0x20, B, ACC, Y8 \
	VPERM2I128 $0x31, B, ACC, ACC \
	VPADDD     Y8, ACC, ACC

// XTERMS stores at DST token K's eight terms float32(s)·(dw·dx) from its
// block sums in ACC and the weight scales in Y10.
#define XTERMS(K, ACC, DST) \
	VCVTDQ2PS ACC, ACC                \
	VMULPS    (768+32*K)(DI), Y10, Y12 \
	VMULPS    Y12, ACC, ACC           \
	VMOVUPS   ACC, DST

// XGROUP stores the terms of the group of the row at BASE for the two
// or three tokens (BX) at D0, D1 and D2; S1..S3 are labels of its own.
#define XGROUP(BASE, D0, D1, D2, S1, S2, S3) \
	VPXOR     Y9, Y9, Y9    \
	VPXOR     Y10, Y10, Y10 \
	VPXOR     Y11, Y11, Y11 \
	VPXOR     Y12, Y12, Y12 \
	VPXOR     Y13, Y13, Y13 \
	VPXOR     Y14, Y14, Y14 \
	WHALF(BASE, 2)          \
	WABS                    \
	XHALF(0, 0, Y9, 9)         \
	XHALF(1, 0, Y11, 11)        \
	CMPQ      BX, $3        \
	JNE       S1            \
	XHALF(2, 0, Y13, 13)        \
S1:                         \
	WHALF(BASE, 138)        \
	WABS                    \
	XHALF(0, 1, Y10, 10)        \
	XHALF(1, 1, Y12, 12)        \
	XJOIN(Y9, Y10)          \
	XJOIN(Y11, Y12)         \
	CMPQ      BX, $3        \
	JNE       S2            \
	XHALF(2, 1, Y14, 14)        \
	XJOIN(Y13, Y14)         \
S2:                         \
	SCALES8(BASE)           \
	XTERMS(0, Y9, D0)       \
	XTERMS(1, Y11, D1)      \
	CMPQ      BX, $3        \
	JNE       S3            \
	XTERMS(2, Y13, D2)      \
S3:

// XTERM1 stores at DST token K's term of the tail block whose weight
// codes are in Y0 (absolute values in Y4) and scale in X10.
#define XTERM1(K, DST) \
	VPXOR     Y12, Y12, Y12               \
	XPROD((32*K)(DI), Y0, Y4, Y12, 4, 12) \
	HSUM8(Y12, X12, X9)                   \
	VCVTDQ2PS X12, X12                    \
	VMULSS    (96+4*K)(DI), X10, X11      \
	VMULSS    X11, X12, X12               \
	VMOVSS    X12, DST

// XONE is XGROUP for the tail block at BASE.
#define XONE(BASE, D0, D1, D2, S) \
	VMOVDQU   2(BASE), Y0  \
	VPABSB    Y0, Y4       \
	MOVWLZX   0(BASE), AX  \
	VMOVD     AX, X10      \
	VCVTPH2PS X10, X10     \
	XTERM1(0, D0)          \
	XTERM1(1, D1)          \
	CMPQ      BX, $3       \
	JNE       S            \
	XTERM1(2, D2)          \
S:

// ROWS2MULTI is the body of dotRows2Multi2Asm (see there), with the
// frame $0-96.
#define ROWS2MULTI \
	MOVQ    w+0(FP), R11 \
	MOVQ    nb+32(FP), R13 \
	MOVQ    tokens+40(FP), BX \
	MOVQ    t+72(FP), R8 \
	MOVQ    tStride+80(FP), R12 \
	MOVQ    pf+88(FP), R14 \
	LEAQ    (R12*4), R9 \
	MOVQ    $4, R10 \
	XONES \
xrow: \
	MOVQ R11, SI \
	MOVQ R11, DX \
	ADDQ far+8(FP), DX \
	MOVQ xp+24(FP), DI \
	MOVQ R13, CX \
	SHRQ $3, CX \
	JZ   xtail \
xgroup: \
	TESTQ R14, R14 \
	JZ    xfetched \
	PREFETCH5(SI) \
	PREFETCH5(DX) \
xfetched: \
	XGROUP(SI, (R8), 32(R8), 64(R8), xn1, xn2, xn3) \
	XGROUP(DX, (R8)(R9*1), 32(R8)(R9*1), 64(R8)(R9*1), xf1, xf2, xf3) \
	ADDQ $272, SI \
	ADDQ $272, DX \
	ADDQ $864, DI \
	ADDQ $96, R8 \
	DECQ CX \
	JNZ  xgroup \
xtail: \
	MOVQ R13, CX \
	ANDQ $7, CX \
	JZ   xnext \
xone: \
	XONE(SI, (R8), 32(R8), 64(R8), xn4) \
	XONE(DX, (R8)(R9*1), 32(R8)(R9*1), 64(R8)(R9*1), xf4) \
	ADDQ $34, SI \
	ADDQ $34, DX \
	ADDQ $128, DI \
	ADDQ $4, R8 \
	DECQ CX \
	JNZ  xone \
xnext: \
	ADDQ  rowBytes+16(FP), R11 \
	MOVQ  R13, AX \
	SHRQ  $3, AX \
	IMULQ $96, AX \
	SUBQ  AX, R8 \
	MOVQ  R13, AX \
	ANDQ  $7, AX \
	SHLQ  $2, AX \
	SUBQ  AX, R8 \
	ADDQ  R12, R8 \
	DECQ  R10 \
	JNZ   xrow \
	MOVQ t+72(FP), R11 \
	MOVQ out+48(FP), R14 \
	MOVQ outFar+56(FP), R9 \
	MOVQ outStride+64(FP), R10 \
xsumtok: \
	SUMTERMSBY(R11, $96, xsum) \
	VMOVUPS      X15, (R14) \
	VEXTRACTF128 $1, Y15, X0 \
	VMOVUPS      X0, (R9) \
	ADDQ         $32, R11 \
	ADDQ         R10, R14 \
	ADDQ         R10, R9 \
	DECQ         BX \
	JNZ          xsumtok \
	VZEROUPPER \
	RET
