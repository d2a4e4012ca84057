//go:build !purego

#include "textflag.h"

// AVX-512 (F, BW, VL, VNNI) kernels for decoding: weight rows two at a
// time against one activation row prepared by q8Prep.set (codes packed,
// per-block corrections and scales). VPDPBUSD multiplies unsigned by
// signed bytes, so the weights go in as w+128 (w XOR 0x80) and each
// block sum is then Σ(w+128)·x − 128·Σx: exact in int32, and the same
// integer as the twin's. The float32 operations are dotQ8_0Go's, in its
// order, for each row; the two rows' serial sums are independent chains.

// ACC adds the products of code pair P of a group (blocks P and P+4 of
// the row at BASE, byte offsets OLO and OHI of their codes) to Z.
#define ACC(BASE, OLO, OHI, OX, Z) \
	VMOVDQU      OLO(BASE), Y8          \
	VINSERTI64X4 $1, OHI(BASE), Z8, Z8  \
	VPXORD       Z31, Z8, Z8            \
	VPDPBUSD     OX(DI), Z8, Z

// REDUCE sums the eight int32 lanes of each block half in A..D ([block
// p | block p+4] for p = 0..3) to the eight block sums in order in Y9.
#define REDUCE(A, B, C, D) \
	VPUNPCKLQDQ   B, A, Z8        \
	VPUNPCKHQDQ   B, A, Z9        \
	VPADDD        Z9, Z8, Z8      \
	VPUNPCKLQDQ   D, C, Z10       \
	VPUNPCKHQDQ   D, C, Z11       \
	VPADDD        Z11, Z10, Z10   \
	VSHUFPS       $0x88, Z10, Z8, Z9  \
	VSHUFPS       $0xdd, Z10, Z8, Z11 \
	VPADDD        Z11, Z9, Z9     \
	VSHUFI64X2    $0xd8, Z9, Z9, Z9 \
	VEXTRACTI64X4 $1, Z9, Y10     \
	VPADDD        Y10, Y9, Y9

// TERMS turns the block sums in Y9 of the group of the row at BASE into
// the eight terms float32(s)·(dw·dx), in Y9.
#define TERMS(BASE) \
	VPSUBD      (BX), Y9, Y9          \
	VCVTDQ2PS   Y9, Y9                \
	VMOVDQU64   0(BASE), Z12          \
	VPERMT2W    68(BASE), Z30, Z12    \
	VMOVDQU64   136(BASE), Z13        \
	VPERMT2W    204(BASE), Z30, Z13   \
	VPUNPCKLQDQ X13, X12, X12         \
	VCVTPH2PS   X12, Y12              \
	VMULPS      (BX)(R13*4), Y12, Y12 \
	VMULPS      Y12, Y9, Y9

// ADD4 adds the four terms in X to the sum S one by one, in order.
#define ADD4(X, S) \
	VADDSS    X, S, S      \
	VMOVSHDUP X, X10       \
	VADDSS    X10, S, S    \
	VMOVHLPS  X, X, X10    \
	VADDSS    X10, S, S    \
	VPSHUFD   $3, X, X10   \
	VADDSS    X10, S, S

// GROUP does a group of eight blocks of the row at BASE (accumulators
// A..D, running sum S).
#define GROUP(BASE, A, B, C, D, S) \
	REDUCE(A, B, C, D)          \
	TERMS(BASE)                 \
	ADD4(X9, S)                 \
	VEXTRACTF128 $1, Y9, X9     \
	ADD4(X9, S)

// ONE does one block of the row at BASE into the sum S (the tail).
#define ONE(BASE, S) \
	VMOVDQU      2(BASE), Y8      \
	VPXORD       Y31, Y8, Y8      \
	VPXORD       Y11, Y11, Y11    \
	VPDPBUSD     (DI), Y8, Y11    \
	VEXTRACTI128 $1, Y11, X9      \
	VPADDD       X9, X11, X11     \
	VPSHUFD      $0x4e, X11, X9   \
	VPADDD       X9, X11, X11     \
	VPSHUFD      $0xb1, X11, X9   \
	VPADDD       X9, X11, X11     \
	VMOVD        (BX), X9         \
	VPSUBD       X9, X11, X11     \
	VCVTDQ2PS    X11, X11         \
	MOVWLZX      0(BASE), AX      \
	VMOVD        AX, X12          \
	VCVTPH2PS    X12, X12         \
	VMULSS       (BX)(R13*4), X12, X12 \
	VMULSS       X12, X11, X11    \
	VADDSS       X11, S, S

#define PREFETCH(BASE) \
	PREFETCHT0 0(BASE)(R9*1)   \
	PREFETCHT0 64(BASE)(R9*1)  \
	PREFETCHT0 128(BASE)(R9*1) \
	PREFETCHT0 192(BASE)(R9*1) \
	PREFETCHT0 256(BASE)(R9*1)

