//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"

// BLOCKS4 reduces the int32 partial sums of four blocks (Y8..Y11) to
// [s0 s1 s2 s3], scales them by dw·dx of each block (weight scales at W,
// activation scales at DI; exact in float32) and adds them to the sum in
// S in order: sum += t0; … sum += t3.
#define BLOCKS4(W, S) \
	VPHADDD      Y9, Y8, Y8          \
	VPHADDD      Y11, Y10, Y10       \
	VPHADDD      Y10, Y8, Y8         \
	VEXTRACTI128 $1, Y8, X9          \
	VPADDD       X9, X8, X8          \
	VCVTDQ2PS    X8, X8              \
	MOVWLZX   0(W), AX               \
	VMOVD     AX, X12                \
	VPINSRW   $1, 34(W), X12, X12    \
	VPINSRW   $2, 68(W), X12, X12    \
	VPINSRW   $3, 102(W), X12, X12   \
	MOVWLZX   0(DI), AX              \
	VMOVD     AX, X13                \
	VPINSRW   $1, 34(DI), X13, X13   \
	VPINSRW   $2, 68(DI), X13, X13   \
	VPINSRW   $3, 102(DI), X13, X13  \
	VCVTPH2PS X12, X12               \
	VCVTPH2PS X13, X13               \
	VMULPS    X13, X12, X12          \
	VMULPS    X12, X8, X8            \
	VADDSS    X8, S, S               \
	VMOVSHDUP X8, X9                 \
	VADDSS    X9, S, S               \
	VMOVHLPS  X8, X8, X9             \
	VADDSS    X9, S, S               \
	VPSHUFD   $3, X8, X9             \
	VADDSS    X9, S, S

// WIDE sets D to the eight int32 partial sums of the block at byte O of
// the rows at SI and DI: codes widened to 16 bits, pairs multiplied and
// summed (VPMADDWD).
#define WIDE(O, D) \
	VPMOVSXBW O(SI), Y0       \
	VPMOVSXBW (O+16)(SI), Y1  \
	VPMOVSXBW O(DI), Y2       \
	VPMOVSXBW (O+16)(DI), Y3  \
	VPMADDWD  Y2, Y0, Y0      \
	VPMADDWD  Y3, Y1, Y1      \
	VPADDD    Y1, Y0, D

// SYM sets D to the eight int32 partial sums of the block at byte O of
// the rows at W and DI for codes of x in [−127, 127]: |w|·(x·sign(w))
// with VPMADDUBSW (byte pairs summed to int16 cannot saturate: at most
// 2·128·127), then VPMADDWD by ones (Y15).
#define SYM(O, W, D) \
	VMOVDQU    O(W), Y0        \
	VMOVDQU    O(DI), Y1       \
	VPSIGNB    Y0, Y1, Y1      \
	VPABSB     Y0, Y0          \
	VPMADDUBSW Y1, Y0, Y0      \
	VPMADDWD   Y15, Y0, D

// SYMBLOCKS4 adds the terms of the four blocks of the rows at W and DI
// to the sum in S, as BLOCKS4 does, their int32 sums formed by SYM.
#define SYMBLOCKS4(W, S) \
	SYM(2, W, Y8)    \
	SYM(36, W, Y9)   \
	SYM(70, W, Y10)  \
	SYM(104, W, Y11) \
	BLOCKS4(W, S)

