package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/testkit/blocks"
)

func same(f, g any) bool { return reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer() }

// sizes covers empty rows, every tail length and the model row lengths.
var sizes = func() []int {
	s := []int{}
	for n := 0; n <= 80; n++ {
		s = append(s, n)
	}
	return append(s, 172, 2048, 2049, 5632, 5639)
}()

// randomF32 returns values of mixed magnitude and sign, with some edge
// values (±0, subnormals, ±Inf, NaN, huge) when edges is set.
func randomF32(r *rand.Rand, n int, edges bool) []float32 {
	x := make([]float32, n)
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-45, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(20)-10))
		if edges && r.IntN(16) == 0 {
			x[i] = special[r.IntN(len(special))]
		}
	}
	return x
}

func randomU16(r *rand.Rand, n int, round func(float32) uint16) []uint16 {
	u := make([]uint16, n)
	for i := range u {
		if r.IntN(8) == 0 {
			u[i] = uint16(r.Uint32()) // any pattern: NaNs, Infs, subnormals
		} else {
			u[i] = round(float32(r.NormFloat64()))
		}
	}
	return u
}

func TestDotAsmMatchesGo(t *testing.T) {
	if same(dotF32, dotF32Go) {
		t.Skip("no assembly kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for iter := range 20 {
		edges := iter%2 == 1
		for _, n := range sizes {
			a, b := randomF32(r, n, edges), randomF32(r, n, edges)
			if n == 0 {
				continue
			}
			if got, want := dotF32(a, b), dotF32Go(a, b); !blocks.SameFloat(got, want) {
				t.Fatalf("F32 n=%d: asm %v, Go %v", n, got, want)
			}
			w, x := randomU16(r, n, half.F32ToF16), randomU16(r, n, half.F32ToF16)
			if got, want := dotF16(w, x), dotF16Go(w, x); !blocks.SameFloat(got, want) {
				t.Fatalf("F16 n=%d: asm %v, Go %v", n, got, want)
			}
			checkF16F32(t, w, x)
			w, x = randomU16(r, n, half.F32ToBF16), randomU16(r, n, half.F32ToBF16)
			if iter%4 == 3 {
				for i := range w {
					w[i], x[i] = tinyBF16(r), tinyBF16(r)
				}
			}
			if got, want := dotBF16(w, x), dotBF16Go(w, x); !blocks.SameFloat(got, want) {
				t.Fatalf("BF16 n=%d: asm %v, Go %v", n, got, want)
			}
			checkBF16F32(t, w, x)
		}
	}
}

func TestAxpyScaleAsmMatchesGo(t *testing.T) {
	if same(axpy, axpyGo) {
		t.Skip("no assembly kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range sizes {
		if n == 0 {
			continue
		}
		a := float32(r.NormFloat64())
		x, y := randomF32(r, n, true), randomF32(r, n, true)
		y1, y2 := append([]float32(nil), y...), append([]float32(nil), y...)
		axpy(a, x, y1)
		axpyGo(a, x, y2)
		s1, s2 := append([]float32(nil), x...), append([]float32(nil), x...)
		scale(a, s1)
		scaleGo(a, s2)
		for i := range y1 {
			if !blocks.SameFloat(y1[i], y2[i]) || !blocks.SameFloat(s1[i], s2[i]) {
				t.Fatalf("n=%d, element %d: axpy %v/%v, scale %v/%v", n, i, y1[i], y2[i], s1[i], s2[i])
			}
		}
	}
}

// TestDotOrder checks the documented summation order on values chosen so
// that any other grouping rounds differently: 2²⁴ in lane 0 absorbs a 1
// added to it, but not 1+1 added first.
func TestDotOrder(t *testing.T) {
	const big = 1 << 24
	for _, dot := range []func(a, b []float32) float32{dotF32, dotF32Go} {
		a := make([]float32, 64)
		b := make([]float32, 64)
		for i := range b {
			b[i] = 1
		}
		a[0] = big
		a[32] = 1 // lane 0 again: big+1 rounds to big
		a[1] = 1  // lane 1
		a[9] = 1  // lane 9: l1 + l9 = 2 is formed before meeting lane 0
		// r8[1] = (l1+l9) + (l17+l25) = 2, r8[0] = big; r4[0] = big,
		// r4[1] = 2; r2[0] = big, r2[1] = 2; big + 2 is exact.
		if got := dot(a, b); got != big+2 {
			t.Errorf("got %v, want %v", got, float32(big+2))
		}
		// A tail element (index 64 of 65) goes to lane 0 after the others.
		a = append(a, 1)
		b = append(b, 1)
		if got := dot(a, b); got != big+2 {
			t.Errorf("with tail: got %v, want %v", got, float32(big+2))
		}
	}
}

func TestDotValues(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const n = 999
	a, b := randomF32(r, n, false), randomF32(r, n, false)
	var want, mag float64
	for i := range a {
		want += float64(a[i]) * float64(b[i])
		mag += math.Abs(float64(a[i]) * float64(b[i]))
	}
	w := make([]byte, 4*n)
	for i, v := range a {
		binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v))
	}
	if got := DotF32(w, b); math.Abs(float64(got)-want) > 1e-5*mag {
		t.Errorf("DotF32 = %v, want %v", got, want)
	}
	if got := Dot(a, b); math.Abs(float64(got)-want) > 1e-5*mag {
		t.Errorf("Dot = %v, want %v", got, want)
	}
	// Unaligned weight bytes give the same result.
	w2 := make([]byte, 4*n+1)
	copy(w2[1:], w)
	if got, want := DotF32(w2[1:], b), DotF32(w, b); !blocks.SameFloat(got, want) {
		t.Errorf("unaligned: %v, aligned: %v", got, want)
	}

	// F16 and BF16: the products of rounded values, summed in float64.
	x16, xb := make([]uint16, n), make([]uint16, n)
	RoundF16(x16, b)
	RoundBF16(xb, b)
	w16, wb := make([]byte, 2*n), make([]byte, 2*n)
	var want16, wantB float64
	for i, v := range a {
		h, bf := half.F32ToF16(v), half.F32ToBF16(v)
		binary.LittleEndian.PutUint16(w16[2*i:], h)
		binary.LittleEndian.PutUint16(wb[2*i:], bf)
		want16 += float64(half.F16ToF32(h)) * float64(half.F16ToF32(x16[i]))
		wantB += float64(half.BF16ToF32(bf)) * float64(half.BF16ToF32(xb[i]))
	}
	if got := DotF16(w16, x16); math.Abs(float64(got)-want16) > 1e-5*mag {
		t.Errorf("DotF16 = %v, want %v", got, want16)
	}
	if got := DotBF16(wb, xb); math.Abs(float64(got)-wantB) > 1e-5*mag {
		t.Errorf("DotBF16 = %v, want %v", got, wantB)
	}
}

