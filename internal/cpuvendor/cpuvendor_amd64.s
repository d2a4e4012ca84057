#include "textflag.h"

// func intel() bool
//
// CPUID leaf 0 returns the vendor string in BX, DX, CX.
TEXT ·intel(SB), NOSPLIT, $0-1
	XORL AX, AX
	CPUID
	CMPL BX, $0x756e6547 // "Genu"
	JNE  other
	CMPL DX, $0x49656e69 // "ineI"
	JNE  other
	CMPL CX, $0x6c65746e // "ntel"
	JNE  other
	MOVB $1, ret+0(FP)
	RET

other:
	MOVB $0, ret+0(FP)
	RET
