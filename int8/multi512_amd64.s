//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"
#include "q8_512_amd64.h"

// AVX-512 (F, BW, VL, VNNI) decoding row kernels for 2 or 3 tokens: the
// codes of each group of a weight row are loaded, XORed with 0x80 and
// permuted (MPERM) once, and its scales gathered once, then taken
// against every token's prepared activation row (multiPrep.set). Per
// token the integer block sums (exact in int32 in any order), the
// float32 operations and the serial sums are those of dotRowsQ8_0Asm
// (dot512_amd64.s), so every result equals dotQ8_0RowsAVX512's and
// dotQ8_0Go's bit for bit.
//
// Prepared activations (all tokens in one buffer from DI): per group of
// eight blocks a 960-byte record, token k's codes at 256k (code pairs as
// q8Prep lays them out, permuted by MPERM), its eight corrections 128·Σx
// (int32) at 768+32k and its eight scales (float32) at 864+32k; then per
// tail block a 120-byte record, token k's codes at 32k, correction at
// 96+4k, scale at 108+4k. Room is kept for three tokens whatever the
// count.
//
// Terms: row i of t (tStride bytes apart) holds, per group g, token k's
// eight terms at 96g+32k (tail blocks: the first slots of the last
// group's), +0 in the slots past nb.

// MPERM permutes the dwords of the code pairs P0..P3 (pair p is [block
// p | block p+4]) as REDUCE's first two stages move the lanes of their
// products (those are lane-wise, so permuting the codes of weights and
// activations alike permutes the products alike), using Q0..Q3: then
// the four products of a group add up lane by lane to REDUCE's sixteen
// lanes, two per block, and VPDPBUSD does the adding. The weights'
// shuffles are done once for all the tokens, instead of REDUCE's per
// token.
#define MPERM(P0, P1, P2, P3, Q0, Q1, Q2, Q3) \
	VPUNPCKLQDQ P1, P0, Q0        \
	VPUNPCKHQDQ P1, P0, Q1        \
	VPUNPCKLQDQ P3, P2, Q2        \
	VPUNPCKHQDQ P3, P2, Q3        \
	VSHUFPS     $0x88, Q2, Q0, P0 \
	VSHUFPS     $0x88, Q3, Q1, P1 \
	VSHUFPS     $0xdd, Q2, Q0, P2 \
	VSHUFPS     $0xdd, Q3, Q1, P3

// MWLOAD loads the code pairs of the group of the row at BASE, XORed
// with 0x80 and permuted by MPERM, into Z16..Z19 and its eight scales as
// float32 into both halves of Z20.
#define MWLOAD(BASE) \
	VMOVDQU64    2(BASE), Y16          \
	VINSERTI64X4 $1, 138(BASE), Z16, Z16 \
	VPXORD       Z31, Z16, Z16         \
	VMOVDQU64    36(BASE), Y17         \
	VINSERTI64X4 $1, 172(BASE), Z17, Z17 \
	VPXORD       Z31, Z17, Z17         \
	VMOVDQU64    70(BASE), Y18         \
	VINSERTI64X4 $1, 206(BASE), Z18, Z18 \
	VPXORD       Z31, Z18, Z18         \
	VMOVDQU64    104(BASE), Y19        \
	VINSERTI64X4 $1, 240(BASE), Z19, Z19 \
	VPXORD       Z31, Z19, Z19         \
	VMOVDQU64    0(BASE), Z12          \
	VPERMT2W     68(BASE), Z30, Z12    \
	VMOVDQU64    136(BASE), Z13        \
	VPERMT2W     204(BASE), Z30, Z13   \
	VPUNPCKLQDQ  X13, X12, X12         \
	VCVTPH2PS    X12, Y20              \
	VINSERTF64X4 $1, Y20, Z20, Z20     \
	MPERM(Z16, Z17, Z18, Z19, Z21, Z22, Z23, Z24)

