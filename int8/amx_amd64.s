//go:build !purego

#include "textflag.h"

// AMX-INT8 kernel for MulQ8_0 (amx_amd64.go). The Go assembler has no
// AMX mnemonics, so the tile instructions are spelled out as bytes (VEX
// encodings from the Intel SDM), each with the instruction it is.

// LDTILECFG (AX)
#define LDTILECFG_AX BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
// TILERELEASE
#define TILERELEASE BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
// TILEZERO tmm4
#define TILEZERO_T4 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xe0
// TILELOADD tmm0, 2(SI)(CX*1): the weight rows' codes of a block
#define TILELOADD_T0_SI BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x44; BYTE $0x0e; BYTE $0x02
// TILELOADD tmm2, (DI)(DX*1): the tokens' codes of a block
#define TILELOADD_T2_DI BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x17
// TDPBSSD tmm4, tmm0, tmm2
#define TDPBSSD_T4_T0_T2 BYTE $0xc4; BYTE $0xe2; BYTE $0x6b; BYTE $0x5e; BYTE $0xe0
// TILESTORED (BX)(DX*1), tmm4
#define TILESTORED_BX_T4 BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x24; BYTE $0x13

// The second block of a pair: tiles 1, 3 and 5.
// TILEZERO tmm5
#define TILEZERO_T5 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xe8
// TILELOADD tmm1, 36(SI)(CX*1)
#define TILELOADD_T1_SI BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x4c; BYTE $0x0e; BYTE $0x24
// TILELOADD tmm3, 512(DI)(DX*1)
#define TILELOADD_T3_DI BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x9c; BYTE $0x17; BYTE $0x00; BYTE $0x02; BYTE $0x00; BYTE $0x00
// TDPBSSD tmm5, tmm1, tmm3
#define TDPBSSD_T5_T1_T3 BYTE $0xc4; BYTE $0xe2; BYTE $0x63; BYTE $0x5e; BYTE $0xe9
// TILESTORED 1024(BX)(DX*1), tmm5
#define TILESTORED_BX1024_T5 BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0xac; BYTE $0x13; BYTE $0x00; BYTE $0x04; BYTE $0x00; BYTE $0x00

// TERM adds weight row M's block terms for the sixteen tokens to ACC:
// acc = acc + float32(s)·(dw·dx), DotQ8_0's operations (the product of
// the scales is commutative, so dx·dw has the same bits). DX holds the
// tokens' scales, DW(AX) the rows' scales, C(BX) the block sums.
#define TERM(M, ACC, T0, T1, DX, DW, C) \
	VMULPS.BCST (DW+4*M)(AX), DX, T0 \
	VCVTDQ2PS   (C+64*M)(BX), T1     \
	VMULPS      T0, T1, T1           \
	VADDPS      T1, ACC, ACC

// TERMS adds a block's terms to the sixteen rows' sums Z0-Z15.
#define TERMS(DX, DW, C) \
	TERM(0, Z0, Z16, Z17, DX, DW, C)   \
	TERM(1, Z1, Z18, Z19, DX, DW, C)   \
	TERM(2, Z2, Z20, Z21, DX, DW, C)   \
	TERM(3, Z3, Z22, Z23, DX, DW, C)   \
	TERM(4, Z4, Z24, Z25, DX, DW, C)   \
	TERM(5, Z5, Z26, Z27, DX, DW, C)   \
	TERM(6, Z6, Z16, Z17, DX, DW, C)   \
	TERM(7, Z7, Z18, Z19, DX, DW, C)   \
	TERM(8, Z8, Z20, Z21, DX, DW, C)   \
	TERM(9, Z9, Z22, Z23, DX, DW, C)   \
	TERM(10, Z10, Z24, Z25, DX, DW, C) \
	TERM(11, Z11, Z26, Z27, DX, DW, C) \
	TERM(12, Z12, Z16, Z17, DX, DW, C) \
	TERM(13, Z13, Z18, Z19, DX, DW, C) \
	TERM(14, Z14, Z20, Z21, DX, DW, C) \
	TERM(15, Z15, Z22, Z23, DX, DW, C)

