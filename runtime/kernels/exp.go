package kernels

import "math"

// The exponential is one fixed sequence of float32 operations (no fused
// multiply-add), written once in Go (Expf) and once in AVX2 assembly that
// performs the same operations on eight lanes, so the vector and scalar
// forms give the same bits. It is Cephes' expf: e^x = 2^n · p(r) with
// n = round(x·log₂e), r = x − n·ln2 in two parts (the first, with few
// mantissa bits, makes n·ln2hi exact), and p a degree-7 polynomial on
// |r| ≤ ln2/2. Against math.Exp it is within 2 ulp (test).
//
// math.Exp through float64 costs ~15 ns a call; SiLU over the FFN and the
// attention softmax call it for every element, which made them a tenth of
// prompt processing and, at depth, a third of decoding.
const (
	expLog2e float32 = 1.44269504088896341
	expLn2Hi float32 = 0.693359375
	expLn2Lo float32 = -2.12194440e-4
	expP0    float32 = 1.9875691500e-4
	expP1    float32 = 1.3981999507e-3
	expP2    float32 = 8.3334519073e-3
	expP3    float32 = 4.1665795894e-2
	expP4    float32 = 1.6666665459e-1
	expP5    float32 = 5.0000001201e-1
	// Above expHi, n would reach 128 and 2ⁿ leave float32: the result is
	// +Inf (e^x > 2.7e38 there). Below expLo (n < −126) it is 0.
	expHi float32 = 88.3762626647949
	expLo float32 = -87.33654475
)

// Expf returns e^x in the package's fixed operation order: NaN for NaN,
// +Inf above 88.376, +0 below −87.337 (where e^x < 2^−126).
func Expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > expHi:
		return float32(math.Inf(1))
	case x < expLo:
		return 0
	}
	// Every intermediate is converted explicitly so that no compiler may
	// fuse a multiply and an add (the assembly does not).
	n := float32(math.RoundToEven(float64(float32(x * expLog2e))))
	r := float32(x - float32(n*expLn2Hi))
	r = float32(r - float32(n*expLn2Lo))
	p := float32(float32(expP0*r) + expP1)
	p = float32(float32(p*r) + expP2)
	p = float32(float32(p*r) + expP3)
	p = float32(float32(p*r) + expP4)
	p = float32(float32(p*r) + expP5)
	p = float32(float32(float32(p*float32(r*r))+r) + 1)
	return float32(p * math.Float32frombits(uint32(int32(n)+127)<<23))
}

// Silu returns x·σ(x), computed as x / (1 + e^−x) with Expf.
func Silu(x float32) float32 { return float32(x / float32(1+Expf(-x))) }

// Exp replaces every x[i] by Expf(x[i]).
func Exp(x []float32) {
	if len(x) > 0 {
		expVec(x)
	}
}

// SiluMul sets g[i] = Silu(g[i])·u[i], the SwiGLU gate. It panics if u is
// shorter than g.
func SiluMul(g, u []float32) {
	if len(u) < len(g) {
		panic("kernels: SiluMul: len(u) < len(g)")
	}
	if len(g) > 0 {
		siluMulVec(g, u[:len(g)])
	}
}

// SiluSlice replaces every x[i] by Silu(x[i]).
func SiluSlice(x []float32) {
	for len(x) > 0 {
		n := min(len(x), len(ones))
		siluMulVec(x[:n], ones[:n]) // Silu(v)·1 is Silu(v) exactly
		x = x[n:]
	}
}

var ones = func() (o [512]float32) {
	for i := range o {
		o[i] = 1
	}
	return
}()

var (
	expVec     = expGo
	siluMulVec = siluMulGo
)

func expGo(x []float32) {
	for i, v := range x {
		x[i] = Expf(v)
	}
}

func siluMulGo(g, u []float32) {
	for i, v := range g {
		g[i] = float32(Silu(v) * u[i])
	}
}
