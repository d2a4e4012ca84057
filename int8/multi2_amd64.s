//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"

// AVX2 decoding row kernels for 2 or 3 tokens: the codes of each group
// (eight blocks) of a weight row are loaded, permuted and their absolute
// values taken once, and its scales gathered once, then taken against
// every token's prepared activation row (multiPrep.setAVX2). Per token
// the block sums are dotQ8_0SymAsm's (exact in int32, however they are
// added up), the terms float32(s)·(dw·dx) and the serial sums in block
// order those of dotRows2SymAsm, so every result equals
// dotQ8_0SymRowsAVX2's and dotQ8_0Go's bit for bit. Activation codes
// must lie in [−127, 127], as for dotQ8_0SymAsm.
//
// Without VNNI a product of 32 codes costs VPSIGNB, VPMADDUBSW and
// VPMADDWD whatever is shared, so what the tokens share is the rest:
// the weight loads, VPABSB, the scales and most of the reduction. The
// codes of four blocks are permuted (WHALF) so that dword lanes b and
// 4+b of every vector hold codes of block b only: a token's block sums
// are then the lane-wise sums of its products, two accumulators of four
// vectors each, joined by one VPERM2I128 pair (XJOIN). On the EPYC (Zen
// 5), against sixteen-byte halves of blocks p and p+4 put side by side
// (VINSERTI128) so that no join was needed, it ran 4-7% faster in cache
// and 2-5% over the mapped 700M file (CPU time, interleaved).
//
// Prepared activations (all tokens in one buffer from DI): per group an
// 864-byte record, token k's codes at 256k (the eight vectors WHALF
// makes of them, blocks 4h..4h+3's vector j at 128h+32j) and its eight
// scales (float32) at 768+32k; then per tail block a 128-byte record,
// token k's codes at 32k and scale at 96+4k. Room is kept for three
// tokens whatever the count.
//
// Terms: as multi512_amd64.s, row i of t (tStride bytes apart) holds,
// per group g, token k's eight terms at 96g+32k (tail blocks: the first
// slots of the last group's), +0 in the slots past nb.

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

// XPROD adds to ACC the int32 sums of the products of the weight vector
// in YW (absolute values in YA) and the activation vector at M: the
// activation codes take the weights' signs, byte pairs are multiplied
// and summed to int16 (at most 2·128·127, no saturation) and word pairs
// summed to int32 by ones (Y15).
#define XPROD(M, YW, YA, ACC) \
	VMOVDQU    M, Y8         \
	VPSIGNB    YW, Y8, Y8    \
	VPMADDUBSW Y8, YA, Y8    \
	VPMADDWD   Y15, Y8, Y8   \
	VPADDD     Y8, ACC, ACC

// XHALF adds token K's products with the four weight blocks in Y0..Y7
// (blocks 4H..4H+3) to ACC.
#define XHALF(K, H, ACC) \
	XPROD((256*K+128*H)(DI), Y0, Y4, ACC)    \
	XPROD((256*K+128*H+32)(DI), Y1, Y5, ACC) \
	XPROD((256*K+128*H+64)(DI), Y2, Y6, ACC) \
	XPROD((256*K+128*H+96)(DI), Y3, Y7, ACC)

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
	XHALF(0, 0, Y9)         \
	XHALF(1, 0, Y11)        \
	CMPQ      BX, $3        \
	JNE       S1            \
	XHALF(2, 0, Y13)        \
S1:                         \
	WHALF(BASE, 138)        \
	WABS                    \
	XHALF(0, 1, Y10)        \
	XHALF(1, 1, Y12)        \
	XJOIN(Y9, Y10)          \
	XJOIN(Y11, Y12)         \
	CMPQ      BX, $3        \
	JNE       S2            \
	XHALF(2, 1, Y14)        \
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
	VMOVDQU    (32*K)(DI), Y8        \
	VPSIGNB    Y0, Y8, Y8            \
	VPMADDUBSW Y8, Y4, Y8            \
	VPMADDWD   Y15, Y8, Y8           \
	HSUM8(Y8, X8, X9)                \
	VCVTDQ2PS  X8, X8                \
	VMULSS     (96+4*K)(DI), X10, X11 \
	VMULSS     X11, X8, X8           \
	VMOVSS     X8, DST

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

// func dotRows2Multi2Asm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int)
//
// dotRows2SymAsm for tokens (2 or 3) prepared activation rows at xp:
// four rows at w and four at w+far, row i and row i of the far set
// group by group side by side, each with the lines pf bytes ahead
// prefetched (pf 0: none). Token k's products go to out and outFar,
// each plus k·outStride bytes.
TEXT ·dotRows2Multi2Asm(SB), NOSPLIT, $0-96
	MOVQ    w+0(FP), R11
	MOVQ    nb+32(FP), R13
	MOVQ    tokens+40(FP), BX
	MOVQ    t+72(FP), R8
	MOVQ    tStride+80(FP), R12
	MOVQ    pf+88(FP), R14
	LEAQ    (R12*4), R9 // from row i of t to row 4+i
	MOVQ    $4, R10
	VMOVDQU x2ones16<>(SB), Y15

