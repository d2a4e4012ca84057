// Package cpubench measures benchmarks by CPU time as well as wall time:
// on a machine shared with other work the CPU time of the benchmark's own
// thread or process shows a kernel's cost where wall time does not.
package cpubench

import (
	"runtime"
	"testing"
)

// Run runs f b.N times on a locked thread and, where the thread's CPU time
// is available, reports it per op ("cpu-ns/op") together with weights per
// CPU second ("cpu-Gweights/s") when weights > 0.
func Run(b *testing.B, weights int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := Thread()
	for b.Loop() {
		f()
	}
	c := Thread() - c0
	if c0 == 0 || c <= 0 {
		return
	}
	ns := float64(c.Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns, "cpu-ns/op")
	if weights > 0 {
		b.ReportMetric(float64(weights)/ns, "cpu-Gweights/s")
	}
}
