//go:build !purego

#include "textflag.h"
#include "q8_amd64.h"
#include "vnni_amd64.h"
#include "multi2_amd64.h"

// AVX-VNNI (VEX, 256-bit) kernels, for CPUs with AVX2 and AVX-VNNI but
// no AVX-512 (or with it unused). Their int32 block sums are exact, so
// they are the AVX2 kernels' sums; the float32 operations are the AVX2
// kernels', in their order.

// KQUAD multiplies code quad q (panel bytes OW, activation bytes OX: 4q)
// into the block sums, Y0-Y3 rows 0-7 and Y4-Y7 rows 8-15 of tokens
// 0-3: VPDPBUSD of the weights as unsigned bytes (w XOR 0x80, layoutBytes)
// and the activation codes broadcast as signed bytes.
#define KQUAD(OW, OX) \
	VMOVDQU      OW(SI), Y8           \
	VMOVDQU      (OW+32)(SI), Y9      \
	VPBROADCASTD OX(DI), Y10          \
	VPBROADCASTD OX(DI)(R10*1), Y11   \
	VPBROADCASTD OX(DI)(R10*2), Y12   \
	VPBROADCASTD OX(DI)(R11*1), Y13   \
	VPDPBUSDY(0, 8, 10)               \
	VPDPBUSDY(4, 9, 10)               \
	VPDPBUSDY(1, 8, 11)               \
	VPDPBUSDY(5, 9, 11)               \
	VPDPBUSDY(2, 8, 12)               \
	VPDPBUSDY(6, 9, 12)               \
	VPDPBUSDY(3, 8, 13)               \
	VPDPBUSDY(7, 9, 13)

// KSTART starts token T's block sums (Y(T), Y(T+4)) at its correction
// −128·Σx (at R14), which the unsigned weights' products carry on top of
// Σw·x.
#define KSTART(T, A, B) \
	VPBROADCASTD (4*T)(R14), A \
	VMOVDQU      A, B

// func mulQ8_0KernelVNNIAsm(codes, d, x unsafe.Pointer, xstride int, xd unsafe.Pointer, xdBlocks, nb, groups int, sums, xc unsafe.Pointer)
//
// mulQ8_0KernelAsm's contract for a panel piece laid out by layoutBytes
// (512 bytes per block) and activation codes as bytes (x, xstride bytes
// apart), with the corrections at xc laid out as xd. Its float32
// operations are mulQ8_0KernelAsm's (FLUSH).
TEXT ·mulQ8_0KernelVNNIAsm(SB), NOSPLIT, $0-80
	PANELARGSBY(5)
	MOVQ xc+72(FP), R14

vgroup:
	MOVQ codes+0(FP), SI
	MOVQ d+8(FP), R8
	MOVQ BX, CX

vblock:
	KSTART(0, Y0, Y4)
	KSTART(1, Y1, Y5)
	KSTART(2, Y2, Y6)
	KSTART(3, Y3, Y7)
	KQUAD(0, 0)
	KQUAD(64, 4)
	KQUAD(128, 8)
	KQUAD(192, 12)
	KQUAD(256, 16)
	KQUAD(320, 20)
	KQUAD(384, 24)
	KQUAD(448, 28)

	VMOVUPS (R8), Y8
	VMOVUPS 32(R8), Y9
	FLUSH(0, Y0, Y4)
	FLUSH(1, Y1, Y5)
	FLUSH(2, Y2, Y6)
	FLUSH(3, Y3, Y7)

	ADDQ $16, R14
	PANELNEXTBY(512, 32)
	JNZ vblock

	ADDQ R12, R14
	PANELNEXTGROUP
	JNZ vgroup

	VZEROUPPER
	RET

// BYTESHALF lays out one block of eight rows (rows 0, 1, 2, 3 at S, +R8,
// +2·R8, +R9 and rows 4-7 at D likewise): their codes, XOR 0x80 (Y15),
// as eight vectors of quads q (dword q of each row in lane r) at OUT+64q,
// and their scales as float32 at DOUT. The 8×8 dword transpose runs
// through Y8..Y11.
#define BYTESHALF(S, D, OUT, DOUT) \
	VMOVDQU     2(S), Y0          \
	VMOVDQU     2(S)(R8*1), Y1    \
	VMOVDQU     2(S)(R8*2), Y2    \
	VMOVDQU     2(S)(R9*1), Y3    \
	VMOVDQU     2(D), Y4          \
	VMOVDQU     2(D)(R8*1), Y5    \
	VMOVDQU     2(D)(R8*2), Y6    \
	VMOVDQU     2(D)(R9*1), Y7    \
	VPUNPCKLDQ  Y1, Y0, Y8        \
	VPUNPCKHDQ  Y1, Y0, Y9        \
	VPUNPCKLDQ  Y3, Y2, Y10       \
	VPUNPCKHDQ  Y3, Y2, Y11       \
	VPUNPCKLQDQ Y10, Y8, Y0       \
	VPUNPCKHQDQ Y10, Y8, Y1       \
	VPUNPCKLQDQ Y11, Y9, Y2       \
	VPUNPCKHQDQ Y11, Y9, Y3       \
	VPUNPCKLDQ  Y5, Y4, Y8        \
	VPUNPCKHDQ  Y5, Y4, Y9        \
	VPUNPCKLDQ  Y7, Y6, Y10       \
	VPUNPCKHDQ  Y7, Y6, Y11       \
	VPUNPCKLQDQ Y10, Y8, Y4       \
	VPUNPCKHQDQ Y10, Y8, Y5       \
	VPUNPCKLQDQ Y11, Y9, Y6       \
	VPUNPCKHQDQ Y11, Y9, Y7       \
	BYTESQUADS(Y0, Y4, OUT)       \
	BYTESQUADS(Y1, Y5, 64+OUT)    \
	BYTESQUADS(Y2, Y6, 128+OUT)   \
	BYTESQUADS(Y3, Y7, 192+OUT)   \
	MOVWLZX     (S), AX           \
	VMOVD       AX, X8            \
	VPINSRW     $1, (S)(R8*1), X8, X8 \
	VPINSRW     $2, (S)(R8*2), X8, X8 \
	VPINSRW     $3, (S)(R9*1), X8, X8 \
	VPINSRW     $4, (D), X8, X8       \
	VPINSRW     $5, (D)(R8*1), X8, X8 \
	VPINSRW     $6, (D)(R8*2), X8, X8 \
	VPINSRW     $7, (D)(R9*1), X8, X8 \
	VCVTPH2PS   X8, Y8            \
	VMOVUPS     Y8, DOUT

