//go:build !purego

package quant1bit

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX2 {
		q1Signs = q1SignsAVX2
		q2Err = q2ErrAsm
	}
}

//go:noescape
func q2ErrAsm(x *[BlockQ2_0]float64, d, sg, h1, h3, m1 float64) float64

//go:noescape
func q1SignsAsm(x *float32, y *byte, nb int)

func q1SignsAVX2(src []float32, dst []byte, nb int) {
	q1SignsAsm(unsafe.SliceData(src), unsafe.SliceData(dst), nb)
}
