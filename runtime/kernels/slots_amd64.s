//go:build !purego

#include "textflag.h"

// func axpySlotsAsm(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, m, d32 int)
//
// For each output row r and each 32 of its d32 values (Y0-Y3), the n slots
// in order: y = y + c[j][r]·v[j] (VMULPS, then VADDPS, as axpyAsm).
// Slot rows are prefetched 8 ahead: at depth they come from memory with
// a stride the hardware prefetcher does not follow.
TEXT ·axpySlotsAsm(SB), NOSPLIT, $0-64
	MOVQ n+0(FP), R9
	MOVQ c+8(FP), R10
	MOVQ cstride+16(FP), R11
	SHLQ $2, R11
	MOVQ v+24(FP), R12
	MOVQ vstride+32(FP), R13
	SHLQ $2, R13
	MOVQ ys+40(FP), DI
	MOVQ m+48(FP), BX
	MOVQ d32+56(FP), DX
	MOVQ R13, R14
	SHLQ $3, R14 // 8 slots ahead


slotrow:
	XORQ AX, AX // offset into the row, bytes

slotcol:
	VMOVUPS 0(DI)(AX*1), Y0
	VMOVUPS 32(DI)(AX*1), Y1
	VMOVUPS 64(DI)(AX*1), Y2
	VMOVUPS 96(DI)(AX*1), Y3
	MOVQ    R10, SI       // c[j][r]
	LEAQ    (R12)(AX*1), R8 // v[j] + offset
	MOVQ    R9, CX

slotloop:
	PREFETCHT0   (R8)(R14*1)
	VBROADCASTSS (SI), Y15
	VMULPS       0(R8), Y15, Y4
	VMULPS       32(R8), Y15, Y5
	VMULPS       64(R8), Y15, Y6
	VMULPS       96(R8), Y15, Y7
	VADDPS       Y4, Y0, Y0
	VADDPS       Y5, Y1, Y1
	VADDPS       Y6, Y2, Y2
	VADDPS       Y7, Y3, Y3
	ADDQ         R11, SI
	ADDQ         R13, R8
	DECQ         CX
	JNZ          slotloop

	VMOVUPS Y0, 0(DI)(AX*1)
	VMOVUPS Y1, 32(DI)(AX*1)
	VMOVUPS Y2, 64(DI)(AX*1)
	VMOVUPS Y3, 96(DI)(AX*1)
	ADDQ    $128, AX
	MOVQ    DX, CX
	SHLQ    $2, CX
	CMPQ    AX, CX
	JB      slotcol

	ADDQ $4, R10 // next row's coefficients
	LEAQ (DI)(DX*4), DI
	DECQ BX
	JNZ  slotrow
	VZEROUPPER
	RET