// BYTESQUADS stores quads q and q+4 of rows 0-3 (A) and 4-7 (B), each
// [q | q+4], at OUT and OUT+256.
#define BYTESQUADS(A, B, OUT) \
	VPERM2I128 $0x20, B, A, Y8 \
	VPERM2I128 $0x31, B, A, Y9 \
	VPXOR      Y15, Y8, Y8     \
	VPXOR      Y15, Y9, Y9     \
	VMOVDQU    Y8, OUT(DI)     \
	VMOVDQU    Y9, (256+OUT)(DI)

// func layoutBytesAsm(w unsafe.Pointer, rowBytes, nb int, codes, d unsafe.Pointer)
//
// Lays out nb blocks of sixteen rows (rowBytes apart from w) for
// mulQ8_0KernelVNNIAsm: per block, at codes+512k, code quad q (codes
// 4q..4q+3) of rows 0-7 and then of rows 8-15 at 64q, each row's four
// bytes XOR 0x80 in lane r; the scales as float32 at d+64k as panel.Q8_0
// lays them out.
TEXT ·layoutBytesAsm(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rowBytes+8(FP), R8
	MOVQ nb+16(FP), CX
	MOVQ codes+24(FP), DI
	MOVQ d+32(FP), BX
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), DX
	LEAQ (DX)(R8*4), R10
	LEAQ (R10)(R8*4), R11
	MOVL $0x80808080, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

lblock:
	BYTESHALF(SI, DX, 0, (BX))
	BYTESHALF(R10, R11, 32, 32(BX))
	ADDQ $34, SI
	ADDQ $34, DX
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $512, DI
	ADDQ $64, BX
	DECQ CX
	JNZ  lblock

	VZEROUPPER
	RET

// XPROD (multi2_amd64.h) with VPDPBUSD: the activation codes take the
// weights' signs and meet their absolute values as unsigned bytes, the
// four products of each lane added to ACC at once where the AVX2 kernel
// takes VPMADDUBSW, VPMADDWD and VPADDD.
#define XPROD(M, YW, YA, ACC, NA, NACC) \
	VMOVDQU M, Y8         \
	VPSIGNB YW, Y8, Y8    \
	VPDPBUSDY(NACC, NA, 8)

#define XONES

// func dotRows2MultiVNNIAsm(w unsafe.Pointer, far, rowBytes int, xp unsafe.Pointer, nb, tokens int, out, outFar unsafe.Pointer, outStride int, t unsafe.Pointer, tStride, pf int)
//
// dotRows2Multi2Asm with the XPROD above.
TEXT ·dotRows2MultiVNNIAsm(SB), NOSPLIT, $0-96
	ROWS2MULTI

// func prepVNNIAsm(x unsafe.Pointer, nb int, xb, xc unsafe.Pointer)
//
// Copies the codes of the nb blocks of the Q8_0 row x to xb (32 bytes a
// block) and stores each block's −128·Σx at xc (16 bytes apart): the
// VPDPBUSD of 0x80 bytes and the codes, reduced (exact in int32).
TEXT ·prepVNNIAsm(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ xb+16(FP), DI
	MOVQ xc+24(FP), BX
	MOVL $0x80808080, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

pblock:
	VMOVDQU 2(SI), Y0
	VMOVDQU Y0, (DI)
	VPXOR   Y1, Y1, Y1
	VPDPBUSDY(1, 15, 0)
	HSUM8(Y1, X1, X2)
	VPXOR   X3, X3, X3
	VPSUBD  X1, X3, X1
	VMOVD   X1, (BX)
	ADDQ    $34, SI
	ADDQ    $32, DI
	ADDQ    $16, BX
	DECQ    CX
	JNZ     pblock

	VZEROUPPER
	RET
