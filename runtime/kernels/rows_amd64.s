//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// DOTROWS computes BX rows of DX (a multiple of 32, > 0) floats at DI
// against the vector at SI: dotF32Asm's partial sums Y0..Y3 and its
// reduction, so each result is Dot's; it stores them at R11 on. It
// leaves SI and DX, advances DI and R11 past the rows and results, and
// uses R8, CX, BX and Y0..Y7 (one use per function: it has labels).
#define DOTROWS \
rowsnext:                  \
	TESTQ  BX, BX          \
	JE     rowsdone        \
	MOVQ   SI, R8          \
	MOVQ   DX, CX          \
	ZEROY4(Y0, Y1, Y2, Y3) \
rowsloop:                  \
	VMOVUPS 0(R8), Y4      \
	VMULPS  0(DI), Y4, Y4  \
	VADDPS  Y4, Y0, Y0     \
	VMOVUPS 32(R8), Y5     \
	VMULPS  32(DI), Y5, Y5 \
	VADDPS  Y5, Y1, Y1     \
	VMOVUPS 64(R8), Y6     \
	VMULPS  64(DI), Y6, Y6 \
	VADDPS  Y6, Y2, Y2     \
	VMOVUPS 96(R8), Y7     \
	VMULPS  96(DI), Y7, Y7 \
	VADDPS  Y7, Y3, Y3     \
	ADDQ    $128, R8       \
	ADDQ    $128, DI       \
	SUBQ    $32, CX        \
	JNE     rowsloop       \
	REDUCE                 \
	VMOVSS  X0, 0(R11)     \
	ADDQ    $4, R11        \
	DECQ    BX             \
	JMP     rowsnext       \
rowsdone:

// func dotRowsAsm(x, rows unsafe.Pointer, n32, m int, out unsafe.Pointer)
//
// For each of m rows of n32 (a multiple of 32, > 0) floats: Dot's result.
TEXT ·dotRowsAsm(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ rows+8(FP), DI
	MOVQ n32+16(FP), DX
	MOVQ m+24(FP), BX
	MOVQ out+32(FP), R11
	DOTROWS
	VZEROUPPER
	RET

// func dotRowsSlotsAsm(k unsafe.Pointer, kstride, n int, q unsafe.Pointer, qskip, tokens, m, d32 int, out unsafe.Pointer, oskip int)
//
// DotRowsSlots for d32 (a multiple of 32, > 0) elements, strides in
// bytes: for each of n slots (key rows kstride apart) and each of tokens
// tokens, DOTROWS of m query rows; token t's rows start qskip bytes after
// token t−1's end, and slot j+1's results oskip bytes after slot j's
// last. Each slot first prefetches the key row attnPrefetch = 16 slots
// ahead (the rows are strided, so the hardware prefetcher misses them;
// PREFETCHT0 never faults, so the rows past the range need no check).
TEXT ·dotRowsSlotsAsm(SB), NOSPLIT, $0-80
	MOVQ k+0(FP), SI
	MOVQ kstride+8(FP), R10
	MOVQ n+16(FP), R12
	MOVQ q+24(FP), R13
	MOVQ d32+56(FP), DX
	MOVQ out+64(FP), R11

slot:
	MOVQ R10, R8
	SHLQ $4, R8
	ADDQ SI, R8
	MOVQ DX, CX

slotpf:
	PREFETCHT0 (R8)
	PREFETCHT0 64(R8)
	ADDQ       $128, R8
	SUBQ       $32, CX
	JNE        slotpf

	MOVQ R13, DI
	MOVQ tokens+40(FP), AX

token:
	MOVQ m+48(FP), BX
	DOTROWS
	ADDQ qskip+32(FP), DI
	DECQ AX
	JNZ  token

	ADDQ oskip+72(FP), R11
	ADDQ R10, SI
	DECQ R12
	JNZ  slot
	VZEROUPPER
	RET

// func axpyRowsAsm(a, x, ys unsafe.Pointer, n8, m int)
//
// For each of m rows of n8 (a multiple of 8, > 0) floats: y += a[r]·x as
// axpyAsm computes it (product rounded, then added).
TEXT ·axpyRowsAsm(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), R10
	MOVQ x+8(FP), SI
	MOVQ ys+16(FP), DI
	MOVQ n8+24(FP), DX
	MOVQ m+32(FP), BX

axrowsnext:
	TESTQ        BX, BX
	JE           axrowsdone
	VBROADCASTSS 0(R10), Y15
	MOVQ         SI, R8
	MOVQ         DX, CX

axrowsloop:
	VMULPS  0(R8), Y15, Y0
	VADDPS  0(DI), Y0, Y0
	VMOVUPS Y0, 0(DI)
	ADDQ    $32, R8
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNE     axrowsloop

	ADDQ $4, R10
	DECQ BX
	JMP  axrowsnext

axrowsdone:
	VZEROUPPER
	RET

// func prefetchAsm(p unsafe.Pointer, n int)
//
// PREFETCHT0 every cache line of the n > 0 bytes at p.
TEXT ·prefetchAsm(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ADDQ SI, CX

pfloop:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	CMPQ       SI, CX
	JB         pfloop
	RET

// func madF16Asm(a float32, x, y unsafe.Pointer, n4 int)
//
// Four at a time in float64: y = fma(x, a, y), rounded to float32
// (VCVTPD2PS, nearest) and then to binary16 and back (VCVTPS2PH $0:
// nearest, ties to even).
TEXT ·madF16Asm(SB), NOSPLIT, $0-32
	VCVTSS2SD    a+0(FP), X15, X15
	VBROADCASTSD X15, Y15
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n4+24(FP), CX

madloop:
	VCVTPS2PD   0(SI), Y0
	VCVTPS2PD   0(DI), Y1
	VFMADD231PD Y15, Y0, Y1
	VCVTPD2PSY  Y1, X1
	VCVTPS2PH   $0, X1, X1
	VCVTPH2PS   X1, X1
	VMOVUPS     X1, 0(DI)
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $4, CX
	JNE         madloop
	VZEROUPPER
	RET

// func scaleF16Asm(a float32, x, y unsafe.Pointer, n8 int)
//
// y = f16(a·x), eight at a time (y may be x).
TEXT ·scaleF16Asm(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y15
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n8+24(FP), CX

sf16loop:
	VMULPS    0(SI), Y15, Y0
	VCVTPS2PH $0, Y0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, 0(DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNE       sf16loop
	VZEROUPPER
	RET
