//go:build !purego

#include "textflag.h"

// TRANSPOSE8 transposes the 8×8 matrix of 32-bit values in Y0-Y7 (row r
// in Yr) and stores column p at LO+p·S for p < 4 and at HI+(p−4)·S for
// p >= 4 (LO and HI memory operands without an index, S and S3 = 3·S
// registers). It is the one transpose of both panel layouts: Q8_0's code
// pairs (two int16 codes as one 32-bit value) and F16's float32 values.
#define TRANSPOSE8(LO, HI, S, S3) \
	VPUNPCKLDQ  Y1, Y0, Y8    \
	VPUNPCKHDQ  Y1, Y0, Y9    \
	VPUNPCKLDQ  Y3, Y2, Y10   \
	VPUNPCKHDQ  Y3, Y2, Y11   \
	VPUNPCKLDQ  Y5, Y4, Y12   \
	VPUNPCKHDQ  Y5, Y4, Y13   \
	VPUNPCKLDQ  Y7, Y6, Y14   \
	VPUNPCKHDQ  Y7, Y6, Y15   \
	VPUNPCKLQDQ Y10, Y8, Y0   \
	VPUNPCKHQDQ Y10, Y8, Y1   \
	VPUNPCKLQDQ Y11, Y9, Y2   \
	VPUNPCKHQDQ Y11, Y9, Y3   \
	VPUNPCKLQDQ Y14, Y12, Y4  \
	VPUNPCKHQDQ Y14, Y12, Y5  \
	VPUNPCKLQDQ Y15, Y13, Y6  \
	VPUNPCKHQDQ Y15, Y13, Y7  \
	VPERM2I128  $0x20, Y4, Y0, Y8  \
	VMOVDQU     Y8, LO             \
	VPERM2I128  $0x31, Y4, Y0, Y9  \
	VMOVDQU     Y9, HI             \
	VPERM2I128  $0x20, Y5, Y1, Y10 \
	VMOVDQU     Y10, LO(S*1)       \
	VPERM2I128  $0x31, Y5, Y1, Y11 \
	VMOVDQU     Y11, HI(S*1)       \
	VPERM2I128  $0x20, Y6, Y2, Y12 \
	VMOVDQU     Y12, LO(S*2)       \
	VPERM2I128  $0x31, Y6, Y2, Y13 \
	VMOVDQU     Y13, HI(S*2)       \
	VPERM2I128  $0x20, Y7, Y3, Y14 \
	VMOVDQU     Y14, LO(S3*1)      \
	VPERM2I128  $0x31, Y7, Y3, Y15 \
	VMOVDQU     Y15, HI(S3*1)

// ROWS8 loads 16 bytes at byte CO of eight rows (A, A+rb, A+2rb, A+3rb,
// B, B+rb, B+2rb, B+3rb; R10 = rb, R11 = 3rb) widened by W(m, d) into
// Y0-Y7: SXBW (int8 codes to int16), CVTPH (binary16 to float32) or
// CVTBF16 (bfloat16 to float32, its top half).
#define ROWS8(W, A, B, CO) \
	W(CO(A), Y0)        \
	W(CO(A)(R10*1), Y1) \
	W(CO(A)(R10*2), Y2) \
	W(CO(A)(R11*1), Y3) \
	W(CO(B), Y4)        \
	W(CO(B)(R10*1), Y5) \
	W(CO(B)(R10*2), Y6) \
	W(CO(B)(R11*1), Y7)

#define SXBW(m, d) VPMOVSXBW m, d
#define CVTPH(m, d) VCVTPH2PS m, d
#define CVTBF16(m, d) VPMOVZXWD m, d; VPSLLD $16, d, d

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

// F16PANEL converts eight rows of 32·m 16-bit values (func(w
// unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)), widened by W
// (CVTPH or CVTBF16), into a panel whose vectors are vb bytes (32 for
// eight lanes, 64 for sixteen, this call filling eight), one lane class
// being m·4·vb = m<<shift bytes.
#define F16PANEL(W, shift, vb) \
	MOVQ w+0(FP), SI                             \
	MOVQ rowBytes+8(FP), R10                     \
	MOVQ m+16(FP), CX                            \
	MOVQ dst+24(FP), DI                          \
	LEAQ (R10)(R10*2), R11                       \
	LEAQ (SI)(R10*4), BX                         \
	MOVQ CX, R12                                 \
	SHLQ $shift, R12                             \
	LEAQ (R12)(R12*2), R13                       \
	LEAQ (DI)(R12*4), DX                         \
group:                                           \
	ROWS8(W, SI, BX, 0)                  \
	TRANSPOSE8(0(DI), 0(DX), R12, R13)           \
	ROWS8(W, SI, BX, 16)                 \
	TRANSPOSE8(vb(DI), vb(DX), R12, R13)         \
	ROWS8(W, SI, BX, 32)                 \
	TRANSPOSE8(2*vb(DI), 2*vb(DX), R12, R13)     \
	ROWS8(W, SI, BX, 48)                 \
	TRANSPOSE8(3*vb(DI), 3*vb(DX), R12, R13)     \
	ADDQ $64, SI                                 \
	ADDQ $64, BX                                 \
	ADDQ $(4*vb), DI                             \
	ADDQ $(4*vb), DX                             \
	DECQ CX                                      \
	JNZ  group                                   \
	VZEROUPPER                                   \
	RET

// func q8_0Asm(w unsafe.Pointer, rowBytes, nb int, codes, d unsafe.Pointer)
//
// Q8_0's panel piece: per block, sixteen code pairs of 64 bytes each
// ([rows 0-7][rows 8-15] of int16 pairs), then the sixteen scales.
TEXT ·q8_0Asm(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), R10
	MOVQ nb+16(FP), CX
	MOVQ codes+24(FP), DI
	MOVQ d+32(FP), R8
	LEAQ (R10)(R10*2), R11
	LEAQ (SI)(R10*4), BX  // row 4
	LEAQ (BX)(R10*4), DX  // row 8
	LEAQ (DX)(R10*4), R12 // row 12
	MOVQ $64, R9          // one code pair of sixteen rows
	MOVQ $192, AX

rblock:
	// Codes 0-15 (pairs 0-7) and 16-31 (pairs 8-15) of rows 0-7, then of
	// rows 8-15 at +32.
	ROWS8(SXBW, SI, BX, 2)
	TRANSPOSE8(0(DI), 256(DI), R9, AX)
	ROWS8(SXBW, SI, BX, 18)
	TRANSPOSE8(512(DI), 768(DI), R9, AX)
	ROWS8(SXBW, DX, R12, 2)
	TRANSPOSE8(32(DI), 288(DI), R9, AX)
	ROWS8(SXBW, DX, R12, 18)
	TRANSPOSE8(544(DI), 800(DI), R9, AX)
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

// func f16x8Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)
TEXT ·f16x8Asm(SB), NOSPLIT, $0-32
	F16PANEL(CVTPH, 7, 32)

// func f16x16Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)
TEXT ·f16x16Asm(SB), NOSPLIT, $0-32
	F16PANEL(CVTPH, 8, 64)

// func bf16x8Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)
TEXT ·bf16x8Asm(SB), NOSPLIT, $0-32
	F16PANEL(CVTBF16, 7, 32)

// func bf16x16Asm(w unsafe.Pointer, rowBytes, m int, dst unsafe.Pointer)
TEXT ·bf16x16Asm(SB), NOSPLIT, $0-32
	F16PANEL(CVTBF16, 8, 64)
