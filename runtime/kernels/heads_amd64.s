//go:build !purego

#include "textflag.h"

// DotHeads (heads.go): eight dot products per vector operation, lanes over
// query heads, each in Dot's order. Element i's products of a 32-element
// group go to lane l[i%32]; l[j] sums its terms in order, starting with
// the first (the +0 Dot starts from is added at the end, which gives the
// same result: a sum is −0 only when every term is).

// TERM adds element I's product (key element broadcast, times the eight
// heads' element I) into D.
#define TERM(I, D) \
	VBROADCASTSS ((I)*4)(SI), Y8    \
	VMULPS       ((I)*32)(DI), Y8, Y8 \
	VADDPS       Y8, D, D

// LQ64(J, D) sets D to Dot's lane l[J] for 64-element rows (terms J and
// J+32), with lanes over the eight heads; LQ128 for 128 (J, …, J+96).
#define LQ64(J, D) \
	VBROADCASTSS ((J)*4)(SI), Y7     \
	VMULPS       ((J)*32)(DI), Y7, D \
	TERM((J)+32, D)

#define LQ128(J, D) \
	LQ64(J, D)      \
	TERM((J)+64, D) \
	TERM((J)+96, D)

// R8_64(J, A) sets A to r8[J] = (l[J]+l[J+8]) + (l[J+16]+l[J+24]);
// R8_128 likewise. (A macro name cannot be passed down two levels.)
#define R8_64(J, A) \
	LQ64(J, A); LQ64((J)+8, Y5)          \
	VADDPS Y5, A, A                      \
	LQ64((J)+16, Y5); LQ64((J)+24, Y6)   \
	VADDPS Y6, Y5, Y5; VADDPS Y5, A, A

#define R8_128(J, A) \
	LQ128(J, A); LQ128((J)+8, Y5)        \
	VADDPS Y5, A, A                      \
	LQ128((J)+16, Y5); LQ128((J)+24, Y6) \
	VADDPS Y6, Y5, Y5; VADDPS Y5, A, A

// HEADS computes one token's eight scores with R8M (R8_64 or R8_128) and
// stores them at AX: r4[j] = r8[j]+r8[j+4], then (r4[0]+r4[2]) +
// (r4[1]+r4[3]), then +0 (Dot's lanes start at +0, so a sum of −0 terms
// is +0 there).
#define HEADS(R8M) \
	R8M(0, Y0) \
	R8M(4, Y1) \
	VADDPS Y1, Y0, Y0 \
	R8M(1, Y1) \
	R8M(5, Y2) \
	VADDPS Y2, Y1, Y1 \
	R8M(2, Y2) \
	R8M(6, Y3) \
	VADDPS Y3, Y2, Y2 \
	R8M(3, Y3) \
	R8M(7, Y4) \
	VADDPS Y4, Y3, Y3 \
	VADDPS Y2, Y0, Y0 \
	VADDPS Y3, Y1, Y1 \
	VADDPS Y1, Y0, Y0 \
	VADDPS  Y15, Y0, Y0 \
	VMOVUPS Y0, (AX)

// SLOTS(R8M, D) is a whole DotHeadsSlots kernel for head size D (64 or
// 128, with R8M = R8_64 or R8_128), func(k unsafe.Pointer, kstride, n
// int, qt unsafe.Pointer, tokens int, out unsafe.Pointer, ostride int),
// strides in bytes: for each of n slots, the key row attnPrefetch = 16
// slots ahead is prefetched (PREFETCHT0 never faults, so rows past the
// range need no check), then HEADS for each token, the scores of token t
// 32 bytes after token t−1's.
#define SLOTS(R8M, D) \
	MOVQ   k+0(FP), SI          \
	MOVQ   kstride+8(FP), R10   \
	MOVQ   n+16(FP), R12        \
	MOVQ   qt+24(FP), R13       \
	MOVQ   out+40(FP), R11      \
	VXORPS Y15, Y15, Y15        \
slot:                           \
	MOVQ       R10, BX          \
	SHLQ       $4, BX           \
	ADDQ       SI, BX           \
	MOVQ       $(D), R14        \
slotpf:                         \
	PREFETCHT0 (BX)             \
	PREFETCHT0 64(BX)           \
	ADDQ       $128, BX         \
	SUBQ       $32, R14         \
	JNE        slotpf           \
	MOVQ       R13, DI          \
	MOVQ       R11, AX          \
	MOVQ       tokens+32(FP), CX \
token:                          \
	HEADS(R8M)                  \
	ADDQ $((D)*32), DI          \
	ADDQ $32, AX                \
	DECQ CX                     \
	JNZ  token                  \
	ADDQ ostride+48(FP), R11    \
	ADDQ R10, SI                \
	DECQ R12                    \
	JNZ  slot                   \
	VZEROUPPER                  \
	RET

// func dotHeadsAsm(k, qt unsafe.Pointer, n, tokens int, out unsafe.Pointer, outStride int)
//
// n is 64 or 128; outStride is in bytes.
TEXT ·dotHeadsAsm(SB), NOSPLIT, $0-48
	MOVQ   k+0(FP), SI
	MOVQ   qt+8(FP), DI
	MOVQ   n+16(FP), DX
	MOVQ   tokens+24(FP), CX
	MOVQ   out+32(FP), AX
	MOVQ   outStride+40(FP), R8
	MOVQ   DX, R9
	SHLQ   $5, R9 // one token's qt: n·8 floats
	VXORPS Y15, Y15, Y15
	CMPQ   DX, $64
	JNE    heads128

heads64:
	HEADS(R8_64)
	ADDQ R9, DI
	ADDQ R8, AX
	DECQ CX
	JNZ  heads64
	VZEROUPPER
	RET

heads128:
	HEADS(R8_128)
	ADDQ R9, DI
	ADDQ R8, AX
	DECQ CX
	JNZ  heads128
	VZEROUPPER
	RET

TEXT ·dotHeadsSlots64Asm(SB), NOSPLIT, $0-56
	SLOTS(R8_64, 64)

TEXT ·dotHeadsSlots128Asm(SB), NOSPLIT, $0-56
	SLOTS(R8_128, 128)
