//go:build !purego

package int8

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux hands out the AMX tile state only to processes that ask for it
// (arch_prctl ARCH_REQ_XCOMP_PERM with XFEATURE_XTILEDATA, Linux 5.16 and
// later); tile instructions fault otherwise.
const (
	archGetXCompPerm  = 0x1022
	archReqXCompPerm  = 0x1023
	xfeatureXTileData = 18
)

// requestTileState asks for the tile state and reports whether this
// process now holds it.
func requestTileState() bool {
	if _, _, e := unix.Syscall(unix.SYS_ARCH_PRCTL, archReqXCompPerm, xfeatureXTileData, 0); e != 0 {
		return false
	}
	var mask uint64
	if _, _, e := unix.Syscall(unix.SYS_ARCH_PRCTL, archGetXCompPerm, uintptr(unsafe.Pointer(&mask)), 0); e != 0 {
		return false
	}
	return mask&(1<<xfeatureXTileData) != 0
}
