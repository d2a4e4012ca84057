//go:build !purego

#include "textflag.h"

// func q1SignsAsm(x *float32, y *byte, nb int)
// For each of nb Q1_0 blocks (128 floats at x, 18 bytes at y) writes the
// 16 sign bytes at y+2: bit j of byte i is x[8i+j] >= 0 (ordered compare,
// so NaN gives 0 and -0 gives 1).
TEXT ·q1SignsAsm(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   nb+16(FP), CX
	TESTQ  CX, CX
	JZ     done
	VXORPS Y15, Y15, Y15

block:
	MOVQ $0, DX

byte8:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCMPPS    $0x1d, Y15, Y0, Y0
	VCMPPS    $0x1d, Y15, Y1, Y1
	VCMPPS    $0x1d, Y15, Y2, Y2
	VCMPPS    $0x1d, Y15, Y3, Y3
	VMOVMSKPS Y0, AX
	VMOVMSKPS Y1, BX
	VMOVMSKPS Y2, R8
	VMOVMSKPS Y3, R9
	MOVB      AX, 2(DI)(DX*1)
	MOVB      BX, 3(DI)(DX*1)
	MOVB      R8, 4(DI)(DX*1)
	MOVB      R9, 5(DI)(DX*1)
	ADDQ      $128, SI
	ADDQ      $4, DX
	CMPQ      DX, $16
	JLT       byte8

	ADDQ $18, DI
	DECQ CX
	JNZ  block

done:
	VZEROUPPER
	RET
