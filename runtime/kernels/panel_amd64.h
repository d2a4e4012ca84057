// Macros shared by MulF16's AVX2 and AVX-512 panel kernels
// (#include "panel_amd64.h").

// F16ROWS converts the binary16 values at byte CO of the eight rows (SI,
// SI+rb, …, BX+3rb) into Y0-Y7.
#define F16ROWS(CO) \
	VCVTPH2PS CO(SI), Y0          \
	VCVTPH2PS CO(SI)(R10*1), Y1   \
	VCVTPH2PS CO(SI)(R10*2), Y2   \
	VCVTPH2PS CO(SI)(R11*1), Y3   \
	VCVTPH2PS CO(BX), Y4          \
	VCVTPH2PS CO(BX)(R10*1), Y5   \
	VCVTPH2PS CO(BX)(R10*2), Y6   \
	VCVTPH2PS CO(BX)(R11*1), Y7

// TRANSPOSE8STORE transposes Y0-Y7 (8×8 float32, row r in Yr) and stores
// column p at OFF(DI)+p·R12 for p < 4 and OFF(DX)+(p−4)·R12 (R13 = 3·R12).
#define TRANSPOSE8STORE(OFF) \
	VPUNPCKLDQ  Y1, Y0, Y8          \
	VPUNPCKHDQ  Y1, Y0, Y9          \
	VPUNPCKLDQ  Y3, Y2, Y10         \
	VPUNPCKHDQ  Y3, Y2, Y11         \
	VPUNPCKLDQ  Y5, Y4, Y12         \
	VPUNPCKHDQ  Y5, Y4, Y13         \
	VPUNPCKLDQ  Y7, Y6, Y14         \
	VPUNPCKHDQ  Y7, Y6, Y15         \
	VPUNPCKLQDQ Y10, Y8, Y0         \
	VPUNPCKHQDQ Y10, Y8, Y1         \
	VPUNPCKLQDQ Y11, Y9, Y2         \
	VPUNPCKHQDQ Y11, Y9, Y3         \
	VPUNPCKLQDQ Y14, Y12, Y4        \
	VPUNPCKHQDQ Y14, Y12, Y5        \
	VPUNPCKLQDQ Y15, Y13, Y6        \
	VPUNPCKHQDQ Y15, Y13, Y7        \
	VPERM2I128  $0x20, Y4, Y0, Y8   \
	VMOVDQU     Y8, OFF(DI)         \
	VPERM2I128  $0x31, Y4, Y0, Y9   \
	VMOVDQU     Y9, OFF(DX)         \
	VPERM2I128  $0x20, Y5, Y1, Y10  \
	VMOVDQU     Y10, OFF(DI)(R12*1) \
	VPERM2I128  $0x31, Y5, Y1, Y11  \
	VMOVDQU     Y11, OFF(DX)(R12*1) \
	VPERM2I128  $0x20, Y6, Y2, Y12  \
	VMOVDQU     Y12, OFF(DI)(R12*2) \
	VPERM2I128  $0x31, Y6, Y2, Y13  \
	VMOVDQU     Y13, OFF(DX)(R12*2) \
	VPERM2I128  $0x20, Y7, Y3, Y14  \
	VMOVDQU     Y14, OFF(DI)(R13*1) \
	VPERM2I128  $0x31, Y7, Y3, Y15  \
	VMOVDQU     Y15, OFF(DX)(R13*1)

// PANELF16 is a whole panel conversion (func(w unsafe.Pointer, rowBytes,
// m int, panel unsafe.Pointer)): eight rows of 32·m binary16 values
// (rowBytes apart) into a panel whose vectors are vb bytes (32 for eight
// rows, 64 for sixteen, this call filling one half), one lane class being
// m·4·vb = m<<shift bytes.
#define PANELF16(shift, vb) \
	MOVQ w+0(FP), SI           \
	MOVQ rowBytes+8(FP), R10   \
	MOVQ m+16(FP), CX          \
	MOVQ panel+24(FP), DI      \
	LEAQ (R10)(R10*2), R11     \
	LEAQ (SI)(R10*4), BX       \
	MOVQ CX, R12               \
	SHLQ $shift, R12           \
	LEAQ (R12)(R12*2), R13     \
	LEAQ (DI)(R12*4), DX       \
group:                         \
	F16ROWS(0)                 \
	TRANSPOSE8STORE(0)         \
	F16ROWS(16)                \
	TRANSPOSE8STORE(vb)        \
	F16ROWS(32)                \
	TRANSPOSE8STORE(2*vb)      \
	F16ROWS(48)                \
	TRANSPOSE8STORE(3*vb)      \
	ADDQ $64, SI               \
	ADDQ $64, BX               \
	ADDQ $(4*vb), DI           \
	ADDQ $(4*vb), DX           \
	DECQ CX                    \
	JNZ  group                 \
	VZEROUPPER                 \
	RET
