// Package sha256pair computes SHA-256 digests two at a time.
//
// The SHA-NI round instruction is bound by its latency, not its
// throughput: one message stream retires a round every ~1.35 ns on this
// project's machines, two interleaved streams one every ~0.67 ns. Hashing
// a model's source in independent chunks (as quantize does) can therefore
// run two chunks through one core at twice the speed of crypto/sha256.
// Digest results are plain SHA-256, identical to crypto/sha256's; without
// SHA-NI (or with the purego tag) the package hashes through crypto/sha256.
package sha256pair

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"hash"
)

// Digest is one SHA-256 stream. The zero value is not ready: use New.
type Digest struct {
	h   [8]uint32
	x   [64]byte // a partial block
	nx  int
	n   uint64    // bytes written
	std hash.Hash // set when the kernel is unavailable
}

// New returns a Digest ready to write.
func New() *Digest {
	d := &Digest{}
	d.Reset()
	return d
}

var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// Reset returns d to the empty message.
func (d *Digest) Reset() {
	if !haveKernel {
		d.std = sha256.New()
		return
	}
	d.h, d.nx, d.n = iv, 0, 0
}

// Write adds p to the message. It never fails.
func (d *Digest) Write(p []byte) (int, error) {
	if d.std != nil {
		return d.std.Write(p)
	}
	d.n += uint64(len(p))
	d.write(p)
	return len(p), nil
}

// write hashes p, already counted in d.n, as one stream.
func (d *Digest) write(p []byte) {
	p = d.fill(p)
	if nb := len(p) / 64; nb > 0 {
		var scratch [8]uint32 // the kernel's second stream, unused
		blocks2(&d.h, &scratch, p, p, nb)
		p = p[nb*64:]
	}
	if len(p) > 0 { // then fill left no partial block
		d.nx = copy(d.x[:], p)
	}
}

// fill completes a partial block from p, compresses it when full, and
// returns the rest of p.
func (d *Digest) fill(p []byte) []byte {
	if d.nx == 0 {
		return p
	}
	k := copy(d.x[d.nx:], p)
	d.nx += k
	if d.nx == 64 {
		var scratch [8]uint32
		blocks2(&d.h, &scratch, d.x[:], d.x[:], 1)
		d.nx = 0
	}
	return p[k:]
}

// WritePair adds pa to a's message and pb to b's, hashing the whole
// blocks they have in common two at a time. a and b must be different
// digests.
func WritePair(a, b *Digest, pa, pb []byte) {
	if a.std != nil {
		a.std.Write(pa)
		b.std.Write(pb)
		return
	}
	a.n += uint64(len(pa))
	b.n += uint64(len(pb))
	pa, pb = a.fill(pa), b.fill(pb)
	// With a partial block left in either stream (p was too short to
	// complete it) the rest goes one stream at a time.
	if a.nx == 0 && b.nx == 0 {
		if nb := min(len(pa), len(pb)) / 64; nb > 0 {
			blocks2(&a.h, &b.h, pa, pb, nb)
			pa, pb = pa[nb*64:], pb[nb*64:]
		}
	}
	a.write(pa)
	b.write(pb)
}

// Sum appends the digest of the message so far to in; d is unchanged.
func (d *Digest) Sum(in []byte) []byte {
	if d.std != nil {
		return d.std.Sum(in)
	}
	// crypto/sha256 takes over the state and pads: its marshalled form is
	// "sha\x03", the eight state words, the 64-byte block buffer and the
	// length, all big-endian.
	state := make([]byte, 0, 4+32+64+8)
	state = append(state, "sha\x03"...)
	for _, w := range d.h {
		state = binary.BigEndian.AppendUint32(state, w)
	}
	state = append(state, d.x[:d.nx]...)
	state = append(state, make([]byte, 64-d.nx)...)
	state = binary.BigEndian.AppendUint64(state, d.n)
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		panic("sha256pair: crypto/sha256 refused a state: " + err.Error())
	}
	return h.Sum(in)
}

// Size and BlockSize make Digest a hash.Hash.
func (d *Digest) Size() int      { return sha256.Size }
func (d *Digest) BlockSize() int { return sha256.BlockSize }

var _ hash.Hash = (*Digest)(nil)