// func dotRowsQ8_0Asm(w unsafe.Pointer, rowBytes int, xp unsafe.Pointer, nb int, out unsafe.Pointer, pairs, pf int)
//
// For each of pairs pairs of rows (row 2i at w+2i·rowBytes, row 2i+1
// rowBytes after it) stores the two dot products with the prepared
// activation row xp at out+8i. pf is how far ahead of each row's loads
// the rows are prefetched, in bytes.
TEXT ·dotRowsQ8_0Asm(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R11
	MOVQ rowBytes+8(FP), R8
	MOVQ nb+24(FP), R13
	MOVQ out+32(FP), R12
	MOVQ pairs+40(FP), R10
	MOVQ pf+48(FP), R9
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VMOVDQU64 q8scaleidx<>(SB), Z30

pair:
	MOVQ R11, SI
	LEAQ (SI)(R8*1), DX
	MOVQ xp+16(FP), DI
	MOVQ R13, BX
	SHLQ $5, BX
	ADDQ DI, BX
	VPXORD X16, X16, X16
	VPXORD X17, X17, X17
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   tail

group:
	PREFETCH(SI)
	PREFETCH(DX)
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	ACC(SI, 2, 138, 0, Z0)
	ACC(DX, 2, 138, 0, Z4)
	ACC(SI, 36, 172, 64, Z1)
	ACC(DX, 36, 172, 64, Z5)
	ACC(SI, 70, 206, 128, Z2)
	ACC(DX, 70, 206, 128, Z6)
	ACC(SI, 104, 240, 192, Z3)
	ACC(DX, 104, 240, 192, Z7)
	GROUP(SI, Z0, Z1, Z2, Z3, X16)
	GROUP(DX, Z4, Z5, Z6, Z7, X17)
	ADDQ $272, SI
	ADDQ $272, DX
	ADDQ $256, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  group

tail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   store

one:
	ONE(SI, X16)
	ONE(DX, X17)
	ADDQ $34, SI
	ADDQ $34, DX
	ADDQ $32, DI
	ADDQ $4, BX
	DECQ CX
	JNZ  one

store:
	VMOVSS X16, 0(R12)
	VMOVSS X17, 4(R12)
	ADDQ   $8, R12
	LEAQ   (R11)(R8*2), R11
	DECQ   R10
	JNZ    pair

	VZEROUPPER
	RET

// Word indices of the four block scales (at bytes 0, 34, 68, 102) in the
// two 64-byte loads at 0 and 68: table words 0 and 17 of each.
DATA q8scaleidx<>+0(SB)/8, $0x0031002000110000
DATA q8scaleidx<>+8(SB)/8, $0
DATA q8scaleidx<>+16(SB)/8, $0
DATA q8scaleidx<>+24(SB)/8, $0
DATA q8scaleidx<>+32(SB)/8, $0
DATA q8scaleidx<>+40(SB)/8, $0
DATA q8scaleidx<>+48(SB)/8, $0
DATA q8scaleidx<>+56(SB)/8, $0
GLOBL q8scaleidx<>(SB), RODATA|NOPTR, $64

// PREPPAIR copies code pair P of a group of the activation row (blocks
// P and P+4, code bytes at OLO and OHI) to OX(DI) and sets Z to the
// lanes of 128·Σx of both blocks (0x80 as the unsigned operand).
#define PREPPAIR(OLO, OHI, OX, Z) \
	VMOVDQU      OLO(SI), Y8          \
	VINSERTI64X4 $1, OHI(SI), Z8, Z8  \
	VMOVDQU64    Z8, OX(DI)           \
	VPXORD       Z, Z, Z              \
	VPDPBUSD     Z8, Z31, Z

// func prepQ8_0Asm(x unsafe.Pointer, nb int, xp unsafe.Pointer)
//
// Lays out the activation row x of nb blocks as q8Prep describes.
TEXT ·prepQ8_0Asm(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), R13
	MOVQ xp+16(FP), DI
	MOVQ R13, BX
	SHLQ $5, BX
	ADDQ DI, BX
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VMOVDQU64 q8scaleidx<>(SB), Z30
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   preptail

prepgroup:
	PREPPAIR(2, 138, 0, Z0)
	PREPPAIR(36, 172, 64, Z1)
	PREPPAIR(70, 206, 128, Z2)
	PREPPAIR(104, 240, 192, Z3)
	REDUCE(Z0, Z1, Z2, Z3)
	VMOVDQU     Y9, (BX)
	VMOVDQU64   0(SI), Z12
	VPERMT2W    68(SI), Z30, Z12
	VMOVDQU64   136(SI), Z13
	VPERMT2W    204(SI), Z30, Z13
	VPUNPCKLQDQ X13, X12, X12
	VCVTPH2PS   X12, Y12
	VMOVUPS     Y12, (BX)(R13*4)
	ADDQ $272, SI
	ADDQ $256, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  prepgroup

preptail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   prepdone

prepone:
	VMOVDQU      2(SI), Y8
	VMOVDQU      Y8, (DI)
	VPXORD       Y11, Y11, Y11
	VPDPBUSD     Y8, Y31, Y11
	VEXTRACTI128 $1, Y11, X9
	VPADDD       X9, X11, X11
	VPSHUFD      $0x4e, X11, X9
	VPADDD       X9, X11, X11
	VPSHUFD      $0xb1, X11, X9
	VPADDD       X9, X11, X11
	VMOVD        X11, (BX)
	MOVWLZX      0(SI), AX
	VMOVD        AX, X12
	VCVTPH2PS    X12, X12
	VMOVSS       X12, (BX)(R13*4)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, BX
	DECQ CX
	JNZ  prepone

prepdone:
	VZEROUPPER
	RET
