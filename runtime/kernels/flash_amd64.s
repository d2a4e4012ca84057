//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"
#include "exp_amd64.h"

// FEXP is exp_amd64.h's EXPLANES with its constants read from memory
// (this kernel needs the registers).
#define FEXP EXPLANES(expLog2e<>(SB), expLn2Hi<>(SB), expLn2Lo<>(SB), expP0<>(SB), expP1<>(SB), expP2<>(SB), expP3<>(SB), expP4<>(SB))

// REDUCE8 finishes REDUCE for eight heads at once: from the eight lanes
// a_h that REDUCE's first three additions leave for head h (at
// flashSums), lane h of Y6 becomes ((a[0]+a[4]) + (a[2]+a[6])) +
// ((a[1]+a[5]) + (a[3]+a[7])), each addition with REDUCE's operands in
// REDUCE's order, by transposing as it adds: t_h = a_h[0:4] + a_h[4:8]
// two heads per register, then u_h = t_h[0:2] + t_h[2:4], then r_h =
// u_h[0] + u_h[1]. Heads past hc hold stale sums, ignored lanes.
#define REDUCE8 \
	VMOVUPS    flashSums(AX), Y0 \
	VMOVUPS    flashSums+32(AX), Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y2 \
	VPERM2F128 $0x31, Y1, Y0, Y3 \
	VADDPS     Y3, Y2, Y8 \
	VMOVUPS    flashSums+64(AX), Y0 \
	VMOVUPS    flashSums+96(AX), Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y2 \
	VPERM2F128 $0x31, Y1, Y0, Y3 \
	VADDPS     Y3, Y2, Y9 \
	VMOVUPS    flashSums+128(AX), Y0 \
	VMOVUPS    flashSums+160(AX), Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y2 \
	VPERM2F128 $0x31, Y1, Y0, Y3 \
	VADDPS     Y3, Y2, Y10 \
	VMOVUPS    flashSums+192(AX), Y0 \
	VMOVUPS    flashSums+224(AX), Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y2 \
	VPERM2F128 $0x31, Y1, Y0, Y3 \
	VADDPS     Y3, Y2, Y11 \
	VSHUFPS    $0x44, Y9, Y8, Y0 \
	VSHUFPS    $0xee, Y9, Y8, Y1 \
	VADDPS     Y1, Y0, Y8 \
	VSHUFPS    $0x44, Y11, Y10, Y0 \
	VSHUFPS    $0xee, Y11, Y10, Y1 \
	VADDPS     Y1, Y0, Y10 \
	VSHUFPS    $0x88, Y10, Y8, Y0 \
	VSHUFPS    $0xdd, Y10, Y8, Y1 \
	VADDPS     Y1, Y0, Y0 \
	VMOVUPS    flashPerm<>(SB), Y1 \
	VPERMPS    Y0, Y1, Y6

// FLASHSLOT is the part of a slot both kernels share, its labels the
// kernel's: the prefetch of slot j+16 while R11 = pf − 16 − j is
// positive; the scores s[h] = Dot(k_j, q_h)·scale, k the first operand
// as in dotRowsAsm; and the step, lane h for head h: moved = s > m; ms,
// vs = e^(m−s), 1 where it moved, else 1, e^(s−m); m = s where it moved;
// sum = sum·ms + vs. It leaves ms in Y11, vs in Y13 and the moved heads'
// bits in SI.
#define FLASHSLOT \
	CMPQ R11, $0 \
	JLE  noprefetch \
	MOVQ R9, R13 \
	SHLQ $4, R13 \
	LEAQ (DI)(R13*1), SI \
	ADDQ R8, R13 \
	XORQ CX, CX \
pfloop: \
	PREFETCHT0 (SI)(CX*1) \
	PREFETCHT0 (R13)(CX*1) \
	ADDQ       $64, CX \
	CMPQ       CX, DX \
	JB         pfloop \
noprefetch: \
	DECQ R11 \
	MOVQ q+0(FP), R13 \
	LEAQ flashSums(AX), SI \
	XORQ R12, R12 \
dothead: \
	ZEROY4(Y0, Y1, Y2, Y3) \
	XORQ CX, CX \
