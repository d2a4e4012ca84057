//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// AVX-512 versions of the F16 dot products, in the package's summation
// order: the 32 partial sums live in Z0 (l[0..15]) and Z1 (l[16..31]), so
// each product meets the same partial sum, in the same sequence, as in the
// AVX2 kernels' Y0..Y3, and the results are the same bits.

// MAC32F adds the products of 32 binary16 weights at off(a) and 32 float32
// activations at 2·off(b) to Z0, Z1, with T0, T1 as scratch.
#define MAC32F(off, a, b, T0, T1, T2, T3) \
	VCVTPH2PS off(a), T0            \
	VCVTPH2PS (off+32)(a), T1       \
	VMULPS    (2*off)(b), T0, T0    \
	VMULPS    (2*off+64)(b), T1, T1 \
	VADDPS    T0, Z0, Z0            \
	VADDPS    T1, Z1, Z1

// PF2K fetches the weights 2 KiB ahead.
#define PF2K PREFETCHT0 2048(SI); PREFETCHT0 2112(SI)

// DOT32 leaves in Z0, Z1 the partial sums over CX (a multiple of 32)
// elements from SI (binary16) and DI (activations of xs bytes, taken by
// MAC), advancing both, with PF before each 64 elements. Z0 and Z1 must
// start at zero.
#define DOT32(MAC, xs, PF, lbl64, lbl32, done) \
	CMPQ CX, $64          \
	JB   lbl32            \
lbl64:                    \
	PF                    \
	MAC(0, SI, DI, Z4, Z5, Z8, Z9)    \
	MAC(64, SI, DI, Z6, Z7, Z10, Z11) \
	ADDQ $128, SI         \
	ADDQ $(64*xs), DI     \
	SUBQ $64, CX          \
	CMPQ CX, $64          \
	JAE  lbl64            \
lbl32:                    \
	CMPQ CX, $32          \
	JB   done             \
	MAC(0, SI, DI, Z4, Z5, Z8, Z9) \
	ADDQ $64, SI          \
	ADDQ $(32*xs), DI     \
	SUBQ $32, CX          \
done:

// PAIR512 is dotF16F32RowsAsm512's two rows: per 32 elements each row's
// weights widened (exactly, by W) and fused-multiply-added with the float32
// activations into Z0, Z1 (the row at SI) and Z2, Z3 (the row at DX), then
// moved to the AVX2 layout, Y0..Y3 and Y12..Y15. The weights are fetched
// 1 KiB ahead.
#define PAIR512(W) \
	VPXORD        Z0, Z0, Z0    \
	VPXORD        Z1, Z1, Z1    \
	VPXORD        Z2, Z2, Z2    \
	VPXORD        Z3, Z3, Z3    \
zploop:                         \
	PREFETCHT0    1024(SI)      \
	PREFETCHT0    1024(DX)      \
	W((SI), Z4)                 \
	W(32(SI), Z5)               \
	W((DX), Z6)                 \
	W(32(DX), Z7)               \
	VMOVUPS       (DI), Z8      \
	VMOVUPS       64(DI), Z9    \
	VFMADD231PS   Z8, Z4, Z0    \
	VFMADD231PS   Z9, Z5, Z1    \
	VFMADD231PS   Z8, Z6, Z2    \
	VFMADD231PS   Z9, Z7, Z3    \
	ADDQ          $64, SI       \
	ADDQ          $64, DX       \
	ADDQ          $128, DI      \
	SUBQ          $32, CX       \
	JNZ           zploop        \
	VEXTRACTF64X4 $1, Z3, Y15   \
	VMOVAPS       Y3, Y14       \
	VEXTRACTF64X4 $1, Z2, Y13   \
	VMOVAPS       Y2, Y12       \
	SPLIT

// ROWS4Z(W) is the body of dotF16F32Rows4Asm512 (below), the weights
// widened by W. It stands before the file's first TEXT, where go vet does
// not check its argument names against another function's.
#define ROWS4Z(W) \
	QUADARGS                                             \
	LEAQ (AX)(R14*2), BX                                 \
quad:                                                        \
	/* Rows at SI, SI+R13, DX = SI+2·R13 and DX+R13. */  \
	MOVQ   R8, SI                                        \
	LEAQ   (R8)(R13*2), DX                               \
	MOVQ   R11, DI                                       \
	MOVQ   R12, CX                                       \
	ZEROZ4(Z16, Z17, Z18, Z19)                           \
	ZEROZ4(Z20, Z21, Z22, Z23)                           \
