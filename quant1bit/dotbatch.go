package quant1bit

import "fmt"

// DotQ1_0ActsBatch sets out[t*stride] = DotQ1_0Acts(w, &acts[t]) for
// every t, bit for bit, faster than separate calls when len(acts) ≥ 2:
// the weight row's sign bits are expanded once per group of up to four
// activation rows and shared by them. All acts must have the same Len.
// It panics if w is too short for that length, if the lengths differ,
// or if stride < 1 or out is too short.
func DotQ1_0ActsBatch(w []byte, acts []Acts, out []float32, stride int) {
	if len(acts) == 0 {
		return
	}
	n := acts[0].n
	for t := range acts {
		if acts[t].n != n {
			panic(fmt.Sprintf("quant1bit: DotQ1_0ActsBatch: acts[%d] has %d elements, acts[0] has %d", t, acts[t].n, n))
		}
	}
	if stride < 1 || len(out) == 0 || (len(out)-1)/stride < len(acts)-1 {
		panic(fmt.Sprintf("quant1bit: DotQ1_0ActsBatch: %d results at stride %d do not fit in %d floats", len(acts), stride, len(out)))
	}
	nb := checkDot("DotQ1_0ActsBatch", w, acts[0].raw, n, BlockQ1_0, BlockBytesQ1_0)
	if nb == 0 {
		for t := range acts {
			out[t*stride] = 0
		}
		return
	}
	dotQ1_0ActsBatch(w, acts, out, stride, nb)
}

// DotQ1_0ActsRows is DotQ1_0ActsBatch for rows consecutive weight rows
// of rowBytes bytes each in w: out[t*stride+r] is row r against acts[t].
// The checks are made once, which matters when decoding, where a row
// against one token is only some tens of nanoseconds of work. It panics
// as DotQ1_0ActsBatch does, and if rowBytes is too small for the length.
func DotQ1_0ActsRows(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride int) {
	actsRows("DotQ1_0ActsRows", w, rowBytes, rows, acts, out, stride, BlockQ1_0, BlockBytesQ1_0, dotQ1_0ActsRows)
}

// actsRows checks the arguments of the rows function name for weights
// of block elements in blockBytes bytes and runs kernel (nb ≥ 1), or
// zeroes the results for rows of no blocks.
func actsRows(name string, w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, block, blockBytes int,
	kernel func(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int)) {
	if len(acts) == 0 || rows == 0 {
		return
	}
	n := acts[0].n
	for t := range acts {
		if acts[t].n != n {
			panic(fmt.Sprintf("quant1bit: %s: acts[%d] has %d elements, acts[0] has %d", name, t, acts[t].n, n))
		}
	}
	last := (len(acts)-1)*stride + rows - 1
	if rows < 0 || stride < rows || last >= len(out) {
		panic(fmt.Sprintf("quant1bit: %s: %d rows x %d results at stride %d do not fit in %d floats", name, rows, len(acts), stride, len(out)))
	}
	if rowBytes < 0 || rowBytes*(rows-1) > len(w) {
		panic(fmt.Sprintf("quant1bit: %s: %d rows of %d bytes do not fit in %d", name, rows, rowBytes, len(w)))
	}
	nb := checkDot(name, w[rowBytes*(rows-1):], acts[0].raw, n, block, blockBytes)
	if nb*blockBytes > rowBytes && rows > 1 {
		panic(fmt.Sprintf("quant1bit: %s: rows of %d bytes are shorter than %d elements", name, rowBytes, n))
	}
	if nb == 0 {
		for t := range acts {
			clear(out[t*stride : t*stride+rows])
		}
		return
	}
	kernel(w, rowBytes, rows, acts, out, stride, nb)
}

// dotQ1_0ActsBatch and dotQ1_0ActsRows are the kernels chosen at init;
// arguments are checked, nb ≥ 1.
var (
	dotQ1_0ActsBatch = dotQ1_0ActsBatchGo
	dotQ1_0ActsRows  = dotQ1_0ActsRowsGo
)

func dotQ1_0ActsRowsGo(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	for r := range rows {
		dotQ1_0ActsBatch(w[r*rowBytes:], acts, out[r:], stride, nb)
	}
}

// dotQ1_0ActsBatchGo is the per-token loop.
func dotQ1_0ActsBatchGo(w []byte, acts []Acts, out []float32, stride, nb int) {
	for t := range acts {
		out[t*stride] = dotQ1_0Acts(w, &acts[t], nb)
	}
}
