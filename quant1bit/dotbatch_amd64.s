//go:build !purego

#include "textflag.h"
#include "q_amd64.h"

// The AVX2 batch kernel (DotQ1_0ActsBatch, DotQ1_0ActsRows). A step is a
// pair of Q1_0 blocks (eight activation blocks D = 0..7) on the layout of
// the AVX-VNNI kernel (Acts.bqb, see dotvnni_amd64.s): the 0/2 vector
// for r is the pair's sign bytes shifted right by r−1 and ANDed with 2s.
// VPMADDUBSW of vector r with codes r puts block D's products in words
// 2D, 2D+1 for every r, so the eight products add vertically (int16,
// |sum| ≤ 8·512) and one VPMADDWD gives the eight 2·Σ_{bit set} x as
// int32 lanes in block order; adding the negated code sums gives Σ±x.

DATA btwos<>+0(SB)/8, $0x0202020202020202
DATA btwos<>+8(SB)/8, $0x0202020202020202
DATA btwos<>+16(SB)/8, $0x0202020202020202
DATA btwos<>+24(SB)/8, $0x0202020202020202
GLOBL btwos<>(SB), RODATA|NOPTR, $32

DATA bones16<>+0(SB)/8, $0x0001000100010001
DATA bones16<>+8(SB)/8, $0x0001000100010001
DATA bones16<>+16(SB)/8, $0x0001000100010001
DATA bones16<>+24(SB)/8, $0x0001000100010001
GLOBL bones16<>(SB), RODATA|NOPTR, $32

DATA bperm<>+0(SB)/8, $0x0000000000000000
DATA bperm<>+8(SB)/8, $0x0000000000000000
DATA bperm<>+16(SB)/8, $0x0000000100000001
DATA bperm<>+24(SB)/8, $0x0000000100000001
GLOBL bperm<>(SB), RODATA|NOPTR, $32

// BMADD0 and BMADD add vector r (in Y14) times token P's codes at off
// to the int16 sums A; BMADD0 starts them.
#define BMADD0(off, P, A) VPMADDUBSW off(P)(DX*1), Y14, A
#define BMADD(off, P, A) \
	VPMADDUBSW off(P)(DX*1), Y14, Y8 \
	VPADDW     Y8, A, A

// BFIN adds token P's pair to its float32 lanes F, as Q1PAIRACTS does:
// l[i] += float32(2·set_i − Σx_i) · (d0 · d1_i), with d0 in Y10.
#define BFIN(P, A, F) \
	VPMADDWD  Y9, A, A            \
	VPADDD    288(P)(DX*1), A, A  \
	VCVTDQ2PS A, A                \
	VMULPS    256(P)(DX*1), Y10, Y8 \
	VMULPS    Y8, A, A            \
	VADDPS    A, F, F

// BSHIFT(r−1) makes vector r ≥ 2 from the sign bytes in Y13, as VSHIFT.
#define BSHIFT(n) \
	VPSRLW $n, Y13, Y14 \
	VPAND  Y15, Y14, Y14

// BPAIR adds the pair of Q1_0 blocks at SI to the tokens: M0(off) and
// M(off) invoke BMADD0 / BMADD for every token, FINS BFIN. It clobbers
// AX and DI (not BX, the row count of ROWS).
#define BPAIR(M0, M, FINS) \
	VMOVDQU     2(SI), X13              \
	VINSERTI128 $1, 20(SI), Y13, Y13    \
	VPADDB      Y13, Y13, Y14           \
	VPAND       Y15, Y14, Y14           \
	M0(0)                               \
	VPAND       Y15, Y13, Y14           \
	M(32)                               \
	BSHIFT(1)                           \
	M(64)                               \
	BSHIFT(2)                           \
	M(96)                               \
	BSHIFT(3)                           \
	M(128)                              \
	BSHIFT(4)                           \
	M(160)                              \
	BSHIFT(5)                           \
	M(192)                              \
	BSHIFT(6)                           \
	M(224)                              \
	Q1SCALES2(X10, AX, DI)              \
	VPERMPS     Y10, Y11, Y10           \
	FINS

#define BM0_4(off) BMADD0(off, R8, Y4) ; BMADD0(off, R9, Y5) ; BMADD0(off, R10, Y6) ; BMADD0(off, R11, Y7)
#define BM_4(off) BMADD(off, R8, Y4) ; BMADD(off, R9, Y5) ; BMADD(off, R10, Y6) ; BMADD(off, R11, Y7)
#define BFIN_4 BFIN(R8, Y4, Y0) ; BFIN(R9, Y5, Y1) ; BFIN(R10, Y6, Y2) ; BFIN(R11, Y7, Y3)

#define BM0_3(off) BMADD0(off, R8, Y4) ; BMADD0(off, R9, Y5) ; BMADD0(off, R10, Y6)
#define BM_3(off) BMADD(off, R8, Y4) ; BMADD(off, R9, Y5) ; BMADD(off, R10, Y6)
#define BFIN_3 BFIN(R8, Y4, Y0) ; BFIN(R9, Y5, Y1) ; BFIN(R10, Y6, Y2)

