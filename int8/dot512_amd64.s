//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"
#include "q8_512_amd64.h"

// AVX-512 (F, BW, VL, VNNI) kernels for decoding: weight rows against
// one activation row prepared by q8Prep.set (codes packed, per-block
// corrections and scales). VPDPBUSD multiplies unsigned by signed bytes,
// so the weights go in as w+128 (w XOR 0x80) and each block sum is then
// Σ(w+128)·x − 128·Σx: exact in int32, and the same integer as the
// twin's. The float32 operations are dotQ8_0Go's, in its order, for
// each row.

// ACC adds the products of code pair P of a group (blocks P and P+4 of
// the row at BASE, byte offsets OLO and OHI of their codes) to Z.
#define ACC(BASE, OLO, OHI, OX, Z) \
	VMOVDQU      OLO(BASE), Y8          \
	VINSERTI64X4 $1, OHI(BASE), Z8, Z8  \
	VPXORD       Z31, Z8, Z8            \
	VPDPBUSD     OX(DI), Z8, Z

// TERMS turns the block sums in Y9 of the group of the row at BASE into
// the eight terms float32(s)·(dw·dx), in Y9.
#define TERMS(BASE) \
	VPSUBD      (BX), Y9, Y9          \
	VCVTDQ2PS   Y9, Y9                \
	VMOVDQU64   0(BASE), Z12          \
	VPERMT2W    68(BASE), Z30, Z12    \
	VMOVDQU64   136(BASE), Z13        \
	VPERMT2W    204(BASE), Z30, Z13   \
	VPUNPCKLQDQ X13, X12, X12         \
	VCVTPH2PS   X12, Y12              \
	VMULPS      (BX)(R13*4), Y12, Y12 \
	VMULPS      Y12, Y9, Y9

// GROUPTERMS stores at DST the terms of the group of eight blocks of the
// row at BASE, using the accumulators A..D.
#define GROUPTERMS(BASE, A, B, C, D, DST) \
	VPXORD  A, A, A              \
	VPXORD  B, B, B              \
	VPXORD  C, C, C              \
	VPXORD  D, D, D              \
	ACC(BASE, 2, 138, 0, A)      \
	ACC(BASE, 36, 172, 64, B)    \
	ACC(BASE, 70, 206, 128, C)   \
	ACC(BASE, 104, 240, 192, D)  \
	REDUCE(A, B, C, D)           \
	TERMS(BASE)                  \
	VMOVUPS Y9, DST

// TERM1 sets X11 to the term float32(s)·(dw·dx) of the one block at
// BASE (the tail of a row).
#define TERM1(BASE) \
	VMOVDQU      2(BASE), Y8      \
	VPXORD       Y31, Y8, Y8      \
	VPXORD       Y11, Y11, Y11    \
	VPDPBUSD     (DI), Y8, Y11    \
	HSUM8(Y11, X11, X9)           \
	VMOVD        (BX), X9         \
	VPSUBD       X9, X11, X11     \
	VCVTDQ2PS    X11, X11         \
	MOVWLZX      0(BASE), AX      \
	VMOVD        AX, X12          \
	VCVTPH2PS    X12, X12         \
	VMULSS       (BX)(R13*4), X12, X12 \
	VMULSS       X12, X11, X11

// XSTART points DI at the prepared activation row XP, BX at its
// corrections and CX at the row's count of whole groups.
#define XSTART(XP) \
	MOVQ XP, DI    \
	MOVQ R13, BX   \
	SHLQ $5, BX    \
	ADDQ DI, BX    \
	MOVQ R13, CX   \
	SHRQ $3, CX

