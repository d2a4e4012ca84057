package quant1bit

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
)

// DotQ2_0ActsRows sets out[t*stride+r] = DotQ2_0Acts(row r, &acts[t]),
// bit for bit, for rows consecutive Q2_0 weight rows of rowBytes bytes
// each in w: the contract of DotQ1_0ActsRows, for the Q2_0 heads of 1-bit
// models. Each row's codes are expanded once for up to four tokens with
// AVX-512 (the set DotQ1_0ActsRows' kernel needs), two with AVX2, and the
// checks are made once per call rather than per row. All acts must have the same Len. It
// panics if the results do not fit in out at stride, or if w or rowBytes
// is too short for that length.
func DotQ2_0ActsRows(w []byte, rowBytes, rows int, acts []Acts, out []float32, stride int) {
	actsRows("DotQ2_0ActsRows", w, rowBytes, rows, acts, out, stride, BlockQ2_0, BlockBytesQ2_0, dotQ2_0ActsRows)
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

// q2Ready fills a.bq2 for the row Set last, unless that is done: only
// the AVX2 Q2_0 rows kernels read it, and only models with Q2_0 weights
// (the heads of some 1-bit models) call them, so Set leaves it to the
// first call. Goroutines sharing a may call it at once; q2Mu makes one
// of them fill it.
func (a *Acts) q2Ready() {
	if atomic.LoadUint32(&a.q2) != 0 {
		return
	}
	q2Mu.Lock()
	defer q2Mu.Unlock()
	if a.q2 == 0 {
		a.setQ2(len(a.d)) // Set padded a.d to whole groups of 8 (or 16)
		atomic.StoreUint32(&a.q2, 1)
	}
}

// q2Mu guards the fills of Acts.bq2 (one lock for all: an Acts fills
// once per Set).
var q2Mu sync.Mutex

// setQ2 fills a.bq2 for the np (a multiple of 8) padded blocks: per group
// of eight activation blocks D = 0..7 (four Q2_0 blocks), 320 bytes:
//
//	[0, 256)   vector u = 4h+s (h = 0, 1; s = 0..3) at 32u: bytes 4D .. 4D+3
//	           are codes 16h+s, 16h+4+s, 16h+8+s, 16h+12+s of block D
//	[256, 288) the eight block scales as float32
//	[288, 320) the eight code sums as int32
//
// Codes 16h+4i+s are field s (bits 2s, 2s+1) of code bytes 4h+i of the
// weight half that block D meets, so a shift and a mask of those four
// bytes make the weights that vector u multiplies.
func (a *Acts) setQ2(np int) {
	a.bq2 = grow(a.bq2, np/8*q2GroupBytes)
	for g := range np / 8 {
		out := (*[q2GroupBytes]byte)(a.bq2[g*q2GroupBytes:])
		for d := range 8 {
			blk := (*[blockQ8_0]byte)(a.codes[(8*g+d)*blockQ8_0:])
			for h := range 2 {
				// A 4×4 byte transpose: word i of the half holds codes
				// 16h+4i+s at byte s; word s of the result, byte i.
				w0 := binary.LittleEndian.Uint32(blk[16*h:])
				w1 := binary.LittleEndian.Uint32(blk[16*h+4:])
				w2 := binary.LittleEndian.Uint32(blk[16*h+8:])
				w3 := binary.LittleEndian.Uint32(blk[16*h+12:])
				t0 := w0&0x00ff00ff | (w1&0x00ff00ff)<<8
				t1 := w0>>8&0x00ff00ff | w1&0xff00ff00
				t2 := w2&0x00ff00ff | (w3&0x00ff00ff)<<8
				t3 := w2>>8&0x00ff00ff | w3&0xff00ff00
				o := 128*h + 4*d
				binary.LittleEndian.PutUint32(out[o:], t0&0xffff|t2<<16)
				binary.LittleEndian.PutUint32(out[o+32:], t1&0xffff|t3<<16)
				binary.LittleEndian.PutUint32(out[o+64:], t0>>16|t2&0xffff0000)
				binary.LittleEndian.PutUint32(out[o+96:], t1>>16|t3&0xffff0000)
			}
			binary.LittleEndian.PutUint32(out[256+4*d:], math.Float32bits(a.d[8*g+d]))
			binary.LittleEndian.PutUint32(out[288+4*d:], uint32(a.sum[8*g+d]))
		}
	}
}

// q2GroupBytes is the size of one group's entry in Acts.bq2.
const q2GroupBytes = 320
