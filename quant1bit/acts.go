package quant1bit

import (
	"encoding/binary"
	"math"
	"sync/atomic"

	"github.com/qnnprep/qnnprep/internal/half"
)

// Acts is a Q8_0 activation row unpacked once for dot products with many
// weight rows: the codes of each block without their scales, the scales
// as float32, and the sum of each block's codes. DotQ1_0Acts(w, a) is
// bit for bit DotQ1_0(w, x, n); it only skips work that does not depend
// on the weights. DotQ2_0Acts is the same for DotQ2_0, and
// DotQ1_0ActsBatch computes DotQ1_0Acts for several rows at once.
// Goroutines may share an Acts while none of them calls Set.
//
// Acts may be copied (the copy shares its memory), so it holds no
// sync or atomic types: q2 is used through atomic functions.
type Acts struct {
	n     int
	raw   []byte    // the Q8_0 row (for the Go kernels)
	codes []byte    // 32 codes per block, contiguous
	d     []float32 // block scales
	sum   []int32   // Σ codes per block
	bq4   []byte    // the AVX-512 batch kernel's layout (see setQuad), when in use
	bq2   []byte    // the AVX2 Q2_0 rows kernels' layout (see setQ2), filled on first use
	q2    uint32    // 1 once bq2 holds the row Set last (atomic; see q2Ready)
	bqb   []byte    // the AVX2 and AVX-VNNI batch kernels' layout (see setBytes), when in use
}

// Set unpacks the Q8_0 activation row x of n elements (n a multiple of
// 32), reusing a's memory. x is copied. It panics if x is too short.
func (a *Acts) Set(x []byte, n int) {
	if n < 0 || n%blockQ8_0 != 0 || len(x) < n/blockQ8_0*blockBytesQ8_0 {
		panic("quant1bit: Acts.Set: bad row length")
	}
	nb := n / blockQ8_0
	a.n = n
	a.raw = append(a.raw[:0], x[:nb*blockBytesQ8_0]...)
	// Zero-padded to a whole number of 8-block groups, which the AVX2
	// kernels read as two Q1_0 or four Q2_0 blocks at a time (16-block
	// groups, four Q1_0 blocks, for the AVX-512 kernel).
	np := (nb + 7) &^ 7
	if quadLayout {
		np = (nb + 15) &^ 15
	}
	a.codes = grow(a.codes, np*blockQ8_0)
	a.d = grow(a.d, np)
	a.sum = grow(a.sum, np)
	clear(a.codes[nb*blockQ8_0:])
	clear(a.d[nb:])
	clear(a.sum[nb:])
	for b := range nb {
		blk := a.raw[b*blockBytesQ8_0 : (b+1)*blockBytesQ8_0]
		a.d[b] = half.F16ToF32(binary.LittleEndian.Uint16(blk))
		copy(a.codes[b*blockQ8_0:], blk[2:])
		// Σ codes, eight at a time: bias each byte to unsigned (c+128),
		// add byte pairs, then the four 16-bit sums by one multiply.
		var s int32
		for i := 2; i < blockBytesQ8_0; i += 8 {
			v := binary.LittleEndian.Uint64(blk[i:]) ^ 0x8080808080808080
			v = v&0x00ff00ff00ff00ff + v>>8&0x00ff00ff00ff00ff
			s += int32(v*0x0001000100010001>>48) - 8*128
		}
		a.sum[b] = s
	}
	if quadLayout {
		a.setQuad(np)
	}
	atomic.StoreUint32(&a.q2, 0)
	if byteLayout {
		a.setBytes(np)
	}
}

// byteLayout and quadLayout are set at init when DotQ1_0ActsBatch's
// kernel reads Acts.bqb or Acts.bq4.
var byteLayout, quadLayout bool

// batchPairBytes is the size of one pair's entry in Acts.bqb.
const batchPairBytes = 320

// setQuad fills a.bq4 for the np (a multiple of 16) padded blocks: per
// quad of Q1_0 blocks (sixteen activation blocks L = 0..15), 640 bytes:
//
//	[0, 512)   the codes transposed by 4-byte words: bytes 64r+4L ..
//	           64r+4L+3 are codes 4r .. 4r+3 of block L (r = 0..7)
//	[512, 576) the sixteen block scales as float32
//	[576, 640) the sixteen code sums, negated, as int32
//
// so that one 64-byte load at 64r holds a piece of every block.
func (a *Acts) setQuad(np int) {
	a.bq4 = grow(a.bq4, np/16*quadBytes)
	packWords(a.bq4, a.codes, a.d, a.sum, np/16, 16, -1)
}

