//go:build !amd64

package cpuvendor

func intel() bool { return false }
