//go:build !purego

package bench

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func xorStreamsAVX512(p *byte, n, streams int) uint64

//go:noescape
func xorStreamsAVX2(p *byte, n, streams int) uint64

func init() {
	switch {
	case cpu.X86.HasAVX512F:
		probeSet = "avx512"
		xorStreams = func(b []byte, streams int) uint64 {
			return xorStreamsAVX512(unsafe.SliceData(b), len(b)/streams, streams)
		}
	case cpu.X86.HasAVX2:
		probeSet = "avx2"
		xorStreams = func(b []byte, streams int) uint64 {
			return xorStreamsAVX2(unsafe.SliceData(b), len(b)/streams, streams)
		}
	}
}
