//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"

// AVX-512 (F, BW, VNNI) panel kernel for MulQ8_0: the panel layout and
// the float32 operations of mulQ8_0KernelAsm (mul_amd64.s), with the
// sixteen rows of a code pair in one register and VPDPWSSD forming the
// pair products and their sum in one instruction. The block sums are
// exact int32 whatever their order, so each token's sum is split over
// four accumulators (pairs p mod 4) to keep several multiply-add chains
// in flight, and added up at the end of the block.

// KPAIR5 multiplies code pair p (panel bytes OW, activation bytes OX)
// into partial sums Q+0..Q+3 (tokens 0-3, sixteen rows each).
#define KPAIR5(OW, OX, Q0, Q1, Q2, Q3) \
	VMOVDQU64     OW(SI), Z20             \
	VPDPWSSD.BCST OX(DI), Z20, Q0         \
	VPDPWSSD.BCST OX(DI)(R10*1), Z20, Q1  \
	VPDPWSSD.BCST OX(DI)(R10*2), Z20, Q2  \
	VPDPWSSD.BCST OX(DI)(R11*1), Z20, Q3

// KPAIR5FIRST is KPAIR5 for the first pair of a block into Q0..Q3,
// which it starts from zero.
#define KPAIR5FIRST(OW, OX, Q0, Q1, Q2, Q3) \
	VPXORD Q0, Q0, Q0 \
	VPXORD Q1, Q1, Q1 \
	VPXORD Q2, Q2, Q2 \
	VPXORD Q3, Q3, Q3 \
	KPAIR5(OW, OX, Q0, Q1, Q2, Q3)

// FLUSH5 adds token T's block sums S to its running sums SUM:
// sum = sum + float32(s)·(dw·dx), in DotQ8_0's operand order (dw in
// Z21).
#define FLUSH5(T, S, SUM) \
	VBROADCASTSS (T*4)(R9), Z22  \
	VMULPS       Z22, Z21, Z23   \
	VCVTDQ2PS    S, S            \
	VMULPS       Z23, S, S       \
	VADDPS       S, SUM, SUM

// func mulQ8_0KernelAVX512Asm(codes, d, x unsafe.Pointer, xstride int, xd unsafe.Pointer, xdBlocks, nb, groups int, sums unsafe.Pointer)
//
// mulQ8_0KernelAsm's contract.
TEXT ·mulQ8_0KernelAVX512Asm(SB), NOSPLIT, $0-72
	PANELARGS

k5group:
	MOVQ      codes+0(FP), SI
	MOVQ      d+8(FP), R8
	MOVQ      BX, CX
	VMOVUPS   0(AX), Z16
	VMOVUPS   64(AX), Z17
	VMOVUPS   128(AX), Z18
	VMOVUPS   192(AX), Z19

k5block:
	KPAIR5FIRST(0, 0, Z0, Z1, Z2, Z3)
	KPAIR5FIRST(64, 4, Z4, Z5, Z6, Z7)
	KPAIR5FIRST(128, 8, Z8, Z9, Z10, Z11)
	KPAIR5FIRST(192, 12, Z12, Z13, Z14, Z15)
	KPAIR5(256, 16, Z0, Z1, Z2, Z3)
	KPAIR5(320, 20, Z4, Z5, Z6, Z7)
	KPAIR5(384, 24, Z8, Z9, Z10, Z11)
	KPAIR5(448, 28, Z12, Z13, Z14, Z15)
	KPAIR5(512, 32, Z0, Z1, Z2, Z3)
	KPAIR5(576, 36, Z4, Z5, Z6, Z7)
	KPAIR5(640, 40, Z8, Z9, Z10, Z11)
	KPAIR5(704, 44, Z12, Z13, Z14, Z15)
	KPAIR5(768, 48, Z0, Z1, Z2, Z3)
	KPAIR5(832, 52, Z4, Z5, Z6, Z7)
	KPAIR5(896, 56, Z8, Z9, Z10, Z11)
	KPAIR5(960, 60, Z12, Z13, Z14, Z15)
	VPADDD Z4, Z0, Z0
	VPADDD Z12, Z8, Z8
	VPADDD Z8, Z0, Z0
	VPADDD Z5, Z1, Z1
	VPADDD Z13, Z9, Z9
	VPADDD Z9, Z1, Z1
	VPADDD Z6, Z2, Z2
	VPADDD Z14, Z10, Z10
	VPADDD Z10, Z2, Z2
	VPADDD Z7, Z3, Z3
	VPADDD Z15, Z11, Z11
	VPADDD Z11, Z3, Z3

	VMOVUPS (R8), Z21
	FLUSH5(0, Z0, Z16)
	FLUSH5(1, Z1, Z17)
	FLUSH5(2, Z2, Z18)
	FLUSH5(3, Z3, Z19)

	PANELNEXT
	JNZ k5block

	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	PANELNEXTGROUP
	JNZ k5group

	VZEROUPPER
	RET
