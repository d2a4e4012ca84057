//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// The dot products keep the 32 partial sums of the package's order in
// Y0..Y3 (lane j of Yk is l[8k+j]); elements past the last whole group of
// 32 go to Y0. LOADn(off, src, dst) loads 8 elements as float32.

#define LOADF32(off, src, dst) VMOVUPS off(src), dst
#define LOADF16(off, src, dst) WIDENF16(off(src), dst)
#define LOADBF16(off, src, dst) WIDENBF16(off(src), dst)

// MULADD adds the 8 products at off(a) and off(b) (elements loaded by
// LOADA and LOADB) to acc, the product rounded first; FMADD fused (BF16).
#define MULADD(LOADA, LOADB, offa, offb, a, b, acc) \
	LOADA(offa, a, Y4)     \
	LOADB(offb, b, Y5)     \
	VMULPS Y5, Y4, Y4      \
	VADDPS Y4, acc, acc

#define FMADD(LOADA, LOADB, offa, offb, a, b, acc) \
	LOADA(offa, a, Y4)          \
	LOADB(offb, b, Y5)          \
	VFMADD231PS Y5, Y4, acc

// DOT is a whole dot product of n8 elements of a (sa bytes each, LOADA)
// and b (sb bytes, LOADB), then the padded tail at ta, tb if not nil,
// each step MAC (MULADD or FMADD).
#define DOT(MAC, LOADA, LOADB, sa, sb) \
	MOVQ   a+0(FP), SI        \
	MOVQ   b+8(FP), DI        \
	MOVQ   n8+16(FP), CX      \
	MOVQ   ta+24(FP), R8      \
	MOVQ   tb+32(FP), R9      \
	ZEROY4(Y0, Y1, Y2, Y3)    \
	CMPQ   CX, $32            \
	JB     tail8              \
loop32:                       \
	/* weight rows (a) stream from memory: fetch 2 KiB ahead */ \
	PREFETCHT0 2048(SI)       \
	PREFETCHT0 (2048+32*sa-64)(SI) \
	MAC(LOADA, LOADB, 0, 0, SI, DI, Y0)             \
	MAC(LOADA, LOADB, 8*sa, 8*sb, SI, DI, Y1)       \
	MAC(LOADA, LOADB, 16*sa, 16*sb, SI, DI, Y2)     \
	MAC(LOADA, LOADB, 24*sa, 24*sb, SI, DI, Y3)     \
	ADDQ   $(32*sa), SI       \
	ADDQ   $(32*sb), DI       \
	SUBQ   $32, CX            \
	CMPQ   CX, $32            \
	JAE    loop32             \
tail8:                        \
	CMPQ   CX, $8             \
	JB     partial            \
	MAC(LOADA, LOADB, 0, 0, SI, DI, Y0) \
	ADDQ   $(8*sa), SI        \
	ADDQ   $(8*sb), DI        \
	SUBQ   $8, CX             \
	JMP    tail8              \
partial:                      \
	TESTQ  R8, R8             \
	JE     reduce             \
	MAC(LOADA, LOADB, 0, 0, R8, R9, Y0) \
reduce:                       \
	REDUCE                    \
	VZEROUPPER                \
	VMOVSS X0, ret+40(FP)     \
	RET

// STREAM walks n = CX float32 elements from SI (and DI), 32, then 8, then
// 1 at a time, applying OP(MUL, ADD, MOV, off, A, R) to each register's
// worth: MUL, ADD and MOV are the vector or scalar instructions, A the
// broadcast factor (Y15 or X15), R the scratch register.
#define STREAM(OP) \
s32:                                       \
	CMPQ CX, $32                           \
	JB   s8                                \
	OP(VMULPS, VADDPS, VMOVUPS, 0, Y15, Y0)  \
	OP(VMULPS, VADDPS, VMOVUPS, 32, Y15, Y1) \
	OP(VMULPS, VADDPS, VMOVUPS, 64, Y15, Y2) \
	OP(VMULPS, VADDPS, VMOVUPS, 96, Y15, Y3) \
	ADDQ $128, SI                          \
	ADDQ $128, DI                          \
	SUBQ $32, CX                           \
	JMP  s32                               \
s8:                                        \
	CMPQ CX, $8                            \
	JB   s1                                \
	OP(VMULPS, VADDPS, VMOVUPS, 0, Y15, Y0)  \
	ADDQ $32, SI                           \
	ADDQ $32, DI                           \
	SUBQ $8, CX                            \
	JMP  s8                                \
s1:                                        \
	TESTQ CX, CX                           \
	JE    sdone                            \
	OP(VMULSS, VADDSS, VMOVSS, 0, X15, X0)   \
	ADDQ  $4, SI                           \
	ADDQ  $4, DI                           \
	DECQ  CX                               \
	JMP   s1                               \
