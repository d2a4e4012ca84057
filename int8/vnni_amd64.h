// AVX-VNNI (VEX) multiply-adds, hand-encoded.
//
// Go's assembler encodes VPDPBUSD only in its EVEX form
// (AVX512_VNNI, prefix 0x62), which fault on the Intel client CPUs that
// have AVX-VNNI but no AVX-512 (Alder Lake to Arrow Lake, Lunar Lake).
// VNNIVEX emits the VEX forms as bytes: C4 [R̄ X̄ B̄ 00010]
// [W0 v̄v̄v̄v̄ L1 pp01] OP ModRM(11 reg rm), that is VEX.256.66.0F38.W0 OP /r
// with register operands only. Operands are register numbers (Y0..Y15
// as 0..15) in Intel order: ACC (ModRM.reg, accumulated into), S1
// (VEX.vvvv) and S2 (ModRM.rm). Verify with GNU objdump, which shows
// them as "{vex} vpdpbusd %ymmS2,%ymmS1,%ymmACC".

#define VNNIVEX(OP, ACC, S1, S2) \
	BYTE $0xC4; \
	BYTE $(0x42 | (((((ACC)>>3)&1)^1)<<7) | (((((S2)>>3)&1)^1)<<5)); \
	BYTE $(((((S1)^15)&15)<<3) | 0x05); \
	BYTE $(OP); \
	BYTE $(0xC0 | (((ACC)&7)<<3) | ((S2)&7))

// VPDPBUSDY adds to the eight int32 lanes of Y(ACC) the sums of the four
// products of unsigned bytes of Y(S1) and signed bytes of Y(S2) in each.
#define VPDPBUSDY(ACC, S1, S2) VNNIVEX(0x50, ACC, S1, S2)
