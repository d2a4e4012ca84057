//go:build !linux

package mmapfile

func populate([]byte, bool) {}
