package int8

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/mmapfile"
	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

func benchRows(n int) (w, x []byte) {
	r := rand.New(rand.NewPCG(1, 1))
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	w, x = make([]byte, n/BlockQ8_0*BlockBytesQ8_0), make([]byte, n/BlockQ8_0*BlockBytesQ8_0)
	QuantizeRowQ8_0(a, w)
	QuantizeRowQ8_0(b, x)
	return w, x
}

// benchDot reports weight bytes per second (MB/s) and weights per CPU
// second for one row of n elements, which stays in cache: the compute
// ceiling of the kernel.
func benchDot(b *testing.B, n int, dot func(w, x []byte, nb int) float32) {
	w, x := benchRows(n)
	b.SetBytes(int64(len(w)))
	cpubench.Run(b, n, func() { dot(w, x, n/BlockQ8_0) })
}

func BenchmarkDotQ8_0(b *testing.B) {
	for _, n := range []int{2048, 5632} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchDot(b, n, dotQ8_0) })
		b.Run(strconv.Itoa(n)+"/sym", func(b *testing.B) { benchDot(b, n, dotQ8_0Sym) })
		b.Run(strconv.Itoa(n)+"/go", func(b *testing.B) { benchDot(b, n, dotQ8_0Go) })
	}
}

func benchQuantize(b *testing.B, f func([]float32, []byte)) {
	const n = 5632
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]byte, n/BlockQ8_0*BlockBytesQ8_0)
	b.SetBytes(4 * n)
	cpubench.Run(b, 0, func() { f(x, y) })
}

func BenchmarkQuantizeRowQ8_0(b *testing.B) { benchQuantize(b, QuantizeRowQ8_0) }

func BenchmarkQuantizeRowPerChannel(b *testing.B) {
	benchQuantize(b, func(x []float32, y []byte) { QuantizeRowPerChannel(x, y) })
}

// BenchmarkDotQ8_0Stream is BenchmarkDotQ8_0 over 96 MiB of weight rows of
// 2048 elements, far larger than the caches: the kernel's speed when the
// weights stream from memory, as in decoding ("cpu-GB/s": weight bytes per
// CPU second of the calling thread).
func BenchmarkDotQ8_0Stream(b *testing.B) {
	b.Run("any", func(b *testing.B) { benchStream(b, dotQ8_0) })
	b.Run("sym", func(b *testing.B) { benchStream(b, dotQ8_0Sym) })
}

func benchStream(b *testing.B, dot func(w, x []byte, nb int) float32) {
	const n = 2048
	rowBytes := n / BlockQ8_0 * BlockBytesQ8_0
	rows := 96 << 20 / rowBytes
	w0, x := benchRows(n)
	w := make([]byte, rows*rowBytes)
	for r := 0; r < rows; r++ {
		copy(w[r*rowBytes:], w0)
	}
	cpubench.HugePages(w) // as the runtime places its weights
	b.SetBytes(int64(len(w)))
	var s float32
	cpubench.Run(b, 0, func() {
		for r := 0; r < rows; r++ {
			s += dot(w[r*rowBytes:(r+1)*rowBytes], x, n/BlockQ8_0)
		}
	})
	_ = s
}

// BenchmarkDotQ8_0Rows compares the row kernels this CPU runs (the
// decoding kernel: many weight rows against one activation row), with
// the rows in cache ("2048", 48 rows of 2048 elements), streaming from
// memory ("stream", 96 MiB of such rows) and, when QNNPREP_BENCH_Q8_FILE
// names a file (a Q8_0 GGUF), streaming from its memory map as decoding
// reads the weights ("file": its bytes taken as rows of 2048 elements).
func BenchmarkDotQ8_0Rows(b *testing.B) {
	const n = 2048
	rowBytes := n / BlockQ8_0 * BlockBytesQ8_0
	w0, x := benchRows(n)
	cases := []struct {
		name string
		w    []byte
	}{{"2048", rowsOf(w0, 48)}, {"stream", rowsOf(w0, 96<<20/rowBytes)}}
	if path := os.Getenv("QNNPREP_BENCH_Q8_FILE"); path != "" {
		cases = append(cases, struct {
			name string
			w    []byte
		}{"file", mapFile(b, path)})
	}
	impls := rowsImpls()
	for _, c := range cases {
		rows := len(c.w) / rowBytes
		out := make([]float32, rows)
		for _, set := range []string{"go", "avx2", "avx512"} {
			f := impls[set]
			if f == nil || set == "go" && c.name != "2048" {
				continue
			}
			b.Run(c.name+"/"+set, func(b *testing.B) {
				b.SetBytes(int64(rows * rowBytes))
				cpubench.Run(b, n*rows, func() { f(c.w, rowBytes, x, n/BlockQ8_0, out) })
			})
		}
	}
}

