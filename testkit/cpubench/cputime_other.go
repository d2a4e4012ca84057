//go:build !linux

package cpubench

import "time"

// Thread is unavailable here; benchmarks then report wall time only.
func Thread() time.Duration { return 0 }

// Process is unavailable here; benchmarks then report wall time only.
func Process() time.Duration { return 0 }

// HugePages does nothing here.
func HugePages([]byte) {}
