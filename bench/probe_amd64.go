//go:build !purego

package bench

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func xorStreamsAVX512(p *byte, n, streams, ahead int) uint64

//go:noescape
func xorStreamsAVX2(p *byte, n, streams, ahead int) uint64

func init() {
	var asm func(p *byte, n, streams, ahead int) uint64
	switch {
	case cpu.X86.HasAVX512F:
		probeSet, asm = "avx512", xorStreamsAVX512
	case cpu.X86.HasAVX2:
		probeSet, asm = "avx2", xorStreamsAVX2
	default:
		return
	}
	probeLoops = nil
	for _, ahead := range probeAheads {
		probeLoops = append(probeLoops, readLoop{ahead: ahead, xor: func(b []byte, streams int) uint64 {
			return asm(unsafe.SliceData(b), len(b)/streams, streams, ahead)
		}})
	}
}
