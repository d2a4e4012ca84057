// Expf on eight float32 lanes, for exp_amd64.s and flash_amd64.s
// (#include "exp_amd64.h"; each file gets its own copy of the constants).

// EXPLANES(L2E, HI, LO, P0, P1, P2, P3, P4) sets Y4 to Expf of each lane
// of Y0, with Expf's operations in Expf's order (Y1-Y5 are clobbered);
// the arguments are the constants expLog2e .. expP4, in registers or as
// memory operands. The lanes are first clamped to [expLo, expHi] so that
// every step stays finite; the out-of-range and NaN lanes are patched at
// the end.
#define EXPLANES(L2E, HI, LO, P0, P1, P2, P3, P4) \
	VMAXPS    expLo<>(SB), Y0, Y1            \
	VMINPS    expHi<>(SB), Y1, Y1            \
	VMULPS    L2E, Y1, Y2                    \
	VROUNDPS  $0, Y2, Y2                     \
	VMULPS    HI, Y2, Y3                     \
	VSUBPS    Y3, Y1, Y3                     \
	VMULPS    LO, Y2, Y4                     \
	VSUBPS    Y4, Y3, Y3                     \
	VMULPS    P0, Y3, Y4                     \
	VADDPS    P1, Y4, Y4                     \
	VMULPS    Y3, Y4, Y4                     \
	VADDPS    P2, Y4, Y4                     \
	VMULPS    Y3, Y4, Y4                     \
	VADDPS    P3, Y4, Y4                     \
	VMULPS    Y3, Y4, Y4                     \
	VADDPS    P4, Y4, Y4                     \
	VMULPS    Y3, Y4, Y4                     \
	VADDPS    expP5<>(SB), Y4, Y4            \
	VMULPS    Y3, Y3, Y5                     \
	VMULPS    Y5, Y4, Y4                     \
	VADDPS    Y3, Y4, Y4                     \
	VADDPS    expOne<>(SB), Y4, Y4           \
	VCVTPS2DQ Y2, Y2                         \
	VPADDD    exp127<>(SB), Y2, Y2           \
	VPSLLD    $23, Y2, Y2                    \
	VMULPS    Y2, Y4, Y4                     \
	VCMPPS    $1, expLo<>(SB), Y0, Y5        \
	VANDNPS   Y4, Y5, Y4                     \
	VCMPPS    $14, expHi<>(SB), Y0, Y5       \
	VBLENDVPS Y5, expInf<>(SB), Y4, Y4       \
	VCMPPS    $3, Y0, Y0, Y5                 \
	VBLENDVPS Y5, Y0, Y4, Y4

#define CONST8(name, bits) \
	DATA name+0(SB)/4, bits  \
	DATA name+4(SB)/4, bits  \
	DATA name+8(SB)/4, bits  \
	DATA name+12(SB)/4, bits \
	DATA name+16(SB)/4, bits \
	DATA name+20(SB)/4, bits \
	DATA name+24(SB)/4, bits \
	DATA name+28(SB)/4, bits \
	GLOBL name(SB), RODATA|NOPTR, $32

// The bits of exp.go's constants.
CONST8(expLog2e<>, $0x3fb8aa3b)
CONST8(expLn2Hi<>, $0x3f318000)
CONST8(expLn2Lo<>, $0xb95e8083)
CONST8(expP0<>, $0x39506967)
CONST8(expP1<>, $0x3ab743ce)
CONST8(expP2<>, $0x3c088908)
CONST8(expP3<>, $0x3d2aa9c1)
CONST8(expP4<>, $0x3e2aaaaa)
CONST8(expP5<>, $0x3f000000)
CONST8(expOne<>, $0x3f800000)
CONST8(expHi<>, $0x42b0c0a5)
CONST8(expLo<>, $0xc2aeac50)
CONST8(expInf<>, $0x7f800000)
CONST8(exp127<>, $127)
CONST8(expSign<>, $0x80000000)
