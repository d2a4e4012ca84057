//go:build !purego

#include "textflag.h"
#include "exp_amd64.h"

// EXPCONST loads the constants EXP8 keeps in registers.
#define EXPCONST \
	VBROADCASTSS expLog2e<>(SB), Y15 \
	VBROADCASTSS expLn2Hi<>(SB), Y14 \
	VBROADCASTSS expLn2Lo<>(SB), Y13 \
	VBROADCASTSS expP0<>(SB), Y12    \
	VBROADCASTSS expP1<>(SB), Y11    \
	VBROADCASTSS expP2<>(SB), Y10    \
	VBROADCASTSS expP3<>(SB), Y9     \
	VBROADCASTSS expP4<>(SB), Y8

// EXP8 is EXPLANES with the constants EXPCONST loads.
#define EXP8 EXPLANES(Y15, Y14, Y13, Y12, Y11, Y10, Y9, Y8)

// func expAsm(x unsafe.Pointer, n8 int)
TEXT ·expAsm(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n8+8(FP), CX
	EXPCONST

exploop:
	VMOVUPS (SI), Y0
	EXP8
	VMOVUPS Y4, (SI)
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     exploop
	VZEROUPPER
	RET

// func siluMulAsm(gp, up unsafe.Pointer, n8 int)
//
// g = (g / (1 + Expf(−g))) · u, lane by lane, as siluMulGo.
TEXT ·siluMulAsm(SB), NOSPLIT, $0-24
	MOVQ gp+0(FP), SI
	MOVQ up+8(FP), DI
	MOVQ n8+16(FP), CX
	EXPCONST

siluloop:
	VMOVUPS (SI), Y6
	VXORPS  expSign<>(SB), Y6, Y0 // −g
	EXP8
	VADDPS  expOne<>(SB), Y4, Y4
	VDIVPS  Y4, Y6, Y4
	VMULPS  (DI), Y4, Y4
	VMOVUPS Y4, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     siluloop
	VZEROUPPER
	RET