dotloop: \
	VMOVUPS (DI)(CX*1), Y4 \
	VMULPS  (R13)(CX*1), Y4, Y4 \
	VADDPS  Y4, Y0, Y0 \
	VMOVUPS 32(DI)(CX*1), Y5 \
	VMULPS  32(R13)(CX*1), Y5, Y5 \
	VADDPS  Y5, Y1, Y1 \
	VMOVUPS 64(DI)(CX*1), Y6 \
	VMULPS  64(R13)(CX*1), Y6, Y6 \
	VADDPS  Y6, Y2, Y2 \
	VMOVUPS 96(DI)(CX*1), Y7 \
	VMULPS  96(R13)(CX*1), Y7, Y7 \
	VADDPS  Y7, Y3, Y3 \
	ADDQ    $128, CX \
	CMPQ    CX, DX \
	JNE     dotloop \
	VADDPS  Y1, Y0, Y0 \
	VADDPS  Y3, Y2, Y2 \
	VADDPS  Y2, Y0, Y0 \
	VMOVUPS Y0, (SI) \
	ADDQ    $32, SI \
	ADDQ    DX, R13 \
	INCQ    R12 \
	CMPQ    R12, BX \
	JNE     dothead \
	REDUCE8 \
	VMULPS    Y15, Y6, Y6 \
	VMOVUPS   0(AX), Y7 \
	VCMPPS    $0x1e, Y7, Y6, Y8 \
	VSUBPS    Y6, Y7, Y9 \
	VSUBPS    Y7, Y6, Y10 \
	VBLENDVPS Y8, Y9, Y10, Y0 \
	FEXP \
	VBLENDVPS Y8, Y4, Y12, Y11 \
	VBLENDVPS Y8, Y12, Y4, Y13 \
	VBLENDVPS Y8, Y6, Y7, Y7 \
	VMOVUPS   Y7, 0(AX) \
	VMOVUPS   32(AX), Y9 \
	VMULPS    Y11, Y9, Y9 \
	VADDPS    Y13, Y9, Y9 \
	VMOVUPS   Y9, 32(AX) \
	VMOVMSKPS Y8, SI
// FLASHSTEPS runs FLASHSLOT on the ns slots and keeps each slot's ms,
// vs and moved bits in its record of flashState.rec (96 bytes: ms at 0, vs
// at 32, the bits at 64). The slots are independent but for max and sum,
// so this pass overlaps one slot's exponential with the next one's
// scores; FLASHUPDATES then applies the records.
#define FLASHSTEPS \
	LEAQ      flashRec(AX), R14 \
steps: \
	FLASHSLOT \
	VMOVUPS   Y11, 0(R14) \
	VMOVUPS   Y13, 32(R14) \
	MOVL      SI, 64(R14) \
	ADDQ      $96, R14 \
	ADDQ      R9, DI \
	ADDQ      R9, R8 \
	DECQ      R10 \
	JNZ       steps

// FLASHUPDATES(W, SCALE, MAD) applies the slots' records: per slot the V
// row widened to float64 by W into flashState.vd, then per head SCALE
// where its max moved (ms broadcast in Y14/Z14) and MAD (vs in float64
// broadcast), the row of head h at R13.
#define FLASHUPDATES(W, BS, BD, SCALE, MAD) \
	MOVQ ns+48(FP), R10 \
	MOVQ v+16(FP), R8 \
	LEAQ flashRec(AX), R14 \
updslot: \
	W \
	MOVL 64(R14), SI \
	MOVQ o+24(FP), R13 \
	XORQ R12, R12 \
upd: \
	BTQ R12, SI \
	JCC nomove \
	BS \
	XORQ CX, CX \
	SCALE \
nomove: \
	VMOVSS    32(R14)(R12*4), X14 \
	VCVTSS2SD X14, X14, X14 \
	BD \
	XORQ      CX, CX \
	MAD \
	ADDQ DX, R13 \
	INCQ R12 \
	CMPQ R12, BX \
	JNE  upd \
	ADDQ R9, R8 \
	ADDQ $96, R14 \
	DECQ R10 \
	JNZ  updslot \
	VZEROUPPER \
	RET

// Byte offsets in flashState (flash_amd64.go).
#define flashSums 64
#define flashVD 320
#define flashRec 2368

// The AVX2 passes: V widened four at a time, scaleF16Asm's and
// madF16Asm's operations.
#define WIDEN2 \
	XORQ CX, CX \
widen: \
	VCVTPS2PD (R8)(CX*1), Y0 \
	VMOVUPD   Y0, flashVD(AX)(CX*2) \
	ADDQ      $16, CX \
	CMPQ      CX, DX \
	JNE       widen

#define BS2 VBROADCASTSS 0(R14)(R12*4), Y14
#define BD2 VBROADCASTSD X14, Y14

#define SCALE2 \
sloop: \
	VMULPS    (R13)(CX*1), Y14, Y0 \
	VCVTPS2PH $0, Y0, X0 \
	VCVTPH2PS X0, Y0 \
	VMOVUPS   Y0, (R13)(CX*1) \
	ADDQ      $32, CX \
	CMPQ      CX, DX \
	JNE       sloop

#define MAD2 \
mloop: \
	VMOVUPD     flashVD(AX)(CX*2), Y0 \
	VCVTPS2PD   (R13)(CX*1), Y1 \
	VFMADD231PD Y14, Y0, Y1 \
	VCVTPD2PSY  Y1, X1 \
	VCVTPS2PH   $0, X1, X1 \
	VCVTPH2PS   X1, X1 \
	VMOVUPS     X1, (R13)(CX*1) \
	VMOVUPD     flashVD+32(AX)(CX*2), Y2 \
	VCVTPS2PD   16(R13)(CX*1), Y3 \
	VFMADD231PD Y14, Y2, Y3 \
	VCVTPD2PSY  Y3, X3 \
	VCVTPS2PH   $0, X3, X3 \
	VCVTPH2PS   X3, X3 \
	VMOVUPS     X3, 16(R13)(CX*1) \
	ADDQ        $32, CX \
	CMPQ        CX, DX \
	JNE         mloop

