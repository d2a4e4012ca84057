//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// The multi-token decoding row kernels (DotF16F32RowsMulti): four rows far
// apart at a time, as dotF16F32Rows4Asm512, each weight widened once and
// fused-multiply-added with the activations of 2 or 3 tokens (token t's at
// x+t·4·n32), each token's products into that row and token's own partial
// sums in PAIR512's order: the bits of the decoding kernels per token.
//
// func(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
//
// For i < quads, rows i+k·far/rowBytes of w (rowBytes apart), k < 4,
// results for token t to out[i+k·farOut/4+t·ldoBytes/4].

// ZFMA4 adds the four rows' widened weights (Z0..Z7, row k's halves in
// Z2k, Z2k+1) times one token's 32 activations (XLO, XHI) to that token's
// partial sums A0..A7 (row k's in A2k, A2k+1).
#define ZFMA4(XLO, XHI, A0, A1, A2, A3, A4, A5, A6, A7) \
	VFMADD231PS XLO, Z0, A0 \
	VFMADD231PS XHI, Z1, A1 \
	VFMADD231PS XLO, Z2, A2 \
	VFMADD231PS XHI, Z3, A3 \
	VFMADD231PS XLO, Z4, A4 \
	VFMADD231PS XHI, Z5, A5 \
	VFMADD231PS XLO, Z6, A6 \
	VFMADD231PS XHI, Z7, A7

// ZQUAD widens (by W) 32 weights of each of the rows at SI, SI+R13, DX
// and DX+R13 into Z0..Z7, fetching them 1 KiB ahead.
#define ZQUAD(W) \
	PREFETCHT0 1024(SI)            \
	PREFETCHT0 1024(SI)(R13*1)     \
	PREFETCHT0 1024(DX)            \
	PREFETCHT0 1024(DX)(R13*1)     \
	WIDEN4Z(W)

#define ZARGS QUADARGS; MOVQ ldoBytes+64(FP), R15

// ZSTART points SI and DX at the quad's rows and DI, CX at the activations.
#define ZSTART \
	MOVQ R8, SI          \
	LEAQ (R8)(R13*2), DX \
	MOVQ R11, DI         \
	MOVQ R12, CX

#define ZNEXT(lbl) \
	ADDQ $64, SI  \
	ADDQ $64, DX  \
	ADDQ $128, DI \
	SUBQ $32, CX  \
	JNZ  lbl

// ZMULTI is a whole AVX-512 multi-token kernel, the weights widened by W:
// ZEROS clears the tokens' partial sums, BODY adds the products of
// ZQUAD's 32 weights of each row to them, RESULTS stores the quad's
// results from SI = out.
#define ZMULTI(W, ZEROS, BODY, RESULTS) \
	ZARGS         \
zquad:            \
	ZSTART        \
	ZEROS         \
zloop:            \
	ZQUAD(W)      \
	BODY          \
	ZNEXT(zloop)  \
	MOVQ AX, SI   \
	RESULTS       \
	ADDQ $4, AX   \
	NEXTROWS(zquad)

// Two tokens: partial sums in Z8..Z15 (token 0) and Z16..Z23 (token 1),
// the activations in Z24..Z27.
#define Z2ZEROS \
	ZEROZ4(Z8, Z9, Z10, Z11)   \
	ZEROZ4(Z12, Z13, Z14, Z15) \
	ZEROZ4(Z16, Z17, Z18, Z19) \
	ZEROZ4(Z20, Z21, Z22, Z23)

