//go:build amd64 && !purego

#include "textflag.h"

// Register use: X0 the round constants plus message words (SHA256RNDS2
// reads it implicitly); stream A state X1 (ABEF) X2 (CDGH), message words
// X3-X6, temporary X7; stream B the same in X8, X9, X10-X13, X14; X15 the
// byte-swap mask. Only legacy-SSE encodings are used, so no SSE/AVX
// transition is paid between the SHA instructions.

// Legacy-SSE memory operands must be 16-byte aligned, which neither the
// constant table nor the stack is sure to be: they are loaded with MOVOU.

// ROUNDS4 runs four rounds on state (ABEF, CDGH) with message words W
// and constants at offset k of kTable.
#define ROUNDS4(W, k, ABEF, CDGH) \
	MOVOU       kTable<>+k(SB), X0 \
	PADDD       W, X0             \
	SHA256RNDS2 X0, ABEF, CDGH    \
	PSHUFD      $0x0e, X0, X0     \
	SHA256RNDS2 X0, CDGH, ABEF

// SCHED turns R (words i−16..i−13) into words i..i+3, given W3, W2, W1
// (words i−12.., i−8.., i−4..) and a temporary T.
#define SCHED(R, W3, W2, W1, T) \
	SHA256MSG1 W3, R     \
	MOVO       W1, T     \
	PALIGNR    $4, W2, T \
	PADDD      T, R      \
	SHA256MSG2 W1, R

// LOADW loads 16 message bytes at off(P), big-endian words.
#define LOADW(P, off, W) \
	MOVOU  off(P), W \
	PSHUFB X15, W

// STATEIN turns h[0..7] at P into ABEF, CDGH (T a temporary).
#define STATEIN(P, ABEF, CDGH, T) \
	MOVOU   0(P), ABEF       \
	MOVOU   16(P), CDGH      \
	PSHUFD  $0xb1, ABEF, ABEF \
	PSHUFD  $0x1b, CDGH, CDGH \
	MOVO    ABEF, T          \
	PALIGNR $8, CDGH, ABEF   \
	PBLENDW $0xf0, T, CDGH

// STATEOUT stores ABEF, CDGH back as h[0..7] at P.
#define STATEOUT(P, ABEF, CDGH, T) \
	PSHUFD  $0x1b, ABEF, ABEF \
	PSHUFD  $0xb1, CDGH, CDGH \
	MOVO    ABEF, T          \
	PBLENDW $0xf0, CDGH, ABEF \
	PALIGNR $8, T, CDGH      \
	MOVOU   ABEF, 0(P)       \
	MOVOU   CDGH, 16(P)

// func blocks2Asm(ha, hb *[8]uint32, pa, pb *byte, nb int)
TEXT ·blocks2Asm(SB), NOSPLIT, $64-40
	MOVQ  ha+0(FP), DI
	MOVQ  hb+8(FP), DX
	MOVQ  pa+16(FP), SI
	MOVQ  pb+24(FP), BX
	MOVQ  nb+32(FP), CX
	MOVOU flipMask<>(SB), X15
	STATEIN(DI, X1, X2, X7)
	STATEIN(DX, X8, X9, X14)