#define BM0_2(off) BMADD0(off, R8, Y4) ; BMADD0(off, R9, Y5)
#define BM_2(off) BMADD(off, R8, Y4) ; BMADD(off, R9, Y5)
#define BFIN_2 BFIN(R8, Y4, Y0) ; BFIN(R9, Y5, Y1)

#define BM0_1(off) BMADD0(off, R8, Y4)
#define BM_1(off) BMADD(off, R8, Y4)
#define BFIN_1 BFIN(R8, Y4, Y0)

#define BCONSTS \
	VMOVDQU btwos<>(SB), Y15   \
	VMOVDQU bones16<>(SB), Y9  \
	VMOVDQU bperm<>(SB), Y11

// q1BatchK is BATCH and q1BatchRowsK ROWS for K tokens (each
// &Acts.bqb[0]), a step a pair of Q1_0 blocks.
#define BSTEP_4 BPAIR(BM0_4, BM_4, BFIN_4)
#define BSTEP_3 BPAIR(BM0_3, BM_3, BFIN_3)
#define BSTEP_2 BPAIR(BM0_2, BM_2, BFIN_2)
#define BSTEP_1 BPAIR(BM0_1, BM_1, BFIN_1)

// func q1Batch1..4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
TEXT ·q1Batch4(SB), NOSPLIT, $0-48; BATCH(TOKS_4, BCONSTS, ZERO_4, BSTEP_4, 36, 320, SUMS_4)
TEXT ·q1Batch3(SB), NOSPLIT, $0-48; BATCH(TOKS_3, BCONSTS, ZERO_3, BSTEP_3, 36, 320, SUMS_3)
TEXT ·q1Batch2(SB), NOSPLIT, $0-48; BATCH(TOKS_2, BCONSTS, ZERO_2, BSTEP_2, 36, 320, SUMS_2)
TEXT ·q1Batch1(SB), NOSPLIT, $0-48; BATCH(TOKS_1, BCONSTS, ZERO_1, BSTEP_1, 36, 320, SUMS_1)

// Dword indexes of word 0 of eight consecutive 32-byte blocks.
DATA packidx<>+0(SB)/8, $0x0000000800000000
DATA packidx<>+8(SB)/8, $0x0000001800000010
DATA packidx<>+16(SB)/8, $0x0000002800000020
DATA packidx<>+24(SB)/8, $0x0000003800000030
GLOBL packidx<>(SB), RODATA|NOPTR, $32

// func q1PackWords(codes, d, sum unsafe.Pointer, groups, n int, sign int32, dst unsafe.Pointer)
//
// packWordsGo (n a multiple of 8): for each eight blocks of a group, word
// r of the eight is one gather, stored at row r; then their scales and
// their sums (VPSIGND by sign = ±1).
TEXT ·q1PackWords(SB), NOSPLIT, $0-56
	MOVQ         codes+0(FP), SI
	MOVQ         d+8(FP), R8
	MOVQ         sum+16(FP), R9
	MOVQ         groups+24(FP), CX
	MOVQ         n+32(FP), R10
	MOVL         sign+40(FP), AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVQ         dst+48(FP), DI
	VMOVDQU      packidx<>(SB), Y15
	MOVQ         R10, R11
	SHLQ         $2, R11     // a row: 4n bytes
	SHRQ         $3, R10     // eights per group
	TESTQ        CX, CX
	JE           packdone

packgroup:
	MOVQ R10, DX
	MOVQ DI, R13

packeight:
	MOVQ SI, AX
	MOVQ R13, R12
	MOVQ $8, BX

packword:
	VPCMPEQD   Y2, Y2, Y2
	VPGATHERDD Y2, (AX)(Y15*4), Y0
	VMOVDQU    Y0, (R12)
	ADDQ       $4, AX
	ADDQ       R11, R12
	DECQ       BX
	JNZ        packword

	VMOVDQU (R8), Y0          // R12 is now at the scales
	VMOVDQU Y0, (R12)
	VMOVDQU (R9), Y1
	VPSIGND Y14, Y1, Y1
	VMOVDQU Y1, (R12)(R11*1)
	ADDQ    $256, SI
	ADDQ    $32, R8
	ADDQ    $32, R9
	ADDQ    $32, R13
	DECQ    DX
	JNZ     packeight

	LEAQ (R11)(R11*4), AX     // to the next group: 40n bytes
	LEAQ (DI)(AX*2), DI
	DECQ CX
	JNZ  packgroup

packdone:
	VZEROUPPER
	RET