sdone:                                     \
	VZEROUPPER                             \
	RET

// AXPYOP sets y = a·x + y (product rounded, then added); SCALEOP x = a·x.
#define AXPYOP(MUL, ADD, MOV, off, A, R) \
	MUL off(SI), A, R \
	ADD off(DI), R, R \
	MOV R, off(DI)

#define SCALEOP(MUL, ADD, MOV, off, A, R) \
	MUL off(SI), A, R \
	MOV R, off(SI)

// ROWS4Y(W) is the body of dotF16F32Rows4Asm (below), the weights
// widened by W (R11 and R12, QUADARGS' x and n32, are its scratch). It
// stands before the file's first TEXT, where go vet does not check its
// argument names against another function's.
#define ROWS4Y(W) \
	QUADARGS                    \
quad:                               \
	MOVQ R8, SI                 \
	LEAQ (R8)(R13*2), DX        \
	MOVQ x+24(FP), DI           \
	MOVQ n32+32(FP), CX         \
	ZEROY4(Y0, Y1, Y2, Y3)      \
	ZEROY4(Y12, Y13, Y14, Y15)  \
	SAVE8(256)                  \
block:                              \
	MOVQ    $256, R11           \
	CMPQ    CX, R11             \
	CMOVQLT CX, R11             \
	MOVQ    R11, BX             \
	PAIRBLOCK(W, SI, first)     \
	SAVE8(0)                    \
	LOAD8(256)                  \
	MOVQ    R11, BX             \
	PAIRBLOCK(W, DX, second)    \
	SAVE8(256)                  \
	LOAD8(0)                    \
	MOVQ    R12, DI             \
	SUBQ    R11, CX             \
	JNZ     block               \
	SUM2(AX)                    \
	LOAD8(256)                  \
	LEAQ (AX)(R14*2), BX        \
	SUM2(BX)                    \
	ADDQ $4, AX                 \
	NEXTROWS(quad)

// func dotF16F32Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32
//
// dotF16Asm with b already float32: the same products and sums, one
// conversion per element fewer.
TEXT ·dotF16F32Asm(SB), NOSPLIT, $0-44
	DOT(MULADD, LOADF16, LOADF32, 2, 4)

// func dotBF16F32Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32
//
// dotBF16Asm with b already float32.
TEXT ·dotBF16F32Asm(SB), NOSPLIT, $0-44
	DOT(FMADD, LOADBF16, LOADF32, 2, 4)

// FMA8 adds the products of the eight 16-bit weights at off(R) (widened
// exactly into T by W) and the float32 activations at 2·off(DI) to A,
// fused: the product of two binary16 values is exact in float32, so the
// one rounding is the add's, as in dotF16F32Asm; BF16 steps are fused by
// definition.
#define FMA8(W, off, R, T, A) \
	W(off(R), T)                  \
	VFMADD231PS (2*off)(DI), T, A

// PAIR2 is dotF16F32RowsAsm's two rows (weights widened by W): the row at
// SI in Y0..Y3, the row at DX in Y12..Y15, with the weights fetched 1 KiB
// ahead.
#define PAIR2(W) \
	ZEROY4(Y0, Y1, Y2, Y3)      \
	ZEROY4(Y12, Y13, Y14, Y15)  \
pairloop:                       \
	PREFETCHT0 1024(SI)         \
	PREFETCHT0 1024(DX)         \
	FMA8(W, 0, SI, Y4, Y0)      \
	FMA8(W, 16, SI, Y5, Y1)     \
	FMA8(W, 32, SI, Y6, Y2)     \
	FMA8(W, 48, SI, Y7, Y3)     \
	FMA8(W, 0, DX, Y8, Y12)     \
	FMA8(W, 16, DX, Y9, Y13)    \
	FMA8(W, 32, DX, Y10, Y14)   \
	FMA8(W, 48, DX, Y11, Y15)   \
	ADDQ $64, SI                \
	ADDQ $64, DX                \
	ADDQ $128, DI               \
	SUBQ $32, CX                \
	JNZ  pairloop

// func dotF16F32RowsAsm(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// dotF16F32RowsAsm512 in ymm registers: out[r] is dotF16F32Asm's result
// for row r.
TEXT ·dotF16F32RowsAsm(SB), NOSPLIT, $0-64
	ROWPAIRS(PAIR2, WIDENF16)

// func dotBF16F32RowsAsm(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// dotF16F32RowsAsm for bfloat16 weights: out[r] is dotBF16F32Asm's result.
TEXT ·dotBF16F32RowsAsm(SB), NOSPLIT, $0-64
	ROWPAIRS(PAIR2, WIDENBF16)

// FMA8X is FMA8 for the row at off(R)(R13*1), the activations at R12.
#define FMA8X(W, off, R, T, A) \
	W(off(R)(R13*1), T)            \
	VFMADD231PS (2*off)(R12), T, A