func TestAxpyScale(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	y := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 100}
	Axpy(0.5, x, y)
	for i, v := range x {
		if y[i] != 1+v/2 {
			t.Errorf("Axpy: y[%d] = %v, want %v", i, y[i], 1+v/2)
		}
	}
	if y[9] != 100 {
		t.Errorf("Axpy wrote past len(x)")
	}
	Scale(2, x)
	if x[8] != 18 || x[0] != 2 {
		t.Errorf("Scale: %v", x)
	}
}

func TestChecks(t *testing.T) {
	if Dot(nil, nil) != 0 || DotF32(nil, nil) != 0 || DotF16(nil, nil) != 0 || DotBF16(nil, nil) != 0 {
		t.Error("empty rows must give 0")
	}
	for name, f := range map[string]func(){
		"Dot":    func() { Dot(make([]float32, 3), make([]float32, 2)) },
		"DotF32": func() { DotF32(make([]byte, 11), make([]float32, 3)) },
		"DotF16": func() { DotF16(make([]byte, 5), make([]uint16, 3)) },
		"Axpy":   func() { Axpy(1, make([]float32, 3), make([]float32, 2)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// format is a 16-bit weight type's kernels with float32 activations
// (DotF16F32 or DotBF16F32 and their Rows, RowsMulti forms), each held to
// the type's Go twin.
type format struct {
	name  string
	twin  func(w []uint16, x []float32) float32 // the Go definition
	dot   func(w []uint16, x []float32) float32 // the selected kernel
	rows  func(w []byte, rowBytes int, x, out []float32)
	multi func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int)
	// multiSel is the selected 2-3-token kernel.
	multiSel func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int)
	act      func(h uint16) float32 // an activation's value from its bits
	round    func(float32) uint16
	// kernels are the dot and rows kernels of every set this CPU runs
	// besides the selected ones (the AVX2 fallback where AVX-512 is
	// selected); streams each set's rows kernels in both stream forms;
	// multis the multi-token kernels, the Go twin first.
	kernels []setKernel
	streams []rowsKernel
	multis  []multiKernel
	// mul is MulF16 or MulBF16, muls its panel kernels of every set this
	// CPU runs.
	mul  mulFunc
	muls []mulF16Kernel
}

type setKernel struct {
	name string
	dot  func(w []uint16, x []float32) float32
	rows func(w []byte, rowBytes int, x, out []float32)
}

var (
	f16Fmt = &format{
		name: "F16", twin: dotF16F32Go, dot: func(w []uint16, x []float32) float32 { return dotF16F32(w, x) },
		rows: DotF16F32Rows, multi: DotF16F32RowsMulti,
		multiSel: func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
			dotF16F32RowsMulti(w, rowBytes, rows, x, n, out, ldo)
		},
		act: half.F16ToF32, round: half.F32ToF16,
		multis: []multiKernel{{"go", dotF16F32RowsMultiGo}},
		mul:    MulF16,
	}
	bf16Fmt = &format{
		name: "BF16", twin: dotBF16Go[float32], dot: func(w []uint16, x []float32) float32 { return dotBF16F32(w, x) },
		rows: DotBF16F32Rows, multi: DotBF16F32RowsMulti,
		multiSel: func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int) {
			dotBF16F32RowsMulti(w, rowBytes, rows, x, n, out, ldo)
		},
		act: bf16, round: half.F32ToBF16,
		multis: []multiKernel{{"go", dotBF16F32RowsMultiGo}},
		mul:    MulBF16,
	}
	formats = []*format{f16Fmt, bf16Fmt}
)