xrow:
	MOVQ R11, SI
	MOVQ R11, DX
	ADDQ far+8(FP), DX
	MOVQ xp+24(FP), DI
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   xtail

xgroup:
	TESTQ R14, R14
	JZ    xfetched
	PREFETCH5(SI)
	PREFETCH5(DX)

xfetched:
	XGROUP(SI, (R8), 32(R8), 64(R8), xn1, xn2, xn3)
	XGROUP(DX, (R8)(R9*1), 32(R8)(R9*1), 64(R8)(R9*1), xf1, xf2, xf3)
	ADDQ $272, SI
	ADDQ $272, DX
	ADDQ $864, DI
	ADDQ $96, R8
	DECQ CX
	JNZ  xgroup

xtail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   xnext

xone:
	XONE(SI, (R8), 32(R8), 64(R8), xn4)
	XONE(DX, (R8)(R9*1), 32(R8)(R9*1), 64(R8)(R9*1), xf4)
	ADDQ $34, SI
	ADDQ $34, DX
	ADDQ $128, DI
	ADDQ $4, R8
	DECQ CX
	JNZ  xone

xnext:
	// R8 back over the row's terms (⌊nb/8⌋ groups of 96 bytes and nb%8
	// tail slots of 4) and on to the next row.
	ADDQ  rowBytes+16(FP), R11
	MOVQ  R13, AX
	SHRQ  $3, AX
	IMULQ $96, AX
	SUBQ  AX, R8
	MOVQ  R13, AX
	ANDQ  $7, AX
	SHLQ  $2, AX
	SUBQ  AX, R8
	ADDQ  R12, R8
	DECQ  R10
	JNZ   xrow

	// Per token: its serial sums, lanes 0-3 to out, 4-7 to outFar.
	MOVQ t+72(FP), R11
	MOVQ out+48(FP), R14
	MOVQ outFar+56(FP), R9
	MOVQ outStride+64(FP), R10

xsumtok:
	SUMTERMSBY(R11, $96, xsum)
	VMOVUPS      X15, (R14)
	VEXTRACTF128 $1, Y15, X0
	VMOVUPS      X0, (R9)
	ADDQ         $32, R11
	ADDQ         R10, R14
	ADDQ         R10, R9
	DECQ         BX
	JNZ          xsumtok
	VZEROUPPER
	RET

// func prepMulti2Asm(x unsafe.Pointer, nb int, codes, scales, tcodes, tscales unsafe.Pointer)
//
// Lays out one token's activation row x of nb blocks in the records the
// kernel above reads: per group its codes permuted by WHALF at codes and
// its scales as float32 at scales (both 864 bytes on per group); per
// tail block its codes at tcodes and its scale at tscales (both 128
// bytes on per block).
TEXT ·prepMulti2Asm(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), R13
	MOVQ codes+16(FP), DI
	MOVQ scales+24(FP), BX
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   xpreptail

xprepgroup:
	WHALF(SI, 2)
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	WHALF(SI, 138)
	VMOVDQU Y0, 128(DI)
	VMOVDQU Y1, 160(DI)
	VMOVDQU Y2, 192(DI)
	VMOVDQU Y3, 224(DI)
	SCALES8(SI)
	VMOVUPS Y10, (BX)
	ADDQ    $272, SI
	ADDQ    $864, DI
	ADDQ    $864, BX
	DECQ    CX
	JNZ     xprepgroup

xpreptail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   xprepdone
	MOVQ tcodes+32(FP), DI
	MOVQ tscales+40(FP), BX

xprepone:
	VMOVDQU   2(SI), Y0
	VMOVDQU   Y0, (DI)
	MOVWLZX   0(SI), AX
	VMOVD     AX, X10
	VCVTPH2PS X10, X10
	VMOVSS    X10, (BX)
	ADDQ      $34, SI
	ADDQ      $128, DI
	ADDQ      $128, BX
	DECQ      CX
	JNZ       xprepone

xprepdone:
	VZEROUPPER
	RET

DATA x2ones16<>+0(SB)/8, $0x0001000100010001
DATA x2ones16<>+8(SB)/8, $0x0001000100010001
DATA x2ones16<>+16(SB)/8, $0x0001000100010001
DATA x2ones16<>+24(SB)/8, $0x0001000100010001
GLOBL x2ones16<>(SB), RODATA|NOPTR, $32
