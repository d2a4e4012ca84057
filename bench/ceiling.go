package bench

import (
	"context"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/qnnprep/qnnprep/internal/mmapfile"
	rtkernels "github.com/qnnprep/qnnprep/runtime/kernels"
)

// Ceiling is the machine's memory-read ceiling with a number of threads:
// the best rate at which that many threads streamed a window of a buffer
// far larger than any last-level cache through the runtime's float32 dot
// kernel (kernels.Dot, rows of probeRow floats against one vector held in
// L1), as decoding streams weight rows. Decode rows report their weight
// stream as a fraction of it (Result.ReadFraction).
type Ceiling struct {
	Threads     int     `json:"threads"`
	GBPerSec    float64 `json:"gb_per_s"`     // best window, 1e9 bytes/s
	Bytes       int64   `json:"bytes"`        // the buffer, read window after window
	WindowBytes int64   `json:"window_bytes"` // bytes of each timed window
	Windows     int     `json:"windows"`      // windows timed, after one untimed pass
	Load        float64 `json:"load"`         // 1-minute load average
}

// DefaultProbeBytes is the probe's buffer: 256 MiB, several times the
// largest last-level cache a core reaches today (96 MiB per CCD on
// EPYC with 3D V-Cache), so each window comes from DRAM.
const DefaultProbeBytes = 256 << 20

const (
	probeRow        = 2048                   // floats per row: 8 KiB, like a hidden-2048 F32 weight row
	probeWindowRows = 4096                   // rows per timed window: 32 MiB
	probeMaxWindows = 64                     // windows timed at most (8 passes of the default buffer)…
	probeBudget     = 250 * time.Millisecond // …or until this much time was spent timing
	probeCheckRows  = 256                    // untimed work between checks of the context: 2 MiB
)

// ReadCeiling measures the memory-read ceiling with each thread count:
// it fills a buffer of size bytes (whole rows, at least one window) with
// a fixed pattern and reads it once untimed; then it times windows of
// probeWindowRows rows in turn, wrapping around the buffer, each read by
// all the threads together (each its contiguous share), until
// probeMaxWindows were timed or probeBudget spent, and keeps the best.
// The best, not the mean: the ceiling is what the machine can do, and on
// a shared machine a window during which a thread lost its core only
// reads slower. Windows are short (about a millisecond) so that some of
// them run undisturbed even under load. Each thread count costs at most
// about a third of a second, plus filling the buffer once.
func ReadCeiling(ctx context.Context, size int64, threads []int) ([]Ceiling, error) {
	window := probeWindowRows
	rows := int(size / (4 * probeRow))
	if rows < window {
		window = max(rows, 1)
	}
	rows -= rows % window
	// Outside the Go heap and on huge pages, like the runtime's mapped
	// weights: on 4 KiB heap pages two threads read about a quarter
	// slower here (TLB walks), and the ceiling fell below what decoding
	// itself reached.
	var buf []float32
	if raw, err := mmapfile.MapAnon(rows * probeRow * 4); err == nil {
		defer mmapfile.Unmap(raw)
		buf = unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), rows*probeRow)
	} else {
		buf = make([]float32, rows*probeRow)
	}
	for r := range rows {
		if r%probeCheckRows == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for i := range probeRow {
			buf[r*probeRow+i] = float32(i) / probeRow
		}
	}
	x := make([]float32, probeRow)
	for i := range x {
		x[i] = 1
	}
	out := make([]Ceiling, 0, len(threads))
	for _, th := range threads {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := Ceiling{Threads: th, Bytes: int64(len(buf)) * 4, WindowBytes: int64(window) * probeRow * 4}
		l0 := LoadAvg()[0]
		for lo := 0; lo < rows; lo += probeCheckRows { // untimed: warm the TLB
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			readWindow(buf, x, lo, min(lo+probeCheckRows, rows), th)
		}
		var spent time.Duration
		for lo := 0; c.Windows < probeMaxWindows && spent < probeBudget; lo = (lo + window) % rows {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			readWindow(buf, x, lo, lo+window, th)
			dt := time.Since(t0)
			spent += dt
			c.Windows++
			c.GBPerSec = max(c.GBPerSec, float64(c.WindowBytes)/dt.Seconds()/1e9)
		}
		c.Load = (l0 + LoadAvg()[0]) / 2
		out = append(out, c)
	}
	// The buffer goes back to the system at once, so that the peak RSS of
	// the run that follows does not include it: the mapping on return, a
	// heap fallback here. (Not when interrupted: the collection and the
	// returning of the pages would delay the stop.)
	debug.FreeOSMemory()
	return out, nil
}

// probeSink keeps the sums live so the reads cannot be optimised away.
var probeSink float32

// readWindow reads rows [lo, hi) of buf with th goroutines, each a
// contiguous share, as the runtime's workers split a matrix's rows.
func readWindow(buf, x []float32, lo, hi, th int) {
	var wg sync.WaitGroup
	sums := make([]float32, th)
	n := hi - lo
	for t := range th {
		a, b := lo+n*t/th, lo+n*(t+1)/th
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s float32
			for r := a; r < b; r++ {
				s += rtkernels.Dot(buf[r*probeRow:(r+1)*probeRow], x)
			}
			sums[t] = s
		}()
	}
	wg.Wait()
	for _, s := range sums {
		probeSink += s
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
