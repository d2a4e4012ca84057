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
		q1Sums8 = q1Sums8AVX2
		q2Vertex = q2VertexAVX2
		q2Below = q2BelowAVX2
		q2Sort = q2SortAVX2
		q2Sweep = q2SweepAVX2
		q2Codes = q2CodesAVX2
	}
}

//go:noescape
func q2CodesAsm(x *[BlockQ2_0]float32, neg uint32, h1, h3, m1 float32, y *[BlockQ2_0 / 4]byte)

func q2CodesAVX2(x *[BlockQ2_0]float32, sg, h1, h3, m1 float64, y *[BlockQ2_0 / 4]byte) {
	var neg uint32
	if sg < 0 {
		neg = 1 << 31
	}
	q2CodesAsm(x, neg, float32(h1), float32(h3), float32(m1), y)
}

// q2SweepAsm's layout: 48-byte events, 133 sums per sign.
var _ = [1]int{}[unsafe.Sizeof(q2Event{})-48+q2Steps+q2Pad-133]

//go:noescape
func q2SweepAsm(e3, e2 *q2Event, steps int, bp, sx, sc *float64)

func q2SweepAVX2(e3, e2 *[BlockQ2_0 + 1]q2Event, steps int, bp *[q2Steps + 1 + q2Pad]float64, sx, sc *[2][q2Steps + q2Pad]float64) {
	q2SweepAsm(&e3[0], &e2[0], steps, &bp[0], &sx[0][0], &sc[0][0])
}

//go:noescape
func q2SortAsm(x *[BlockQ2_0]float32, keys *[BlockQ2_0]uint32)

func q2SortAVX2(x *[BlockQ2_0]float32, _ float32, keys *[BlockQ2_0]uint32) { q2SortAsm(x, keys) }

//go:noescape
func q2VertexAsm(bp, sx, sc *float64, steps int, in *[q2MaskWords]uint64)

func q2VertexAVX2(bp *[q2Steps + 1 + q2Pad]float64, sx, sc *[q2Steps + q2Pad]float64, steps int, in *[q2MaskWords]uint64) {
	q2VertexAsm(&bp[0], &sx[0], &sc[0], steps, in)
}

//go:noescape
func q2BelowAsm(bp, sx, sc *float64, k, steps int, K float64) int

func q2BelowAVX2(bp *[q2Steps + 1 + q2Pad]float64, sx, sc *[q2Steps + q2Pad]float64, k, steps int, K float64) int {
	return q2BelowAsm(&bp[0], &sx[0], &sc[0], k, steps, K)
}

//go:noescape
func q1SumsAsm(x *float32, groups int, sums *float32)

func q1Sums8AVX2(x *[8 * BlockQ1_0]float32, s *[8]float32) { q1SumsAsm(&x[0], 1, &s[0]) }

//go:noescape
func q2ErrAsm(x *[BlockQ2_0]float64, d, sg, h1, h3, m1 float64) float64

//go:noescape
func q1SignsAsm(x *float32, y *byte, nb int)

func q1SignsAVX2(src []float32, dst []byte, nb int) {
	q1SignsAsm(unsafe.SliceData(src), unsafe.SliceData(dst), nb)
}