block:
	// The states before the block, added back after it.
	MOVOU X1, 0(SP)
	MOVOU X2, 16(SP)
	MOVOU X8, 32(SP)
	MOVOU X9, 48(SP)
	LOADW(SI, 0, X3)
	LOADW(BX, 0, X10)
	LOADW(SI, 16, X4)
	LOADW(BX, 16, X11)
	LOADW(SI, 32, X5)
	LOADW(BX, 32, X12)
	LOADW(SI, 48, X6)
	LOADW(BX, 48, X13)
	ROUNDS4(X3, 0, X1, X2)
	ROUNDS4(X10, 0, X8, X9)
	ROUNDS4(X4, 16, X1, X2)
	ROUNDS4(X11, 16, X8, X9)
	ROUNDS4(X5, 32, X1, X2)
	ROUNDS4(X12, 32, X8, X9)
	ROUNDS4(X6, 48, X1, X2)
	ROUNDS4(X13, 48, X8, X9)
	SCHED(X3, X4, X5, X6, X7)
	SCHED(X10, X11, X12, X13, X14)
	ROUNDS4(X3, 64, X1, X2)
	ROUNDS4(X10, 64, X8, X9)
	SCHED(X4, X5, X6, X3, X7)
	SCHED(X11, X12, X13, X10, X14)
	ROUNDS4(X4, 80, X1, X2)
	ROUNDS4(X11, 80, X8, X9)
	SCHED(X5, X6, X3, X4, X7)
	SCHED(X12, X13, X10, X11, X14)
	ROUNDS4(X5, 96, X1, X2)
	ROUNDS4(X12, 96, X8, X9)
	SCHED(X6, X3, X4, X5, X7)
	SCHED(X13, X10, X11, X12, X14)
	ROUNDS4(X6, 112, X1, X2)
	ROUNDS4(X13, 112, X8, X9)
	SCHED(X3, X4, X5, X6, X7)
	SCHED(X10, X11, X12, X13, X14)
	ROUNDS4(X3, 128, X1, X2)
	ROUNDS4(X10, 128, X8, X9)
	SCHED(X4, X5, X6, X3, X7)
	SCHED(X11, X12, X13, X10, X14)
	ROUNDS4(X4, 144, X1, X2)
	ROUNDS4(X11, 144, X8, X9)
	SCHED(X5, X6, X3, X4, X7)
	SCHED(X12, X13, X10, X11, X14)
	ROUNDS4(X5, 160, X1, X2)
	ROUNDS4(X12, 160, X8, X9)
	SCHED(X6, X3, X4, X5, X7)
	SCHED(X13, X10, X11, X12, X14)
	ROUNDS4(X6, 176, X1, X2)
	ROUNDS4(X13, 176, X8, X9)
	SCHED(X3, X4, X5, X6, X7)
	SCHED(X10, X11, X12, X13, X14)
	ROUNDS4(X3, 192, X1, X2)
	ROUNDS4(X10, 192, X8, X9)
	SCHED(X4, X5, X6, X3, X7)
	SCHED(X11, X12, X13, X10, X14)
	ROUNDS4(X4, 208, X1, X2)
	ROUNDS4(X11, 208, X8, X9)
	SCHED(X5, X6, X3, X4, X7)
	SCHED(X12, X13, X10, X11, X14)
	ROUNDS4(X5, 224, X1, X2)
	ROUNDS4(X12, 224, X8, X9)
	SCHED(X6, X3, X4, X5, X7)
	SCHED(X13, X10, X11, X12, X14)
	ROUNDS4(X6, 240, X1, X2)
	ROUNDS4(X13, 240, X8, X9)

	MOVOU 0(SP), X7
	PADDD X7, X1
	MOVOU 16(SP), X7
	PADDD X7, X2
	MOVOU 32(SP), X14
	PADDD X14, X8
	MOVOU 48(SP), X14
	PADDD X14, X9
	ADDQ  $64, SI
	ADDQ  $64, BX
	DECQ  CX
	JNZ   block

	STATEOUT(DI, X1, X2, X7)
	STATEOUT(DX, X8, X9, X14)
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// Big-endian words: reverse the bytes of each 32-bit lane.
DATA flipMask<>+0(SB)/8, $0x0405060700010203
DATA flipMask<>+8(SB)/8, $0x0c0d0e0f08090a0b
GLOBL flipMask<>(SB), RODATA|NOPTR, $16

