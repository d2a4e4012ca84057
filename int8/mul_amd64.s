//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"

// Panel kernels for MulQ8_0 (mul.go). A panel piece holds sixteen weight
// rows of nb blocks: per block, sixteen code pairs (k = 2p, 2p+1), each
// as [rows 0-7][rows 8-15] of int16 pairs (64 bytes), then the rows'
// scales as float32 ([block][16]); internal/panel's Q8_0 lays it out.

// KPAIR multiplies code pair p (panel bytes OW, activation bytes OX)
// into the block sums: Y0-Y3 rows 0-7 and Y4-Y7 rows 8-15 of tokens 0-3.
#define KPAIR(OW, OX) \
	VMOVDQU      OW(SI), Y8           \
	VMOVDQU      (OW+32)(SI), Y9      \
	VPBROADCASTD OX(DI), Y10          \
	VPMADDWD     Y10, Y8, Y11         \
	VPADDD       Y11, Y0, Y0          \
	VPMADDWD     Y10, Y9, Y12         \
	VPADDD       Y12, Y4, Y4          \
	VPBROADCASTD OX(DI)(R10*1), Y13   \
	VPMADDWD     Y13, Y8, Y14         \
	VPADDD       Y14, Y1, Y1          \
	VPMADDWD     Y13, Y9, Y15         \
	VPADDD       Y15, Y5, Y5          \
	VPBROADCASTD OX(DI)(R10*2), Y10   \
	VPMADDWD     Y10, Y8, Y11         \
	VPADDD       Y11, Y2, Y2          \
	VPMADDWD     Y10, Y9, Y12         \
	VPADDD       Y12, Y6, Y6          \
	VPBROADCASTD OX(DI)(R11*1), Y13   \
	VPMADDWD     Y13, Y8, Y14         \
	VPADDD       Y14, Y3, Y3          \
	VPMADDWD     Y13, Y9, Y15         \
	VPADDD       Y15, Y7, Y7

// KPAIRFIRST is KPAIR for the first code pair of a block: its products
// start the block sums.
#define KPAIRFIRST(OW, OX) \
	VMOVDQU      OW(SI), Y8           \
	VMOVDQU      (OW+32)(SI), Y9      \
	VPBROADCASTD OX(DI), Y10          \
	VPMADDWD     Y10, Y8, Y0          \
	VPMADDWD     Y10, Y9, Y4          \
	VPBROADCASTD OX(DI)(R10*1), Y13   \
	VPMADDWD     Y13, Y8, Y1          \
	VPMADDWD     Y13, Y9, Y5          \
	VPBROADCASTD OX(DI)(R10*2), Y10   \
	VPMADDWD     Y10, Y8, Y2          \
	VPMADDWD     Y10, Y9, Y6          \
	VPBROADCASTD OX(DI)(R11*1), Y13   \
	VPMADDWD     Y13, Y8, Y3          \
	VPMADDWD     Y13, Y9, Y7

// func mulQ8_0KernelAsm(codes, d, x unsafe.Pointer, xstride int, xd unsafe.Pointer, xdBlocks, nb, groups int, sums unsafe.Pointer)
//
// Sixteen rows by four tokens, for each of groups token groups: group g's
// int16 codes start at x+4g·xstride (token rows at stride xstride bytes),
// its scales at xd+16g·xdBlocks ([block][4]; xdBlocks is the batch's
// blocks per row) and its running sums at sums+256g ([token][16]).
TEXT ·mulQ8_0KernelAsm(SB), NOSPLIT, $0-72
	PANELARGS

kgroup:
	MOVQ codes+0(FP), SI
	MOVQ d+8(FP), R8
	MOVQ BX, CX

kblock:
	KPAIRFIRST(0, 0)
	KPAIR(64, 4)
	KPAIR(128, 8)
	KPAIR(192, 12)
	KPAIR(256, 16)
	KPAIR(320, 20)
	KPAIR(384, 24)
	KPAIR(448, 28)
	KPAIR(512, 32)
	KPAIR(576, 36)
	KPAIR(640, 40)
	KPAIR(704, 44)
	KPAIR(768, 48)
	KPAIR(832, 52)
	KPAIR(896, 56)
	KPAIR(960, 60)

	VMOVUPS (R8), Y8
	VMOVUPS 32(R8), Y9
	FLUSH(0, Y0, Y4)
	FLUSH(1, Y1, Y5)
	FLUSH(2, Y2, Y6)
	FLUSH(3, Y3, Y7)

	PANELNEXT
	JNZ kblock

	PANELNEXTGROUP
	JNZ kgroup

	VZEROUPPER
	RET

// func prefetchRowsAsm(p unsafe.Pointer, rowBytes, rows, n int)
TEXT ·prefetchRowsAsm(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ rowBytes+8(FP), R10
	MOVQ rows+16(FP), CX
	MOVQ n+24(FP), DX

prow:
	XORQ AX, AX

pline:
	PREFETCHT1 (SI)(AX*1)
	ADDQ       $64, AX
	CMPQ       AX, DX
	JLT        pline
	// The last byte's line, when n does not end on one.
	PREFETCHT1 -1(SI)(DX*1)
	ADDQ       R10, SI
	DECQ       CX
	JNZ        prow
	RET