// rowsOf returns rows copies of the row w on huge pages where Linux
// gives them, as the runtime's weights are.
func rowsOf(w []byte, rows int) []byte {
	all := make([]byte, rows*len(w))
	for r := range rows {
		copy(all[r*len(w):], w)
	}
	cpubench.HugePages(all)
	return all
}

// mapFile maps the file at path read-only as the runtime maps a model
// (mmapfile.PopulateHuge).
func mapFile(b *testing.B, path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	data, err := mmapfile.Map(f, st.Size())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mmapfile.Unmap(data) })
	mmapfile.PopulateHuge([][]byte{data})
	return data
}

// BenchmarkDotQ8_0Decode runs the row kernels this CPU runs over the
// weight matrices of the Q8_0 GGUF that QNNPREP_BENCH_Q8_FILE names, each
// in one call as decoding at one thread takes them, in file order (the
// order a decode step reads them: each layer's attention and FFN
// matrices, then the output head), from its memory map: "cpu-GB/s" is
// weight bytes per CPU second of the calling thread, to set beside the
// memory-read ceiling `qnnprep bench` measures over the same bytes.
// QNNPREP_BENCH_Q8_PART=k/n takes, of each matrix cut in 2n chunks,
// chunks k and k+n, as the k-th of n decoding threads does (runtime's two
// chunks per worker): run n processes at once, one per CPU (taskset), for
// n threads.
func BenchmarkDotQ8_0Decode(b *testing.B) {
	path := os.Getenv("QNNPREP_BENCH_Q8_FILE")
	if path == "" {
		b.Skip("QNNPREP_BENCH_Q8_FILE names no Q8_0 GGUF")
	}
	k, parts := 0, 1
	if p := os.Getenv("QNNPREP_BENCH_Q8_PART"); p != "" {
		if _, err := fmt.Sscanf(p, "%d/%d", &k, &parts); err != nil || parts < 1 || k < 0 || k >= parts {
			b.Fatalf("QNNPREP_BENCH_Q8_PART=%q: want k/n, 0 <= k < n", p)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	type mat struct {
		w   []byte
		nb  int
		x   []byte
		out []float32
	}
	var ms []mat
	var spans [][]byte
	var bytes int64
	r := rand.New(rand.NewPCG(3, 4))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Type != gguf.Q8_0 || len(t.Dims) != 2 || !strings.HasPrefix(t.Name, "blk.") && t.Name != "output.weight" {
			continue
		}
		w, err := f.Data(t)
		if err != nil {
			b.Fatal(err)
		}
		nb := int(t.Dims[0]) / BlockQ8_0
		x := symmetric(randomQ8Row(r, nb))
		spans = append(spans, w)
		rows, rb := int(t.Dims[1]), nb*BlockBytesQ8_0
		chunks := []int{0}
		if parts > 1 {
			chunks = []int{k, k + parts}
		}
		for _, c := range chunks {
			r0, r1 := rows*c/(len(chunks)*parts), rows*(c+1)/(len(chunks)*parts)
			ms = append(ms, mat{w[r0*rb : r1*rb], nb, x, make([]float32, r1-r0)})
			bytes += int64((r1 - r0) * rb)
		}
	}
	if len(ms) == 0 {
		b.Skip(path + ": no Q8_0 matrices")
	}
	mmapfile.PopulateHuge(spans)
	for set, k := range rowsImpls() {
		if set == "go" {
			continue
		}
		b.Run(set, func(b *testing.B) {
			b.SetBytes(bytes)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0 := cpubench.Thread()
			for b.Loop() {
				for _, m := range ms {
					k(m.w, m.nb*BlockBytesQ8_0, m.x, m.nb, m.out)
				}
			}
			if c := cpubench.Thread() - c0; c0 != 0 && c > 0 {
				b.ReportMetric(float64(bytes)*float64(b.N)/c.Seconds()/1e9, "cpu-GB/s")
			}
		})
	}
}
