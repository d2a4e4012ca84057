//go:build !purego && !linux

package int8

// requestTileState reports false: only Linux's way of granting the AMX
// tile state is known here and tested, so elsewhere the AVX-512 kernels
// run.
func requestTileState() bool { return false }
