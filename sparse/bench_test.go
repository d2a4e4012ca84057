package sparse

import "testing"

// BenchmarkZeroNM: 2:4 over a 4096×4096 matrix (one 7B-class projection).
func BenchmarkZeroNM(b *testing.B) {
	orig := randMatrix(4096, 4096, 1)
	w := make([]float32, len(orig))
	b.SetBytes(int64(4 * len(w)))
	for b.Loop() {
		copy(w, orig)
		zeroNM(w, 4096, 2, 4, nil)
	}
}

// BenchmarkZeroBlocks: block32 at 50% over a 4096×4096 matrix.
func BenchmarkZeroBlocks(b *testing.B) {
	orig := randMatrix(4096, 4096, 1)
	w := make([]float32, len(orig))
	b.SetBytes(int64(4 * len(w)))
	for b.Loop() {
		copy(w, orig)
		zeroBlocks(w, 4096, 4096, 32, 0.5, nil)
	}
}
