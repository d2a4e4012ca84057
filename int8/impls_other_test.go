//go:build !amd64 || purego

package int8

func rowsImpls() map[string]func(w []byte, rowBytes int, x []byte, nb int, out []float32) {
	return map[string]func(w []byte, rowBytes int, x []byte, nb int, out []float32){"go": rowsGo}
}

func mulImpls() map[string]func([]byte, int, int, *Q8_0Batch, []float32, int) {
	return map[string]func([]byte, int, int, *Q8_0Batch, []float32, int){"go": mulQ8_0Go}
}

func amxSelected() bool { return false }
