// Hand-encoded AVX-VNNI instructions, and the dot-product forms the
// VNNI kernels are instantiated with (#include "vnni_amd64.h").
//
// Go's assembler encodes VPDPBUSD only in its EVEX form (AVX512_VNNI),
// which faults on the Intel client CPUs that have AVX-VNNI but no
// AVX-512 (Alder Lake .. Arrow Lake, Lunar Lake). These macros emit the
// VEX form, VEX.256.66.0F38.W0 50 /r:
//
//	C4 [R̄ X̄ B̄ 00010] [0 v̄v̄v̄v̄ 1 01] 50 ModRM SIB disp8
//
// Check any change with GNU objdump -d, which prints {vex} vpdpbusd.

// VPDPBUSD_M(disp, base, index, v, acc) is
//
//	VPDPBUSD disp(base)(index*1), Yv, Yacc
//
// with registers given by number (AX = 0 .. R15 = 15, Y0 = 0 .. Y15 =
// 15) and -128 ≤ disp ≤ 127: for each int32 lane of Yacc, add the four
// products of Yv's unsigned bytes with the memory operand's signed ones.
#define VPDPBUSD_M(disp, base, index, v, acc) \
	BYTE $0xC4 \
	BYTE $((1-((acc)>>3))<<7 | (1-((index)>>3))<<6 | (1-((base)>>3))<<5 | 2) \
	BYTE $((15-(v))<<3 | 5) \
	BYTE $0x50 \
	BYTE $(1<<6 | ((acc)&7)<<3 | 4) \
	BYTE $(((index)&7)<<3 | ((base)&7)) \
	BYTE $(disp)

// VEXDOT and EVEXDOT are the two forms of the VNNI kernels' dot product,
//
//	VPDPBUSD disp(P)(DX*1), V, A
//
// with each register given by name (P, V, A) and by number (p, v, a), so
// that one kernel body takes either: VEXDOT is the AVX-VNNI form above,
// EVEXDOT Go's own EVEX one, which needs AVX512_VNNI and AVX512VL (Intel
// Xeons from Cascade Lake on, whose lack of VBMI and BITALG keeps them
// from the AVX-512 kernels, and which have no AVX-VNNI). The arithmetic
// is the same.
#define VEXDOT(disp, P, p, V, v, A, a) VPDPBUSD_M(disp, p, 2, v, a)
#define EVEXDOT(disp, P, p, V, v, A, a) VPDPBUSD disp(P)(DX*1), V, A
