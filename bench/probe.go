package bench

import (
	"encoding/binary"
	"fmt"
)

// probeSet is the instruction set of the probe's read loops: "avx512",
// "avx2" (probe_amd64.go) or "go".
var probeSet = "go"

// probeAheads are the prefetch distances, in bytes, the assembly loops
// are timed with (0: no software prefetch, the hardware prefetchers
// alone). Which reads fastest depends on the CPU, and the decode kernels
// prefetch on some: a ceiling without it could understate what the
// machine reads. On the Xeon of session 9 (interleaved, load 4-5, one
// thread, the 700M Q8_0 weights) four streams read 3-4% faster 256-512
// bytes ahead than without, 1 KiB ahead level, 2 KiB ahead slower.
var probeAheads = []int{0, 256, 512, 1024}

// readLoop is one of the probe's read loops.
type readLoop struct {
	ahead int // software prefetch distance in bytes; 0: none
	// xor returns the XOR of every 64-bit word of b, read as streams
	// adjacent regions of len(b)/streams bytes side by side (streams 1,
	// 2 or 4; len(b) a multiple of 256·streams).
	xor func(b []byte, streams int) uint64
}

// label is "avx512, 4 streams per thread, prefetch 1 KiB ahead".
func (l readLoop) label() string {
	s := fmt.Sprintf("%s, %d streams per thread", probeSet, probeStreams)
	if l.ahead > 0 {
		if l.ahead%1024 == 0 {
			s += fmt.Sprintf(", prefetch %d KiB ahead", l.ahead/1024)
		} else {
			s += fmt.Sprintf(", prefetch %d B ahead", l.ahead)
		}
	}
	return s
}

// probeLoops are the loops the probe times, interleaved; the ceiling is
// the fastest one's (probe_amd64.go sets them where the CPU has wider
// loads; Go has no prefetch instruction, so the Go loop is alone).
var probeLoops = []readLoop{{xor: xorStreamsGo}}

func xorStreamsGo(b []byte, streams int) uint64 {
	n := len(b) / streams
	var acc [4]uint64
	for off := 0; off < n; off += 32 {
		for s := range streams {
			w := b[s*n+off : s*n+off+32]
			acc[0] ^= binary.LittleEndian.Uint64(w)
			acc[1] ^= binary.LittleEndian.Uint64(w[8:])
			acc[2] ^= binary.LittleEndian.Uint64(w[16:])
			acc[3] ^= binary.LittleEndian.Uint64(w[24:])
		}
	}
	return acc[0] ^ acc[1] ^ acc[2] ^ acc[3]
}
