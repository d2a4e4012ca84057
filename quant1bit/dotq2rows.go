package quant1bit

import "fmt"

// DotQ2_0ActsRows sets out[t*stride+r] = DotQ2_0Acts(row r, &acts[t]),
// bit for bit, for rows consecutive Q2_0 weight rows of rowBytes bytes
// each in w: the contract of DotQ1_0ActsRows, for the Q2_0 heads of 1-bit
// models. With AVX-512 (the set DotQ1_0ActsRows' kernel needs) each row's
// codes are expanded once for up to four tokens, and the checks are made
// once per call rather than per row. All acts must have the same Len. It
// panics if the results do not fit in out at stride, or if w or rowBytes
// is too short for that length.
func DotQ2_0ActsRows(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride int) {
	if len(acts) == 0 || rows == 0 {
		return
	}
	n := acts[0].n
	for t := range acts {
		if acts[t].n != n {
			panic(fmt.Sprintf("quant1bit: DotQ2_0ActsRows: acts[%d] has %d elements, acts[0] has %d", t, acts[t].n, n))
		}
	}
	last := (len(acts)-1)*stride + rows - 1
	if rows < 0 || stride < rows || last >= len(out) {
		panic(fmt.Sprintf("quant1bit: DotQ2_0ActsRows: %d rows x %d results at stride %d do not fit in %d floats", rows, len(acts), stride, len(out)))
	}
	if rowBytes < 0 || rowBytes*(rows-1) > len(w) {
		panic(fmt.Sprintf("quant1bit: DotQ2_0ActsRows: %d rows of %d bytes do not fit in %d", rows, rowBytes, len(w)))
	}
	nb := checkDot("DotQ2_0ActsRows", w[rowBytes*(rows-1):], acts[0].raw, n, BlockQ2_0, BlockBytesQ2_0)
	if nb*BlockBytesQ2_0 > rowBytes && rows > 1 {
		panic(fmt.Sprintf("quant1bit: DotQ2_0ActsRows: rows of %d bytes are shorter than %d elements", rowBytes, n))
	}
	if nb == 0 {
		for t := range acts {
			clear(out[t*stride : t*stride+rows])
		}
		return
	}
	dotQ2_0ActsRows(w, rowBytes, rows, acts, out, stride, nb)
}

// dotQ2_0ActsRows is the kernel chosen at init; arguments are checked,
// nb ≥ 1.
var dotQ2_0ActsRows = dotQ2_0ActsRowsGo

// dotQ2_0ActsRowsGo defines the bits: each row against each token through
// the per-row kernel (dotQ2_0Acts, assembly on AVX2 machines, which is
// dotQ2_0Go's float32 steps).
func dotQ2_0ActsRowsGo(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride, nb int) {
	for r := range rows {
		row := w[r*rowBytes:]
		for t := range acts {
			out[t*stride+r] = dotQ2_0Acts(row, &acts[t], nb)
		}
	}
}
