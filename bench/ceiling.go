package bench

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/qnnprep/qnnprep/internal/mmapfile"
)

// Ceiling is the machine's memory-read ceiling with a number of threads:
// how fast that many threads read windows of a buffer far larger than
// any last-level cache, each thread its contiguous share of a window as
// four streams side by side with the widest loads the CPU has (Loop).
// Decode rows report their weight stream as a fraction of GBPerSec
// (Result.ReadFraction).
type Ceiling struct {
	Threads int `json:"threads"`
	// GBPerSec is the ceiling, in 1e9 bytes/s: Statistic over every
	// window timed, before and after the model's timings.
	GBPerSec float64 `json:"gb_per_s"`
	// Statistic is what GBPerSec is: "upper quartile" (StatUpperQuartile);
	// absent in reports written before it was recorded, whose ceiling is
	// the best window.
	Statistic string  `json:"statistic,omitempty"`
	Median    float64 `json:"median_gb_per_s,omitempty"`
	Best      float64 `json:"best_gb_per_s,omitempty"`
	// Before and After are the upper quartiles of the probe run before
	// the model's timings and of the one after them (0: not run).
	Before      float64 `json:"before_gb_per_s,omitempty"`
	After       float64 `json:"after_gb_per_s,omitempty"`
	Loop        string  `json:"loop,omitempty"` // the read loop: "avx512, 4 streams per thread"
	Bytes       int64   `json:"bytes"`          // the buffer, read window after window
	WindowBytes int64   `json:"window_bytes"`   // bytes of each timed window
	Windows     int     `json:"windows"`        // windows timed, after one untimed pass
	Load        float64 `json:"load"`           // 1-minute load average

	samples []float64 // GB/s of each window, for merging a later probe
}

// StatUpperQuartile is Ceiling.Statistic: the upper quartile of the
// windows' GB/s. Not the best window: on a shared machine a single window
// can run while a neighbour is idle and read more than the machine
// sustains. Not the median: under load a quarter and more of the windows
// lose their core for part of the window and read slower.
const StatUpperQuartile = "upper quartile"

// DefaultProbeBytes is the probe's buffer: 256 MiB, several times the
// largest last-level cache a core reaches today (96 MiB per CCD on
// EPYC with 3D V-Cache), so each window comes from DRAM.
const DefaultProbeBytes = 256 << 20

const (
	probeWindow     = 32 << 20               // bytes of each timed window
	probeUnit       = 1024                   // a thread's share is whole units: probeStreams × 256 bytes
	probeStreams    = 4                      // streams per thread
	probeMaxWindows = 128                    // windows timed at most (16 passes of the default buffer)…
	probeBudget     = 400 * time.Millisecond // …or until this much time was spent timing
	probeCheck      = 2 << 20                // untimed work between checks of the context
)

// ReadCeiling measures the memory-read ceiling with each thread count:
// it fills a buffer of size bytes (whole windows, at least one unit) with
// a fixed pattern and reads it once untimed; then it times windows of
// probeWindow bytes in turn, wrapping around the buffer, each read by
// all the threads together (each its contiguous share, as probeStreams
// streams), until probeMaxWindows were timed or probeBudget spent, and
// keeps the upper quartile, the median and the best. Windows are short
// (about a millisecond) so that many of them run undisturbed even under
// load. Each thread count costs at most about half a second, plus filling
// the buffer once.
func ReadCeiling(ctx context.Context, size int64, threads []int) ([]Ceiling, error) {
	window := min(int64(probeWindow), size-size%probeUnit)
	window = max(window, probeUnit)
	size = max(size-size%window, window)
	// Outside the Go heap and on huge pages, like the runtime's mapped
	// weights: on 4 KiB heap pages two threads read about a quarter
	// slower here (TLB walks).
	buf, err := mmapfile.MapAnon(int(size))
	if err == nil {
		defer mmapfile.Unmap(buf)
	} else {
		buf = make([]byte, size)
	}
	for i := range min(len(buf), probeCheck) {
		buf[i] = byte(i*7 + i>>9)
	}
	for off := probeCheck; off < len(buf); off += probeCheck {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		copy(buf[off:], buf[:probeCheck])
	}
	out := make([]Ceiling, 0, len(threads))
	for _, th := range threads {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := Ceiling{Threads: th, Statistic: StatUpperQuartile, Loop: fmt.Sprintf("%s, %d streams per thread", probeSet, probeStreams),
			Bytes: size, WindowBytes: window}
		l0 := LoadAvg()[0]
		for lo := int64(0); lo < size; lo += probeCheck { // untimed: warm the TLB
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			readWindow(buf[lo:min(lo+probeCheck, size)], th)
		}
		var spent time.Duration
		for lo := int64(0); len(c.samples) < probeMaxWindows && spent < probeBudget; lo = (lo + window) % size {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			readWindow(buf[lo:lo+window], th)
			dt := time.Since(t0)
			spent += dt
			c.samples = append(c.samples, float64(window)/dt.Seconds()/1e9)
		}
		c.Load = (l0 + LoadAvg()[0]) / 2
		c.summarise()
		c.Before = c.GBPerSec
		out = append(out, c)
	}
	// The buffer goes back to the system at once, so that the peak RSS of
	// the run that follows does not include it: the mapping on return, a
	// heap fallback here. (Not when interrupted: the collection and the
	// returning of the pages would delay the stop.)
	debug.FreeOSMemory()
	return out, nil
}

// summarise sets the statistics from the samples.
func (c *Ceiling) summarise() {
	s := slices.Sorted(slices.Values(c.samples))
	n := len(s)
	c.Windows = n
	if n == 0 {
		return
	}
	c.Median = (s[(n-1)/2] + s[n/2]) / 2
	c.GBPerSec = s[(3*n+3)/4-1] // nearest rank: ⌈0.75 n⌉
	c.Best = s[n-1]
}

// mergeCeilings adds the probe after the timings (after) to the one
// before them (before): the statistics are over both probes' windows,
// Before and After each probe's own upper quartile.
func mergeCeilings(before, after []Ceiling) []Ceiling {
	out := slices.Clone(before)
	for i := range out {
		for _, a := range after {
			if a.Threads != out[i].Threads {
				continue
			}
			c := &out[i]
			c.samples = append(slices.Clone(c.samples), a.samples...)
			c.Load = (c.Load + a.Load) / 2
			c.summarise()
			c.After = a.GBPerSec
		}
	}
	return out
}

// probeSink keeps the sums live so the reads cannot be optimised away.
var probeSink uint64

// readWindow reads w (whole probeUnits) with th goroutines, each a
// contiguous share of whole units, as the runtime's workers split a
// matrix's rows.
func readWindow(w []byte, th int) {
	var wg sync.WaitGroup
	sums := make([]uint64, th)
	units := len(w) / probeUnit
	for t := range th {
		a, b := units*t/th*probeUnit, units*(t+1)/th*probeUnit
		if a == b {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[t] = xorStreams(w[a:b], probeStreams)
		}()
	}
	wg.Wait()
	for _, s := range sums {
		probeSink ^= s
	}
}

// ceilingFor returns the ceiling measured with th threads (0 when none
// was).
func ceilingFor(cs []Ceiling, th int) float64 {
	for _, c := range cs {
		if c.Threads == th {
			return c.GBPerSec
		}
	}
	return 0
}