// func dotQ8_0Asm(w, x unsafe.Pointer, nb int) float32
//
// Same float32 operations, in the same order, as dotQ8_0Go. Four blocks at
// a time: their int32 sums are exact whatever the reduction order, so they
// are formed with a VPHADDD tree; the four terms s·(dw·dx) are then added
// to the running sum one by one, in block order.
TEXT ·dotQ8_0Asm(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS X7, X7, X7 // sum

	CMPQ CX, $4
	JB   tail

loop4:
	// Weight rows stream from memory when decoding: fetching 2 KiB ahead
	// nearly doubles the streaming speed (the hardware prefetcher alone
	// leaves the loads waiting).
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	WIDE(2, Y8)
	WIDE(36, Y9)
	WIDE(70, Y10)
	WIDE(104, Y11)

	BLOCKS4(SI, X7)

	ADDQ $136, SI
	ADDQ $136, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JAE  loop4

tail:
	TESTQ CX, CX
	JE    done

loop1:
	WIDE(2, Y8)
	BLOCK1

	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  loop1

done:
	VZEROUPPER
	VMOVSS X7, ret+24(FP)
	RET

// func dotQ8_0SymAsm(w, x unsafe.Pointer, nb int) float32
//
// dotQ8_0Asm for activation codes in [−127, 127]: the same exact int32
// block sums from fewer instructions (SYM), and dotQ8_0Asm's float32
// operations.
TEXT ·dotQ8_0SymAsm(SB), NOSPLIT, $0-28
	MOVQ    w+0(FP), SI
	MOVQ    x+8(FP), DI
	MOVQ    nb+16(FP), CX
	VXORPS  X7, X7, X7 // sum
	VMOVDQU q8ones16<>(SB), Y15

	CMPQ CX, $4
	JB   symtail

symloop4:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	SYMBLOCKS4(SI, X7)

	ADDQ $136, SI
	ADDQ $136, DI
	SUBQ $4, CX
	CMPQ CX, $4
	JAE  symloop4

symtail:
	TESTQ CX, CX
	JE    symdone

symloop1:
	SYM(2, SI, Y8)
	BLOCK1

	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  symloop1

symdone:
	VZEROUPPER
	VMOVSS X7, ret+24(FP)
	RET

// ROWSYM sets D to the eight int32 partial sums of the block whose
// weight codes are at M, for the activation codes in Y14 (in
// [−127, 127]), as SYM does.
#define ROWSYM(M, D) \
	VPSIGNB    M, Y14, Y13 \
	VPABSB     M, D        \
	VPMADDUBSW Y13, D, D   \
	VPMADDWD   Y15, D, D

// PAIRTERMS4 sets Y1 to the terms float32(s)·(dw·dx) of four blocks of
// the row at SI (low half) and of the row at DX (high half), the
// activation codes at DI and their scales as float32 at BX: the eight
// block sums by unpacking and adding (exact in int32 in any order); the
// eight weight scales gathered in AX (each pair of fp16 scales 34 bytes
// apart from one 32-bit load and one 16-bit load into its low half) and
// converted at once. On the EPYC (Zen 5), against a VPHADDD tree and
// scales broadcast and blended into a vector, it read the mapped 700M
// file 2-7% faster per CPU second at two threads and 4% at one
// (interleaved, load 4-5), and 2% faster in cache.
#define PAIRTERMS4 \
	VMOVDQU        2(DI), Y14        \
	ROWSYM(2(SI), Y0)                \
	ROWSYM(2(DX), Y4)                \
	VMOVDQU        36(DI), Y14       \
	ROWSYM(36(SI), Y1)               \
	ROWSYM(36(DX), Y5)               \
	VMOVDQU        70(DI), Y14       \
	ROWSYM(70(SI), Y2)               \
	ROWSYM(70(DX), Y6)               \
	VMOVDQU        104(DI), Y14      \
	ROWSYM(104(SI), Y3)              \
	ROWSYM(104(DX), Y7)              \
	VPUNPCKLDQ     Y1, Y0, Y8        \
	VPUNPCKHDQ     Y1, Y0, Y9        \
	VPADDD         Y9, Y8, Y0        \
	VPUNPCKLDQ     Y3, Y2, Y8        \
	VPUNPCKHDQ     Y3, Y2, Y9        \
	VPADDD         Y9, Y8, Y2        \
	VPUNPCKLDQ     Y5, Y4, Y8        \
	VPUNPCKHDQ     Y5, Y4, Y9        \
	VPADDD         Y9, Y8, Y4        \
	VPUNPCKLDQ     Y7, Y6, Y8        \
	VPUNPCKHDQ     Y7, Y6, Y9        \
	VPADDD         Y9, Y8, Y6        \
	VPUNPCKLQDQ    Y2, Y0, Y8        \
	VPUNPCKHQDQ    Y2, Y0, Y9        \
	VPADDD         Y9, Y8, Y0        \
	VPUNPCKLQDQ    Y6, Y4, Y8        \
	VPUNPCKHQDQ    Y6, Y4, Y9        \
	VPADDD         Y9, Y8, Y4        \
	VPERM2I128     $0x20, Y4, Y0, Y1 \
	VPERM2I128     $0x31, Y4, Y0, Y2 \
	VPADDD         Y2, Y1, Y1        \
	VCVTDQ2PS      Y1, Y1            \
	MOVL           32(SI), AX        \
	MOVW           (SI), AX          \
	VMOVD          AX, X8            \
	MOVL           100(SI), AX       \
	MOVW           68(SI), AX        \
	VPINSRD        $1, AX, X8, X8    \
	MOVL           32(DX), AX        \
	MOVW           (DX), AX          \
	VPINSRD        $2, AX, X8, X8    \
	MOVL           100(DX), AX       \
	MOVW           68(DX), AX        \
	VPINSRD        $3, AX, X8, X8    \
	VCVTPH2PS      X8, Y8            \
	VBROADCASTF128 (BX), Y9          \
	VMULPS         Y9, Y8, Y8        \
	VMULPS         Y8, Y1, Y1

// TERM1SYM sets X0 to the term of the one block at BASE (the tail of a
// row), the activation codes in Y14 and their scale at BX.
#define TERM1SYM(BASE) \
	ROWSYM(2(BASE), Y0)    \
	HSUM8(Y0, X0, X9)      \
	VCVTDQ2PS X0, X0       \
	VMOVD     0(BASE), X8  \
	VCVTPH2PS X8, X8       \
	VMULSS    (BX), X8, X8 \
	VMULSS    X8, X0, X0

// PREFETCH3 prefetches the three lines from R14 bytes past the four
// blocks at R (136 bytes).
#define PREFETCH3(R) \
	PREFETCHT0 (R)(R14*1)    \
	PREFETCHT0 64(R)(R14*1)  \
	PREFETCHT0 128(R)(R14*1)


// SUMSTEP2 is one iteration of SUMTERMS with its sum in Y12 and Y15
// among its temporaries (the group loop's ones, to be reloaded), rows
// 0, 1, 2 and 4 at AX (+0, R12, 2·R12, 4·R12), rows 3, 5 and 7 at R11
// (+0, 2·R12, 4·R12), row 6 at R10.
#define SUMSTEP2 \
	VMOVUPS    (AX), Y0 \
	VMOVUPS    (AX)(R12*1), Y1 \
	VMOVUPS    (AX)(R12*2), Y2 \
	VMOVUPS    (R11), Y3 \
	VMOVUPS    (AX)(R12*4), Y4 \
	VMOVUPS    (R11)(R12*2), Y5 \
	VMOVUPS    (R10), Y6 \
	VMOVUPS    (R11)(R12*4), Y7 \
	TRANSPOSEADD(Y12, Y15)

// STEPIF does, while steps are left (left-16(SP)), the next SUMSTEP2 of
// the previous call's terms (at p-8(SP)) and reloads the ones in Y15.
#define STEPIF(DONE) \
	MOVQ     left-16(SP), AX      \
	TESTQ    AX, AX               \
	JZ       DONE                 \
	DECQ     AX                   \
	MOVQ     AX, left-16(SP)      \
	MOVQ     p-8(SP), AX          \
	LEAQ     (R12)(R12*2), R10    \
	LEAQ     (AX)(R10*1), R11     \
	LEAQ     (R11)(R10*1), R10    \
	SUMSTEP2                      \
	ADDQ     $32, AX              \
	MOVQ     AX, p-8(SP)          \
	VMOVDQU  q8ones16<>(SB), Y15  \
DONE:

// func dotRows2SymAsm(w unsafe.Pointer, far, rowBytes int, x, xs unsafe.Pointer, nb int, t unsafe.Pointer, tStride, pf int, prev, outPrev, outFarPrev unsafe.Pointer)
//
// dotQ8_0SymAsm for four rows at w (rowBytes apart) and four at w+far,
// read as dot512_amd64.s's dotRows2Q8_0Asm reads them: row i and row i
// of the far set side by side, four blocks at a time (two streams far
// apart), each with the lines pf bytes ahead prefetched (pf 0: none).
// Their terms go to rows i and 4+i of t (rows tStride bytes apart). xs
// holds the activation scales as float32 (exact). As dotRows2Q8_0Asm,
// it leaves their sums to the next call or sumTermsPairAsm and, unless
// prev is nil, forms those of the call before (SUMTERMS' steps, to
// outPrev and outFarPrev) during its first row, one after each of its
// first ⌈nb/8⌉ groups.
TEXT ·dotRows2SymAsm(SB), NOSPLIT, $16-96
	MOVQ    w+0(FP), R11
	MOVQ    nb+40(FP), R13
	MOVQ    t+48(FP), R8
	MOVQ    tStride+56(FP), R12
	MOVQ    pf+64(FP), R14
	LEAQ    (R12*4), R9 // from row i of t to row 4+i
	MOVQ    $4, R10
	VMOVDQU q8ones16<>(SB), Y15
	MOVQ    prev+72(FP), AX
	TESTQ   AX, AX
	JZ      pair

	// Row 0, with the steps of the sums of the call before.
	MOVQ   AX, p-8(SP)
	MOVQ   R13, AX
	ADDQ   $7, AX
	SHRQ   $3, AX
	MOVQ   AX, left-16(SP)
	VXORPS Y12, Y12, Y12
	MOVQ   R11, SI
	MOVQ   R11, DX
	ADDQ   far+8(FP), DX
	MOVQ   x+24(FP), DI
	MOVQ   xs+32(FP), BX
	MOVQ   R13, CX
	SHRQ   $2, CX
	JZ     steps0

group0:
	TESTQ R14, R14
	JZ    fetched0
	PREFETCH3(SI)
	PREFETCH3(DX)

fetched0:
	PAIRTERMS4
	VMOVUPS      X1, (R8)
	VEXTRACTF128 $1, Y1, (R8)(R9*1)
	STEPIF(stepped0)
	ADDQ         $136, SI
	ADDQ         $136, DX
	ADDQ         $136, DI
	ADDQ         $16, BX
	ADDQ         $16, R8
	DECQ         CX
	JNZ          group0

steps0:
	STEPIF(stepped1)
	MOVQ  left-16(SP), AX
	TESTQ AX, AX
	JNZ   steps0

	// The sums of the call before, to its products.
	MOVQ         outPrev+80(FP), AX
	VMOVUPS      X12, (AX)
	MOVQ         outFarPrev+88(FP), AX
	VEXTRACTF128 $1, Y12, X0
	VMOVUPS      X0, (AX)
	MOVQ         w+0(FP), R11
	MOVQ         $4, R10
	JMP          pairtail

pair:
	MOVQ R11, SI
	MOVQ R11, DX
	ADDQ far+8(FP), DX
	MOVQ x+24(FP), DI
	MOVQ xs+32(FP), BX
	MOVQ R13, CX
	SHRQ $2, CX
	JZ   pairtail

pairgroup:
	TESTQ R14, R14
	JZ    pairfetched
	PREFETCH3(SI)
	PREFETCH3(DX)

pairfetched:
	PAIRTERMS4
	VMOVUPS      X1, (R8)
	VEXTRACTF128 $1, Y1, (R8)(R9*1)
	ADDQ         $136, SI
	ADDQ         $136, DX
	ADDQ         $136, DI
	ADDQ         $16, BX
	ADDQ         $16, R8
	DECQ         CX
	JNZ          pairgroup

pairtail:
	MOVQ R13, CX
	ANDQ $3, CX
	JZ   pairnext

pairone:
	VMOVDQU 2(DI), Y14
	TERM1SYM(SI)
	VMOVSS  X0, (R8)
	TERM1SYM(DX)
	VMOVSS  X0, (R8)(R9*1)
	ADDQ    $34, SI
	ADDQ    $34, DX
	ADDQ    $34, DI
	ADDQ    $4, BX
	ADDQ    $4, R8
	DECQ    CX
	JNZ     pairone

pairnext:
	ROWPAIRNEXT(rowBytes+16(FP), pair)
	VZEROUPPER
	RET

// func sumTermsPairAsm(t unsafe.Pointer, tStride, nb int, out, outFar unsafe.Pointer)
//
// The sums of the terms at t that dotRows2Q8_0Asm and dotRows2SymAsm
// leave to the next call (SUMSTOREPAIR), for the last call.
TEXT ·sumTermsPairAsm(SB), NOSPLIT, $0-40
	MOVQ tStride+8(FP), R12
	MOVQ nb+16(FP), R13
	SUMSTOREPAIR(t+0(FP), out+24(FP), outFar+32(FP))

DATA q8ones16<>+0(SB)/8, $0x0001000100010001
DATA q8ones16<>+8(SB)/8, $0x0001000100010001
DATA q8ones16<>+16(SB)/8, $0x0001000100010001
DATA q8ones16<>+24(SB)/8, $0x0001000100010001
GLOBL q8ones16<>(SB), RODATA|NOPTR, $32

DATA q8perm<>+0(SB)/8, $0x0000000400000000
DATA q8perm<>+8(SB)/8, $0x0000000500000001
DATA q8perm<>+16(SB)/8, $0x0000000600000002
DATA q8perm<>+24(SB)/8, $0x0000000700000003
GLOBL q8perm<>(SB), RODATA|NOPTR, $32

DATA q8const<>+0(SB)/4, $0x7fffffff  // |x| mask
DATA q8const<>+4(SB)/4, $0x7f800000  // +Inf bits
DATA q8const<>+8(SB)/4, $0x3f000000  // 0.5
DATA q8const<>+12(SB)/4, $0x3f800000 // 1.0
DATA q8const<>+16(SB)/4, $0x80000000 // sign bit
DATA q8const<>+20(SB)/4, $0x42fe0000 // 127.0
GLOBL q8const<>(SB), RODATA|NOPTR, $24

// Q8ROUND turns t (in T) into roundf(t) as int32 in R: trunc(t), plus
// ±1 when the dropped fraction is at least one half (exact in float32).
#define Q8ROUND(T, R) \
	VMULPS    Y9, T, T       \
	VROUNDPS  $3, T, R       \
	VSUBPS    R, T, Y8       \
	VANDPS    Y15, Y8, Y8    \
	VCMPPS    $13, Y13, Y8, Y8 \
	VANDPS    Y11, T, T      \
	VORPS     Y12, T, T      \
	VANDPS    Y8, T, T       \
	VADDPS    T, R, R        \
	VCVTPS2DQ R, R

// func quantizeQ8_0Asm(x, y unsafe.Pointer, nb int) int
//
// quantizeBlockQ8_0 for up to nb blocks: the same float32 max, division
// and products, roundf, and fp16 rounding (VCVTPS2PH, nearest-even).
// Returns the number of blocks encoded; it stops before a block holding
// a NaN or ±Inf.
TEXT ·quantizeQ8_0Asm(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         y+8(FP), DI
	MOVQ         nb+16(FP), CX
	XORQ         AX, AX
	VBROADCASTSS q8const<>+0(SB), Y15
	VBROADCASTSS q8const<>+4(SB), Y14
	VBROADCASTSS q8const<>+8(SB), Y13
	VBROADCASTSS q8const<>+12(SB), Y12
	VBROADCASTSS q8const<>+16(SB), Y11
	VMOVDQU      q8perm<>(SB), Y10

qloop:
	CMPQ AX, CX
	JAE  qdone

	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS  Y15, Y0, Y4
	VANDPS  Y15, Y1, Y5
	VANDPS  Y15, Y2, Y6
	VANDPS  Y15, Y3, Y7

	// All finite: |x| bits below those of +Inf.
	VPCMPGTD  Y4, Y14, Y8
	VPCMPGTD  Y5, Y14, Y9
	VPAND     Y9, Y8, Y8
	VPCMPGTD  Y6, Y14, Y9
	VPAND     Y9, Y8, Y8
	VPCMPGTD  Y7, Y14, Y9
	VPAND     Y9, Y8, Y8
	VMOVMSKPS Y8, BX
	CMPL      BX, $0xff
	JNE       qdone

	// amax, d = amax/127, stored as fp16.
	VMAXPS       Y5, Y4, Y4
	VMAXPS       Y7, Y6, Y6
	VMAXPS       Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0x4e, X4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0xb1, X4, X5
	VMAXPS       X5, X4, X4
	VDIVSS       q8const<>+20(SB), X4, X4
	VCVTPS2PH    $0, X4, X5
	VMOVD        X5, BX
	MOVW         BX, 0(DI)

	// id = d != 0 ? 1/d : 0
	VDIVSS       X4, X12, X9
	VXORPS       X5, X5, X5
	VCMPSS       $4, X5, X4, X5
	VANDPS       X5, X9, X9
	VBROADCASTSS X9, Y9

	Q8ROUND(Y0, Y4)
	Q8ROUND(Y1, Y5)
	Q8ROUND(Y2, Y6)
	Q8ROUND(Y3, Y7)
	VPACKSSDW Y5, Y4, Y4
	VPACKSSDW Y7, Y6, Y6
	VPACKSSWB Y6, Y4, Y4
	VPERMD    Y4, Y10, Y4
	VMOVDQU   Y4, 2(DI)

	ADDQ $128, SI
	ADDQ $34, DI
	INCQ AX
	JMP  qloop

qdone:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