// checkF32Acts checks that f's kernels, given x as float32, equal want
// (the dot product with x as bits) bit for bit.
func (f *format) checkF32Acts(t *testing.T, w, x []uint16, want float32) {
	t.Helper()
	xf := make([]float32, len(x))
	for i, h := range x {
		xf[i] = f.act(h)
	}
	if got := f.dot(w, xf); !blocks.SameFloat(got, want) {
		t.Fatalf("%sF32 n=%d: %v, want %v", f.name, len(x), got, want)
	}
	if got := f.twin(w, xf); !blocks.SameFloat(got, want) {
		t.Fatalf("%sF32 Go n=%d: %v, want %v", f.name, len(x), got, want)
	}
	for _, k := range f.kernels {
		if got := k.dot(w, xf); !blocks.SameFloat(got, want) {
			t.Fatalf("%sF32 %s n=%d: %v, want %v", f.name, k.name, len(x), got, want)
		}
	}
	f.checkRowsCut(t, w, xf)
}

// checkF16F32 checks that DotF16F32's kernels, given x as float32, equal
// dotF16Go bit for bit.
func checkF16F32(t *testing.T, w, x []uint16) {
	t.Helper()
	f16Fmt.checkF32Acts(t, w, x, dotF16Go(w, x))
}

// checkBF16F32 checks that DotBF16F32's kernels equal dotBF16Go (x as
// bits) bit for bit.
func checkBF16F32(t *testing.T, w, x []uint16) {
	t.Helper()
	bf16Fmt.checkF32Acts(t, w, x, dotBF16Go(w, x))
}

// rowsImpls returns the exported Rows function and every rows kernel of f.
func (f *format) rowsImpls() []rowsKernel {
	impls := []rowsKernel{{"selected", f.rows}}
	for _, k := range f.kernels {
		impls = append(impls, rowsKernel{k.name, k.rows})
	}
	return append(impls, f.streams...)
}

