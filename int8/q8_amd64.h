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
// 3·xstride, R9 = xd, BX = nb, DX = groups, AX = sums. PANELARGSBY is
// it for 1<<XSHIFT activation bytes per block (PANELARGS: 64, int16).
#define PANELARGS PANELARGSBY(6)
#define PANELARGSBY(XSHIFT) \
	MOVQ x+16(FP), DI          \
	MOVQ xstride+24(FP), R10   \
	MOVQ xd+32(FP), R9         \
	MOVQ nb+48(FP), BX         \
	MOVQ groups+56(FP), DX     \
	MOVQ sums+64(FP), AX       \
	LEAQ (R10)(R10*2), R11     \
	MOVQ BX, R12               \
	SHLQ $XSHIFT, R12          \
	LEAQ (R10*4), R13          \
	SUBQ R12, R13              \
	MOVQ xdBlocks+40(FP), R12  \
	SUBQ BX, R12               \
	SHLQ $4, R12

// FLUSH adds token T's block sums (S0 rows 0-7, S1 rows 8-15) into the
// running sums at AX: sum = sum + float32(s)·(dw·dx), each operation in
// DotQ8_0's operand order (dw in Y8/Y9).
#define FLUSH(T, S0, S1) \
	VBROADCASTSS (T*4)(R9), Y10       \
	VMULPS       Y10, Y8, Y11         \
	VMULPS       Y10, Y9, Y12         \
	VCVTDQ2PS    S0, S0               \
	VMULPS       Y11, S0, S0          \
	VMOVUPS      (T*64)(AX), Y13      \
	VADDPS       S0, Y13, Y13         \
	VMOVUPS      Y13, (T*64)(AX)      \
	VCVTDQ2PS    S1, S1               \
	VMULPS       Y12, S1, S1          \
	VMOVUPS      (T*64+32)(AX), Y14   \
	VADDPS       S1, Y14, Y14         \
	VMOVUPS      Y14, (T*64+32)(AX)

// PANELNEXT moves the panel kernels on to the next block (SI: panel
// codes, R8: panel scales, DI: activation codes, R9: activation scales)
// and counts it down in CX. PANELNEXTBY is it for WB panel bytes and XB
// activation bytes per block (PANELNEXT: int16 codes).
#define PANELNEXT PANELNEXTBY(1024, 64)
#define PANELNEXTBY(WB, XB) \
	ADDQ $WB, SI   \
	ADDQ $64, R8   \
	ADDQ $XB, DI   \
	ADDQ $16, R9   \
	DECQ CX

// PANELNEXTGROUP moves the panel kernels on to the next token group and
// counts it down in DX.
#define PANELNEXTGROUP \
	ADDQ R13, DI   \
	ADDQ R12, R9   \
	ADDQ $256, AX  \
	DECQ DX

// TRANSPOSEADD adds to SUM the eight rows' eight terms in Y0..Y7 (row i
// in Yi) in block order: transposed so that each VPERM2F128 result holds
// one block of every row, through Y8..Y11, Y13, Y14 and T, all of which
// (and Y0..Y7) it overwrites.
#define TRANSPOSEADD(SUM, T) \
	VUNPCKLPS  Y1, Y0, Y8 \
	VUNPCKHPS  Y1, Y0, Y9 \
	VUNPCKLPS  Y3, Y2, Y10 \
	VUNPCKHPS  Y3, Y2, Y11 \
	VUNPCKLPS  Y5, Y4, T \
	VUNPCKHPS  Y5, Y4, Y13 \
	VUNPCKLPS  Y7, Y6, Y14 \
	VUNPCKHPS  Y7, Y6, Y0 \
	VSHUFPS    $0x44, Y10, Y8, Y1 \
	VSHUFPS    $0xee, Y10, Y8, Y2 \
	VSHUFPS    $0x44, Y11, Y9, Y3 \
	VSHUFPS    $0xee, Y11, Y9, Y4 \
	VSHUFPS    $0x44, Y14, T, Y5 \
	VSHUFPS    $0xee, Y14, T, Y6 \
	VSHUFPS    $0x44, Y0, Y13, Y7 \
	VSHUFPS    $0xee, Y0, Y13, Y8 \
	VPERM2F128 $0x20, Y5, Y1, Y0 \
	VADDPS     Y0, SUM, SUM \
	VPERM2F128 $0x20, Y6, Y2, Y0 \
	VADDPS     Y0, SUM, SUM \
	VPERM2F128 $0x20, Y7, Y3, Y0 \
	VADDPS     Y0, SUM, SUM \
	VPERM2F128 $0x20, Y8, Y4, Y0 \
	VADDPS     Y0, SUM, SUM \
	VPERM2F128 $0x31, Y5, Y1, Y0 \
	VADDPS     Y0, SUM, SUM \
	VPERM2F128 $0x31, Y6, Y2, Y0 \
	VADDPS     Y0, SUM, SUM \
	VPERM2F128 $0x31, Y7, Y3, Y0 \
	VADDPS     Y0, SUM, SUM \
	VPERM2F128 $0x31, Y8, Y4, Y0 \
	VADDPS     Y0, SUM, SUM