// MTOK2 stores at DST the sixteen terms of tokens 0 and 1 (eight each)
// of the group loaded by MWLOAD: each token's products summed in one
// accumulator (Z0, Z4), then both tokens' last reduction stage (that of
// REDUCE), correction, conversion and scaling in one zmm each.
#define MTOK2(DST) \
	VPXORD     Z0, Z0, Z0                \
	VPXORD     Z4, Z4, Z4                \
	VPDPBUSD   0(DI), Z16, Z0            \
	VPDPBUSD   256(DI), Z16, Z4          \
	VPDPBUSD   64(DI), Z17, Z0           \
	VPDPBUSD   320(DI), Z17, Z4          \
	VPDPBUSD   128(DI), Z18, Z0          \
	VPDPBUSD   384(DI), Z18, Z4          \
	VPDPBUSD   192(DI), Z19, Z0          \
	VPDPBUSD   448(DI), Z19, Z4          \
	VSHUFI64X2 $0x88, Z4, Z0, Z10        \
	VSHUFI64X2 $0xdd, Z4, Z0, Z11        \
	VPADDD     Z11, Z10, Z10             \
	VPSUBD     768(DI), Z10, Z10         \
	VCVTDQ2PS  Z10, Z10                  \
	VMULPS     864(DI), Z20, Z11         \
	VMULPS     Z11, Z10, Z10             \
	VMOVUPS    Z10, DST

// MTOK3 stores at DST the eight terms of token 2, as MTOK2 (Z21).
#define MTOK3(DST) \
	VPXORD     Z21, Z21, Z21             \
	VPDPBUSD   512(DI), Z16, Z21         \
	VPDPBUSD   576(DI), Z17, Z21         \
	VPDPBUSD   640(DI), Z18, Z21         \
	VPDPBUSD   704(DI), Z19, Z21         \
	VSHUFI64X2 $0x88, Z21, Z21, Z9       \
	VSHUFI64X2 $0xdd, Z21, Z21, Z10      \
	VPADDD     Y10, Y9, Y9               \
	VPSUBD     832(DI), Y9, Y9           \
	VCVTDQ2PS  Y9, Y9                    \
	VMULPS     928(DI), Y20, Y12         \
	VMULPS     Y12, Y9, Y9               \
	VMOVUPS    Y9, DST

// MGROUP stores the terms of the group of the row at BASE for the two
// or three tokens (BX): tokens 0 and 1 at D01, token 2 at D2.
#define MGROUP(BASE, D01, D2, SKIP) \
	MWLOAD(BASE)                          \
	MTOK2(D01)                            \
	CMPQ      BX, $3                      \
	JNE       SKIP                        \
	MTOK3(D2)                             \
SKIP:

// MW1 loads the codes of the one block at BASE (a row's tail), XORed
// with 0x80, into Y16 and its scale as float32 into X20.
#define MW1(BASE) \
	VMOVDQU64 2(BASE), Y16   \
	VPXORD    Y31, Y16, Y16  \
	MOVWLZX   0(BASE), AX    \
	VMOVD     AX, X12        \
	VCVTPH2PS X12, X20

// MT1 stores at DST the term of token K of the block loaded by MW1.
#define MT1(K, DST) \
	VPXORD    Y11, Y11, Y11            \
	VPDPBUSD  (K*32)(DI), Y16, Y11     \
	HSUM8(Y11, X11, X9)                \
	VMOVD     (96+K*4)(DI), X9         \
	VPSUBD    X9, X11, X11             \
	VCVTDQ2PS X11, X11                 \
	VMULSS    (108+K*4)(DI), X20, X12  \
	VMULSS    X12, X11, X11            \
	VMOVSS    X11, DST

// MONE is MGROUP for the tail block at BASE.
#define MONE(BASE, D0, D1, D2, SKIP) \
	MW1(BASE)       \
	MT1(0, D0)      \
	MT1(1, D1)      \
	CMPQ BX, $3     \
	JNE  SKIP       \
	MT1(2, D2)      \
SKIP:

// MSUMTERMS is SUMTERMS for one token's terms from TBASE: eight at a time
// 96 bytes apart, rows R12 bytes apart, ⌈nb/8⌉ (R13) steps.
#define MSUMTERMS(TBASE) SUMTERMSBY(TBASE, $96, msum)

