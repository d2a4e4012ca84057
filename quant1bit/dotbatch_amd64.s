//go:build !purego

#include "textflag.h"
#include "q_amd64.h"

// The batch kernel (DotQ1_0ActsBatch). For a pair of Q1_0 blocks (eight
// activation blocks D = 0..7), vector r = 0..7 holds at bytes 4D..4D+3
// the 0/1 sign bits of elements 4r..4r+3 of block D, in the order of the
// transposed codes in Acts.bq. VPMADDUBSW of vector r with codes r puts
// block D's products in words 2D, 2D+1 for every r, so the eight products
// add vertically (int16, |sum| ≤ 16·128) and one VPMADDWD gives the eight
// Σ_{bit set} x as int32 lanes in block order.
//
// Vector r is built from the pair's 32 bit bytes (block h's 16 in lane
// h): byte 4D+b takes bit byte 4(D%4)+r/2 (bctl, r/2), bit 4(r%2)+b.

DATA bctl<>+0(SB)/8, $0x0404040400000000
DATA bctl<>+8(SB)/8, $0x0c0c0c0c08080808
DATA bctl<>+16(SB)/8, $0x0404040400000000
DATA bctl<>+24(SB)/8, $0x0c0c0c0c08080808
DATA bctl<>+32(SB)/8, $0x0505050501010101
DATA bctl<>+40(SB)/8, $0x0d0d0d0d09090909
DATA bctl<>+48(SB)/8, $0x0505050501010101
DATA bctl<>+56(SB)/8, $0x0d0d0d0d09090909
DATA bctl<>+64(SB)/8, $0x0606060602020202
DATA bctl<>+72(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA bctl<>+80(SB)/8, $0x0606060602020202
DATA bctl<>+88(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA bctl<>+96(SB)/8, $0x0707070703030303
DATA bctl<>+104(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA bctl<>+112(SB)/8, $0x0707070703030303
DATA bctl<>+120(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL bctl<>(SB), RODATA|NOPTR, $128

DATA bmlo<>+0(SB)/8, $0x0804020108040201
DATA bmlo<>+8(SB)/8, $0x0804020108040201
DATA bmlo<>+16(SB)/8, $0x0804020108040201
DATA bmlo<>+24(SB)/8, $0x0804020108040201
GLOBL bmlo<>(SB), RODATA|NOPTR, $32

DATA bmhi<>+0(SB)/8, $0x8040201080402010
DATA bmhi<>+8(SB)/8, $0x8040201080402010
DATA bmhi<>+16(SB)/8, $0x8040201080402010
DATA bmhi<>+24(SB)/8, $0x8040201080402010
GLOBL bmhi<>(SB), RODATA|NOPTR, $32

DATA bones8<>+0(SB)/8, $0x0101010101010101
DATA bones8<>+8(SB)/8, $0x0101010101010101
DATA bones8<>+16(SB)/8, $0x0101010101010101
DATA bones8<>+24(SB)/8, $0x0101010101010101
GLOBL bones8<>(SB), RODATA|NOPTR, $32

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
#define BMADD0(P, A) VPMADDUBSW (P)(DX*1), Y14, A
#define BMADD(off, P, A) \
	VPMADDUBSW off(P)(DX*1), Y14, Y8 \
	VPADDW     Y8, A, A

// BFIN adds token P's pair to its float32 lanes F, as Q1PAIRACTS does:
// l[i] += float32(2·set_i − Σx_i) · (d0 · d1_i), with d0 in Y10.
#define BFIN(P, A, F) \
	VPMADDWD  bones16<>(SB), A, A \
	VPSLLD    $1, A, A            \
	VPSUBD    288(P)(DX*1), A, A  \
	VCVTDQ2PS A, A                \
	VMULPS    256(P)(DX*1), Y10, Y8 \
	VMULPS    Y8, A, A            \
	VADDPS    A, F, F

// BEVEN and BODD make vector r from the shuffled bits in Y12.
#define BEVEN \
	VPAND   Y9, Y12, Y14  \
	VPMINUB Y15, Y14, Y14
#define BODD \
	VPAND   Y11, Y12, Y14 \
	VPMINUB Y15, Y14, Y14

// BPAIR adds the pair of Q1_0 blocks at SI to the tokens: M0 and M(off)
// invoke BMADD0 / BMADD for every token, FINS BFIN. It clobbers AX and DI
// (not BX, the row count of ROWS).
#define BPAIR(M0, M, FINS) \
	VMOVDQU     2(SI), X13              \
	VINSERTI128 $1, 20(SI), Y13, Y13    \
	VPSHUFB     bctl<>+0(SB), Y13, Y12  \
	BEVEN                               \
	M0                                  \
	BODD                                \
	M(32)                               \
	VPSHUFB     bctl<>+32(SB), Y13, Y12 \
	BEVEN                               \
	M(64)                               \
	BODD                                \
	M(96)                               \
	VPSHUFB     bctl<>+64(SB), Y13, Y12 \
	BEVEN                               \
	M(128)                              \
	BODD                                \
	M(160)                              \
	VPSHUFB     bctl<>+96(SB), Y13, Y12 \
	BEVEN                               \
	M(192)                              \
	BODD                                \
	M(224)                              \
	Q1SCALES2(X10, AX, DI)              \
	VMOVDQU     bperm<>(SB), Y8         \
	VPERMPS     Y10, Y8, Y10            \
	FINS

#define BM0_4 BMADD0(R8, Y4) ; BMADD0(R9, Y5) ; BMADD0(R10, Y6) ; BMADD0(R11, Y7)
#define BM_4(off) BMADD(off, R8, Y4) ; BMADD(off, R9, Y5) ; BMADD(off, R10, Y6) ; BMADD(off, R11, Y7)
#define BFIN_4 BFIN(R8, Y4, Y0) ; BFIN(R9, Y5, Y1) ; BFIN(R10, Y6, Y2) ; BFIN(R11, Y7, Y3)

#define BM0_3 BMADD0(R8, Y4) ; BMADD0(R9, Y5) ; BMADD0(R10, Y6)
#define BM_3(off) BMADD(off, R8, Y4) ; BMADD(off, R9, Y5) ; BMADD(off, R10, Y6)
#define BFIN_3 BFIN(R8, Y4, Y0) ; BFIN(R9, Y5, Y1) ; BFIN(R10, Y6, Y2)

#define BM0_2 BMADD0(R8, Y4) ; BMADD0(R9, Y5)
#define BM_2(off) BMADD(off, R8, Y4) ; BMADD(off, R9, Y5)
#define BFIN_2 BFIN(R8, Y4, Y0) ; BFIN(R9, Y5, Y1)

#define BM0_1 BMADD0(R8, Y4)
#define BM_1(off) BMADD(off, R8, Y4)
#define BFIN_1 BFIN(R8, Y4, Y0)

#define BCONSTS \
	VMOVDQU bmlo<>(SB), Y9  \
	VMOVDQU bmhi<>(SB), Y11 \
	VMOVDQU bones8<>(SB), Y15

// q1BatchK is BATCH and q1BatchRowsK ROWS for K tokens (each
// &Acts.bq[0]), a step a pair of Q1_0 blocks.
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
