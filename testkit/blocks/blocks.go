// Package blocks holds what the kernel tests of int8, quant1bit and
// runtime/kernels share: random quantized blocks (the same edge cases for
// every block format with an fp16 scale in front), the bitwise comparison
// of a kernel with its Go twin, a float64 reference dot product and the
// kernel set a package must select.
package blocks

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// EdgeScales are the fp16 scales a kernel must get right besides random
// ones: ±0, the smallest subnormal, the largest subnormal, ±the largest
// finite value, ±Inf, a NaN and 1.
var EdgeScales = []uint16{0, 0x8000, 0x0001, 0x83ff, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x3c00}

// Random returns nb blocks of size bytes: a random fp16 scale (one time
// in four an edge scale) and random payload bytes, with 0x80 (−128 as an
// int8) over-represented.
func Random(r *rand.Rand, nb, size int) []byte {
	row := make([]byte, nb*size)
	for b := range nb {
		blk := row[b*size : (b+1)*size]
		h := uint16(r.Uint32())
		if r.IntN(4) == 0 {
			h = EdgeScales[r.IntN(len(EdgeScales))]
		}
		binary.LittleEndian.PutUint16(blk, h)
		for j := 2; j < size; j++ {
			blk[j] = byte(r.Uint32())
			if r.IntN(8) == 0 {
				blk[j] = 0x80
			}
		}
	}
	return row
}

// SameFloat reports whether a kernel's result a is its Go twin's b to
// the bit, treating any two NaNs as equal.
func SameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}
