package sha256pair

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestMatchesCryptoSHA256 hashes random messages of every length up to
// 300 bytes and some long ones, written whole, in random pieces, and in
// pairs of random pieces, and compares every digest with crypto/sha256.
func TestMatchesCryptoSHA256(t *testing.T) {
	if !haveKernel {
		t.Log("no SHA-NI (or purego): crypto/sha256 underneath")
	}
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 4095, 4096, 65536, 1<<20+17)
	for _, n := range lengths {
		a, b := make([]byte, n), make([]byte, n+r.IntN(200))
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		wantA, wantB := sha256.Sum256(a), sha256.Sum256(b)

		d := New()
		d.Write(a)
		if got := d.Sum(nil); !bytes.Equal(got, wantA[:]) {
			t.Fatalf("n=%d whole: %x, want %x", n, got, wantA)
		}
		if got := d.Sum(nil); !bytes.Equal(got, wantA[:]) {
			t.Fatalf("n=%d: Sum changed the state", n)
		}

		da, db := New(), New()
		pa, pb := a, b
		for len(pa) > 0 || len(pb) > 0 {
			ka, kb := min(len(pa), r.IntN(300)), min(len(pb), r.IntN(300))
			if r.IntN(4) == 0 { // aligned pieces, the common case
				ka, kb = min(len(pa), 128), min(len(pb), 128)
			}
			WritePair(da, db, pa[:ka], pb[:kb])
			pa, pb = pa[ka:], pb[kb:]
		}
		if got := da.Sum(nil); !bytes.Equal(got, wantA[:]) {
			t.Fatalf("n=%d pair a: %x, want %x", n, got, wantA)
		}
		if got := db.Sum(nil); !bytes.Equal(got, wantB[:]) {
			t.Fatalf("n=%d pair b: %x, want %x", len(b), got, wantB)
		}
		da.Reset()
		if got, want := da.Sum(nil), sha256.Sum256(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("Reset: %x", got)
		}
	}
}

func BenchmarkPair(b *testing.B) {
	buf := make([]byte, 2<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	half := len(buf) / 2
	b.Run("pair", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			x, y := New(), New()
			WritePair(x, y, buf[:half], buf[half:])
			x.Sum(nil)
			y.Sum(nil)
		}
	})
	b.Run("crypto/sha256", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			sha256.Sum256(buf[:half])
			sha256.Sum256(buf[half:])
		}
	})
}

// TestIncremental compares both digests with crypto/sha256 after every
// WritePair of random, unaligned, often empty pieces (a partial block
// left in one stream while the other has whole blocks).
func TestIncremental(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 2000 {
		a, b := make([]byte, r.IntN(300)), make([]byte, r.IntN(300))
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		da, db := New(), New()
		ra, rb := sha256.New(), sha256.New()
		for len(a) > 0 || len(b) > 0 {
			ka, kb := min(len(a), r.IntN(150)), min(len(b), r.IntN(150))
			WritePair(da, db, a[:ka], b[:kb])
			ra.Write(a[:ka])
			rb.Write(b[:kb])
			if !bytes.Equal(da.Sum(nil), ra.Sum(nil)) || !bytes.Equal(db.Sum(nil), rb.Sum(nil)) {
				t.Fatalf("digests differ after WritePair of %d and %d bytes", ka, kb)
			}
			a, b = a[ka:], b[kb:]
		}
	}
}