// quadBytes is the size of one quad's entry in Acts.bq4.
const quadBytes = 640

// setBytes fills a.bqb for the np (a multiple of 8) padded blocks: per
// pair of Q1_0 blocks (eight activation blocks D = 0..7), 320 bytes:
//
//	[0, 256)   the codes transposed by bytes: bytes 32r+4D .. 32r+4D+3
//	           are codes r, 8+r, 16+r, 24+r of block D (r = 0..7)
//	[256, 288) the eight block scales as float32
//	[288, 320) the eight code sums, negated, as int32
//
// so that byte q of block D in the load at 32r pairs with bit r of the
// block's sign byte q.
func (a *Acts) setBytes(np int) {
	a.bqb = grow(a.bqb, np/8*batchPairBytes)
	packBytes(a.bqb, a.codes, a.d, a.sum, np/8)
}

// packBytes fills dst with groups groups of eight activation blocks, 320
// bytes each, in the layout of Acts.bqb. An assembly version replaces it
// where the AVX-VNNI kernel is in use.
var packBytes = packBytesGo

func packBytesGo(dst, codes []byte, d []float32, sum []int32, groups int) {
	for g := range groups {
		out := dst[g*batchPairBytes : (g+1)*batchPairBytes]
		for b := range 8 {
			blk := codes[(g*8+b)*32:][:32]
			for r := range 8 {
				for q := range 4 {
					out[32*r+4*b+q] = blk[8*q+r]
				}
			}
			binary.LittleEndian.PutUint32(out[256+4*b:], math.Float32bits(d[g*8+b]))
			binary.LittleEndian.PutUint32(out[288+4*b:], uint32(-sum[g*8+b]))
		}
	}
}

// packWords fills dst with groups groups of n activation blocks (n a
// multiple of 8), 40n bytes each: the codes transposed by 4-byte words
// (bytes 4nr+4b .. 4nr+4b+3 are codes 4r .. 4r+3 of block b), the n
// scales, and the n code sums times sign. An assembly version replaces
// it where the batch kernels are assembly.
var packWords = packWordsGo

func packWordsGo(dst, codes []byte, d []float32, sum []int32, groups, n int, sign int32) {
	for g := range groups {
		out := dst[g*40*n : (g+1)*40*n]
		for b := range n {
			blk := codes[(g*n+b)*32:][:32]
			for r := range 8 {
				copy(out[4*(n*r+b):][:4], blk[4*r:])
			}
			binary.LittleEndian.PutUint32(out[32*n+4*b:], math.Float32bits(d[g*n+b]))
			binary.LittleEndian.PutUint32(out[36*n+4*b:], uint32(sign*sum[g*n+b]))
		}
	}
}

// Len is the number of elements of the row.
func (a *Acts) Len() int { return a.n }

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// DotQ1_0Acts returns DotQ1_0(w, x, a.Len()) for the row x that a was
// Set from, bit for bit, faster when one activation row meets many
// weight rows.
func DotQ1_0Acts(w []byte, a *Acts) float32 {
	return dotActs("DotQ1_0Acts", w, a, BlockQ1_0, BlockBytesQ1_0, dotQ1_0Acts)
}

var dotQ1_0Acts = func(w []byte, a *Acts, nb int) float32 { return dotQ1_0Go(w, a.raw, nb) }

// DotQ2_0Acts returns DotQ2_0(w, x, a.Len()) for the row x that a was
// Set from, bit for bit.
func DotQ2_0Acts(w []byte, a *Acts) float32 {
	return dotActs("DotQ2_0Acts", w, a, BlockQ2_0, BlockBytesQ2_0, dotQ2_0Acts)
}

// dotActs checks the arguments of the function name and runs kernel.
func dotActs(name string, w []byte, a *Acts, block, blockBytes int, kernel func([]byte, *Acts, int) float32) float32 {
	nb := checkDot(name, w, a.raw, a.n, block, blockBytes)
	if nb == 0 {
		return 0
	}
	return kernel(w, a, nb)
}

var dotQ2_0Acts = func(w []byte, a *Acts, nb int) float32 { return dotQ2_0Go(w, a.raw, nb) }