// The SHA-256 round constants (FIPS 180-4 §4.2.2).
DATA kTable<>+0(SB)/4, $0x428a2f98
DATA kTable<>+4(SB)/4, $0x71374491
DATA kTable<>+8(SB)/4, $0xb5c0fbcf
DATA kTable<>+12(SB)/4, $0xe9b5dba5
DATA kTable<>+16(SB)/4, $0x3956c25b
DATA kTable<>+20(SB)/4, $0x59f111f1
DATA kTable<>+24(SB)/4, $0x923f82a4
DATA kTable<>+28(SB)/4, $0xab1c5ed5
DATA kTable<>+32(SB)/4, $0xd807aa98
DATA kTable<>+36(SB)/4, $0x12835b01
DATA kTable<>+40(SB)/4, $0x243185be
DATA kTable<>+44(SB)/4, $0x550c7dc3
DATA kTable<>+48(SB)/4, $0x72be5d74
DATA kTable<>+52(SB)/4, $0x80deb1fe
DATA kTable<>+56(SB)/4, $0x9bdc06a7
DATA kTable<>+60(SB)/4, $0xc19bf174
DATA kTable<>+64(SB)/4, $0xe49b69c1
DATA kTable<>+68(SB)/4, $0xefbe4786
DATA kTable<>+72(SB)/4, $0x0fc19dc6
DATA kTable<>+76(SB)/4, $0x240ca1cc
DATA kTable<>+80(SB)/4, $0x2de92c6f
DATA kTable<>+84(SB)/4, $0x4a7484aa
DATA kTable<>+88(SB)/4, $0x5cb0a9dc
DATA kTable<>+92(SB)/4, $0x76f988da
DATA kTable<>+96(SB)/4, $0x983e5152
DATA kTable<>+100(SB)/4, $0xa831c66d
DATA kTable<>+104(SB)/4, $0xb00327c8
DATA kTable<>+108(SB)/4, $0xbf597fc7
DATA kTable<>+112(SB)/4, $0xc6e00bf3
DATA kTable<>+116(SB)/4, $0xd5a79147
DATA kTable<>+120(SB)/4, $0x06ca6351
DATA kTable<>+124(SB)/4, $0x14292967
DATA kTable<>+128(SB)/4, $0x27b70a85
DATA kTable<>+132(SB)/4, $0x2e1b2138
DATA kTable<>+136(SB)/4, $0x4d2c6dfc
DATA kTable<>+140(SB)/4, $0x53380d13
DATA kTable<>+144(SB)/4, $0x650a7354
DATA kTable<>+148(SB)/4, $0x766a0abb
DATA kTable<>+152(SB)/4, $0x81c2c92e
DATA kTable<>+156(SB)/4, $0x92722c85
DATA kTable<>+160(SB)/4, $0xa2bfe8a1
DATA kTable<>+164(SB)/4, $0xa81a664b
DATA kTable<>+168(SB)/4, $0xc24b8b70
DATA kTable<>+172(SB)/4, $0xc76c51a3
DATA kTable<>+176(SB)/4, $0xd192e819
DATA kTable<>+180(SB)/4, $0xd6990624
DATA kTable<>+184(SB)/4, $0xf40e3585
DATA kTable<>+188(SB)/4, $0x106aa070
DATA kTable<>+192(SB)/4, $0x19a4c116
DATA kTable<>+196(SB)/4, $0x1e376c08
DATA kTable<>+200(SB)/4, $0x2748774c
DATA kTable<>+204(SB)/4, $0x34b0bcb5
DATA kTable<>+208(SB)/4, $0x391c0cb3
DATA kTable<>+212(SB)/4, $0x4ed8aa4a
DATA kTable<>+216(SB)/4, $0x5b9cca4f
DATA kTable<>+220(SB)/4, $0x682e6ff3
DATA kTable<>+224(SB)/4, $0x748f82ee
DATA kTable<>+228(SB)/4, $0x78a5636f
DATA kTable<>+232(SB)/4, $0x84c87814
DATA kTable<>+236(SB)/4, $0x8cc70208
DATA kTable<>+240(SB)/4, $0x90befffa
DATA kTable<>+244(SB)/4, $0xa4506ceb
DATA kTable<>+248(SB)/4, $0xbef9a3f7
DATA kTable<>+252(SB)/4, $0xc67178f2
GLOBL kTable<>(SB), RODATA|NOPTR, $256
