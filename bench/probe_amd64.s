//go:build !purego

#include "textflag.h"

// The memory-read probe's loops: XOR every 64-bit word of `streams`
// adjacent regions of n bytes each (n a multiple of 256), reading the
// regions side by side so that several hardware prefetch streams run at
// once, and, when ahead > 0, PREFETCHT0 every cache line ahead bytes
// before it is read (on the Xeon a plain read with software prefetch ran
// faster than the hardware prefetchers alone; the probe times both and
// keeps the faster, ReadCeiling). The XOR keeps the loads live and lets
// the test compare the result with the Go loop; its order does not
// matter. A prefetch past the regions' end is harmless: it never faults.

// 256 bytes of the stream at R into four accumulators.
#define X512(R) \
	VPXORQ 0(R), Z0, Z0; VPXORQ 64(R), Z1, Z1; VPXORQ 128(R), Z2, Z2; VPXORQ 192(R), Z3, Z3; \
	ADDQ $256, R

// Prefetch the 256 bytes ahead (R10) bytes past R.
#define PF(R) \
	PREFETCHT0 0(R)(R10*1); PREFETCHT0 64(R)(R10*1); PREFETCHT0 128(R)(R10*1); PREFETCHT0 192(R)(R10*1)

#define X256(R) \
	VPXOR 0(R), Y0, Y0; VPXOR 32(R), Y1, Y1; VPXOR 64(R), Y2, Y2; VPXOR 96(R), Y3, Y3; \
	VPXOR 128(R), Y0, Y0; VPXOR 160(R), Y1, Y1; VPXOR 192(R), Y2, Y2; VPXOR 224(R), Y3, Y3; \
	ADDQ $256, R

// func xorStreamsAVX512(p *byte, n, streams, ahead int) uint64
TEXT ·xorStreamsAVX512(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), BX
	MOVQ streams+16(FP), DX
	MOVQ BX, CX
	SHRQ $8, CX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	TESTQ CX, CX
	JZ   done512
	LEAQ (SI)(BX*1), DI
	LEAQ (DI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	MOVQ ahead+24(FP), R10
	TESTQ R10, R10
	JNZ  pf512
	CMPQ DX, $4
	JEQ  four512
	CMPQ DX, $2
	JEQ  two512

one512:
	X512(SI)
	DECQ CX
	JNZ  one512
	JMP  done512
two512:
	X512(SI)
	X512(DI)
	DECQ CX
	JNZ  two512
	JMP  done512
four512:
	X512(SI)
	X512(DI)
	X512(R8)
	X512(R9)
	DECQ CX
	JNZ  four512
	JMP  done512

pf512:
	CMPQ DX, $4
	JEQ  pffour512
	CMPQ DX, $2
	JEQ  pftwo512
pfone512:
	PF(SI)
	X512(SI)
	DECQ CX
	JNZ  pfone512
	JMP  done512
pftwo512:
	PF(SI)
	PF(DI)
	X512(SI)
	X512(DI)
	DECQ CX
	JNZ  pftwo512
	JMP  done512
pffour512:
	PF(SI)
	PF(DI)
	PF(R8)
	PF(R9)
	X512(SI)
	X512(DI)
	X512(R8)
	X512(R9)
	DECQ CX
	JNZ  pffour512

done512:
	VPXORQ Z1, Z0, Z0
	VPXORQ Z3, Z2, Z2
	VPXORQ Z2, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPXOR Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPXOR X1, X0, X0
	VMOVQ X0, AX
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET

// func xorStreamsAVX2(p *byte, n, streams, ahead int) uint64
TEXT ·xorStreamsAVX2(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), BX
	MOVQ streams+16(FP), DX
	MOVQ BX, CX
	SHRQ $8, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	TESTQ CX, CX
	JZ   done256
	LEAQ (SI)(BX*1), DI
	LEAQ (DI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	MOVQ ahead+24(FP), R10
	TESTQ R10, R10
	JNZ  pf256
	CMPQ DX, $4
	JEQ  four256
	CMPQ DX, $2
	JEQ  two256
one256:
	X256(SI)
	DECQ CX
	JNZ  one256
	JMP  done256
two256:
	X256(SI)
	X256(DI)
	DECQ CX
	JNZ  two256
	JMP  done256
four256:
	X256(SI)
	X256(DI)
	X256(R8)
	X256(R9)
	DECQ CX
	JNZ  four256
	JMP  done256

pf256:
	CMPQ DX, $4
	JEQ  pffour256
	CMPQ DX, $2
	JEQ  pftwo256
pfone256:
	PF(SI)
	X256(SI)
	DECQ CX
	JNZ  pfone256
	JMP  done256
pftwo256:
	PF(SI)
	PF(DI)
	X256(SI)
	X256(DI)
	DECQ CX
	JNZ  pftwo256
	JMP  done256
pffour256:
	PF(SI)
	PF(DI)
	PF(R8)
	PF(R9)
	X256(SI)
	X256(DI)
	X256(R8)
	X256(R9)
	DECQ CX
	JNZ  pffour256

done256:
	VPXOR Y1, Y0, Y0
	VPXOR Y3, Y2, Y2
	VPXOR Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPXOR X1, X0, X0
	VMOVQ X0, AX
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