// func q1BatchRows1..4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
TEXT ·q1BatchRows4(SB), NOSPLIT, $0-56; ROWS(TOKS_4, BCONSTS, ZERO_4, BSTEP_4, 36, 320, SUMS_4)
TEXT ·q1BatchRows3(SB), NOSPLIT, $0-56; ROWS(TOKS_3, BCONSTS, ZERO_3, BSTEP_3, 36, 320, SUMS_3)
TEXT ·q1BatchRows2(SB), NOSPLIT, $0-56; ROWS(TOKS_2, BCONSTS, ZERO_2, BSTEP_2, 36, 320, SUMS_2)
TEXT ·q1BatchRows1(SB), NOSPLIT, $0-56; ROWS(TOKS_1, BCONSTS, ZERO_1, BSTEP_1, 36, 320, SUMS_1)

// VPERMD indexes taking dwords 0, 2, 4, 6 (codes 8q..8q+3, q = 0..3) of
// a block to the low lane, 1, 3, 5, 7 (8q+4..8q+7) to the high lane.
DATA vpermidx<>+0(SB)/8, $0x0000000200000000
DATA vpermidx<>+8(SB)/8, $0x0000000600000004
DATA vpermidx<>+16(SB)/8, $0x0000000300000001
DATA vpermidx<>+24(SB)/8, $0x0000000700000005
GLOBL vpermidx<>(SB), RODATA|NOPTR, $32

// VPSHUFB transposing each lane's 4×4 bytes: byte 4r+q takes byte 4q+r.
DATA vtrans<>+0(SB)/8, $0x0d0905010c080400
DATA vtrans<>+8(SB)/8, $0x0f0b07030e0a0602
DATA vtrans<>+16(SB)/8, $0x0d0905010c080400
DATA vtrans<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL vtrans<>(SB), RODATA|NOPTR, $32

// VBLOCK loads block b's codes from SI with dword r holding codes r, 8+r,
// 16+r, 24+r (Y8 the VPERMD indexes).
#define VBLOCK(b, Y) \
	VPERMD  (b*32)(SI), Y8, Y \
	VPSHUFB vtrans<>(SB), Y, Y

// VROWS stores rows r and r+4 (dword r and r+4 of each of the eight
// blocks) from the halves of U and V.
#define VROWS(r, U, V) \
	VPERM2I128 $0x20, V, U, Y10 \
	VMOVDQU    Y10, (r*32)(DI)  \
	VPERM2I128 $0x31, V, U, Y10 \
	VMOVDQU    Y10, (r*32+128)(DI)

// func q1PackBytes(codes, d, sum unsafe.Pointer, groups int, dst unsafe.Pointer)
//
// packBytesGo: for each eight blocks, the codes of each block permuted
// so that dword r holds the bytes of row r, an 8×8 dword transpose, then
// the scales and the negated sums.
TEXT ·q1PackBytes(SB), NOSPLIT, $0-40
	MOVQ    codes+0(FP), SI
	MOVQ    d+8(FP), R8
	MOVQ    sum+16(FP), R9
	MOVQ    groups+24(FP), CX
	MOVQ    dst+32(FP), DI
	VMOVDQU vpermidx<>(SB), Y8
	TESTQ   CX, CX
	JE      vpackdone

vpackgroup:
	VBLOCK(0, Y0)
	VBLOCK(1, Y1)
	VBLOCK(2, Y2)
	VBLOCK(3, Y3)
	VBLOCK(4, Y4)
	VBLOCK(5, Y5)
	VBLOCK(6, Y6)
	VBLOCK(7, Y7)
	VPUNPCKLDQ  Y1, Y0, Y9   // blocks 0, 1: dwords 0 and 1, 4 and 5
	VPUNPCKHDQ  Y1, Y0, Y10  // 2 and 3, 6 and 7
	VPUNPCKLDQ  Y3, Y2, Y11
	VPUNPCKHDQ  Y3, Y2, Y12
	VPUNPCKLDQ  Y5, Y4, Y13
	VPUNPCKHDQ  Y5, Y4, Y14
	VPUNPCKLDQ  Y7, Y6, Y15
	VPUNPCKHDQ  Y7, Y6, Y0
	VPUNPCKLQDQ Y11, Y9, Y1  // blocks 0..3: dword 0, 4
	VPUNPCKHQDQ Y11, Y9, Y2  // 1, 5
	VPUNPCKLQDQ Y12, Y10, Y3 // 2, 6
	VPUNPCKHQDQ Y12, Y10, Y4 // 3, 7
	VPUNPCKLQDQ Y15, Y13, Y5 // blocks 4..7
	VPUNPCKHQDQ Y15, Y13, Y6
	VPUNPCKLQDQ Y0, Y14, Y7
	VPUNPCKHQDQ Y0, Y14, Y9
	VROWS(0, Y1, Y5)
	VROWS(1, Y2, Y6)
	VROWS(2, Y3, Y7)
	VROWS(3, Y4, Y9)
	VMOVDQU     (R8), Y10
	VMOVDQU     Y10, 256(DI)
	VPXOR       Y11, Y11, Y11
	VPSUBD      (R9), Y11, Y11
	VMOVDQU     Y11, 288(DI)
	ADDQ        $256, SI
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $320, DI
	DECQ        CX
	JNZ         vpackgroup

vpackdone:
	VZEROUPPER
	RET
