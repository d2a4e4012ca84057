//go:build purego || !amd64

package panel

func q8_0(w []byte, rowBytes, nb int, codes []int16, d []float32) {
	q8_0Go(w, rowBytes, nb, codes, d)
}

func f16(w []byte, rowBytes, m int, dst []float32, lanes int) {
	f16Go(w, rowBytes, m, dst, lanes)
}

func bf16(w []byte, rowBytes, m int, dst []float32, lanes int) {
	bf16Go(w, rowBytes, m, dst, lanes)
}
