package bench

import (
	"math/rand/v2"
	"testing"
)

// TestXorStreams: each of the probe's read loops (assembly where the CPU
// has it, with and without prefetch) reads every word: its XOR equals the
// Go loop's for every stream count.
func TestXorStreams(t *testing.T) {
	b := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if probeSet != "go" && len(probeLoops) != len(probeAheads) {
		t.Fatalf("%s: %d loops, want one per prefetch distance %v", probeSet, len(probeLoops), probeAheads)
	}
	for _, l := range probeLoops {
		for _, streams := range []int{1, 2, 4} {
			for _, n := range []int{0, 256 * streams, 1024 * streams, len(b)} {
				want := xorStreamsGo(b[:n], streams)
				if got := l.xor(b[:n], streams); got != want {
					t.Errorf("%s: %d bytes, %d streams: %#x, want %#x", l.label(), n, streams, got, want)
				}
			}
		}
		// A flipped bit anywhere shows.
		for _, i := range []int{0, 255, len(b) / 2, len(b) - 1} {
			c := append([]byte(nil), b...)
			c[i] ^= 4
			if l.xor(c, 4) == l.xor(b, 4) {
				t.Errorf("%s: byte %d changed, same XOR", l.label(), i)
			}
		}
	}
}
