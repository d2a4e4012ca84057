//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"

// Panel kernels for MulQ8_0 (mul.go). A panel piece holds sixteen weight
// rows of nb blocks: per block, sixteen code pairs (k = 2p, 2p+1), each
// as [rows 0-7][rows 8-15] of int16 pairs (64 bytes), then the rows'
// scales as float32 ([block][16]).

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

// TRANSPOSE8 transposes the 8×8 int32 matrix in Y0-Y7 (row i in Yi) and
// stores column p at OFF+p*64(DI) for p = 0..3 and OFF+(p+4)*64 for its
// other half: one 64-byte panel step per code pair.
// The same transpose stands in runtime/kernels/panel_amd64.h
// (TRANSPOSE8STORE): assembly cannot include another directory's header,
// and the panels are repacked in every product (the weights are read
// where the file maps them), where a repack in Go took 1.6-1.9 times as
// long as the whole AVX-512 product (700M shapes, 64 tokens).
#define TRANSPOSE8(OFF) \
	VPUNPCKLDQ  Y1, Y0, Y8              \
	VPUNPCKHDQ  Y1, Y0, Y9              \
	VPUNPCKLDQ  Y3, Y2, Y10             \
	VPUNPCKHDQ  Y3, Y2, Y11             \
	VPUNPCKLDQ  Y5, Y4, Y12             \
	VPUNPCKHDQ  Y5, Y4, Y13             \
	VPUNPCKLDQ  Y7, Y6, Y14             \
	VPUNPCKHDQ  Y7, Y6, Y15             \
	VPUNPCKLQDQ Y10, Y8, Y0             \
	VPUNPCKHQDQ Y10, Y8, Y1             \
	VPUNPCKLQDQ Y11, Y9, Y2             \
	VPUNPCKHQDQ Y11, Y9, Y3             \
	VPUNPCKLQDQ Y14, Y12, Y4            \
	VPUNPCKHQDQ Y14, Y12, Y5            \
	VPUNPCKLQDQ Y15, Y13, Y6            \
	VPUNPCKHQDQ Y15, Y13, Y7            \
	VPERM2I128  $0x20, Y4, Y0, Y8       \
	VMOVDQU     Y8, (OFF)(DI)           \
	VPERM2I128  $0x31, Y4, Y0, Y9       \
	VMOVDQU     Y9, (OFF+256)(DI)       \
	VPERM2I128  $0x20, Y5, Y1, Y10      \
	VMOVDQU     Y10, (OFF+64)(DI)       \
	VPERM2I128  $0x31, Y5, Y1, Y11      \
	VMOVDQU     Y11, (OFF+320)(DI)      \
	VPERM2I128  $0x20, Y6, Y2, Y12      \
	VMOVDQU     Y12, (OFF+128)(DI)      \
	VPERM2I128  $0x31, Y6, Y2, Y13      \
	VMOVDQU     Y13, (OFF+384)(DI)      \
	VPERM2I128  $0x20, Y7, Y3, Y14      \
	VMOVDQU     Y14, (OFF+192)(DI)      \
	VPERM2I128  $0x31, Y7, Y3, Y15      \
	VMOVDQU     Y15, (OFF+448)(DI)

// WIDEN8 loads codes at byte CO of eight rows' blocks (rows at A, A+rb,
// A+2rb, A+3rb, B, …) as int16 into Y0-Y7.
#define WIDEN8(A, B, CO) \
	VPMOVSXBW CO(A), Y0          \
	VPMOVSXBW CO(A)(R10*1), Y1   \
	VPMOVSXBW CO(A)(R10*2), Y2   \
	VPMOVSXBW CO(A)(R11*1), Y3   \
	VPMOVSXBW CO(B), Y4          \
	VPMOVSXBW CO(B)(R10*1), Y5   \
	VPMOVSXBW CO(B)(R10*2), Y6   \
	VPMOVSXBW CO(B)(R11*1), Y7

// SCALES8 converts the fp16 scales of eight rows' blocks to float32 at
// OFF(R8).
#define SCALES8(A, B, OFF) \
	MOVWLZX   (A), R13                \
	VMOVD     R13, X0                 \
	VPINSRW   $1, (A)(R10*1), X0, X0  \
	VPINSRW   $2, (A)(R10*2), X0, X0  \
	VPINSRW   $3, (A)(R11*1), X0, X0  \
	VPINSRW   $4, (B), X0, X0         \
	VPINSRW   $5, (B)(R10*1), X0, X0  \
	VPINSRW   $6, (B)(R10*2), X0, X0  \
	VPINSRW   $7, (B)(R11*1), X0, X0  \
	VCVTPH2PS X0, Y0                  \
	VMOVUPS   Y0, OFF(R8)

// func mulQ8_0RepackAsm(w unsafe.Pointer, rowBytes, nb int, codes, d unsafe.Pointer)
//
// Lays out nb blocks of sixteen rows (row r at w+r·rowBytes) as a panel
// piece.
TEXT ·mulQ8_0RepackAsm(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), R10
	MOVQ nb+16(FP), CX
	MOVQ codes+24(FP), DI
	MOVQ d+32(FP), R8
	LEAQ (R10)(R10*2), R11
	LEAQ (SI)(R10*4), BX  // row 4
	LEAQ (BX)(R10*4), DX  // row 8
	LEAQ (DX)(R10*4), R12 // row 12

rblock:
	WIDEN8(SI, BX, 2)
	TRANSPOSE8(0)
	WIDEN8(SI, BX, 18)
	TRANSPOSE8(512)
	WIDEN8(DX, R12, 2)
	TRANSPOSE8(32)
	WIDEN8(DX, R12, 18)
	TRANSPOSE8(544)
	SCALES8(SI, BX, 0)
	SCALES8(DX, R12, 32)

	ADDQ $34, SI
	ADDQ $34, BX
	ADDQ $34, DX
	ADDQ $34, R12
	ADDQ $1024, DI
	ADDQ $64, R8
	DECQ CX
	JNZ  rblock

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
