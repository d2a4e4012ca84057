//go:build !purego

#include "textflag.h"
#include "q_amd64.h"
#include "vnni_amd64.h"

// The AVX-VNNI batch kernel (DotQ1_0ActsBatch and DotQ1_0ActsRows on
// CPUs with AVX2 and AVX-VNNI but not the AVX-512 kernel's features),
// and the same with the EVEX VPDPBUSD where AVX512_VNNI and AVX512VL
// stand in for AVX-VNNI (the steps take the instruction's form, DOT). A
// step is a pair of Q1_0 blocks (eight activation blocks D = 0..7),
// with the activations in Acts.bqb (see Acts.setBytes): vector r = 0..7
// holds at byte 4D+q code 8q+r of block D, whose sign is bit r of the
// pair's sign byte 4D+q (block D/4's sixteen bytes in lane D/4). So the
// 0/2 vector for r is the sign bytes shifted right by r−1 and ANDed with
// 2s, with no shuffle, and VPDPBUSD of it with codes r adds 2·Σ_{bit set}
// x of every block into its own int32 lane. Starting the lanes at −Σx
// gives each block's exact Σ±x, the int32 the AVX2 kernel makes; the
// float32 steps are its, lane for lane: l[D] += float32(s) · (d0 · d1).

DATA vtwos<>+0(SB)/8, $0x0202020202020202
DATA vtwos<>+8(SB)/8, $0x0202020202020202
DATA vtwos<>+16(SB)/8, $0x0202020202020202
DATA vtwos<>+24(SB)/8, $0x0202020202020202
GLOBL vtwos<>(SB), RODATA|NOPTR, $32

// The token pointers point 128 bytes into each pair's entry, so that the
// codes (r·32 − 128) take 8-bit displacements in VPDPBUSD_M; the scales
// are at 128, the negated sums at 160.
#define VTOKS_1 TOKS_1 ; ADDQ $128, R8
#define VTOKS_2 TOKS_2 ; ADDQ $128, R8 ; ADDQ $128, R9
#define VTOKS_3 TOKS_3 ; ADDQ $128, R8 ; ADDQ $128, R9 ; ADDQ $128, R10
#define VTOKS_4 TOKS_4 ; ADDQ $128, R8 ; ADDQ $128, R9 ; ADDQ $128, R10 ; ADDQ $128, R11

#define VCONSTS VMOVDQU vtwos<>(SB), Y15

// VDP_K(DOT, off) adds vector r (Y14) times codes r (at off) to the
// int32 lanes of tokens 1..K, R8..R11 into Y4..Y7, with DOT (VEXDOT or
// EVEXDOT, vnni_amd64.h).
#define VDP_1(DOT, off) DOT(off, R8, 8, Y14, 14, Y4, 4)
#define VDP_2(DOT, off) VDP_1(DOT, off) ; DOT(off, R9, 9, Y14, 14, Y5, 5)
#define VDP_3(DOT, off) VDP_2(DOT, off) ; DOT(off, R10, 10, Y14, 14, Y6, 6)
#define VDP_4(DOT, off) VDP_3(DOT, off) ; DOT(off, R11, 11, Y14, 14, Y7, 7)

// VINIT starts token P's lanes A at −Σx; VFIN adds them to its float32
// lanes F as BFIN does, with d0 in Y10.
#define VINIT(P, A) VMOVDQU 160(P)(DX*1), A
#define VFIN(P, A, F) \
	VCVTDQ2PS A, A               \
	VMULPS    128(P)(DX*1), Y10, Y8 \
	VMULPS    Y8, A, A           \
	VADDPS    A, F, F

#define VINIT_1 VINIT(R8, Y4)
#define VINIT_2 VINIT_1 ; VINIT(R9, Y5)
#define VINIT_3 VINIT_2 ; VINIT(R10, Y6)
#define VINIT_4 VINIT_3 ; VINIT(R11, Y7)
#define VFIN_1 VFIN(R8, Y4, Y0)
#define VFIN_2 VFIN_1 ; VFIN(R9, Y5, Y1)
#define VFIN_3 VFIN_2 ; VFIN(R10, Y6, Y2)
#define VFIN_4 VFIN_3 ; VFIN(R11, Y7, Y3)

// VSHIFT(r−1) makes vector r ≥ 2 from the sign bytes in Y13: bit r of
// each byte to bit 1 (a word shift: what crosses from the high byte
// lands above bit 1), then the 2s.
#define VSHIFT(n) \
	VPSRLW $n, Y13, Y14 \
	VPAND  Y15, Y14, Y14

// VPAIR adds the pair of Q1_0 blocks at SI to the tokens: INIT starts
// their int32 lanes, DPE(DOT, off) and DPO(DOT, off) add the vectors of
// even and odd r with DOT, FIN finishes. d0 (Y10) is block 0's scale in
// lanes 0..3, block 1's in 4..7.
#define VPAIR(INIT, DPE, DPO, FIN, DOT) \
	VMOVDQU      2(SI), X13           \
	VINSERTI128  $1, 20(SI), Y13, Y13 \
	VPBROADCASTW 0(SI), X10           \
	VPBROADCASTW 18(SI), X8           \
	VPUNPCKLQDQ  X8, X10, X10         \
	VCVTPH2PS    X10, Y10             \
	INIT                              \
	VPADDB       Y13, Y13, Y14        \
	VPAND        Y15, Y14, Y14        \
	DPE(DOT, -128)                    \
	VPAND        Y15, Y13, Y14        \
	DPO(DOT, -96)                     \
	VSHIFT(1)                         \
	DPE(DOT, -64)                     \
	VSHIFT(2)                         \
	DPO(DOT, -32)                     \
	VSHIFT(3)                         \
	DPE(DOT, 0)                       \
	VSHIFT(4)                         \
	DPO(DOT, 32)                      \
	VSHIFT(5)                         \
	DPE(DOT, 64)                      \
	VSHIFT(6)                         \
	DPO(DOT, 96)                      \
	FIN

