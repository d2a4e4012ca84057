#include "textflag.h"

// func dotQ8_0Asm(w, x unsafe.Pointer, nb int) float32
//
// Same float32 operations, in the same order, as dotQ8_0Go. Four blocks at
// a time: their int32 sums are exact whatever the reduction order, so they
// are formed with a VPHADDD tree; the four terms s·(dw·dx) are then added
// to the running sum one by one, in block order.
TEXT ·dotQ8_0Asm(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS X7, X7, X7 // sum

	CMPQ CX, $4
	JB   tail

loop4:
	// 16-bit products, pairs summed to int32: 8 partial sums per block.
	VPMOVSXBW 2(SI), Y0
	VPMOVSXBW 18(SI), Y1
	VPMOVSXBW 2(DI), Y2
	VPMOVSXBW 18(DI), Y3
	VPMADDWD  Y2, Y0, Y0
	VPMADDWD  Y3, Y1, Y1
	VPADDD    Y1, Y0, Y8

	VPMOVSXBW 36(SI), Y0
	VPMOVSXBW 52(SI), Y1
	VPMOVSXBW 36(DI), Y2
	VPMOVSXBW 52(DI), Y3
	VPMADDWD  Y2, Y0, Y0
	VPMADDWD  Y3, Y1, Y1
	VPADDD    Y1, Y0, Y9

	VPMOVSXBW 70(SI), Y0
	VPMOVSXBW 86(SI), Y1
	VPMOVSXBW 70(DI), Y2
	VPMOVSXBW 86(DI), Y3
	VPMADDWD  Y2, Y0, Y0
	VPMADDWD  Y3, Y1, Y1
	VPADDD    Y1, Y0, Y10

	VPMOVSXBW 104(SI), Y0
	VPMOVSXBW 120(SI), Y1
	VPMOVSXBW 104(DI), Y2
	VPMOVSXBW 120(DI), Y3
	VPMADDWD  Y2, Y0, Y0
	VPMADDWD  Y3, Y1, Y1
	VPADDD    Y1, Y0, Y11

	// Reduce to [s0 s1 s2 s3].
	VPHADDD      Y9, Y8, Y8
	VPHADDD      Y11, Y10, Y10
	VPHADDD      Y10, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8

	// Scales dw·dx of the four blocks (exact in float32).
	MOVWLZX   0(SI), AX
	VMOVD     AX, X12
	VPINSRW   $1, 34(SI), X12, X12
	VPINSRW   $2, 68(SI), X12, X12
	VPINSRW   $3, 102(SI), X12, X12
	MOVWLZX   0(DI), AX
	VMOVD     AX, X13
	VPINSRW   $1, 34(DI), X13, X13
	VPINSRW   $2, 68(DI), X13, X13
	VPINSRW   $3, 102(DI), X13, X13
	VCVTPH2PS X12, X12
	VCVTPH2PS X13, X13
	VMULPS    X13, X12, X12
	VMULPS    X12, X8, X8

	// sum += t0; sum += t1; sum += t2; sum += t3
	VADDSS    X8, X7, X7
	VMOVSHDUP X8, X9
	VADDSS    X9, X7, X7
	VMOVHLPS  X8, X8, X9
	VADDSS    X9, X7, X7
	VPSHUFD   $3, X8, X9
	VADDSS    X9, X7, X7

	ADDQ $136, SI
	ADDQ $136, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JAE  loop4

tail:
	TESTQ CX, CX
	JE    done

loop1:
	VPMOVSXBW    2(SI), Y0
	VPMOVSXBW    18(SI), Y1
	VPMOVSXBW    2(DI), Y2
	VPMOVSXBW    18(DI), Y3
	VPMADDWD     Y2, Y0, Y0
	VPMADDWD     Y3, Y1, Y1
	VPADDD       Y1, Y0, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8
	VCVTDQ2PS    X8, X8

	MOVWLZX   0(SI), AX
	VMOVD     AX, X12
	MOVWLZX   0(DI), AX
	VMOVD     AX, X13
	VCVTPH2PS X12, X12
	VCVTPH2PS X13, X13
	VMULSS    X13, X12, X12
	VMULSS    X12, X8, X8
	VADDSS    X8, X7, X7

	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop1

done:
	VZEROUPPER
	VMOVSS X7, ret+24(FP)
	RET
