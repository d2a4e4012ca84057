//go:build !linux

package mmapfile

func populate([]byte, bool) {}

func adviseHuge([]byte) {}

func hugeMapped(uintptr, uintptr) (int64, int64) { return 0, 0 }

func dropCache(int, int64, int64) {}

func releaseExecutable() {}