// PAIRBLOCK adds BX elements (a multiple of 32) of the rows at R and
// R+R13, from the activations at DI on, to Y0..Y3 and Y12..Y15, advancing
// R and leaving in R12 the activations' end. The weights are fetched 2 KiB
// ahead (1.02-1.07x as fast as 1 KiB at one thread, 1.01-1.05x at two).
#define PAIRBLOCK(W, R, lbl) \
	MOVQ DI, R12                     \
lbl:                                 \
	PREFETCHT0 2048(R)               \
	PREFETCHT0 2048(R)(R13*1)        \
	W((R), Y4)                       \
	VFMADD231PS (R12), Y4, Y0        \
	W(16(R), Y5)                     \
	VFMADD231PS 32(R12), Y5, Y1      \
	W(32(R), Y6)                     \
	VFMADD231PS 64(R12), Y6, Y2      \
	W(48(R), Y7)                     \
	VFMADD231PS 96(R12), Y7, Y3      \
	FMA8X(W, 0, R, Y8, Y12)          \
	FMA8X(W, 16, R, Y9, Y13)         \
	FMA8X(W, 32, R, Y10, Y14)        \
	FMA8X(W, 48, R, Y11, Y15)        \
	ADDQ $64, R                      \
	ADDQ $128, R12                   \
	SUBQ $32, BX                     \
	JNZ  lbl

// SAVE8 and LOAD8 spill and restore a pair's partial sums (Y0..Y3,
// Y12..Y15) at off(SP).
#define SAVE8(off) \
	VMOVUPS Y0, (off)(SP)       \
	VMOVUPS Y1, (off+32)(SP)    \
	VMOVUPS Y2, (off+64)(SP)    \
	VMOVUPS Y3, (off+96)(SP)    \
	VMOVUPS Y12, (off+128)(SP)  \
	VMOVUPS Y13, (off+160)(SP)  \
	VMOVUPS Y14, (off+192)(SP)  \
	VMOVUPS Y15, (off+224)(SP)

#define LOAD8(off) \
	VMOVUPS (off)(SP), Y0       \
	VMOVUPS (off+32)(SP), Y1    \
	VMOVUPS (off+64)(SP), Y2    \
	VMOVUPS (off+96)(SP), Y3    \
	VMOVUPS (off+128)(SP), Y12  \
	VMOVUPS (off+160)(SP), Y13  \
	VMOVUPS (off+192)(SP), Y14  \
	VMOVUPS (off+224)(SP), Y15

// SUM2 stores the results of the pair in Y0..Y3 and Y12..Y15 at D and
// D+R14.
#define SUM2(D) \
	REDUCE              \
	VMOVSS  X0, (D)     \
	VMOVAPS Y12, Y0     \
	VMOVAPS Y13, Y1     \
	VMOVAPS Y14, Y2     \
	VMOVAPS Y15, Y3     \
	REDUCE              \
	VMOVSS  X0, (D)(R14*1)

// func dotF16F32Rows4Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// dotF16F32Rows4Asm512 in ymm registers, which hold two rows' partial
// sums (Y0..Y3, Y12..Y15) but not four: the pair of rows at SI, SI+far
// and the pair at DX = SI+2·far, DX+far take turns, 256 elements (512
// bytes of each row) at a time, the other pair's sums kept on the stack.
// Each row's sums still take its products in PAIR2's order: the same
// bits. Blocks of 128 or 512 elements were no faster (0.98x, 1.0x).
TEXT ·dotF16F32Rows4Asm(SB), NOSPLIT, $512-64
	ROWS4Y(WIDENF16)

// func dotBF16F32Rows4Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// dotF16F32Rows4Asm for bfloat16 weights.
TEXT ·dotBF16F32Rows4Asm(SB), NOSPLIT, $512-64
	ROWS4Y(WIDENBF16)

// func dotF32Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32
TEXT ·dotF32Asm(SB), NOSPLIT, $0-44
	DOT(MULADD, LOADF32, LOADF32, 4, 4)

// func dotF16Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32
TEXT ·dotF16Asm(SB), NOSPLIT, $0-44
	DOT(MULADD, LOADF16, LOADF16, 2, 2)

// func dotBF16Asm(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32
//
// Fused steps, as the package defines BF16 dot products.
TEXT ·dotBF16Asm(SB), NOSPLIT, $0-44
	DOT(FMADD, LOADBF16, LOADBF16, 2, 2)

// func axpyAsm(a float32, x, y unsafe.Pointer, n int)
TEXT ·axpyAsm(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y15
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX
	STREAM(AXPYOP)

// func scaleAsm(a float32, x unsafe.Pointer, n int)
TEXT ·scaleAsm(SB), NOSPLIT, $0-24
	VBROADCASTSS a+0(FP), Y15
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	STREAM(SCALEOP)