quadloop:                                                    \
	PREFETCHT0  1536(SI)                                 \
	PREFETCHT0  1536(SI)(R13*1)                          \
	PREFETCHT0  1536(DX)                                 \
	PREFETCHT0  1536(DX)(R13*1)                          \
	VMOVUPS     (DI), Z8                                 \
	VMOVUPS     64(DI), Z9                               \
	WIDEN4Z(W)                                           \
	VFMADD231PS Z8, Z0, Z16                              \
	VFMADD231PS Z9, Z1, Z17                              \
	VFMADD231PS Z8, Z2, Z18                              \
	VFMADD231PS Z9, Z3, Z19                              \
	VFMADD231PS Z8, Z4, Z20                              \
	VFMADD231PS Z9, Z5, Z21                              \
	VFMADD231PS Z8, Z6, Z22                              \
	VFMADD231PS Z9, Z7, Z23                              \
	ADDQ        $64, SI                                  \
	ADDQ        $64, DX                                  \
	ADDQ        $128, DI                                 \
	SUBQ        $32, CX                                  \
	JNZ         quadloop                                 \
	SUMZ(Z16, Z17, (AX))                                 \
	SUMZ(Z18, Z19, (AX)(R14*1))                          \
	SUMZ(Z20, Z21, (BX))                                 \
	SUMZ(Z22, Z23, (BX)(R14*1))                          \
	ADDQ $4, AX                                          \
	ADDQ $4, BX                                          \
	NEXTROWS(quad)

// func dotF16F32Asm512(a, b unsafe.Pointer, n8 int, ta, tb unsafe.Pointer) float32
//
// dotF16F32Asm with the whole groups of 32 in zmm registers.
TEXT ·dotF16F32Asm512(SB), NOSPLIT, $0-44
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n8+16(FP), CX
	MOVQ   ta+24(FP), R8
	MOVQ   tb+32(FP), R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ   CX, DX
	ANDQ   $~31, CX
	SUBQ   CX, DX
	DOT32(MAC32F, 4, PF2K, z1loop64, z1loop32, z1done)
	SPLIT

z1tail8:
	CMPQ      DX, $8
	JB        z1partial
	VCVTPH2PS (SI), Y4
	VMULPS    (DI), Y4, Y4
	VADDPS    Y4, Y0, Y0
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, DX
	JMP       z1tail8

z1partial:
	TESTQ     R8, R8
	JE        z1reduce
	VCVTPH2PS (R8), Y4
	VMULPS    (R9), Y4, Y4
	VADDPS    Y4, Y0, Y0

z1reduce:
	REDUCE
	VZEROUPPER
	VMOVSS X0, ret+40(FP)
	RET

// func dotF16F32RowsAsm512(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// out[r] = dotF16F32Asm512 of row r (rowBytes apart) and x, n32 a multiple
// of 32: the rows of a decoding step in one call, two at a time. x is read
// as float32 from L1 (a 5632-wide row's 22 KiB fit beside the streaming
// weights in a 48 KiB L1): widening binary16 activations for every row
// cost as many conversions as the weights' on Intel, where a zmm
// conversion takes two micro-ops; the fused multiply-add halves the rest.
TEXT ·dotF16F32RowsAsm512(SB), NOSPLIT, $0-64
	ROWPAIRS(PAIR512, WIDENF16)

// func dotBF16F32RowsAsm512(w unsafe.Pointer, rowBytes, pairs int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// dotF16F32RowsAsm512 for bfloat16 weights.
TEXT ·dotBF16F32RowsAsm512(SB), NOSPLIT, $0-64
	ROWPAIRS(PAIR512, WIDENBF16)

// func dotF16F32Rows4Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// dotF16F32RowsAsm512 on four rows far apart at a time (the quarters of a
// call's rows, four memory streams): for i < quads, rows i+k·far/rowBytes
// of w (rowBytes apart) for k < 4, results to out[i+k·farOut/4]. Each row
// has its own partial sums (Z16..Z23), fed in PAIR512's order, so the
// results are its bits. On the EPYC (Zen 5) this read the mapped 700M F16
// file's rows 1.15-1.22x as fast as two streams per CPU second at one and
// two threads (see rows4Streams). The weights are fetched 1.5 KiB ahead:
// in session 12 (700M F16, qnnprep bench -n 32, idle, six interleaved
// rounds) 1536 bytes decoded 28.1-28.9 tokens/s at one thread and
// 52.2-54.2 at two, against 26.5-28.0 and 49.7-51.1 with 1024, 27.3-28.5
// and 51.0-52.3 with 1280, 27.1-28.1 and 49.0-50.9 with 1792, 26.6-27.1
// and 48.8-50.7 with 2048.

TEXT ·dotF16F32Rows4Asm512(SB), NOSPLIT, $0-64
	ROWS4Z(WIDENF16)

// func dotBF16F32Rows4Asm512(w unsafe.Pointer, rowBytes, quads int, x unsafe.Pointer, n32 int, out unsafe.Pointer, far, farOut int)
//
// dotF16F32Rows4Asm512 for bfloat16 weights.
TEXT ·dotBF16F32Rows4Asm512(SB), NOSPLIT, $0-64
	ROWS4Z(WIDENBF16)