// One token (decoding) sums the even r in Y4 and the odd in Y5, added
// at the end: two chains of dependent VPDPBUSD, half as long.
#define VDPE_1(DOT, off) DOT(off, R8, 8, Y14, 14, Y4, 4)
#define VDPO_1(DOT, off) DOT(off, R8, 8, Y14, 14, Y5, 5)
#define VINIT2_1 VINIT_1 ; VPXOR Y5, Y5, Y5
#define VFIN2_1 VPADDD Y5, Y4, Y4 ; VFIN_1

#define VSTEP_4(DOT) VPAIR(VINIT_4, VDP_4, VDP_4, VFIN_4, DOT)
#define VSTEP_3(DOT) VPAIR(VINIT_3, VDP_3, VDP_3, VFIN_3, DOT)
#define VSTEP_2(DOT) VPAIR(VINIT_2, VDP_2, VDP_2, VFIN_2, DOT)
#define VSTEP_1(DOT) VPAIR(VINIT2_1, VDPE_1, VDPO_1, VFIN2_1, DOT)

// func q1VNNI1..4(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
TEXT ·q1VNNI4(SB), NOSPLIT, $0-48; BATCH(VTOKS_4, VCONSTS, ZERO_4, VSTEP_4(VEXDOT), 36, 320, SUMS_4)
TEXT ·q1VNNI3(SB), NOSPLIT, $0-48; BATCH(VTOKS_3, VCONSTS, ZERO_3, VSTEP_3(VEXDOT), 36, 320, SUMS_3)
TEXT ·q1VNNI2(SB), NOSPLIT, $0-48; BATCH(VTOKS_2, VCONSTS, ZERO_2, VSTEP_2(VEXDOT), 36, 320, SUMS_2)
TEXT ·q1VNNI1(SB), NOSPLIT, $0-48; BATCH(VTOKS_1, VCONSTS, ZERO_1, VSTEP_1(VEXDOT), 36, 320, SUMS_1)

// func q1VNNIRows1..4(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
TEXT ·q1VNNIRows4(SB), NOSPLIT, $0-56; ROWS(VTOKS_4, VCONSTS, ZERO_4, VSTEP_4(VEXDOT), 36, 320, SUMS_4)
TEXT ·q1VNNIRows3(SB), NOSPLIT, $0-56; ROWS(VTOKS_3, VCONSTS, ZERO_3, VSTEP_3(VEXDOT), 36, 320, SUMS_3)
TEXT ·q1VNNIRows2(SB), NOSPLIT, $0-56; ROWS(VTOKS_2, VCONSTS, ZERO_2, VSTEP_2(VEXDOT), 36, 320, SUMS_2)
TEXT ·q1VNNIRows1(SB), NOSPLIT, $0-56; ROWS(VTOKS_1, VCONSTS, ZERO_1, VSTEP_1(VEXDOT), 36, 320, SUMS_1)

// The same kernels with the EVEX VPDPBUSD (AVX512_VNNI + AVX512VL), for
// CPUs that have it but not AVX-VNNI: q1EVNNI1..4, q1EVNNIRows1..4.
TEXT ·q1EVNNI4(SB), NOSPLIT, $0-48; BATCH(VTOKS_4, VCONSTS, ZERO_4, VSTEP_4(EVEXDOT), 36, 320, SUMS_4)
TEXT ·q1EVNNI3(SB), NOSPLIT, $0-48; BATCH(VTOKS_3, VCONSTS, ZERO_3, VSTEP_3(EVEXDOT), 36, 320, SUMS_3)
TEXT ·q1EVNNI2(SB), NOSPLIT, $0-48; BATCH(VTOKS_2, VCONSTS, ZERO_2, VSTEP_2(EVEXDOT), 36, 320, SUMS_2)
TEXT ·q1EVNNI1(SB), NOSPLIT, $0-48; BATCH(VTOKS_1, VCONSTS, ZERO_1, VSTEP_1(EVEXDOT), 36, 320, SUMS_1)
TEXT ·q1EVNNIRows4(SB), NOSPLIT, $0-56; ROWS(VTOKS_4, VCONSTS, ZERO_4, VSTEP_4(EVEXDOT), 36, 320, SUMS_4)
TEXT ·q1EVNNIRows3(SB), NOSPLIT, $0-56; ROWS(VTOKS_3, VCONSTS, ZERO_3, VSTEP_3(EVEXDOT), 36, 320, SUMS_3)
TEXT ·q1EVNNIRows2(SB), NOSPLIT, $0-56; ROWS(VTOKS_2, VCONSTS, ZERO_2, VSTEP_2(EVEXDOT), 36, 320, SUMS_2)
TEXT ·q1EVNNIRows1(SB), NOSPLIT, $0-56; ROWS(VTOKS_1, VCONSTS, ZERO_1, VSTEP_1(EVEXDOT), 36, 320, SUMS_1)
