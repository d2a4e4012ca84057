// Macros shared by the package's assembly files (#include "q_amd64.h").

// HSUM8 adds the eight float32 lanes of F (X its low half) into the low
// lane of D as sum8 does: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). T is
// clobbered.
#define HSUM8(F, X, T, D) \
	VEXTRACTF128 $1, F, T \
	VADDPS       T, X, D  \
	VMOVHLPS     D, D, T  \
	VADDPS       T, D, D  \
	VMOVSHDUP    D, T     \
	VADDSS       T, D, D

// Q1SCALES2 loads the fp16 scales of the Q1_0 blocks at SI and SI+18 into
// the low two lanes of X as float32 (A and B clobbered).
#define Q1SCALES2(X, A, B) \
	MOVWLZX   0(SI), A   \
	MOVWLZX   18(SI), B  \
	SHLL      $16, B     \
	ORL       B, A       \
	VMOVD     A, X       \
	VCVTPH2PS X, X

// F16X4 gathers the four fp16 words at a, b, c and d into R, from the
// low word up (T clobbered).
#define F16X4(a, b, c, d, R, T) \
	MOVWQZX a, R  \
	MOVWQZX b, T  \
	SHLQ    $16, T \
	ORQ     T, R  \
	MOVWQZX c, T  \
	SHLQ    $32, T \
	ORQ     T, R  \
	MOVWQZX d, T  \
	SHLQ    $48, T \
	ORQ     T, R

// Q8SCALES8 loads the fp16 scales of the eight Q8_0 activation blocks at
// DI (34 bytes apart) into Y4 as float32 (AX, BX and DX clobbered).
#define Q8SCALES8 \
	F16X4(0(DI), 34(DI), 68(DI), 102(DI), AX, BX)    \
	F16X4(136(DI), 170(DI), 204(DI), 238(DI), DX, BX) \
	VMOVQ     AX, X4       \
	VPINSRQ   $1, DX, X4, X4 \
	VCVTPH2PS X4, Y4

// The batch kernels (q1BatchK, q1QuadK) for K = 1..4 tokens: TOKS_K loads
// the tokens' activation pointers from the array at AX into R8..R11,
// ZERO_K clears their float32 lanes Y0..Y3, SUMS_K reduces each token's
// lanes as sum8 does and stores the results at DI, DI+R12, ...
#define TOKS_1 MOVQ 0(AX), R8
#define TOKS_2 TOKS_1 ; MOVQ 8(AX), R9
#define TOKS_3 TOKS_2 ; MOVQ 16(AX), R10
#define TOKS_4 TOKS_3 ; MOVQ 24(AX), R11

#define ZERO_1 VXORPS Y0, Y0, Y0
#define ZERO_2 ZERO_1 ; VXORPS Y1, Y1, Y1
#define ZERO_3 ZERO_2 ; VXORPS Y2, Y2, Y2
#define ZERO_4 ZERO_3 ; VXORPS Y3, Y3, Y3

// SUM8STORE reduces the lanes of F (X its low half) as sum8 does and
// stores the result at DI.
#define SUM8STORE(F, X) \
	HSUM8(F, X, X12, X13) \
	VMOVSS X13, (DI)

#define SUMS_1 SUM8STORE(Y0, X0)
#define SUMS_2 SUMS_1 ; ADDQ R12, DI ; SUM8STORE(Y1, X1)
#define SUMS_3 SUMS_2 ; ADDQ R12, DI ; SUM8STORE(Y2, X2)
#define SUMS_4 SUMS_3 ; ADDQ R12, DI ; SUM8STORE(Y3, X3)

// STEPS runs STEP CX times (CX ≥ 1), moving SI by WBYTES and DX by
// ABYTES after each; the weights stream from memory when decoding, so
// it fetches 2 KiB ahead.
#define STEPS(STEP, WBYTES, ABYTES) \
loop:                          \
	PREFETCHT0 2048(SI)    \
	STEP                   \
	ADDQ  $WBYTES, SI      \
	ADDQ  $ABYTES, DX      \
	DECQ  CX               \
	JNZ   loop

// BATCH is the body of a batch kernel
//
//	func(w unsafe.Pointer, steps int, tw unsafe.Pointer, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
//
// for K tokens (TOKS, ZERO and SUMS for K): CONSTS loads the kernel's
// constants, STEP adds the weights at SI to every token's lanes, reading
// each token's activations at DX; a step takes WBYTES of weights and
// ABYTES of activations. After steps steps comes the zero-padded last
// one at tw, if tw is not nil; the results go to out, out+stride, ...
// (stride in bytes).
#define BATCH(TOKS, CONSTS, ZERO, STEP, WBYTES, ABYTES, SUMS) \
	MOVQ  w+0(FP), SI      \
	MOVQ  steps+8(FP), CX  \
	MOVQ  toks+24(FP), AX  \
	TOKS                   \
	CONSTS                 \
	ZERO                   \
	XORQ  DX, DX           \
	TESTQ CX, CX           \
	JE    tail             \
	STEPS(STEP, WBYTES, ABYTES) \
tail:                          \
	MOVQ  tw+16(FP), SI    \
	TESTQ SI, SI           \
	JE    reduce           \
	STEP                   \
reduce:                        \
	MOVQ  out+32(FP), DI   \
	MOVQ  stride+40(FP), R12 \
	SUMS                   \
	VZEROUPPER             \
	RET

// ROWS is the body of a rows kernel
//
//	func(w unsafe.Pointer, rowBytes, rows, steps int, toks *[4]unsafe.Pointer, out unsafe.Pointer, stride int)
//
// BATCH for rows consecutive weight rows of rowBytes bytes, each of
// steps whole steps: row r's results go to out+4r, out+4r+stride, ...
// The constants stay in registers across rows, which matters for short
// rows (a 2048-column row is four quads).
#define ROWS(TOKS, CONSTS, ZERO, STEP, WBYTES, ABYTES, SUMS) \
	ROWSIN(BX, TOKS, CONSTS, ZERO, STEP, WBYTES, ABYTES, SUMS)

// ROWSIN is ROWS with the rows left counted in register N (BX in ROWS),
// for steps that need BX.
#define ROWSIN(N, TOKS, CONSTS, ZERO, STEP, WBYTES, ABYTES, SUMS) \
	MOVQ  w+0(FP), R14       \
	MOVQ  rows+16(FP), N     \
	MOVQ  toks+32(FP), AX    \
	MOVQ  out+40(FP), R13    \
	MOVQ  stride+48(FP), R12 \
	TOKS                     \
	CONSTS                   \
	TESTQ N, N               \
	JE    done               \
row:                             \
	MOVQ  R14, SI            \
	MOVQ  steps+24(FP), CX   \
	ZERO                     \
	XORQ  DX, DX             \
	STEPS(STEP, WBYTES, ABYTES) \
	MOVQ  R13, DI            \
	SUMS                     \
	ADDQ  $4, R13            \
	ADDQ  rowBytes+8(FP), R14 \
	DECQ  N                  \
	JNZ   row                \
done:                            \
	VZEROUPPER               \
	RET
