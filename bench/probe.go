package bench

import (
	"encoding/binary"
)

// probeSet is the instruction set of the probe's read loop: "avx512",
// "avx2" (probe_amd64.go) or "go".
var probeSet = "go"

// xorStreams returns the XOR of every 64-bit word of b, read as streams
// adjacent regions of len(b)/streams bytes side by side (streams 1, 2 or
// 4; len(b) a multiple of 256·streams).
var xorStreams = xorStreamsGo

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
