//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"
#include "multi2_amd64.h"

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

// XPROD adds to ACC the int32 sums of the products of the weight vector
// in YW (absolute values in YA) and the activation vector at M: the
// activation codes take the weights' signs, byte pairs are multiplied
// and summed to int16 (at most 2·128·127, no saturation) and word pairs
// summed to int32 by ones (Y15). NA and NACC are unused here
// (multi2_amd64.h).
#define XPROD(M, YW, YA, ACC, NA, NACC) \
	VMOVDQU    M, Y8         \
	VPSIGNB    YW, Y8, Y8    \
	VPMADDUBSW Y8, YA, Y8    \
	VPMADDWD   Y15, Y8, Y8   \
	VPADDD     Y8, ACC, ACC

#define XONES VMOVDQU x2ones16<>(SB), Y15

// func dotRows2Multi2Asm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int)
//
// dotRows2SymAsm for tokens (2 or 3) prepared activation rows at xp:
// four rows at w and four at w+far, row i and row i of the far set
// group by group side by side, each with the lines pf bytes ahead
// prefetched (pf 0: none). Token k's products go to out and outFar,
// each plus k·outStride bytes.
TEXT ·dotRows2Multi2Asm(SB), NOSPLIT, $0-96
	ROWS2MULTI

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