// MROWBACK moves R8 from past a row's terms back to the row's start
// (⌊nb/8⌋ groups of 96 bytes and nb%8 tail slots of 4) and on to the
// next row (R12 bytes on).
#define MROWBACK \
	MOVQ  R13, AX   \
	SHRQ  $3, AX    \
	IMULQ $96, AX   \
	SUBQ  AX, R8    \
	MOVQ  R13, AX   \
	ANDQ  $7, AX    \
	SHLQ  $2, AX    \
	SUBQ  AX, R8    \
	ADDQ  R12, R8

// func dotRows2MultiAsm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int)
//
// dotRows2Q8_0Asm for tokens (2 or 3) prepared activation rows at xp:
// four rows at w and four at w+far, row i and row i of the far set
// group by group side by side, each with the lines pf bytes ahead
// prefetched (pf 0: none). Token k's products go to out and outFar,
// each plus k·outStride bytes.
TEXT ·dotRows2MultiAsm(SB), NOSPLIT, $0-96
	MOVQ w+0(FP), R11
	MOVQ nb+32(FP), R13
	MOVQ tokens+40(FP), BX
	MOVQ t+72(FP), R8
	MOVQ tStride+80(FP), R12
	MOVQ pf+88(FP), R14
	LEAQ (R12*4), R9 // from row i of t to row 4+i
	MOVQ $4, R10
	ROWSETUP

mrow2:
	MOVQ R11, SI
	MOVQ R11, DX
	ADDQ far+8(FP), DX
	MOVQ xp+24(FP), DI
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   mtail2

mgroup2:
	TESTQ R14, R14
	JZ    mfetched2
	PREFETCH5(SI)
	PREFETCH5(DX)

mfetched2:
	MGROUP(SI, (R8), 64(R8), mnear3)
	MGROUP(DX, (R8)(R9*1), 64(R8)(R9*1), mfar3)
	ADDQ $272, SI
	ADDQ $272, DX
	ADDQ $960, DI
	ADDQ $96, R8
	DECQ CX
	JNZ  mgroup2

mtail2:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   mnext2

mone2:
	MONE(SI, (R8), 32(R8), 64(R8), mnear1)
	MONE(DX, (R8)(R9*1), 32(R8)(R9*1), 64(R8)(R9*1), mfar1)
	ADDQ $34, SI
	ADDQ $34, DX
	ADDQ $120, DI
	ADDQ $4, R8
	DECQ CX
	JNZ  mone2

mnext2:
	ADDQ rowBytes+16(FP), R11
	MROWBACK
	DECQ R10
	JNZ  mrow2

	// Per token: its serial sums, lanes 0-3 to out, 4-7 to outFar.
	MOVQ t+72(FP), R11
	MOVQ out+48(FP), R14
	MOVQ outFar+56(FP), R9
	MOVQ outStride+64(FP), R10

msumtok2:
	MSUMTERMS(R11)
	VMOVUPS      X15, (R14)
	VEXTRACTF128 $1, Y15, X0
	VMOVUPS      X0, (R9)
	ADDQ         $32, R11
	ADDQ         R10, R14
	ADDQ         R10, R9
	DECQ         BX
	JNZ          msumtok2
	VZEROUPPER
	RET

// func dotRowsMultiAsm(w unsafe.Pointer, rowBytes int, xp unsafe.Pointer, nb, tokens int, out unsafe.Pointer, outStride, rows int, t unsafe.Pointer, tStride int)
//
// dotRowsQ8_0Asm for tokens (2 or 3) prepared activation rows at xp:
// rows (1 to 8) weight rows rowBytes apart from w, each read from start
// to end; token k's products to out plus k·outStride bytes.
TEXT ·dotRowsMultiAsm(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), R11
	MOVQ nb+24(FP), R13
	MOVQ tokens+32(FP), BX
	MOVQ rows+56(FP), R10
	MOVQ t+64(FP), R8
	MOVQ tStride+72(FP), R12
	ROWSETUP

mrow:
	MOVQ R11, SI
	MOVQ xp+16(FP), DI
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   mtail

