// Package panel lays weight rows out as the transposed panels that the
// prompt products of int8 (MulQ8_0) and runtime/kernels (MulF16, MulBF16)
// read:
// the values of several rows, widened to 32 bits, interleaved so that one
// vector holds the same column of every row. Both products repack their
// panels in every call (the weights are read where the file maps them), so
// the packing is assembly; both widen eight rows and transpose them as an
// 8×8 matrix of 32-bit values, and that transpose is written here once.
//
// Each function has a Go twin (the definition of the layout, and what
// -tags purego and other architectures run); the tests compare them bit
// for bit.
package panel

import (
	"encoding/binary"
	"fmt"

	"github.com/qnnprep/qnnprep/internal/half"
)

// Q8_0 panel geometry: Q8Rows rows per panel; a ggml Q8_0 block is an
// fp16 scale and Q8Block int8 codes (Q8BlockBytes bytes); a laid-out block
// takes Q8Codes int16 codes and Q8Rows scales.
const (
	Q8Rows       = 16
	Q8Block      = 32
	Q8BlockBytes = 2 + Q8Block
	Q8Codes      = Q8Rows * Q8Block
)

// Q8_0 lays out nb Q8_0 blocks of Q8Rows rows (row r at w[r·rowBytes:]) as
// a panel piece: per block, the codes as int16 in [pair][row] order, two
// adjacent codes (2p, 2p+1) of a row side by side, at
// codes[k·Q8Codes + p·2·Q8Rows + 2r + j%2] for code j = 2p+j%2 of block k,
// and the scales as float32 at d[k·Q8Rows + r]. It panics if the rows or
// the destinations are too short.
func Q8_0(w []byte, rowBytes, nb int, codes []int16, d []float32) {
	if nb <= 0 {
		return
	}
	if rowBytes < nb*Q8BlockBytes || (Q8Rows-1)*rowBytes+nb*Q8BlockBytes > len(w) || len(codes) < nb*Q8Codes || len(d) < nb*Q8Rows {
		panic(fmt.Sprintf("panel: Q8_0: %d rows of %d blocks at stride %d from %d bytes into %d codes and %d scales",
			Q8Rows, nb, rowBytes, len(w), len(codes), len(d)))
	}
	q8_0(w, rowBytes, nb, codes, d)
}

// F16 converts eight rows of 32·m binary16 values (row r at
// w[r·rowBytes:]) to float32 into a panel of vectors of lanes floats (8 or
// 16), row r in lane r of each: element i of the rows in vector
// ((i%8)·m + i/32)·4 + (i%32)/8, which starts at dst[v·lanes]. A panel of
// sixteen rows is two calls, the second with dst[8:]. It panics if lanes
// is neither 8 nor 16 or the rows or dst are too short.
func F16(w []byte, rowBytes, m int, dst []float32, lanes int) {
	if checkHalf("F16", w, rowBytes, m, dst, lanes) {
		f16(w, rowBytes, m, dst, lanes)
	}
}

// BF16 is F16 for rows of bfloat16 values.
func BF16(w []byte, rowBytes, m int, dst []float32, lanes int) {
	if checkHalf("BF16", w, rowBytes, m, dst, lanes) {
		bf16(w, rowBytes, m, dst, lanes)
	}
}

// checkHalf reports whether F16 or BF16 has rows to lay out (m > 0) and
// panics if they or dst are too short.
func checkHalf(name string, w []byte, rowBytes, m int, dst []float32, lanes int) bool {
	if m <= 0 {
		return false
	}
	if lanes != 8 && lanes != 16 || rowBytes < 64*m || 7*rowBytes+64*m > len(w) || (32*m-1)*lanes+8 > len(dst) {
		panic(fmt.Sprintf("panel: %s: 8 rows of %d values at stride %d from %d bytes into %d floats as vectors of %d",
			name, 32*m, rowBytes, len(w), len(dst), lanes))
	}
	return true
}

func q8_0Go(w []byte, rowBytes, nb int, codes []int16, d []float32) {
	for k := range nb {
		for r := range Q8Rows {
			blk := w[r*rowBytes+k*Q8BlockBytes:]
			d[k*Q8Rows+r] = half.F16ToF32(binary.LittleEndian.Uint16(blk))
			for j, c := range blk[2:Q8BlockBytes] {
				codes[k*Q8Codes+(j/2)*2*Q8Rows+2*r+j%2] = int16(int8(c))
			}
		}
	}
}

func f16Go(w []byte, rowBytes, m int, dst []float32, lanes int) {
	halfGo(half.F16ToF32, w, rowBytes, m, dst, lanes)
}

func bf16Go(w []byte, rowBytes, m int, dst []float32, lanes int) {
	halfGo(half.BF16ToF32, w, rowBytes, m, dst, lanes)
}

// halfGo is the F16 and BF16 layout, the values widened by widen.
func halfGo(widen func(uint16) float32, w []byte, rowBytes, m int, dst []float32, lanes int) {
	for r := range 8 {
		row := w[r*rowBytes:]
		for i := range 32 * m {
			v := ((i%8)*m+i/32)*4 + (i%32)/8
			dst[v*lanes+r] = widen(binary.LittleEndian.Uint16(row[2*i:]))
		}
	}
}
