//go:build !linux

package runtime

import "time"

// processCPU is unavailable here; benchmarks then report wall time only.
func processCPU() time.Duration { return 0 }