// SUMTERMSBY forms in Y15 the serial sums of the eight rows of terms at
// TBASE (rows R12 bytes apart, R13 terms each, padded with +0 to a
// multiple of eight; each row's eight terms of a step STEP bytes past
// the last's), with lanes over rows, adding the terms in block
// order: eight terms of each row at a time, transposed so that each
// VPERM2F128 result holds one block of every row. The padding adds +0,
// which leaves a sum that starts at +0 unchanged. It uses only Y0..Y15,
// so the AVX2 kernels take it too.
#define SUMTERMSBY(TBASE, STEP, LOOP) \
	VXORPS     Y15, Y15, Y15     \
	MOVQ       R13, CX           \
	ADDQ       $7, CX            \
	SHRQ       $3, CX            \
	MOVQ       TBASE, SI         \
	LEAQ       (R12)(R12*2), AX  \
	LEAQ       (SI)(R12*4), DX   \
LOOP:                            \
	VMOVUPS    (SI), Y0          \
	VMOVUPS    (SI)(R12*1), Y1   \
	VMOVUPS    (SI)(R12*2), Y2   \
	VMOVUPS    (SI)(AX*1), Y3    \
	VMOVUPS    (DX), Y4          \
	VMOVUPS    (DX)(R12*1), Y5   \
	VMOVUPS    (DX)(R12*2), Y6   \
	VMOVUPS    (DX)(AX*1), Y7    \
	TRANSPOSEADD(Y15, Y12)       \
	ADDQ       STEP, SI          \
	ADDQ       STEP, DX          \
	DECQ       CX                \
	JNZ        LOOP

// SUMTERMS is SUMTERMSBY for rows of terms one after another.
#define SUMTERMS(TBASE) SUMTERMSBY(TBASE, $32, sum)


// ROWPAIRNEXT ends a pass of the two-stream decode kernels over one row of
// each stream: R11 on to the next row, R8 back by the 4·nb bytes of terms
// it moved on and on to the next row of terms (R12 apart); loops to LOOP
// while R10 counts down.
#define ROWPAIRNEXT(ROWBYTES, LOOP) \
	ADDQ ROWBYTES, R11 \
	LEAQ (R13*4), AX   \
	SUBQ AX, R8        \
	ADDQ R12, R8       \
	DECQ R10           \
	JNZ  LOOP

// SUMSTOREPAIR sums the terms at TBASE (SUMTERMS) and returns, storing the
// four near rows' sums (lanes 0-3) at OUT and the four far rows' (4-7) at
// OUTFAR.
#define SUMSTOREPAIR(TBASE, OUT, OUTFAR) \
	SUMTERMS(TBASE)              \
	MOVQ         OUT, DI         \
	VMOVUPS      X15, (DI)       \
	MOVQ         OUTFAR, DI      \
	VEXTRACTF128 $1, Y15, X0     \
	VMOVUPS      X0, (DI)        \
	VZEROUPPER                   \
	RET

// PREFETCH5 prefetches the five lines from R14 bytes past the group at
// R (a group is 272 bytes).
#define PREFETCH5(R) \
	PREFETCHT0 (R)(R14*1)    \
	PREFETCHT0 64(R)(R14*1)  \
	PREFETCHT0 128(R)(R14*1) \
	PREFETCHT0 192(R)(R14*1) \
	PREFETCHT0 256(R)(R14*1)
