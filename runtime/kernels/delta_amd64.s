//go:build !purego

#include "textflag.h"

// The delta rule kernels walk one strip of a head's state, a row (SI) at a
// time, stride DX bytes, with the strip's accumulators (m or o) in
// registers from the first row to the last. Each element gets the
// operations of the calls they replace, in the same order and with the
// same operand order: scaleAsm's a·x, then axpyAsm's a·x rounded and
// added to y (VMULPS, then VADDPS; never fused). The first pass only
// reads the state; the second scales each value again (the same product)
// before adding to it, and stores it once.

// RETRIEVE adds k[i] (K) times the state's 8 or 16 values at off(SI)
// scaled by alpha (A) to acc; r is scratch.
#define RETRIEVE(A, K, off, acc, r) \
	VMULPS  off(SI), A, r \
	VMULPS  r, K, r       \
	VADDPS  acc, r, acc

// UPDATE sets the state's values at off(SI) to alpha (A) times them plus
// k[i] (K) times delta's values D, stores them and adds their product
// with q[i] (Q) to acc; r and p are scratch.
#define UPDATE(A, K, Q, D, off, acc, r, p) \
	VMULPS  off(SI), A, p  \
	VMULPS  D, K, r        \
	VADDPS  p, r, r        \
	VMOVUPS r, off(SI)     \
	VMULPS  r, Q, p        \
	VADDPS  acc, p, acc

// RETRIEVEM and UPDATEM are RETRIEVE and UPDATE with the accumulator in
// memory at off(DI) and off(AX).
#define RETRIEVEM(A, K, off, r) \
	VMULPS  off(SI), A, r \
	VMULPS  r, K, r       \
	VADDPS  off(DI), r, r \
	VMOVUPS r, off(DI)

#define UPDATEM(A, K, Q, D, off, r, p) \
	VMULPS  off(SI), A, p  \
	VMULPS  D, K, r        \
	VADDPS  p, r, r        \
	VMOVUPS r, off(SI)     \
	VMULPS  r, Q, p        \
	VADDPS  off(AX), p, p  \
	VMOVUPS p, off(AX)

// func deltaRetrieveAsm(alpha float32, st, k, m unsafe.Pointer, n, stride, w int)
//
// Y0-Y7 hold m's first 64 values of the strip (Y0 alone for w = 8), Y8
// alpha, Y9 k[i]; for w = 128 the last 64 are added in memory.
TEXT ·deltaRetrieveAsm(SB), NOSPLIT, $0-56
	VBROADCASTSS alpha+0(FP), Y8
	MOVQ         st+8(FP), SI
	MOVQ         k+16(FP), BX
	MOVQ         m+24(FP), DI
	MOVQ         n+32(FP), CX
	MOVQ         stride+40(FP), DX
	SHLQ         $2, DX
	MOVQ         w+48(FP), AX
	CMPQ         AX, $64
	JB           retrieve8
	VMOVUPS      0(DI), Y0
	VMOVUPS      32(DI), Y1
	VMOVUPS      64(DI), Y2
	VMOVUPS      96(DI), Y3
	VMOVUPS      128(DI), Y4
	VMOVUPS      160(DI), Y5
	VMOVUPS      192(DI), Y6
	VMOVUPS      224(DI), Y7

	CMPQ         AX, $128
	JE           retrieve128

retrieve64:
	VBROADCASTSS (BX), Y9
	RETRIEVE(Y8, Y9, 0, Y0, Y10)
	RETRIEVE(Y8, Y9, 32, Y1, Y11)
	RETRIEVE(Y8, Y9, 64, Y2, Y12)
	RETRIEVE(Y8, Y9, 96, Y3, Y13)
	RETRIEVE(Y8, Y9, 128, Y4, Y14)
	RETRIEVE(Y8, Y9, 160, Y5, Y15)
	RETRIEVE(Y8, Y9, 192, Y6, Y10)
	RETRIEVE(Y8, Y9, 224, Y7, Y11)
	ADDQ         DX, SI
	ADDQ         $4, BX
	DECQ         CX
	JNZ          retrieve64