// func dotRowsQ8_0Asm(w unsafe.Pointer, rowBytes int, xp unsafe.Pointer, nb int, out unsafe.Pointer, rows int, t unsafe.Pointer, tStride int)
//
// Stores at out the dot products of rows (1 to 8) weight rows, rowBytes
// apart from w, with the prepared activation row xp, each row read from
// start to end. Row r's terms go to row r of t (rows tStride bytes
// apart, +0 from nb terms to the stride); then SUMTERMS forms every
// row's serial sum at once: no row waits on its own chain of additions.
TEXT ·dotRowsQ8_0Asm(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R11
	MOVQ nb+24(FP), R13
	MOVQ rows+40(FP), R10
	MOVQ t+48(FP), DX
	MOVQ tStride+56(FP), R12
	ROWSETUP

row:
	MOVQ R11, SI
	MOVQ DX, R8
	XSTART(xp+16(FP))
	JZ   tail

group:
	GROUPTERMS(SI, Z0, Z1, Z2, Z3, (R8))
	ADDQ    $272, SI
	ADDQ    $256, DI
	ADDQ    $32, BX
	ADDQ    $32, R8
	DECQ    CX
	JNZ     group

tail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   next

one:
	TERM1(SI)
	VMOVSS X11, (R8)
	ADDQ   $34, SI
	ADDQ   $32, DI
	ADDQ   $4, BX
	ADDQ   $4, R8
	DECQ   CX
	JNZ    one

next:
	ADDQ rowBytes+8(FP), R11
	ADDQ R12, DX
	DECQ R10
	JNZ  row

	SUMTERMS(t+48(FP))

	// Lanes 0..rows-1 are the results.
	MOVQ    rows+40(FP), CX
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	MOVQ    out+32(FP), DI
	VMOVUPS Y15, K1, (DI)
	VZEROUPPER
	RET

// SUMSTEP is one iteration of SUMTERMS (the next eight terms of each of
// eight rows added to its sum in Y15, in block order) in registers the
// group loop leaves free (Y14, Y16-Y29; VSHUFF32X4 for VPERM2F128,
// which takes no EVEX registers): rows 0, 1, 2 and 4 at AX (+0, R12,
// 2·R12, 4·R12), rows 3, 5 and 7 at R11 (+0, 2·R12, 4·R12), row 6 at
// R10.
#define SUMSTEP \
	VMOVUPS     (AX), Y16           \
	VMOVUPS     (AX)(R12*1), Y17    \
	VMOVUPS     (AX)(R12*2), Y18    \
	VMOVUPS     (R11), Y19          \
	VMOVUPS     (AX)(R12*4), Y20    \
	VMOVUPS     (R11)(R12*2), Y21   \
	VMOVUPS     (R10), Y22          \
	VMOVUPS     (R11)(R12*4), Y23   \
	VUNPCKLPS   Y17, Y16, Y24       \
	VUNPCKHPS   Y17, Y16, Y25       \
	VUNPCKLPS   Y19, Y18, Y26       \
	VUNPCKHPS   Y19, Y18, Y27       \
	VUNPCKLPS   Y21, Y20, Y28       \
	VUNPCKHPS   Y21, Y20, Y29       \
	VUNPCKLPS   Y23, Y22, Y14       \
	VUNPCKHPS   Y23, Y22, Y16       \
	VSHUFPS     $0x44, Y26, Y24, Y17 \
	VSHUFPS     $0xee, Y26, Y24, Y18 \
	VSHUFPS     $0x44, Y27, Y25, Y19 \
	VSHUFPS     $0xee, Y27, Y25, Y20 \
	VSHUFPS     $0x44, Y14, Y28, Y21 \
	VSHUFPS     $0xee, Y14, Y28, Y22 \
	VSHUFPS     $0x44, Y16, Y29, Y23 \
	VSHUFPS     $0xee, Y16, Y29, Y24 \
	VSHUFF32X4  $0, Y21, Y17, Y25   \
	VADDPS      Y25, Y15, Y15       \
	VSHUFF32X4  $0, Y22, Y18, Y25   \
	VADDPS      Y25, Y15, Y15       \
	VSHUFF32X4  $0, Y23, Y19, Y25   \
	VADDPS      Y25, Y15, Y15       \
	VSHUFF32X4  $0, Y24, Y20, Y25   \
	VADDPS      Y25, Y15, Y15       \
	VSHUFF32X4  $3, Y21, Y17, Y25   \
	VADDPS      Y25, Y15, Y15       \
	VSHUFF32X4  $3, Y22, Y18, Y25   \
	VADDPS      Y25, Y15, Y15       \
	VSHUFF32X4  $3, Y23, Y19, Y25   \
	VADDPS      Y25, Y15, Y15       \
	VSHUFF32X4  $3, Y24, Y20, Y25   \
	VADDPS      Y25, Y15, Y15

// func dotRows2Q8_0Asm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb int, t unsafe.Pointer, tStride, pf int, prev, outPrev, outFarPrev unsafe.Pointer)
//
// Puts in t the terms of four rows at w and four at w+far (rows i and
// 4+i of t), read as two streams: row i and row i of the far set go
// group by group side by side, each with the lines pf bytes ahead
// prefetched (pf 0: none). Their sums are left to the next call, or to
// sumTermsPairAsm after the last: unless prev is nil, this call forms
// those of the call before (its terms at prev, its products to outPrev
// and outFarPrev) during its first row, a step of SUMTERMS after each
// group, so that the serial additions run while the rows stream in
// instead of as a chain between calls.
TEXT ·dotRows2Q8_0Asm(SB), NOSPLIT, $0-88
	MOVQ w+0(FP), R11
	MOVQ nb+32(FP), R13
	MOVQ t+40(FP), R8
	MOVQ tStride+48(FP), R12
	MOVQ pf+56(FP), R14
	LEAQ (R12*4), R9 // from row i of t to row 4+i
	MOVQ $4, R10
	ROWSETUP
	MOVQ prev+64(FP), AX
	TESTQ AX, AX
	JZ   rowq

	// Row 0, with a step of the sums of the call before after each group.
	MOVQ R11, SI
	MOVQ R11, DX
	ADDQ far+8(FP), DX
	LEAQ (R12)(R12*2), R10
	LEAQ (AX)(R10*1), R11
	LEAQ (R11)(R10*1), R10
	VXORPS Y15, Y15, Y15
	XSTART(xp+24(FP))
	JZ   tail0

group0:
	TESTQ R14, R14
	JZ    fetched0
	PREFETCH5(SI)
	PREFETCH5(DX)

fetched0:
	GROUPTERMS(SI, Z0, Z1, Z2, Z3, (R8))
	GROUPTERMS(DX, Z4, Z5, Z6, Z7, (R8)(R9*1))
	SUMSTEP
	ADDQ    $32, AX
	ADDQ    $32, R11
	ADDQ    $32, R10
	ADDQ    $272, SI
	ADDQ    $272, DX
	ADDQ    $256, DI
	ADDQ    $32, BX
	ADDQ    $32, R8
	DECQ    CX
	JNZ     group0

tail0:
	TESTQ $7, R13
	JZ    stored0
	SUMSTEP

stored0:
	MOVQ         outPrev+72(FP), AX
	VMOVUPS      X15, (AX)
	MOVQ         outFarPrev+80(FP), AX
	VEXTRACTF128 $1, Y15, X0
	VMOVUPS      X0, (AX)
	MOVQ         w+0(FP), R11
	MOVQ         $4, R10
	JMP          tailq

rowq:
	MOVQ R11, SI
	MOVQ R11, DX
	ADDQ far+8(FP), DX
	XSTART(xp+24(FP))
	JZ   tailq

groupq:
	TESTQ R14, R14
	JZ    fetchedq
	PREFETCH5(SI)
	PREFETCH5(DX)

fetchedq:
	GROUPTERMS(SI, Z0, Z1, Z2, Z3, (R8))
	GROUPTERMS(DX, Z4, Z5, Z6, Z7, (R8)(R9*1))
	ADDQ    $272, SI
	ADDQ    $272, DX
	ADDQ    $256, DI
	ADDQ    $32, BX
	ADDQ    $32, R8
	DECQ    CX
	JNZ     groupq

tailq:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   nextq

oneq:
	TERM1(SI)
	VMOVSS X11, (R8)
	TERM1(DX)
	VMOVSS X11, (R8)(R9*1)
	ADDQ   $34, SI
	ADDQ   $34, DX
	ADDQ   $32, DI
	ADDQ   $4, BX
	ADDQ   $4, R8
	DECQ   CX
	JNZ    oneq

nextq:
	ROWPAIRNEXT(rowBytes+16(FP), rowq)
	VZEROUPPER
	RET

// PREPPAIR copies code pair P of a group of the activation row (blocks
// P and P+4, code bytes at OLO and OHI) to OX(DI) and sets Z to the
// lanes of 128·Σx of both blocks (0x80 as the unsigned operand).
#define PREPPAIR(OLO, OHI, OX, Z) \
	VMOVDQU      OLO(SI), Y8          \
	VINSERTI64X4 $1, OHI(SI), Z8, Z8  \
	VMOVDQU64    Z8, OX(DI)           \
	VPXORD       Z, Z, Z              \
	VPDPBUSD     Z8, Z31, Z

// func prepQ8_0Asm(x unsafe.Pointer, nb int, xp unsafe.Pointer)
//
// Lays out the activation row x of nb blocks as q8Prep describes.
TEXT ·prepQ8_0Asm(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), R13
	MOVQ xp+16(FP), DI
	MOVQ R13, BX
	SHLQ $5, BX
	ADDQ DI, BX
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VMOVDQU64 q8scaleidx<>(SB), Z30
	MOVQ R13, CX
	SHRQ $3, CX
	JZ   preptail

prepgroup:
	PREPPAIR(2, 138, 0, Z0)
	PREPPAIR(36, 172, 64, Z1)
	PREPPAIR(70, 206, 128, Z2)
	PREPPAIR(104, 240, 192, Z3)
	REDUCE(Z0, Z1, Z2, Z3)
	VMOVDQU     Y9, (BX)
	VMOVDQU64   0(SI), Z12
	VPERMT2W    68(SI), Z30, Z12
	VMOVDQU64   136(SI), Z13
	VPERMT2W    204(SI), Z30, Z13
	VPUNPCKLQDQ X13, X12, X12
	VCVTPH2PS   X12, Y12
	VMOVUPS     Y12, (BX)(R13*4)
	ADDQ $272, SI
	ADDQ $256, DI
	ADDQ $32, BX
	DECQ CX
	JNZ  prepgroup

preptail:
	MOVQ R13, CX
	ANDQ $7, CX
	JZ   prepdone

prepone:
	VMOVDQU      2(SI), Y8
	VMOVDQU      Y8, (DI)
	VPXORD       Y11, Y11, Y11
	VPDPBUSD     Y8, Y31, Y11
	HSUM8(Y11, X11, X9)
	VMOVD        X11, (BX)
	MOVWLZX      0(SI), AX
	VMOVD        AX, X12
	VCVTPH2PS    X12, X12
	VMOVSS       X12, (BX)(R13*4)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, BX
	DECQ CX
	JNZ  prepone

prepdone:
	VZEROUPPER
	RET