#define Z2BODY \
	VMOVUPS (DI), Z24                                       \
	VMOVUPS 64(DI), Z25                                     \
	VMOVUPS (DI)(R12*4), Z26                                \
	VMOVUPS 64(DI)(R12*4), Z27                              \
	ZFMA4(Z24, Z25, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)   \
	ZFMA4(Z26, Z27, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

// Z2ROW and Z3ROW store one row's results for each token (partial sums
// A, B, C) at SI + t·ldoBytes.
#define Z2ROW(A0, A1, B0, B1, C0, C1) \
	SUMZ(A0, A1, (SI))         \
	SUMZ(B0, B1, (SI)(R15*1))

#define Z3ROW(A0, A1, B0, B1, C0, C1) \
	Z2ROW(A0, A1, B0, B1, C0, C1) \
	SUMZ(C0, C1, (SI)(R15*2))

// ZRESULTS stores the four rows' results through ROW (Z2ROW or Z3ROW;
// Z2ROW takes the third token's registers and leaves them).
#define ZRESULTS(ROW) \
	ROW(Z8, Z9, Z16, Z17, Z24, Z25)   \
	ADDQ R14, SI                      \
	ROW(Z10, Z11, Z18, Z19, Z26, Z27) \
	ADDQ R14, SI                      \
	ROW(Z12, Z13, Z20, Z21, Z28, Z29) \
	ADDQ R14, SI                      \
	ROW(Z14, Z15, Z22, Z23, Z30, Z31)

// Three tokens: partial sums in Z8..Z15, Z16..Z23 and Z24..Z31, which
// leave no register for the activations: the multiply-adds read them.
#define Z3ZEROS \
	Z2ZEROS                    \
	ZEROZ4(Z24, Z25, Z26, Z27) \
	ZEROZ4(Z28, Z29, Z30, Z31)

#define Z3BODY \
	ZFMA4((DI), 64(DI), Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)                 \
	ZFMA4((DI)(R12*4), 64(DI)(R12*4), Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23) \
	ZFMA4((DI)(R12*8), 64(DI)(R12*8), Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31)

// func dotF16F32Rows4x2Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
TEXT ·dotF16F32Rows4x2Asm512(SB), NOSPLIT, $0-72
	ZMULTI(WIDENF16, Z2ZEROS, Z2BODY, ZRESULTS(Z2ROW))

// func dotBF16F32Rows4x2Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
TEXT ·dotBF16F32Rows4x2Asm512(SB), NOSPLIT, $0-72
	ZMULTI(WIDENBF16, Z2ZEROS, Z2BODY, ZRESULTS(Z2ROW))

// func dotF16F32Rows4x3Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
TEXT ·dotF16F32Rows4x3Asm512(SB), NOSPLIT, $0-72
	ZMULTI(WIDENF16, Z3ZEROS, Z3BODY, ZRESULTS(Z3ROW))

// func dotBF16F32Rows4x3Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
TEXT ·dotBF16F32Rows4x3Asm512(SB), NOSPLIT, $0-72
	ZMULTI(WIDENBF16, Z3ZEROS, Z3BODY, ZRESULTS(Z3ROW))

// The AVX2 forms: a row's partial sums for 3 tokens take 12 of the 16 ymm
// registers, so the four rows take turns, 256 elements (512 bytes of each
// row) at a time, as in dotF16F32Rows4Asm, their sums kept on the stack
// (row k's at 384·k(SP) for three tokens, 256·k(SP) for two, token t's
// four registers 128·t bytes further). Token t's partial sums are
// Y4t..Y4t+3; the weights are widened into Y12..Y15 and fetched 2 KiB
// ahead; the multiply-adds read the activations (R12, token t at
// R12+t·4·R15).

// YSUMS8 and YSUMS12 move two or three tokens' partial sums (Y0..Y7,
// Y0..Y11) to or from off(SP) (OUT is TOSTACK or FROMSTACK).
#define YSUMS8(off, OUT) \
	OUT(Y0, (off)(SP))        \
	OUT(Y1, (off+32)(SP))     \
	OUT(Y2, (off+64)(SP))     \
	OUT(Y3, (off+96)(SP))     \
	OUT(Y4, (off+128)(SP))    \
	OUT(Y5, (off+160)(SP))    \
	OUT(Y6, (off+192)(SP))    \
	OUT(Y7, (off+224)(SP))

#define YSUMS12(off, OUT) \
	YSUMS8(off, OUT)          \
	OUT(Y8, (off+256)(SP))    \
	OUT(Y9, (off+288)(SP))    \
	OUT(Y10, (off+320)(SP))   \
	OUT(Y11, (off+352)(SP))

#define TOSTACK(R, M) VMOVUPS R, M
#define FROMSTACK(R, M) VMOVUPS M, R

// YWIDEN widens (by W) the 32 weights at DX into Y12..Y15.
#define YWIDEN(W) \
	PREFETCHT0 2048(DX)    \
	W((DX), Y12)           \
	W(16(DX), Y13)         \
	W(32(DX), Y14)         \
	W(48(DX), Y15)

// YFMA adds Y12..Y15 times the 32 activations at X to A0..A3.
#define YFMA(X0, X1, X2, X3, A0, A1, A2, A3) \
	VFMADD231PS X0, Y12, A0 \
	VFMADD231PS X1, Y13, A1 \
	VFMADD231PS X2, Y14, A2 \
	VFMADD231PS X3, Y15, A3

#define YFMA0 YFMA((R12), 32(R12), 64(R12), 96(R12), Y0, Y1, Y2, Y3)
#define YFMA1 YFMA((R12)(R15*4), 32(R12)(R15*4), 64(R12)(R15*4), 96(R12)(R15*4), Y4, Y5, Y6, Y7)
#define YFMA2 YFMA((R12)(R15*8), 32(R12)(R15*8), 64(R12)(R15*8), 96(R12)(R15*8), Y8, Y9, Y10, Y11)

#define YBODY2 YWIDEN(WIDENF16); YFMA0; YFMA1
#define YBODY3 YWIDEN(WIDENF16); YFMA0; YFMA1; YFMA2
#define YBODY2B YWIDEN(WIDENBF16); YFMA0; YFMA1
#define YBODY3B YWIDEN(WIDENBF16); YFMA0; YFMA1; YFMA2

// YTURN runs R11 elements of the row at DX from the activations at DI,
// its partial sums (SUMS, BODY's) loaded from and stored back to off(SP).
#define YTURN(SUMS, BODY, off, lbl) \
	SUMS(off, FROMSTACK)  \
	MOVQ DI, R12          \
	MOVQ R11, BX          \
lbl:                      \
	BODY                  \
	ADDQ $64, DX          \
	ADDQ $128, R12        \
	SUBQ $32, BX          \
	JNZ  lbl              \
	SUMS(off, TOSTACK)

// YRESULT stores at D the result of the partial sums at off(SP).
#define YRESULT(off, D) \
	VMOVUPS (off)(SP), Y0    \
	VMOVUPS (off+32)(SP), Y1 \
	VMOVUPS (off+64)(SP), Y2 \
	VMOVUPS (off+96)(SP), Y3 \
	REDUCE                   \
	VMOVSS  X0, D

// YMULTI is a whole AVX2 kernel for SUMS/BODY's tokens, slot bytes of
// partial sums per row.
#define YMULTI(SUMS, BODY, slot, lquad, lblock, l0, l1, l2, l3) \
	MOVQ w+0(FP), R8               \
	MOVQ rowBytes+8(FP), R9        \
	MOVQ quads+16(FP), R10         \
	MOVQ n32+32(FP), R15           \
	MOVQ out+40(FP), AX            \
	MOVQ far+48(FP), R13           \
	MOVQ farOut+56(FP), R14        \
lquad:                           \
	MOVQ   R8, SI                  \
	MOVQ   x+24(FP), DI            \
	MOVQ   R15, CX                 \
	ZEROY4(Y0, Y1, Y2, Y3)         \
	ZEROY4(Y4, Y5, Y6, Y7)         \
	ZEROY4(Y8, Y9, Y10, Y11)       \
	SUMS(0, TOSTACK)               \
	SUMS(slot, TOSTACK)            \
	SUMS(2*slot, TOSTACK)          \
	SUMS(3*slot, TOSTACK)          \
lblock:                          \
	MOVQ    $256, R11              \
	CMPQ    CX, R11                \
	CMOVQLT CX, R11                \
	MOVQ    SI, DX                 \
	YTURN(SUMS, BODY, 0, l0)    \
	LEAQ    (SI)(R13*1), DX        \
	YTURN(SUMS, BODY, slot, l1) \
	LEAQ    (SI)(R13*2), DX        \
	YTURN(SUMS, BODY, 2*slot, l2) \
	LEAQ    (SI)(R13*2), DX        \
	ADDQ    R13, DX                \
	YTURN(SUMS, BODY, 3*slot, l3) \
	LEAQ    (SI)(R11*2), SI        \
	LEAQ    (DI)(R11*4), DI        \
	SUBQ    R11, CX                \
	JNZ     lblock               \
	MOVQ    ldoBytes+64(FP), CX    \
	MOVQ    AX, DX                 \
	YRESULTS(0)                    \
	ADDQ    R14, DX                \
	YRESULTS(slot)                 \
	ADDQ    R14, DX                \
	YRESULTS(2*slot)               \
	ADDQ    R14, DX                \
	YRESULTS(3*slot)               \
	ADDQ    $4, AX                 \
	NEXTROWS(lquad)

// func dotF16F32Rows4x2Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
#define YRESULTS(off) \
	YRESULT(off, (DX)) \
	YRESULT(off+128, (DX)(CX*1))

TEXT ·dotF16F32Rows4x2Asm(SB), $1024-72
	YMULTI(YSUMS8, YBODY2, 256, y2quad, y2block, y2r0, y2r1, y2r2, y2r3)

// func dotBF16F32Rows4x2Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
TEXT ·dotBF16F32Rows4x2Asm(SB), $1024-72
	YMULTI(YSUMS8, YBODY2B, 256, y2quad, y2block, y2r0, y2r1, y2r2, y2r3)

#undef YRESULTS

// func dotF16F32Rows4x3Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
#define YRESULTS(off) \
	YRESULT(off, (DX))           \
	YRESULT(off+128, (DX)(CX*1)) \
	YRESULT(off+256, (DX)(CX*2))

TEXT ·dotF16F32Rows4x3Asm(SB), $1536-72
	YMULTI(YSUMS12, YBODY3, 384, y3quad, y3block, y3r0, y3r1, y3r2, y3r3)

// func dotBF16F32Rows4x3Asm(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut, ldoBytes int)
TEXT ·dotBF16F32Rows4x3Asm(SB), $1536-72
	YMULTI(YSUMS12, YBODY3B, 384, y3quad, y3block, y3r0, y3r1, y3r2, y3r3)