// The AVX-512 passes: the same operations on sixteen values at a time
// (eight doubles per FMA), half as many conversion instructions, which
// bound the AVX2 passes.
#define WIDEN512 \
	XORQ CX, CX \
widen: \
	VCVTPS2PD (R8)(CX*1), Z0 \
	VMOVUPD   Z0, flashVD(AX)(CX*2) \
	ADDQ      $32, CX \
	CMPQ      CX, DX \
	JNE       widen

#define BS512 VBROADCASTSS 0(R14)(R12*4), Z14
#define BD512 VBROADCASTSD X14, Z14

#define SCALE512 \
sloop: \
	VMULPS    (R13)(CX*1), Z14, Z0 \
	VCVTPS2PH $0, Z0, Y0 \
	VCVTPH2PS Y0, Z0 \
	VMOVUPS   Z0, (R13)(CX*1) \
	ADDQ      $64, CX \
	CMPQ      CX, DX \
	JNE       sloop

#define MAD512 \
mloop: \
	VMOVUPD      flashVD(AX)(CX*2), Z0 \
	VCVTPS2PD    (R13)(CX*1), Z1 \
	VFMADD231PD  Z14, Z0, Z1 \
	VMOVUPD      flashVD+64(AX)(CX*2), Z2 \
	VCVTPS2PD    32(R13)(CX*1), Z3 \
	VFMADD231PD  Z14, Z2, Z3 \
	VCVTPD2PS    Z1, Y1 \
	VCVTPD2PS    Z3, Y3 \
	VINSERTF64X4 $1, Y3, Z1, Z1 \
	VCVTPS2PH    $0, Z1, Y1 \
	VCVTPH2PS    Y1, Z1 \
	VMOVUPS      Z1, (R13)(CX*1) \
	ADDQ         $64, CX \
	CMPQ         CX, DX \
	JNE          mloop

// FLASHARGS loads the kernels' arguments.
#define FLASHARGS \
	MOVQ   k+8(FP), DI \
	MOVQ   v+16(FP), R8 \
	MOVQ   st+32(FP), AX \
	MOVQ   strideBytes+40(FP), R9 \
	MOVQ   ns+48(FP), R10 \
	MOVQ   pf+56(FP), R11 \
	SUBQ   $16, R11 \
	MOVQ   dBytes+64(FP), DX \
	MOVQ   hc+72(FP), BX \
	VMOVSS scale+80(FP), X15 \
	VBROADCASTSS expOne<>(SB), Y12 \
	VBROADCASTSS X15, Y15

// func flashF16Asm(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)
//
// FlashF16 for hc ≤ 8 heads of dBytes/4 floats (a multiple of 32) over
// 1 ≤ ns ≤ flashSlots slots strideBytes apart. st is a flashState: max
// (lanes 0-7), sum (8-15), then scratch: the heads' partial sums
// (flashSums), the V row in float64 (flashVD), the slots' records
// (flashRec).
// Per slot: each head's score as dotRowsAsm computes it, times scale; the
// softmax step on all heads at once, lane h as the scalar Go step; then
// (in a second pass over the slots) per head the scaleF16Asm pass where
// its max moved and the madF16Asm pass. The slot pf−1 is the last the
// prefetch (16 slots ahead) may touch.
TEXT ·flashF16Asm(SB), NOSPLIT, $0-84
	FLASHARGS
	FLASHSTEPS
	FLASHUPDATES(WIDEN2, BS2, BD2, SCALE2, MAD2)

// func flashF16Asm512(q, k, v, o, st unsafe.Pointer, strideBytes, ns, pf, dBytes, hc int, scale float32)
//
// flashF16Asm with the AVX-512 passes.
TEXT ·flashF16Asm512(SB), NOSPLIT, $0-84
	FLASHARGS
	FLASHSTEPS
	FLASHUPDATES(WIDEN512, BS512, BD512, SCALE512, MAD512)

// REDUCE8's lanes in head order: r0 r2 r4 r6 | r1 r3 r5 r7.
DATA flashPerm<>+0(SB)/4, $0
DATA flashPerm<>+4(SB)/4, $4
DATA flashPerm<>+8(SB)/4, $1
DATA flashPerm<>+12(SB)/4, $5
DATA flashPerm<>+16(SB)/4, $2
DATA flashPerm<>+20(SB)/4, $6
DATA flashPerm<>+24(SB)/4, $3
DATA flashPerm<>+28(SB)/4, $7
GLOBL flashPerm<>(SB), RODATA|NOPTR, $32
