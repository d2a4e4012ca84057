// AVX-512 pieces the one-token (dot512_amd64.s) and the 2-3-token
// (multi512_amd64.s) decoding kernels share.

// REDUCE sums the eight int32 lanes of each block half in A..D ([block
// p | block p+4] for p = 0..3) to the eight block sums in order in Y9.
#define REDUCE(A, B, C, D) \
	VPUNPCKLQDQ   B, A, Z8        \
	VPUNPCKHQDQ   B, A, Z9        \
	VPADDD        Z9, Z8, Z8      \
	VPUNPCKLQDQ   D, C, Z10       \
	VPUNPCKHQDQ   D, C, Z11       \
	VPADDD        Z11, Z10, Z10   \
	VSHUFPS       $0x88, Z10, Z8, Z9  \
	VSHUFPS       $0xdd, Z10, Z8, Z11 \
	VPADDD        Z11, Z9, Z9     \
	VSHUFI64X2    $0xd8, Z9, Z9, Z9 \
	VEXTRACTI64X4 $1, Z9, Y10     \
	VPADDD        Y10, Y9, Y9

// ROWSETUP loads the kernels' constants: Z31 the bytes 0x80, Z30 the
// scale indices.
#define ROWSETUP \
	MOVL         $0x80808080, AX  \
	VPBROADCASTD AX, Z31          \
	VMOVDQU64    q8scaleidx<>(SB), Z30

// Word indices of the four block scales (at bytes 0, 34, 68, 102) in the
// two 64-byte loads at 0 and 68: table words 0 and 17 of each.
DATA q8scaleidx<>+0(SB)/8, $0x0031002000110000
DATA q8scaleidx<>+8(SB)/8, $0
DATA q8scaleidx<>+16(SB)/8, $0
DATA q8scaleidx<>+24(SB)/8, $0
DATA q8scaleidx<>+32(SB)/8, $0
DATA q8scaleidx<>+40(SB)/8, $0
DATA q8scaleidx<>+48(SB)/8, $0
DATA q8scaleidx<>+56(SB)/8, $0
GLOBL q8scaleidx<>(SB), RODATA|NOPTR, $64
