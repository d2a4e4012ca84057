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

DATA q2one<>+0(SB)/8, $1.0
GLOBL q2one<>(SB), RODATA|NOPTR, $8

// func q2ErrAsm(x *[64]float64, d, sg, h1, h3, m1 float64) float64
//
// q2Search.err for d != 0: lane j of one accumulator sums elements
// i ≡ j (mod 4) in order, then (e0+e1)+(e2+e3); no fused multiply-adds,
// so the bits are those of the Go loop.
TEXT ·q2ErrAsm(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), SI
	VBROADCASTSD d+8(FP), Y8
	VBROADCASTSD sg+16(FP), Y9
	VBROADCASTSD h1+24(FP), Y10
	VBROADCASTSD h3+32(FP), Y11
	VBROADCASTSD m1+40(FP), Y12
	VBROADCASTSD q2one<>(SB), Y13
	VXORPD       Y0, Y0, Y0
	MOVQ         $16, CX

eloop:
	VMOVUPD (SI), Y1
	VMULPD  Y9, Y1, Y2
	VCMPPD  $0x1d, Y10, Y2, Y3
	VCMPPD  $0x1d, Y11, Y2, Y4
	VCMPPD  $0x12, Y12, Y2, Y5
	VANDPD  Y13, Y3, Y3
	VANDPD  Y13, Y4, Y4
	VANDPD  Y13, Y5, Y5
	VADDPD  Y4, Y3, Y3
	VSUBPD  Y5, Y3, Y3
	VMULPD  Y8, Y3, Y3
	VSUBPD  Y3, Y1, Y1
	VMULPD  Y1, Y1, Y1
	VADDPD  Y1, Y0, Y0
	ADDQ    $32, SI
	DECQ    CX
	JNZ     eloop

	VEXTRACTF128 $1, Y0, X1
	VHADDPD      X0, X0, X2
	VHADDPD      X1, X1, X3
	VADDSD       X3, X2, X0
	VZEROUPPER
	MOVSD        X0, ret+48(FP)
	RET
