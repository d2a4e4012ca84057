//go:build !linux

package int8

import "time"

func threadCPU() time.Duration { return 0 }

func hugePages([]byte) {}
