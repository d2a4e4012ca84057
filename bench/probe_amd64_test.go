//go:build !purego

package bench

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// TestXorStreamsAVX2: the AVX2 loop, which a machine with AVX-512 does
// not select, agrees with the Go loop too, with and without prefetch.
func TestXorStreamsAVX2(t *testing.T) {
	if !cpu.X86.HasAVX2 {
		t.Skip("no AVX2")
	}
	b := make([]byte, 16<<10)
	for i := range b {
		b[i] = byte(i*131 + i>>8)
	}
	for _, ahead := range probeAheads {
		for _, streams := range []int{1, 2, 4} {
			for _, n := range []int{0, 256 * streams, len(b)} {
				if got, want := xorStreamsAVX2(unsafe.SliceData(b[:n]), n/streams, streams, ahead), xorStreamsGo(b[:n], streams); got != want {
					t.Errorf("prefetch %d: %d bytes, %d streams: %#x, want %#x", ahead, n, streams, got, want)
				}
			}
		}
	}
}
