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
		q2Fill = q2FillAVX2
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

// q2SweepAsm finds sc 2·133 float64 after sx.
var _ = [1]int{}[unsafe.Offsetof(q2Sums{}.sc)-2*8*(q2Steps+q2Pad)]

//go:noescape
func q2SweepAsm(k3, k2 *uint64, ax *float64, gm *uint64, steps int, bp, sx *float64)

func q2SweepAVX2(m *q2Mags, steps int, bp *[q2Steps + 1 + q2Pad]float64, s *q2Sums) {
	q2SweepAsm(&m.k3[0], &m.k2[0], &m.ax[0], &m.gm[0], steps, &bp[0], &s.sx[0][0])
}

//go:noescape
func q2FillAsm(keys *uint32, n int, k3, k2 *uint64, ax *float64, gm *uint64)

func q2FillAVX2(keys *[q2MagLen]uint32, z, n int, m *q2Mags) {
	q2FillAsm(&keys[z], n, &m.k3[0], &m.k2[0], &m.ax[0], &m.gm[0])
	const inf = 0x7ff0000000000000
	m.k3[n], m.k2[n], m.ax[n], m.gm[n] = inf, inf, 0, 0
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