retrieve64done:
	VMOVUPS      Y0, 0(DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, 64(DI)
	VMOVUPS      Y3, 96(DI)
	VMOVUPS      Y4, 128(DI)
	VMOVUPS      Y5, 160(DI)
	VMOVUPS      Y6, 192(DI)
	VMOVUPS      Y7, 224(DI)
	VZEROUPPER
	RET

retrieve128:
	VBROADCASTSS (BX), Y9
	RETRIEVE(Y8, Y9, 0, Y0, Y10)
	RETRIEVEM(Y8, Y9, 256, Y12)
	RETRIEVE(Y8, Y9, 32, Y1, Y11)
	RETRIEVEM(Y8, Y9, 288, Y13)
	RETRIEVE(Y8, Y9, 64, Y2, Y14)
	RETRIEVEM(Y8, Y9, 320, Y15)
	RETRIEVE(Y8, Y9, 96, Y3, Y10)
	RETRIEVEM(Y8, Y9, 352, Y11)
	RETRIEVE(Y8, Y9, 128, Y4, Y12)
	RETRIEVEM(Y8, Y9, 384, Y13)
	RETRIEVE(Y8, Y9, 160, Y5, Y14)
	RETRIEVEM(Y8, Y9, 416, Y15)
	RETRIEVE(Y8, Y9, 192, Y6, Y10)
	RETRIEVEM(Y8, Y9, 448, Y11)
	RETRIEVE(Y8, Y9, 224, Y7, Y12)
	RETRIEVEM(Y8, Y9, 480, Y13)
	ADDQ         DX, SI
	ADDQ         $4, BX
	DECQ         CX
	JNZ          retrieve128
	JMP          retrieve64done

retrieve8:
	VMOVUPS (DI), Y0

retrieve8row:
	VBROADCASTSS (BX), Y9
	RETRIEVE(Y8, Y9, 0, Y0, Y10)
	ADDQ         DX, SI
	ADDQ         $4, BX
	DECQ         CX
	JNZ          retrieve8row
	VMOVUPS      Y0, (DI)
	VZEROUPPER
	RET

// func deltaUpdateAsm(alpha float32, st, k, delta, q, o unsafe.Pointer, n, stride, w int)
//
// Y0-Y7 hold o's first 64 values of the strip (Y0 alone for w = 8), Y8
// q[i], Y9 k[i], Y15 alpha; for w = 128 the last 64 are added in memory.
// delta's values are read from DI on every row (no registers are left for
// them).
TEXT ·deltaUpdateAsm(SB), NOSPLIT, $0-72
	VBROADCASTSS alpha+0(FP), Y15
	MOVQ    st+8(FP), SI
	MOVQ    k+16(FP), BX
	MOVQ    delta+24(FP), DI
	MOVQ    q+32(FP), R8
	MOVQ    o+40(FP), AX
	MOVQ    n+48(FP), CX
	MOVQ    stride+56(FP), DX
	SHLQ    $2, DX
	MOVQ    w+64(FP), R9
	CMPQ    R9, $64
	JB      update8
	VMOVUPS 0(AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS 64(AX), Y2
	VMOVUPS 96(AX), Y3
	VMOVUPS 128(AX), Y4
	VMOVUPS 160(AX), Y5
	VMOVUPS 192(AX), Y6
	VMOVUPS 224(AX), Y7

	CMPQ    R9, $128
	JE      update128

update64:
	VBROADCASTSS (BX), Y9
	VBROADCASTSS (R8), Y8
	UPDATE(Y15, Y9, Y8, 0(DI), 0, Y0, Y10, Y11)
	UPDATE(Y15, Y9, Y8, 32(DI), 32, Y1, Y12, Y13)
	UPDATE(Y15, Y9, Y8, 64(DI), 64, Y2, Y14, Y10)
	UPDATE(Y15, Y9, Y8, 96(DI), 96, Y3, Y11, Y12)
	UPDATE(Y15, Y9, Y8, 128(DI), 128, Y4, Y13, Y14)
	UPDATE(Y15, Y9, Y8, 160(DI), 160, Y5, Y10, Y11)
	UPDATE(Y15, Y9, Y8, 192(DI), 192, Y6, Y12, Y13)
	UPDATE(Y15, Y9, Y8, 224(DI), 224, Y7, Y14, Y10)
	ADDQ         DX, SI
	ADDQ         $4, BX
	ADDQ         $4, R8
	DECQ         CX
	JNZ          update64

update64done:
	VMOVUPS      Y0, 0(AX)
	VMOVUPS      Y1, 32(AX)
	VMOVUPS      Y2, 64(AX)
	VMOVUPS      Y3, 96(AX)
	VMOVUPS      Y4, 128(AX)
	VMOVUPS      Y5, 160(AX)
	VMOVUPS      Y6, 192(AX)
	VMOVUPS      Y7, 224(AX)
	VZEROUPPER
	RET

update128:
	VBROADCASTSS (BX), Y9
	VBROADCASTSS (R8), Y8
	UPDATE(Y15, Y9, Y8, 0(DI), 0, Y0, Y10, Y11)
	UPDATEM(Y15, Y9, Y8, 256(DI), 256, Y12, Y13)
	UPDATE(Y15, Y9, Y8, 32(DI), 32, Y1, Y14, Y10)
	UPDATEM(Y15, Y9, Y8, 288(DI), 288, Y11, Y12)
	UPDATE(Y15, Y9, Y8, 64(DI), 64, Y2, Y13, Y14)
	UPDATEM(Y15, Y9, Y8, 320(DI), 320, Y10, Y11)
	UPDATE(Y15, Y9, Y8, 96(DI), 96, Y3, Y12, Y13)
	UPDATEM(Y15, Y9, Y8, 352(DI), 352, Y14, Y10)
	UPDATE(Y15, Y9, Y8, 128(DI), 128, Y4, Y11, Y12)
	UPDATEM(Y15, Y9, Y8, 384(DI), 384, Y13, Y14)
	UPDATE(Y15, Y9, Y8, 160(DI), 160, Y5, Y10, Y11)
	UPDATEM(Y15, Y9, Y8, 416(DI), 416, Y12, Y13)
	UPDATE(Y15, Y9, Y8, 192(DI), 192, Y6, Y14, Y10)
	UPDATEM(Y15, Y9, Y8, 448(DI), 448, Y11, Y12)
	UPDATE(Y15, Y9, Y8, 224(DI), 224, Y7, Y13, Y14)
	UPDATEM(Y15, Y9, Y8, 480(DI), 480, Y10, Y11)
	ADDQ         DX, SI
	ADDQ         $4, BX
	ADDQ         $4, R8
	DECQ         CX
	JNZ          update128
	JMP          update64done

update8:
	VMOVUPS (AX), Y0

update8row:
	VBROADCASTSS (BX), Y9
	VBROADCASTSS (R8), Y8
	UPDATE(Y15, Y9, Y8, (DI), 0, Y0, Y10, Y11)
	ADDQ         DX, SI
	ADDQ         $4, BX
	ADDQ         $4, R8
	DECQ         CX
	JNZ          update8row
	VMOVUPS      Y0, (AX)
	VZEROUPPER
	RET

// func deltaRetrieveAsm512(alpha float32, st, k, m unsafe.Pointer, n, stride int)
//
// deltaRetrieveAsm for a strip of 128 columns: m's in Z0-Z7, Z8 alpha, Z9
// k[i].
TEXT ·deltaRetrieveAsm512(SB), NOSPLIT, $0-48
	VBROADCASTSS alpha+0(FP), Z8
	MOVQ         st+8(FP), SI
	MOVQ         k+16(FP), BX
	MOVQ         m+24(FP), DI
	MOVQ         n+32(FP), CX
	MOVQ         stride+40(FP), DX
	SHLQ         $2, DX
	VMOVUPS      0(DI), Z0
	VMOVUPS      64(DI), Z1
	VMOVUPS      128(DI), Z2
	VMOVUPS      192(DI), Z3
	VMOVUPS      256(DI), Z4
	VMOVUPS      320(DI), Z5
	VMOVUPS      384(DI), Z6
	VMOVUPS      448(DI), Z7

retrieve128:
	VBROADCASTSS (BX), Z9
	RETRIEVE(Z8, Z9, 0, Z0, Z16)
	RETRIEVE(Z8, Z9, 64, Z1, Z17)
	RETRIEVE(Z8, Z9, 128, Z2, Z18)
	RETRIEVE(Z8, Z9, 192, Z3, Z19)
	RETRIEVE(Z8, Z9, 256, Z4, Z20)
	RETRIEVE(Z8, Z9, 320, Z5, Z21)
	RETRIEVE(Z8, Z9, 384, Z6, Z22)
	RETRIEVE(Z8, Z9, 448, Z7, Z23)
	ADDQ         DX, SI
	ADDQ         $4, BX
	DECQ         CX
	JNZ          retrieve128
	VMOVUPS      Z0, 0(DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	VMOVUPS      Z4, 256(DI)
	VMOVUPS      Z5, 320(DI)
	VMOVUPS      Z6, 384(DI)
	VMOVUPS      Z7, 448(DI)
	VZEROUPPER
	RET

// func deltaUpdateAsm512(alpha float32, st, k, delta, q, o unsafe.Pointer, n, stride int)
//
// deltaUpdateAsm for a strip of 128 columns: o's in Z0-Z7, delta's in
// Z10-Z17, Z8 q[i], Z9 k[i], Z31 alpha.
TEXT ·deltaUpdateAsm512(SB), NOSPLIT, $0-64
	VBROADCASTSS alpha+0(FP), Z31
	MOVQ    st+8(FP), SI
	MOVQ    k+16(FP), BX
	MOVQ    delta+24(FP), DI
	MOVQ    q+32(FP), R8
	MOVQ    o+40(FP), AX
	MOVQ    n+48(FP), CX
	MOVQ    stride+56(FP), DX
	SHLQ    $2, DX
	VMOVUPS 0(AX), Z0
	VMOVUPS 64(AX), Z1
	VMOVUPS 128(AX), Z2
	VMOVUPS 192(AX), Z3
	VMOVUPS 256(AX), Z4
	VMOVUPS 320(AX), Z5
	VMOVUPS 384(AX), Z6
	VMOVUPS 448(AX), Z7
	VMOVUPS 0(DI), Z10
	VMOVUPS 64(DI), Z11
	VMOVUPS 128(DI), Z12
	VMOVUPS 192(DI), Z13
	VMOVUPS 256(DI), Z14
	VMOVUPS 320(DI), Z15
	VMOVUPS 384(DI), Z16
	VMOVUPS 448(DI), Z17

update128:
	VBROADCASTSS (BX), Z9
	VBROADCASTSS (R8), Z8
	UPDATE(Z31, Z9, Z8, Z10, 0, Z0, Z18, Z19)
	UPDATE(Z31, Z9, Z8, Z11, 64, Z1, Z20, Z21)
	UPDATE(Z31, Z9, Z8, Z12, 128, Z2, Z22, Z23)
	UPDATE(Z31, Z9, Z8, Z13, 192, Z3, Z24, Z25)
	UPDATE(Z31, Z9, Z8, Z14, 256, Z4, Z26, Z27)
	UPDATE(Z31, Z9, Z8, Z15, 320, Z5, Z28, Z29)
	UPDATE(Z31, Z9, Z8, Z16, 384, Z6, Z30, Z18)
	UPDATE(Z31, Z9, Z8, Z17, 448, Z7, Z19, Z20)
	ADDQ         DX, SI
	ADDQ         $4, BX
	ADDQ         $4, R8
	DECQ         CX
	JNZ          update128
	VMOVUPS      Z0, 0(AX)
	VMOVUPS      Z1, 64(AX)
	VMOVUPS      Z2, 128(AX)
	VMOVUPS      Z3, 192(AX)
	VMOVUPS      Z4, 256(AX)
	VMOVUPS      Z5, 320(AX)
	VMOVUPS      Z6, 384(AX)
	VMOVUPS      Z7, 448(AX)
	VZEROUPPER
	RET