mgroup:
	MGROUP(SI, (R8), 64(R8), mg3)
	ADDQ $272, SI
	ADDQ $960, DI
	ADDQ $96, R8
	DECQ CX
	JNZ  mgroup

mtail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   mnext

mone:
	MONE(SI, (R8), 32(R8), 64(R8), mo3)
	ADDQ $34, SI
	ADDQ $120, DI
	ADDQ $4, R8
	DECQ CX
	JNZ  mone

mnext:
	ADDQ rowBytes+8(FP), R11
	MROWBACK
	DECQ R10
	JNZ  mrow

	// Lanes 0..rows-1 are the results.
	MOVQ rows+56(FP), CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVQ t+64(FP), R11
	MOVQ out+40(FP), R14
	MOVQ outStride+48(FP), R10

msumtok:
	MSUMTERMS(R11)
	VMOVUPS Y15, K1, (R14)
	ADDQ    $32, R11
	ADDQ    R10, R14
	DECQ    BX
	JNZ     msumtok
	VZEROUPPER
	RET

// MPREPPAIR loads code pair P of a group of the activation row (blocks
// P and P+4, code bytes at OLO and OHI) into X and sets Z to the lanes of
// 128·Σx of both blocks (0x80 as the unsigned operand).
#define MPREPPAIR(OLO, OHI, X, Z) \
	VMOVDQU      OLO(SI), Y8          \
	VINSERTI64X4 $1, OHI(SI), Z8, X   \
	VPXORD       Z, Z, Z              \
	VPDPBUSD     X, Z31, Z

// func prepMultiAsm(x unsafe.Pointer, nb int, codes, cs, tcodes, tcs unsafe.Pointer)
//
// Lays out one token's activation row x of nb blocks in the records the
// kernels above read: per group its codes (permuted by MPERM) at codes and its corrections
// and scales at cs and cs+96 (both 960 bytes on per group); per tail
// block its codes at tcodes, its correction at tcs and its scale at
// tcs+12 (both 120 bytes on per block).
TEXT ·prepMultiAsm(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), R13
	MOVQ codes+16(FP), DI
	MOVQ cs+24(FP), BX
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VMOVDQU64 q8scaleidx<>(SB), Z30
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   mpreptail

mprepgroup:
	MPREPPAIR(2, 138, Z16, Z0)
	MPREPPAIR(36, 172, Z17, Z1)
	MPREPPAIR(70, 206, Z18, Z2)
	MPREPPAIR(104, 240, Z19, Z3)
	MPERM(Z16, Z17, Z18, Z19, Z4, Z5, Z6, Z7)
	VMOVDQU64   Z16, 0(DI)
	VMOVDQU64   Z17, 64(DI)
	VMOVDQU64   Z18, 128(DI)
	VMOVDQU64   Z19, 192(DI)
	REDUCE(Z0, Z1, Z2, Z3)
	VMOVDQU     Y9, (BX)
	VMOVDQU64   0(SI), Z12
	VPERMT2W    68(SI), Z30, Z12
	VMOVDQU64   136(SI), Z13
	VPERMT2W    204(SI), Z30, Z13
	VPUNPCKLQDQ X13, X12, X12
	VCVTPH2PS   X12, Y12
	VMOVUPS     Y12, 96(BX)
	ADDQ $272, SI
	ADDQ $960, DI
	ADDQ $960, BX
	DECQ CX
	JNZ  mprepgroup

mpreptail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   mprepdone
	MOVQ tcodes+32(FP), DI
	MOVQ tcs+40(FP), BX

mprepone:
	VMOVDQU      2(SI), Y8
	VMOVDQU      Y8, (DI)
	VPXORD       Y11, Y11, Y11
	VPDPBUSD     Y8, Y31, Y11
	HSUM8(Y11, X11, X9)
	VMOVD        X11, (BX)
	MOVWLZX      0(SI), AX
	VMOVD        AX, X12
	VCVTPH2PS    X12, X12
	VMOVSS       X12, 12(BX)
	ADDQ $34, SI
	ADDQ $120, DI
	ADDQ $120, BX
	DECQ CX
	JNZ  mprepone

mprepdone:
	VZEROUPPER
	RET
