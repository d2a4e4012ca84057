package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// littleEndian reports whether the machine stores numbers as the model
// files do, so that weight bytes can be viewed in place.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// f32View returns the first n little-endian float32 values of b, in place
// when the machine is little-endian and b is 4-byte aligned.
func f32View(b []byte, n int) []float32 {
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	f := make([]float32, n)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

// u16View is f32View for 16-bit values.
func u16View(b []byte, n int) []uint16 {
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
	}
	u := make([]uint16, n)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return u
}
