//go:build !purego

#include "textflag.h"

// SLOTARGS loads the AxpySlots kernels' arguments (n int, c unsafe.Pointer,
// cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, groups,
// d32 int): R9 the slots, R10 c, R11 and R13 the strides in bytes, R12 v,
// DI ys, BX the groups of one, two or four rows, DX d32, R14 eight slots
// of v.
#define SLOTARGS \
	MOVQ n+0(FP), R9         \
	MOVQ c+8(FP), R10        \
	MOVQ cstride+16(FP), R11 \
	SHLQ $2, R11             \
	MOVQ v+24(FP), R12       \
	MOVQ vstride+32(FP), R13 \
	SHLQ $2, R13             \
	MOVQ ys+40(FP), DI       \
	MOVQ groups+48(FP), BX   \
	MOVQ d32+56(FP), DX      \
	MOVQ R13, R14            \
	SHLQ $3, R14

// func axpySlotsAsm(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, groups, d32 int)
//
// For each output row r and each 32 of its d32 values (Y0-Y3), the n slots
// in order: y = y + c[j][r]·v[j] (VMULPS, then VADDPS, as axpyAsm).
// Slot rows are prefetched 8 ahead: at depth they come from memory with
// a stride the hardware prefetcher does not follow.
TEXT ·axpySlotsAsm(SB), NOSPLIT, $0-64
	SLOTARGS

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

// SLOTQ adds slot j's products for the four rows of a quad to their two
// accumulators each (row q in Z(2q), Z(2q+1)): v[j]'s 32 values in Z16,
// Z17 times c[j][q] (broadcast from Q·4(SI)), rounded, then added, as
// axpySlotsAsm does lane for lane.
#define SLOTQ(Q, A, B, TA, TB) \
	VMULPS.BCST (Q*4)(SI), Z16, TA \
	VMULPS.BCST (Q*4)(SI), Z17, TB \
	VADDPS      TA, A, A           \
	VADDPS      TB, B, B

// func axpySlotsQuadsAsm512(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, groups, d32 int)
//
// axpySlotsAsm for 4·quads output rows, four at a time: each slot's 32
// values of v are loaded once for the four rows, whose eight accumulator
// chains keep the adds busy where one row's were bound by their latency.
// Every output value gets the same operations in the same order.
TEXT ·axpySlotsQuadsAsm512(SB), NOSPLIT, $0-64
	SLOTARGS
	SHLQ $2, DX // bytes per output row
	LEAQ (DX)(DX*2), R15 // three rows

quad:
	XORQ AX, AX // offset into the rows, bytes

quadcol:
	LEAQ    (DI)(AX*1), CX
	VMOVUPS 0(CX), Z0
	VMOVUPS 64(CX), Z1
	VMOVUPS 0(CX)(DX*1), Z2
	VMOVUPS 64(CX)(DX*1), Z3
	VMOVUPS 0(CX)(DX*2), Z4
	VMOVUPS 64(CX)(DX*2), Z5
	VMOVUPS 0(CX)(R15*1), Z6
	VMOVUPS 64(CX)(R15*1), Z7
	MOVQ    R10, SI       // c[j][4q]
	LEAQ    (R12)(AX*1), R8 // v[j] + offset
	MOVQ    R9, CX

quadslot:
	PREFETCHT0 (R8)(R14*1)
	PREFETCHT0 64(R8)(R14*1)
	VMOVUPS    0(R8), Z16
	VMOVUPS    64(R8), Z17
	SLOTQ(0, Z0, Z1, Z18, Z19)
	SLOTQ(1, Z2, Z3, Z20, Z21)
	SLOTQ(2, Z4, Z5, Z22, Z23)
	SLOTQ(3, Z6, Z7, Z24, Z25)
	ADDQ       R11, SI
	ADDQ       R13, R8
	DECQ       CX
	JNZ        quadslot

	LEAQ    (DI)(AX*1), CX
	VMOVUPS Z0, 0(CX)
	VMOVUPS Z1, 64(CX)
	VMOVUPS Z2, 0(CX)(DX*1)
	VMOVUPS Z3, 64(CX)(DX*1)
	VMOVUPS Z4, 0(CX)(DX*2)
	VMOVUPS Z5, 64(CX)(DX*2)
	VMOVUPS Z6, 0(CX)(R15*1)
	VMOVUPS Z7, 64(CX)(R15*1)
	ADDQ    $128, AX
	CMPQ    AX, DX
	JB      quadcol

	ADDQ $16, R10 // the next quad's coefficients
	LEAQ (DI)(DX*4), DI
	DECQ BX
	JNZ  quad
	VZEROUPPER
	RET

// SLOTP adds slot j's products of 8 values (at O(R8)) for the two rows of
// a pair: times c[j][0] (Y14) into A, times c[j][1] (Y15) into B.
#define SLOTP(O, A, B) \
	VMULPS O(R8), Y14, Y12 \
	VMULPS O(R8), Y15, Y13 \
	VADDPS Y12, A, A       \
	VADDPS Y13, B, B

// func axpySlotsPairsAsm(n int, c unsafe.Pointer, cstride int, v unsafe.Pointer, vstride int, ys unsafe.Pointer, groups, d32 int)
//
// axpySlotsAsm for 2·pairs output rows, two at a time: eight add chains
// (Y0-Y3 row 0, Y4-Y7 row 1) where one row's four were bound by their
// latency. Every output value gets the same operations in the same order.
TEXT ·axpySlotsPairsAsm(SB), NOSPLIT, $0-64
	SLOTARGS
	SHLQ $2, DX // bytes per output row

pair:
	XORQ AX, AX // offset into the rows, bytes

paircol:
	LEAQ    (DI)(AX*1), CX
	VMOVUPS 0(CX), Y0
	VMOVUPS 32(CX), Y1
	VMOVUPS 64(CX), Y2
	VMOVUPS 96(CX), Y3
	VMOVUPS 0(CX)(DX*1), Y4
	VMOVUPS 32(CX)(DX*1), Y5
	VMOVUPS 64(CX)(DX*1), Y6
	VMOVUPS 96(CX)(DX*1), Y7
	MOVQ    R10, SI       // c[j][2p]
	LEAQ    (R12)(AX*1), R8 // v[j] + offset
	MOVQ    R9, CX

pairslot:
	PREFETCHT0   (R8)(R14*1)
	VBROADCASTSS 0(SI), Y14
	VBROADCASTSS 4(SI), Y15
	SLOTP(0, Y0, Y4)
	SLOTP(32, Y1, Y5)
	SLOTP(64, Y2, Y6)
	SLOTP(96, Y3, Y7)
	ADDQ         R11, SI
	ADDQ         R13, R8
	DECQ         CX
	JNZ          pairslot

	LEAQ    (DI)(AX*1), CX
	VMOVUPS Y0, 0(CX)
	VMOVUPS Y1, 32(CX)
	VMOVUPS Y2, 64(CX)
	VMOVUPS Y3, 96(CX)
	VMOVUPS Y4, 0(CX)(DX*1)
	VMOVUPS Y5, 32(CX)(DX*1)
	VMOVUPS Y6, 64(CX)(DX*1)
	VMOVUPS Y7, 96(CX)(DX*1)
	ADDQ    $128, AX
	CMPQ    AX, DX
	JB      paircol

	ADDQ $8, R10 // the next pair's coefficients
	LEAQ (DI)(DX*2), DI
	DECQ BX
	JNZ  pair
	VZEROUPPER
	RET
