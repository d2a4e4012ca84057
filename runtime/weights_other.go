//go:build !linux

package runtime

func hugePagesAvailable() bool { return false }

func adviseHuge([]byte, bool) {}

func availableMemory() uint64 { return 0 }