// checkRowsCut holds the rows kernels (selected, each set's and each
// set's two- and four-stream forms) to the Go twin on 3 to 11 rows cut
// from w, of a whole number of groups of 32 so that the assembly takes
// them (pairs or quads far apart and the rows left over).
func (f *format) checkRowsCut(t *testing.T, w []uint16, xf []float32) {
	t.Helper()
	wb := make([]byte, 2*len(w))
	for i, h := range w {
		binary.LittleEndian.PutUint16(wb[2*i:], h)
	}
	for _, m := range []int{3, 4, 5, 6, 7, 8, 9, 10, 11} {
		rb := 2 * (len(xf) / m)
		q := len(xf) / m &^ 31
		if q == 0 {
			return
		}
		out := make([]float32, m)
		for _, k := range f.rowsImpls() {
			k.rows(wb, rb, xf[:q], out)
			for r, got := range out {
				if want := f.twin(u16View(wb[r*rb:], q), xf[:q]); !blocks.SameFloat(got, want) {
					t.Fatalf("%sF32Rows %s n=%d rows=%d row %d: %v, Go %v", f.name, k.name, q, m, r, got, want)
				}
			}
		}
	}
}

// rowsKernel is a DotF16F32Rows or DotBF16F32Rows kernel.
type rowsKernel struct {
	name string
	rows func(w []byte, rowBytes int, x, out []float32)
}

// TestRoundF16F32 checks RoundF16F32 against RoundF16 on every binary16
// value, the midpoints between neighbours (ties go to even) and the
// float32 values either side of each midpoint, over subnormals, normals
// and overflow, in one slice and in a tail shorter than a vector.
func TestRoundF16F32(t *testing.T) {
	src := []float32{0, 1, 1.0001, -65504, 70000, 1e-8, float32(math.Inf(-1))}
	for h := range uint16(0x7c00) {
		v, next := half.F16ToF32(h), half.F16ToF32(h+1)
		mid := float32((float64(v) + float64(next)) / 2) // exact: one more bit
		for _, x := range []float32{v, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			src = append(src, x, -x)
		}
	}
	h := make([]uint16, len(src))
	f := make([]float32, len(src))
	RoundF16(h, src)
	RoundF16F32(f, src)
	for i := range src {
		if want := half.F16ToF32(h[i]); math.Float32bits(f[i]) != math.Float32bits(want) {
			t.Errorf("%v: got %v, want %v", src[i], f[i], want)
		}
	}
}

// TestDotF16F32Rows checks DotF16F32Rows and DotBF16F32Rows, and each
// kernel's rows form, against the Go twin row by row: strided and
// odd-offset rows, every length class (whole groups of 32 and tails) and
// all 16-bit patterns (BF16 ones that underflow among them).
func TestDotF16F32Rows(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, f := range formats {
		for _, n := range []int{1, 8, 31, 32, 64, 96, 100, 2048, 5632} {
			for _, nrows := range []int{1, 2, 7, 10} {
				rowBytes := 2*n + 2*r.IntN(3)
				off := r.IntN(2) // rows need not be 2-byte aligned
				w := make([]byte, off+(nrows-1)*rowBytes+2*n)
				tiny := f == bf16Fmt && nrows == 10
				for i := 0; i+1 < len(w); i += 2 {
					h := uint16(r.Uint32())
					if tiny {
						h = tinyBF16(r)
					}
					binary.LittleEndian.PutUint16(w[i:], h)
				}
				xh := randomU16(r, n, f.round)
				x := make([]float32, n)
				for i, h := range xh {
					if nrows == 7 && i%5 == 0 {
						// Any activation (subnormal, huge, ±Inf, NaN):
						// the fused products must stay exact.
						h = uint16(r.Uint32())
					}
					if tiny {
						h = tinyBF16(r)
					}
					x[i] = f.act(h)
				}
				for _, k := range f.rowsImpls() {
					out := make([]float32, nrows)
					k.rows(w[off:], rowBytes, x, out)
					for ri, got := range out {
						row := w[off+ri*rowBytes : off+ri*rowBytes+2*n]
						if want := f.twin(u16View(row, n), x); !blocks.SameFloat(got, want) {
							t.Fatalf("%s %s n=%d rows=%d: row %d: %v, Go %v", f.name, k.name, n, nrows, ri, got, want)
						}
					}
				}
			}
		}
	}
}
