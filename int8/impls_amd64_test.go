//go:build !purego

package int8

// rowsImpls are the implementations of dotQ8_0SymRows this CPU runs,
// by kernel set, for tests and benchmarks that compare them.
func rowsImpls() map[string]func(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	m := map[string]func(w []byte, rowBytes int, x []byte, nb int, out []float32){"go": rowsGo}
	if hasAVX2 {
		m["avx2"] = dotQ8_0SymRowsAVX2
	}
	if hasAVX512 {
		m["avx512"] = dotQ8_0RowsAVX512
	}
	return m
}

// mulImpls are the implementations of mulQ8_0 this CPU runs, by kernel
// set.
func mulImpls() map[string]func([]byte, int, int, *Q8_0Batch, []float32, int) {
	m := map[string]func([]byte, int, int, *Q8_0Batch, []float32, int){"go": mulQ8_0Go}
	if hasAVX2 {
		m["avx2"] = mulQ8_0AVX2
	}
	if hasAVXVNNI {
		m["avx2+avxvnni"] = func(w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
			// Where another kernel is selected, Set has not laid the
			// batch out for this one.
			if setVNNI == nil {
				setVNNIBatchGo(x)
			}
			mulQ8_0AVXVNNI(w, rowBytes, rows, x, out, outStride)
		}
	}
	if hasAVX512 {
		m["avx512"] = mulQ8_0AVX512
	}
	if amxUsable() {
		m["avx512+amx"] = mulQ8_0AMX
	}
	return m
}

// amxSelected reports whether MulQ8_0 runs the AMX kernel here.
func amxSelected() bool { return amxUsable() }
