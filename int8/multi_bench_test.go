package int8

import (
	"os"
	"strconv"
	"testing"

	"github.com/qnnprep/qnnprep/testkit/cpubench"
)

// BenchmarkDotQ8_0RowsTokens compares the short-batch implementations
// ("blocks": the row kernel per token over 256 KiB blocks of rows; the
// multi-token kernel of this CPU) for 2 and 3 tokens, with the rows in
// cache ("2048", 48 rows of 2048 elements) and, when
// QNNPREP_BENCH_Q8_FILE names a Q8_0 GGUF, over its memory map in calls
// of 2048 rows of 2048 elements as a short batch's products read the
// weights ("file"). Bytes are weight bytes read per op.
func BenchmarkDotQ8_0RowsTokens(b *testing.B) {
	const n = 2048
	rowBytes := n / BlockQ8_0 * BlockBytesQ8_0
	w0, _ := benchRows(n)
	x := make([]byte, 3*rowBytes)
	for k := range 3 {
		_, xk := benchRows(n + 32*k)
		copy(x[k*rowBytes:], xk[:rowBytes])
	}
	cases := []struct {
		name string
		w    []byte
	}{{"2048", rowsOf(w0, 48)}}
	if path := os.Getenv("QNNPREP_BENCH_Q8_FILE"); path != "" {
		cases = append(cases, struct {
			name string
			w    []byte
		}{"file", mapFile(b, path)})
	}
	impls := tokensImpls()
	for _, c := range cases {
		rows := len(c.w) / rowBytes
		call := min(rows, 2048)
		out := make([]float32, 3*call)
		for _, tokens := range []int{2, 3} {
			for _, set := range []string{"blocks", "avx2", "avx2+avxvnni", "avx512"} {
				f := impls[set]
				if f == nil {
					continue
				}
				b.Run(c.name+"/"+strconv.Itoa(tokens)+"/"+set, func(b *testing.B) {
					b.SetBytes(int64(rows / call * call * rowBytes))
					cpubench.Run(b, 0, func() {
						for r := 0; r+call <= rows; r += call {
							f(c.w[r*rowBytes:], rowBytes, call, x, rowBytes, tokens, n/BlockQ8_0, out, call)
						}
					})
				})
			}
		}
	}
}
