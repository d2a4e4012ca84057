//go:build !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/internal/mmapfile"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// BenchmarkDecodeF16 streams a 128 MiB F16 matrix (far beyond the
// caches; rows of 2048 as in attention and the FFN's gate and up, and of
// 5632 as in its down projection) through each DotF16F32 kernel this CPU
// runs, one row at a time and as DotF16F32Rows does it: the memory-bound
// decoding step, the kernel sets side by side in one process. MB/s counts
// weight bytes; cpu-Gweights/s (two bytes each) the thread's CPU time
// only, which a shared machine disturbs less.
func BenchmarkDecodeF16(b *testing.B) {
	const size = 128 << 20
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, size+2<<20)
	cpubench.HugePages(buf) // as the runtime maps model weights
	for i := 0; i < size; i += 2 {
		binary.LittleEndian.PutUint16(buf[i:], half.F32ToF16(float32(r.NormFloat64())))
	}
	for _, n := range []int{2048, 5632} {
		rows := size / (2 * n)
		w := buf[:2*n*rows]
		x := make([]float32, n)
		for i := range x {
			x[i] = half.F16ToF32(half.F32ToF16(float32(r.NormFloat64())))
		}
		out := make([]float32, rows)
		for _, k := range f16Fmt.kernels {
			b.Run(fmt.Sprintf("%d/%s/each", n, k.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				cpubench.Run(b, n*rows, func() {
					for r := range out {
						out[r] = k.dot(u16View(w[r*2*n:], n), x)
					}
				})
			})
			b.Run(fmt.Sprintf("%d/%s/rows", n, k.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				cpubench.Run(b, n*rows, func() { k.rows(w, 2*n, x, out) })
			})
		}
	}
}

// BenchmarkDecodeF16File streams the F16 weight matrices of the GGUF file
// QNNPREP_BENCH_F16_FILE names (skipped when unset; e.g. the 700M F16
// model) from its memory map, as decoding reads them, through every
// DotF16F32Rows form this CPU runs (each set with two and four streams):
// one op is one token's matrices, each in one call (the token embedding
// table only where it is also the output head). QNNPREP_BENCH_F16_PART=k/n
// takes, of each matrix cut in 2n chunks, chunks k and k+n, as the k-th of
// n decoding threads does (runtime's two chunks per worker): run n
// processes at once, one per CPU (taskset), for n threads. -count repeats
// each form back to back; on a shared machine run one form per process
// (-bench 'DecodeF16File/FORM$' -count 1) in shuffled rounds and compare
// cpu-Gweights/s.
func BenchmarkDecodeF16File(b *testing.B) {
	m := loadF16File(b)
	x := randomActs(m.maxN)
	out := make([]float32, m.maxRows)
	for _, kr := range f16Fmt.streams {
		b.Run(kr.name, func(b *testing.B) {
			b.SetBytes(2 * int64(m.weights))
			cpubench.Run(b, m.weights, func() {
				for _, c := range m.calls {
					kr.rows(c.w, 2*c.n, x[:c.n], out[:c.rows])
				}
			})
		})
	}
}

// BenchmarkShortBatchF16File streams the same matrices as
// BenchmarkDecodeF16File (QNNPREP_BENCH_F16_FILE, QNNPREP_BENCH_F16_PART)
// for a batch of 2 and of 3 tokens, per set this CPU runs: "multi" is the
// multi-token kernel (one call per matrix), "blocks" the form before it,
// the selected decoding kernel token by token over blocks of 256 KiB of
// rows (read from memory by the first token, from L2 by the others), as
// package runtime's short batches ran. One op is one batch's matrices.
func BenchmarkShortBatchF16File(b *testing.B) {
	m := loadF16File(b)
	x := randomActs(3 * m.maxN)
	out := make([]float32, 3*m.maxRows)
	for _, tokens := range []int{2, 3} {
		for _, k := range f16Fmt.multis[1:] {
			b.Run(fmt.Sprintf("%d/%s/multi", tokens, k.name), func(b *testing.B) {
				b.SetBytes(2 * int64(m.weights))
				cpubench.Run(b, m.weights, func() {
					for _, c := range m.calls {
						k.mul(c.w, 2*c.n, c.rows, x[:tokens*c.n], c.n, out, m.maxRows)
					}
				})
			})
		}
		for _, k := range f16Fmt.kernels {
			b.Run(fmt.Sprintf("%d/%s/blocks", tokens, k.name), func(b *testing.B) {
				b.SetBytes(2 * int64(m.weights))
				cpubench.Run(b, m.weights, func() {
					for _, c := range m.calls {
						rb := 2 * c.n
						step := max(16, (256<<10)/rb&^7)
						for b0 := 0; b0 < c.rows; b0 += step {
							b1 := min(b0+step, c.rows)
							for t := range tokens {
								k.rows(c.w[b0*rb:], rb, x[t*c.n:(t+1)*c.n], out[t*m.maxRows+b0:t*m.maxRows+b1])
							}
						}
					}
				})
			})
		}
	}
}

// f16File is the F16 matrices of QNNPREP_BENCH_F16_FILE as the
// benchmarks read them: calls of rows×n weights, maxN and maxRows the
// largest, weights their total.
type f16File struct {
	calls []struct {
		w       []byte
		n, rows int
	}
	weights, maxN, maxRows int
}

func randomActs(n int) []float32 {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, n)
	for i := range x {
		x[i] = half.F16ToF32(half.F32ToF16(float32(r.NormFloat64())))
	}
	return x
}

// loadF16File maps QNNPREP_BENCH_F16_FILE (skipping b when it is unset)
// and cuts its F16 matrices as QNNPREP_BENCH_F16_PART says.
func loadF16File(b *testing.B) *f16File {
	path := os.Getenv("QNNPREP_BENCH_F16_FILE")
	if path == "" {
		b.Skip("QNNPREP_BENCH_F16_FILE names no F16 GGUF file")
	}
	k, parts := 0, 1
	if p := os.Getenv("QNNPREP_BENCH_F16_PART"); p != "" {
		if _, err := fmt.Sscanf(p, "%d/%d", &k, &parts); err != nil || parts < 1 || k < 0 || k >= parts {
			b.Fatalf("QNNPREP_BENCH_F16_PART=%q: want k/n, 0 <= k < n", p)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	m := new(f16File)
	var spans [][]byte
	_, head := f.Tensor("output.weight")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Type != gguf.F16 || len(t.Dims) != 2 || t.Name == "token_embd.weight" && head {
			continue
		}
		d, err := f.Data(t)
		if err != nil {
			b.Fatal(err)
		}
		spans = append(spans, d)
		n, rows := int(t.Dims[0]), int(t.Dims[1])
		chunks := []int{0}
		if parts > 1 {
			chunks = []int{k, k + parts}
		}
		for _, c := range chunks {
			r0, r1 := rows*c/(len(chunks)*parts), rows*(c+1)/(len(chunks)*parts)
			m.calls = append(m.calls, struct {
				w       []byte
				n, rows int
			}{d[r0*2*n : r1*2*n], n, r1 - r0})
			m.weights += (r1 - r0) * n
			m.maxRows = max(m.maxRows, r1-r0)
		}
		m.maxN = max(m.maxN, n)
	}
	if len(m.calls) == 0 {
		b.Skipf("%s holds no F16 matrices", path)
	}
	mmapfile.PopulateHuge(spans) // as the runtime maps model weights
	return m
}