// SCALES converts the rows' fp16 scales of the block at OFF(SI) (the
// first word of each row's block) to float32 at DW(AX).
#define SCALES(OFF, DW) \
	KMOVW      K2, K1                     \
	VPGATHERDD OFF(SI)(Z31*1), K1, Z30    \
	VPMOVDW    Z30, Y30                   \
	VCVTPH2PS  Y30, Z30                   \
	VMOVUPS    Z30, DW(AX)

// func amxQ8_0Asm(sc, w unsafe.Pointer, rowBytes int, xa, xad unsafe.Pointer, nb, groups int, out unsafe.Pointer, outStride, tokens int)
TEXT ·amxQ8_0Asm(SB), NOSPLIT, $0-80
	MOVQ sc+0(FP), AX
	MOVQ w+8(FP), R13
	MOVQ rowBytes+16(FP), CX
	MOVQ xa+24(FP), DI
	MOVQ xad+32(FP), R8
	MOVQ nb+40(FP), R9
	MOVQ groups+48(FP), R11
	MOVQ out+56(FP), R12
	LEAQ 384(AX), BX
	MOVQ $64, DX
	VMOVDQU32 64(AX), Z31
	KMOVW     128(AX), K2
	LDTILECFG_AX

group:
	MOVQ   R13, SI
	MOVQ   R9, R10
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

block:
	// Two blocks at a time, in tiles 0, 2, 4 and 1, 3, 5, so that the
	// tile unit works on one while the other's sums are stored.
	CMPQ R10, $2
	JLT  last
	TILELOADD_T0_SI
	TILELOADD_T2_DI
	TILEZERO_T4
	TDPBSSD_T4_T0_T2
	TILELOADD_T1_SI
	TILELOADD_T3_DI
	TILEZERO_T5
	TDPBSSD_T5_T1_T3
	TILESTORED_BX_T4
	TILESTORED_BX1024_T5
	SCALES(0, 192)
	SCALES(34, 256)
	VMOVUPS (R8), Z29
	VMOVUPS 64(R8), Z28
	TERMS(Z29, 192, 0)
	TERMS(Z28, 256, 1024)
	ADDQ $68, SI
	ADDQ $1024, DI
	ADDQ $128, R8
	SUBQ $2, R10
	JMP  block

last:
	TESTQ R10, R10
	JZ    done
	TILELOADD_T0_SI
	TILELOADD_T2_DI
	TILEZERO_T4
	TDPBSSD_T4_T0_T2
	TILESTORED_BX_T4
	SCALES(0, 192)
	VMOVUPS (R8), Z29
	TERMS(Z29, 192, 0)
	ADDQ $34, SI
	ADDQ $512, DI
	ADDQ $64, R8

done:
	// The rows' sums [row][token] into the block sums' buffer, then
	// token by token (a gather down the rows) to out: only the panel's
	// rows (K2) and the group's tokens.
	VMOVUPS Z0, 0(BX)
	VMOVUPS Z1, 64(BX)
	VMOVUPS Z2, 128(BX)
	VMOVUPS Z3, 192(BX)
	VMOVUPS Z4, 256(BX)
	VMOVUPS Z5, 320(BX)
	VMOVUPS Z6, 384(BX)
	VMOVUPS Z7, 448(BX)
	VMOVUPS Z8, 512(BX)
	VMOVUPS Z9, 576(BX)
	VMOVUPS Z10, 640(BX)
	VMOVUPS Z11, 704(BX)
	VMOVUPS Z12, 768(BX)
	VMOVUPS Z13, 832(BX)
	VMOVUPS Z14, 896(BX)
	VMOVUPS Z15, 960(BX)
	VMOVDQU32 2432(AX), Z30
	MOVQ      tokens+72(FP), R10
	CMPQ      R10, $16
	JLE       ntok
	MOVQ      $16, R10

ntok:
	SUBQ $16, tokens+72(FP)
	MOVQ BX, SI

token:
	KXNORW     K1, K1, K1
	VPGATHERDD (SI)(Z30*1), K1, Z28
	VMOVUPS    Z28, K2, (R12)
	ADDQ       $4, SI
	ADDQ       outStride+64(FP), R12
	DECQ       R10
	JNZ        token

	DECQ R11
	JNZ  group

	TILERELEASE
	VZEROUPPER
	RET
