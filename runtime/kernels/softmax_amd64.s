//go:build !purego

#include "textflag.h"

// Each kernel walks rows × (m/8) vectors of eight; m is a multiple of 8,
// rows ≥ 1.

// ROWLOOP runs COL over BX rows of DX columns, eight at a time: COL
// works on the row at SI and the vector at R8 (from DI again for each
// row) and advances both.
#define ROWLOOP(COL) \
row:                 \
	MOVQ DI, R8      \
	MOVQ DX, CX      \
col:                 \
	COL              \
	SUBQ $8, CX      \
	JNZ  col         \
	DECQ BX          \
	JNZ  row         \
	VZEROUPPER       \
	RET

// OPCOL sets s = OP(s, v) for eight columns.
#define OPCOL(OP) \
	VMOVUPS (SI), Y0     \
	OP      (R8), Y0, Y0 \
	VMOVUPS Y0, (SI)     \
	ADDQ    $32, SI      \
	ADDQ    $32, R8

// ROWSOP applies OP(s, v) → s over all rows.
#define ROWSOP(OP) \
	MOVQ s+0(FP), SI     \
	MOVQ v+8(FP), DI     \
	MOVQ m+16(FP), DX    \
	MOVQ rows+24(FP), BX \
	ROWLOOP(OPCOL(OP))

// SCALEMAXCOL scales eight columns of s by Y15 and keeps their maximum in
// the vector.
#define SCALEMAXCOL \
	VMULPS  (SI), Y15, Y0 \
	VMOVUPS Y0, (SI)      \
	VMAXPS  (R8), Y0, Y1  \
	VMOVUPS Y1, (R8)      \
	ADDQ    $32, SI       \
	ADDQ    $32, R8

// SUMCOL adds eight columns of s, widened to float64, to the sums.
#define SUMCOL \
	VCVTPS2PD (SI), Y0        \
	VCVTPS2PD 16(SI), Y1      \
	VADDPD    (R8), Y0, Y0    \
	VADDPD    32(R8), Y1, Y1  \
	VMOVUPD   Y0, (R8)        \
	VMOVUPD   Y1, 32(R8)      \
	ADDQ      $32, SI         \
	ADDQ      $64, R8

// func scaleMaxRowsAsm(s unsafe.Pointer, scale float32, mx unsafe.Pointer, m, rows int)
//
// MAXPS returns its first source only when it is greater, else the
// second: max(v, mx) is exactly "v > mx ? v : mx".
TEXT ·scaleMaxRowsAsm(SB), NOSPLIT, $0-40
	MOVQ         s+0(FP), SI
	VBROADCASTSS scale+8(FP), Y15
	MOVQ         mx+16(FP), DI
	MOVQ         m+24(FP), DX
	MOVQ         rows+32(FP), BX
	ROWLOOP(SCALEMAXCOL)

// func subRowsAsm(s, v unsafe.Pointer, m, rows int)
TEXT ·subRowsAsm(SB), NOSPLIT, $0-32
	ROWSOP(VSUBPS)

// func mulRowsAsm(s, v unsafe.Pointer, m, rows int)
TEXT ·mulRowsAsm(SB), NOSPLIT, $0-32
	ROWSOP(VMULPS)

// func sumRowsF64Asm(sum, s unsafe.Pointer, m, rows int)
//
// Widening to float64 is exact; each sum[i] adds its rows in order.
TEXT ·sumRowsF64Asm(SB), NOSPLIT, $0-32
	MOVQ sum+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ rows+24(FP), BX
	ROWLOOP(SUMCOL)
