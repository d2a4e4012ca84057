//go:build !purego

#include "textflag.h"

// func q1SignsAsm(x *float32, y *byte, nb int)
// For each of nb Q1_0 blocks (128 floats at x, 18 bytes at y) writes the
// 16 sign bytes at y+2: bit j of byte i is x[8i+j] >= 0 (ordered compare,
// so NaN gives 0 and -0 gives 1).
TEXT ·q1SignsAsm(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   nb+16(FP), CX
	TESTQ  CX, CX
	JZ     done
	VXORPS Y15, Y15, Y15

block:
	MOVQ $0, DX

byte8:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCMPPS    $0x1d, Y15, Y0, Y0
	VCMPPS    $0x1d, Y15, Y1, Y1
	VCMPPS    $0x1d, Y15, Y2, Y2
	VCMPPS    $0x1d, Y15, Y3, Y3
	VMOVMSKPS Y0, AX
	VMOVMSKPS Y1, BX
	VMOVMSKPS Y2, R8
	VMOVMSKPS Y3, R9
	MOVB      AX, 2(DI)(DX*1)
	MOVB      BX, 3(DI)(DX*1)
	MOVB      R8, 4(DI)(DX*1)
	MOVB      R9, 5(DI)(DX*1)
	ADDQ      $128, SI
	ADDQ      $4, DX
	CMPQ      DX, $16
	JLT       byte8

	ADDQ $18, DI
	DECQ CX
	JNZ  block

done:
	VZEROUPPER
	RET

DATA q2one<>+0(SB)/8, $1.0
GLOBL q2one<>(SB), RODATA|NOPTR, $8

// func q2ErrAsm(x *[64]float64, d, sg, h1, h3, m1 float64) float64
//
// q2Search.err for d != 0: lane j of one accumulator sums elements
// i ≡ j (mod 4) in order, then (e0+e1)+(e2+e3); no fused multiply-adds,
// so the bits are those of the Go loop.
TEXT ·q2ErrAsm(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), SI
	VBROADCASTSD d+8(FP), Y8
	VBROADCASTSD sg+16(FP), Y9
	VBROADCASTSD h1+24(FP), Y10
	VBROADCASTSD h3+32(FP), Y11
	VBROADCASTSD m1+40(FP), Y12
	VBROADCASTSD q2one<>(SB), Y13
	VXORPD       Y0, Y0, Y0
	MOVQ         $16, CX

eloop:
	VMOVUPD (SI), Y1
	VMULPD  Y9, Y1, Y2
	VCMPPD  $0x1d, Y10, Y2, Y3
	VCMPPD  $0x1d, Y11, Y2, Y4
	VCMPPD  $0x12, Y12, Y2, Y5
	VANDPD  Y13, Y3, Y3
	VANDPD  Y13, Y4, Y4
	VANDPD  Y13, Y5, Y5
	VADDPD  Y4, Y3, Y3
	VSUBPD  Y5, Y3, Y3
	VMULPD  Y8, Y3, Y3
	VSUBPD  Y3, Y1, Y1
	VMULPD  Y1, Y1, Y1
	VADDPD  Y1, Y0, Y0
	ADDQ    $32, SI
	DECQ    CX
	JNZ     eloop

	VEXTRACTF128 $1, Y0, X1
	VHADDPD      X0, X0, X2
	VHADDPD      X1, X1, X3
	VADDSD       X3, X2, X0
	VZEROUPPER
	MOVSD        X0, ret+48(FP)
	RET

DATA q1abs<>+0(SB)/4, $0x7fffffff
GLOBL q1abs<>(SB), RODATA|NOPTR, $4

// func q1SumsAsm(x *float32, groups int, sums *float32)
//
// For each group of 8 consecutive Q1_0 blocks (8×128 floats) writes the 8
// sums Σ|x| of the blocks, each added in element order in float32 (lane
// k of the accumulator is block k), so the bits are those of the Go
// loop. Element j of the 8 blocks is gathered by an 8×8 transpose of
// elements j..j+7 of each block.
TEXT ·q1SumsAsm(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         groups+8(FP), CX
	MOVQ         sums+16(FP), DI
	TESTQ        CX, CX
	JZ           sdone
	VBROADCASTSS q1abs<>(SB), Y14

sgroup:
	VXORPS Y15, Y15, Y15
	MOVQ   $16, DX

sstep:
	VMOVUPS    0(SI), Y0
	VMOVUPS    1024(SI), Y1
	VMOVUPS    2048(SI), Y2
	VMOVUPS    3072(SI), Y3
	VUNPCKLPS  512(SI), Y0, Y4
	VUNPCKHPS  512(SI), Y0, Y5
	VUNPCKLPS  1536(SI), Y1, Y6
	VUNPCKHPS  1536(SI), Y1, Y7
	VUNPCKLPS  2560(SI), Y2, Y8
	VUNPCKHPS  2560(SI), Y2, Y9
	VUNPCKLPS  3584(SI), Y3, Y10
	VUNPCKHPS  3584(SI), Y3, Y11
	VSHUFPS    $0x44, Y6, Y4, Y0
	VSHUFPS    $0xee, Y6, Y4, Y1
	VSHUFPS    $0x44, Y7, Y5, Y2
	VSHUFPS    $0xee, Y7, Y5, Y3
	VSHUFPS    $0x44, Y10, Y8, Y4
	VSHUFPS    $0xee, Y10, Y8, Y5
	VSHUFPS    $0x44, Y11, Y9, Y6
	VSHUFPS    $0xee, Y11, Y9, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y0
	VPERM2F128 $0x31, Y6, Y2, Y1
	VPERM2F128 $0x31, Y7, Y3, Y2
	VANDPS     Y14, Y8, Y8
	VANDPS     Y14, Y9, Y9
	VANDPS     Y14, Y10, Y10
	VANDPS     Y14, Y11, Y11
	VANDPS     Y14, Y12, Y12
	VANDPS     Y14, Y0, Y0
	VANDPS     Y14, Y1, Y1
	VANDPS     Y14, Y2, Y2
	VADDPS     Y8, Y15, Y15
	VADDPS     Y9, Y15, Y15
	VADDPS     Y10, Y15, Y15
	VADDPS     Y11, Y15, Y15
	VADDPS     Y12, Y15, Y15
	VADDPS     Y0, Y15, Y15
	VADDPS     Y1, Y15, Y15
	VADDPS     Y2, Y15, Y15
	ADDQ       $32, SI
	DECQ       DX
	JNZ        sstep

	VMOVUPS Y15, (DI)
	ADDQ    $32, DI
	ADDQ    $3584, SI // to the next group: 8 blocks of 512 bytes, 512 done
	DECQ    CX
	JNZ     sgroup

sdone:
	VZEROUPPER
	RET

// func q2VertexAsm(bp, sx, sc *float64, steps int, in *[3]uint64)
//
// q2VertexGo four steps at a time: bit k is set where bp[k+1] > bp[k],
// sc[k] > 0, sx[k] >= bp[k]·sc[k] and sx[k] <= bp[k+1]·sc[k]. Steps are
// taken four at a time from 0, so a group's bits never straddle a word;
// the padding after steps has sc = 0 and sets nothing. Bits gather in
// a register and each word is stored once.
TEXT ·q2VertexAsm(SB), NOSPLIT, $0-40
	MOVQ   bp+0(FP), SI
	MOVQ   sx+8(FP), DI
	MOVQ   sc+16(FP), R8
	MOVQ   steps+24(FP), R12
	MOVQ   in+32(FP), R9
	MOVQ   $0, 0(R9)
	MOVQ   $0, 8(R9)
	MOVQ   $0, 16(R9)
	VXORPD Y15, Y15, Y15
	XORQ   DX, DX
	XORQ   R10, R10 // the word being filled

vloop:
	CMPQ      DX, R12
	JGE       vdone
	VMOVUPD   (SI)(DX*8), Y0
	VMOVUPD   8(SI)(DX*8), Y1
	VMOVUPD   (DI)(DX*8), Y2
	VMOVUPD   (R8)(DX*8), Y3
	VCMPPD    $0x1e, Y0, Y1, Y4 // hi > lo
	VCMPPD    $0x1e, Y15, Y3, Y5 // c > 0
	VMULPD    Y3, Y0, Y6
	VMULPD    Y3, Y1, Y7
	VCMPPD    $0x1d, Y6, Y2, Y6 // x >= lo·c
	VCMPPD    $0x12, Y7, Y2, Y7 // x <= hi·c
	VANDPD    Y5, Y4, Y4
	VANDPD    Y7, Y6, Y6
	VANDPD    Y6, Y4, Y4
	VMOVMSKPD Y4, AX
	MOVQ      DX, CX
	ANDQ      $63, CX
	SHLQ      CL, AX
	ORQ       AX, R10
	ADDQ      $4, DX
	TESTQ     $63, DX
	JNZ       vloop
	MOVQ      DX, BX  // a word is full: store it
	SHRQ      $6, BX
	MOVQ      R10, -8(R9)(BX*8)
	XORQ      R10, R10
	JMP       vloop

vdone:
	TESTQ $63, DX // the last, partial word
	JZ    vret
	MOVQ  DX, BX
	SHRQ  $6, BX
	MOVQ  R10, (R9)(BX*8)

vret:
	VZEROUPPER
	RET

// func q2BelowAsm(bp, sx, sc *float64, k, steps int, K float64) int
//
// q2BelowGo four steps at a time: the first j >= k with sc[j] > 0,
// K·sc[j] < sx[j]² and bp[j+1] > bp[j], or steps. The padding after
// steps has sc = 0 and never matches.
TEXT ·q2BelowAsm(SB), NOSPLIT, $0-56
	MOVQ         bp+0(FP), SI
	MOVQ         sx+8(FP), DI
	MOVQ         sc+16(FP), R8
	MOVQ         k+24(FP), DX
	MOVQ         steps+32(FP), R12
	VBROADCASTSD K+40(FP), Y8
	VXORPD       Y15, Y15, Y15

bloop:
	CMPQ      DX, R12
	JGE       bnone
	VMOVUPD   (SI)(DX*8), Y0
	VMOVUPD   8(SI)(DX*8), Y1
	VMOVUPD   (DI)(DX*8), Y2
	VMOVUPD   (R8)(DX*8), Y3
	VCMPPD    $0x1e, Y15, Y3, Y4 // c > 0
	VMULPD    Y3, Y8, Y5
	VMULPD    Y2, Y2, Y6
	VCMPPD    $0x11, Y6, Y5, Y5 // K·c < x²
	VCMPPD    $0x1e, Y0, Y1, Y7 // hi > lo
	VANDPD    Y5, Y4, Y4
	VANDPD    Y7, Y4, Y4
	VMOVMSKPD Y4, AX
	TESTQ     AX, AX
	JNZ       bfound
	ADDQ      $4, DX
	JMP       bloop

bfound:
	BSFQ AX, AX
	ADDQ AX, DX
	MOVQ DX, ret+48(FP)
	VZEROUPPER
	RET

bnone:
	MOVQ R12, ret+48(FP)
	VZEROUPPER
	RET

// func q2SortAsm(x *[64]float32, keys *[64]uint32)
//
// q2SortGo as a rank sort: each key's position is 63 minus the number
// of keys greater than it (signed compares of the keys with the top bit
// flipped), so equal keys all land on the last slot of their run; the
// slots left empty (0xffffffff, never a key of a finite value) take the
// key above them.
TEXT ·q2SortAsm(SB), NOSPLIT, $512-16
	MOVQ     x+0(FP), SI
	MOVQ     keys+8(FP), DI
	VPCMPEQD Y15, Y15, Y15
	VPSLLD   $31, Y15, Y14
	XORQ     CX, CX

skeys:
	VMOVDQU (SI)(CX*1), Y0
	VPSLLD  $1, Y0, Y1
	VPSRLD  $31, Y0, Y2
	VPOR    Y2, Y1, Y1
	VPXOR   Y14, Y1, Y1
	VMOVDQU Y1, (SP)(CX*1)
	VMOVDQU Y15, (DI)(CX*1)
	ADDQ    $32, CX
	CMPQ    CX, $256
	JLT     skeys

	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	XORQ  CX, CX

srank:
	VPBROADCASTD (SP)(CX*4), Y8
	VPCMPGTD     0(SP), Y8, Y9
	VPSUBD       Y9, Y0, Y0
	VPCMPGTD     32(SP), Y8, Y10
	VPSUBD       Y10, Y1, Y1
	VPCMPGTD     64(SP), Y8, Y11
	VPSUBD       Y11, Y2, Y2
	VPCMPGTD     96(SP), Y8, Y12
	VPSUBD       Y12, Y3, Y3
	VPCMPGTD     128(SP), Y8, Y9
	VPSUBD       Y9, Y4, Y4
	VPCMPGTD     160(SP), Y8, Y10
	VPSUBD       Y10, Y5, Y5
	VPCMPGTD     192(SP), Y8, Y11
	VPSUBD       Y11, Y6, Y6
	VPCMPGTD     224(SP), Y8, Y12
	VPSUBD       Y12, Y7, Y7
	INCQ         CX
	CMPQ         CX, $64
	JLT          srank

	VMOVDQU Y0, 256(SP)
	VMOVDQU Y1, 288(SP)
	VMOVDQU Y2, 320(SP)
	VMOVDQU Y3, 352(SP)
	VMOVDQU Y4, 384(SP)
	VMOVDQU Y5, 416(SP)
	VMOVDQU Y6, 448(SP)
	VMOVDQU Y7, 480(SP)
	VZEROUPPER
	XORQ    CX, CX

sscatter:
	MOVL $63, BX
	SUBL 256(SP)(CX*4), BX
	MOVL (SP)(CX*4), DX
	XORL $0x80000000, DX
	MOVL DX, (DI)(BX*4)
	INCQ CX
	CMPQ CX, $64
	JLT  sscatter

	MOVL 252(DI), AX
	MOVQ $62, CX

sfill:
	MOVL    (DI)(CX*4), DX
	CMPL    DX, $-1
	CMOVLEQ AX, DX
	MOVL    DX, (DI)(CX*4)
	MOVL    DX, AX
	DECQ    CX
	JGE     sfill
	RET

DATA q2c33<>+0(SB)/8, $0.0
DATA q2c33<>+8(SB)/8, $0.0
DATA q2c33<>+16(SB)/8, $3.0
DATA q2c33<>+24(SB)/8, $3.0
GLOBL q2c33<>(SB), RODATA|NOPTR, $32

DATA q2c11<>+0(SB)/8, $0.0
DATA q2c11<>+8(SB)/8, $0.0
DATA q2c11<>+16(SB)/8, $1.0
DATA q2c11<>+24(SB)/8, $1.0
GLOBL q2c11<>(SB), RODATA|NOPTR, $32

DATA q2flip<>+0(SB)/8, $-1
DATA q2flip<>+8(SB)/8, $0
DATA q2flip<>+16(SB)/8, $-1
DATA q2flip<>+24(SB)/8, $0
GLOBL q2flip<>(SB), RODATA|NOPTR, $32

// func q2SweepAsm(k3, k2 *uint64, ax *float64, gm *uint64, steps int, bp, sx *float64)
//
// q2SweepGo with the four sums in one vector (lanes: Σc·y for p = 0, 1,
// then Σc² for p = 0, 1), each lane the same serial sum; sc follows sx
// (133 float64 per sign). A 2|x|/3 breakpoint's deltas are
// (|x|, |x|, 3, 3) masked to the sign with y > 0 and a 2|x| one's are
// (|x|, |x|, 1, 1); they are built from the lists as the merge goes,
// off the critical path (key loads, compare, conditional advance of one
// list), so a step costs about 7-8 cycles, its ~27 instructions
// included; precomputed 48-byte events were no faster and made the fill
// dearer.
TEXT ·q2SweepAsm(SB), NOSPLIT, $0-56
	MOVQ    k3+0(FP), SI
	MOVQ    k2+8(FP), DI
	MOVQ    ax+16(FP), R8
	MOVQ    gm+24(FP), R9
	MOVQ    bp+40(FP), R12
	MOVQ    sx+48(FP), R13
	VMOVUPD q2c33<>(SB), Y14
	VMOVUPD q2c11<>(SB), Y12
	VMOVUPD q2flip<>(SB), Y13
	VXORPD  Y0, Y0, Y0
	MOVQ    steps+32(FP), CX
	SHRQ    $1, CX
	XORQ    BX, BX

wstart:
	CMPQ         BX, CX
	JGE          wmerge
	VBROADCASTSD (R8)(BX*8), Y1
	VBLENDPD     $0x0c, Y14, Y1, Y2
	VBROADCASTSD (R9)(BX*8), Y3
	VXORPD       Y13, Y3, Y3
	VANDPD       Y3, Y2, Y2
	VBLENDPD     $0x0c, Y12, Y1, Y1
	VADDPD       Y1, Y2, Y1
	VADDPD       Y1, Y0, Y0
	INCQ         BX
	JMP          wstart

wmerge:
	XORQ BX, BX   // position in k3
	XORQ R10, R10 // position in k2
	XORQ DX, DX   // step

wloop:
	MOVQ         (SI)(BX*8), AX
	MOVQ         (DI)(R10*8), CX
	VBROADCASTSD (R8)(BX*8), Y1
	VBLENDPD     $0x0c, Y14, Y1, Y1
	VBROADCASTSD (R9)(BX*8), Y2
	VXORPD       Y13, Y2, Y2
	VANDPD       Y2, Y1, Y1 // the 2|x|/3 deltas
	VBROADCASTSD (R8)(R10*8), Y3
	VBLENDPD     $0x0c, Y12, Y3, Y3 // the 2|x| deltas
	CMPQ         AX, CX
	CMOVQCS      AX, CX
	LEAQ         1(R10), AX
	CMOVQCC      AX, R10
	SBBQ         AX, AX
	ADCQ         $0, BX
	MOVQ         CX, 8(R12)(DX*8)
	VMOVSD       X0, (R13)(DX*8)
	VMOVHPD      X0, 1064(R13)(DX*8)
	VEXTRACTF128 $1, Y0, X6
	VMOVSD       X6, 2128(R13)(DX*8)
	VMOVHPD      X6, 3192(R13)(DX*8)
	VMOVQ        AX, X4
	VPBROADCASTQ X4, Y4
	VBLENDVPD    Y4, Y1, Y3, Y5
	VSUBPD       Y5, Y0, Y0
	INCQ         DX
	CMPQ         DX, steps+32(FP)
	JLT          wloop

	VZEROUPPER
	RET

DATA q2twothirds<>+0(SB)/8, $0.6666666666666666
GLOBL q2twothirds<>(SB), RODATA|NOPTR, $8

DATA q2one32<>+0(SB)/4, $1
GLOBL q2one32<>(SB), RODATA|NOPTR, $4

// func q2FillAsm(keys *uint32, n int, k3, k2 *uint64, ax *float64, gm *uint64)
//
// q2FillGo without the sentinel, four keys at a time: |x| is the key
// shifted down one, widened exactly; 2|x| and 2|x|/3 as the Go code
// rounds them; the mask is minus the key's low bit.
TEXT ·q2FillAsm(SB), NOSPLIT, $0-48
	MOVQ         keys+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVQ         k3+16(FP), R8
	MOVQ         k2+24(FP), R9
	MOVQ         ax+32(FP), R10
	MOVQ         gm+40(FP), R11
	VBROADCASTSD q2twothirds<>(SB), Y14
	VPBROADCASTD q2one32<>(SB), X13
	VPXOR        Y15, Y15, Y15
	XORQ         DX, DX

floop:
	CMPQ      DX, CX
	JGE       fdone
	VMOVDQU   (SI)(DX*4), X0
	VPSRLD    $1, X0, X1
	VCVTPS2PD X1, Y1
	VMOVUPD   Y1, (R10)(DX*8)
	VADDPD    Y1, Y1, Y2
	VMOVUPD   Y2, (R9)(DX*8)
	VMULPD    Y14, Y1, Y3
	VMOVUPD   Y3, (R8)(DX*8)
	VPAND     X13, X0, X4
	VPMOVZXDQ X4, Y4
	VPSUBQ    Y4, Y15, Y4
	VMOVDQU   Y4, (R11)(DX*8)
	ADDQ      $4, DX
	JMP       floop

fdone:
	VZEROUPPER
	RET

// func q2CodesAsm(x *[64]float32, neg uint32, h1, h3, m1 float32, y *[16]byte)
//
// q2CodesGo in float32, eight elements at a time: the thresholds (±d/2,
// 3d/2 of an fp16 d, or infinities) are exact in float32 and negation is
// exact, so the compares decide as the float64 ones do for finite x.
// Code c is [y > m1] + [y >= h1] + [y >= h3]; its low bits (c odd) and
// high bits (c >= 2) are spread to even and odd bit positions.
TEXT ·q2CodesAsm(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	VBROADCASTSS neg+8(FP), Y13
	VBROADCASTSS h1+12(FP), Y10
	VBROADCASTSS h3+16(FP), Y11
	VBROADCASTSS m1+20(FP), Y12
	MOVQ         y+24(FP), DI
	XORQ         DX, DX

cloop:
	VMOVUPS   (SI)(DX*8), Y0 // elements 2·DX to 2·DX+7
	VXORPS    Y13, Y0, Y0
	VCMPPS    $0x1d, Y10, Y0, Y1 // y >= h1
	VCMPPS    $0x1d, Y11, Y0, Y2 // y >= h3
	VCMPPS    $0x1e, Y12, Y0, Y3 // y > m1
	VMOVMSKPS Y1, AX
	VMOVMSKPS Y2, BX
	VMOVMSKPS Y3, CX
	NOTL      AX
	ANDL      AX, CX
	NOTL      AX
	ORL       BX, CX // c odd: (y > m1 and y < h1) or y >= h3
	MOVL      CX, BX
	SHLL      $4, BX
	ORL       BX, CX
	ANDL      $0x0f0f, CX
	MOVL      CX, BX
	SHLL      $2, BX
	ORL       BX, CX
	ANDL      $0x3333, CX
	MOVL      CX, BX
	SHLL      $1, BX
	ORL       BX, CX
	ANDL      $0x5555, CX
	MOVL      AX, BX
	SHLL      $4, BX
	ORL       BX, AX
	ANDL      $0x0f0f, AX
	MOVL      AX, BX
	SHLL      $2, BX
	ORL       BX, AX
	ANDL      $0x3333, AX
	MOVL      AX, BX
	SHLL      $1, BX
	ORL       BX, AX
	ANDL      $0x5555, AX
	SHLL      $1, AX
	ORL       AX, CX
	MOVW      CX, (DI)
	ADDQ      $2, DI
	ADDQ      $4, DX
	CMPQ      DX, $32
	JLT       cloop

	VZEROUPPER
	RET
