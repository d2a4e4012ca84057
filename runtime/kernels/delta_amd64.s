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

// LOAD8 and STORE8 move eight vectors of W bytes, from (B) on, to and from
// the registers R0-R7 (a strip's accumulators, or delta's).
#define LOAD8(B, W, R0, R1, R2, R3, R4, R5, R6, R7) \
	VMOVUPS (0*W)(B), R0 \
	VMOVUPS (1*W)(B), R1 \
	VMOVUPS (2*W)(B), R2 \
	VMOVUPS (3*W)(B), R3 \
	VMOVUPS (4*W)(B), R4 \
	VMOVUPS (5*W)(B), R5 \
	VMOVUPS (6*W)(B), R6 \
	VMOVUPS (7*W)(B), R7

#define STORE8(B, W, R0, R1, R2, R3, R4, R5, R6, R7) \
	VMOVUPS R0, (0*W)(B) \
	VMOVUPS R1, (1*W)(B) \
	VMOVUPS R2, (2*W)(B) \
	VMOVUPS R3, (3*W)(B) \
	VMOVUPS R4, (4*W)(B) \
	VMOVUPS R5, (5*W)(B) \
	VMOVUPS R6, (6*W)(B) \
	VMOVUPS R7, (7*W)(B)

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
	LOAD8(DI, 32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)

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
	STORE8(DI, 32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
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
	LOAD8(AX, 32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)

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
	STORE8(AX, 32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
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
	LOAD8(DI, 64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)

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
	STORE8(DI, 64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
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
	LOAD8(AX, 64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	LOAD8(DI, 64, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17)

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
	STORE8(AX, 64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	VZEROUPPER
	RET
