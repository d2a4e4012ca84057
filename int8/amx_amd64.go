//go:build !purego

package int8

import (
	"encoding/binary"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AMX prompt product. TDPBSSD multiplies a tile of sixteen weight
// rows' block codes (int8, read in place from the ggml rows: 32 bytes per
// row at stride rowBytes) with a tile of sixteen tokens' block codes (laid
// out by setAMX in the 4-byte-interleaved form the instruction wants) into
// sixteen by sixteen exact int32 block sums, one block (K = 32) per
// instruction: two blocks in one 64-byte row would add their sums, which
// DotQ8_0's order keeps apart. AVX-512 then applies the scales and adds
// the terms in DotQ8_0's order, so every output has DotQ8_0's bits.

// amxMinTokens is the least batch the AMX kernel takes; smaller ones go to
// the AVX-512 panel kernel (a tile of sixteen tokens would be mostly
// padding).
const amxMinTokens = 16

var (
	amxOnce sync.Once
	amxOK   bool
)

// amxUsable reports whether the CPU has AMX-TILE and AMX-INT8 and the
// operating system granted this process the tile state (asked for once).
func amxUsable() bool {
	amxOnce.Do(func() {
		if !hasAVX512 || !cpu.X86.HasAMXTile || !cpu.X86.HasAMXInt8 {
			return
		}
		amxOK = requestTileState()
	})
	return amxOK
}

// setAMXBatch lays b's t rows out for amxQ8_0Asm: per group of sixteen
// tokens and block, eight rows of 64 bytes, row j holding codes 4j..4j+3
// of each token (zero for the tokens past t), and the tokens' scales.
func setAMXBatch(b *Q8_0Batch, x []byte, xstride int) {
	if b.t < amxMinTokens {
		return
	}
	groups, nb := (b.t+15)/16, b.nb
	na, nd := groups*nb*512, groups*nb*16
	b.xa = slices.Grow(b.xa[:0], na)[:na]
	b.xad = slices.Grow(b.xad[:0], nd)[:nd]
	if b.t%16 != 0 {
		last := (groups - 1) * nb
		clear(b.xa[last*512:])
		clear(b.xad[last*16:])
	}
	for t := range b.t {
		row := x[t*xstride:]
		g, tt := t/16, t%16
		for k := range nb {
			blk := row[k*BlockBytesQ8_0 : (k+1)*BlockBytesQ8_0]
			b.xad[(g*nb+k)*16+tt] = f16At(blk)
			dst := b.xa[(g*nb+k)*512+4*tt:]
			for j := range 8 {
				binary.LittleEndian.PutUint32(dst[64*j:], binary.LittleEndian.Uint32(blk[2+4*j:]))
			}
		}
	}
}

// amxScratch is one call's tile configuration, row offsets, block sums
// and results, 64-byte aligned within buf.
type amxScratch struct {
	buf []byte
}

// Offsets in the aligned scratch (amx_amd64.s reads them).
const (
	amxCfg     = 0    // the 64-byte tile configuration
	amxOffsets = 64   // [16]int32: r·rowBytes
	amxMask    = 128  // uint16: the rows in this panel
	amxDW      = 192  // [2][16]float32: the rows' scales of two blocks
	amxC       = 384  // [2][16][16]int32: two blocks' sums
	amxRowIdx  = 2432 // [16]int32: 64·m, where row m's sums start in amxC
	amxSize    = 2496
)

var amxPool = sync.Pool{New: func() any { return &amxScratch{buf: make([]byte, amxSize+64)} }}

// mulQ8_0AMX is mulQ8_0 with the AMX kernel for batches of at least
// amxMinTokens rows (laid out by setAMXBatch), the AVX-512 one otherwise.
func mulQ8_0AMX(w []byte, rowBytes, rows int, x *Q8_0Batch, out []float32, outStride int) {
	if len(x.xa) == 0 || 15*rowBytes >= 1<<31 {
		mulQ8_0AVX512(w, rowBytes, rows, x, out, outStride)
		return
	}
	s := amxPool.Get().(*amxScratch)
	defer amxPool.Put(s)
	off := -int(uintptr(unsafe.Pointer(&s.buf[0]))) & 63
	sc := s.buf[off : off+amxSize]
	groups := (x.t + 15) / 16
	for m := range 16 {
		binary.LittleEndian.PutUint32(sc[amxRowIdx+4*m:], uint32(64*m))
	}
	// Tiles: 0 and 1 weight codes (rows × 32 bytes), 2 and 3 token codes
	// (8 × 64), 4 and 5 block sums (rows × 64).
	clear(sc[:64])
	sc[0] = 1 // palette 1
	for i := range 2 {
		binary.LittleEndian.PutUint16(sc[16+2*i:], 32)
		binary.LittleEndian.PutUint16(sc[16+2*(2+i):], 64)
		binary.LittleEndian.PutUint16(sc[16+2*(4+i):], 64)
		sc[48+2+i] = 8
	}
	for r := range 16 {
		binary.LittleEndian.PutUint32(sc[amxOffsets+4*r:], uint32(r*rowBytes))
	}
	for r0 := 0; r0 < rows; r0 += 16 {
		nr := min(16, rows-r0)
		sc[48+0], sc[48+1], sc[48+4], sc[48+5] = byte(nr), byte(nr), byte(nr), byte(nr)
		binary.LittleEndian.PutUint16(sc[amxMask:], uint16(1<<nr-1))
		amxQ8_0Asm(unsafe.Pointer(&sc[0]), unsafe.Pointer(&w[r0*rowBytes]), rowBytes,
			unsafe.Pointer(&x.xa[0]), unsafe.Pointer(&x.xad[0]), x.nb, groups, unsafe.Pointer(&out[r0]), 4*outStride, x.t)
	}
}

// amxQ8_0Asm sets the float32 at out + t·outStride bytes + 4m to the
// product of weight row m (of the panel at w, rows at stride rowBytes, nb
// blocks) and token t < tokens (in groups groups of sixteen), in
// DotQ8_0's order; the rows it computes and the tile shapes are in the
// scratch at sc (amxCfg, amxOffsets, amxMask, amxRowIdx). It configures
// the tiles and releases them before returning.
//
//go:noescape
func amxQ8_0Asm(sc, w unsafe.Pointer, rowBytes int, xa, xad unsafe.Pointer, nb, groups int, out unsafe.Pointer, outStride, tokens int)
