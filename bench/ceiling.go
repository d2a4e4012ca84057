package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Ceiling is the memory-read ceiling of a model with a number of threads:
// how fast that many threads stream the model's own weights, the bytes
// decoding reads for every token where the engine holds them (for a GGUF
// file its mapping), window after window, each thread its contiguous
// share of a window as four streams side by side with the widest loads the
// CPU has (Loop). Decode rows report their weight stream as a fraction of
// GBPerSec (Result.ReadFraction). Weights that fit in the last-level cache
// are read from it, as decoding reads them: the ceiling is then the
// cache's rate, and the decode is judged against that.
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
	Before float64 `json:"before_gb_per_s,omitempty"`
	After  float64 `json:"after_gb_per_s,omitempty"`
	Loop   string  `json:"loop,omitempty"` // the read loop: "avx512, 4 streams per thread"
	// Source is what was read: SourceWeights; absent in reports written
	// before it was recorded, whose probe read a buffer of its own.
	Source      string `json:"source,omitempty"`
	Bytes       int64  `json:"bytes"`        // bytes read window after window
	WindowBytes int64  `json:"window_bytes"` // bytes of each window
	// Repeats is how many times each timed window is read in a row when
	// the bytes are fewer than probeWindow (0 or 1: once).
	Repeats int     `json:"window_repeats,omitempty"`
	Windows int     `json:"windows"` // windows timed, after one untimed pass
	Load    float64 `json:"load"`    // 1-minute load average

	samples []float64 // GB/s of each window, for merging a later probe
}

// SourceWeights is Ceiling.Source: the probe read the model's weight
// matrices as decoding reads them (runtime.Engine.DecodeWeights).
const SourceWeights = "model weights"

// StatUpperQuartile is Ceiling.Statistic: the upper quartile of the
// windows' GB/s. Not the best window: on a shared machine a single window
// can run while a neighbour is idle and read more than the machine
// sustains. Not the median: under load a quarter and more of the windows
// lose their core for part of the window and read slower.
const StatUpperQuartile = "upper quartile"

const (
	probeWindow     = 32 << 20               // bytes of each timed window, at most
	probeGrain      = 256                    // the read loops' step per stream
	probeStreams    = 4                      // streams per thread
	probeMaxWindows = 128                    // windows timed at most…
	probeBudget     = 400 * time.Millisecond // …or until this much time was spent timing
)

// ReadCeiling measures the memory-read ceiling of spans (the model's
// weights, runtime.Engine.DecodeWeights) with each thread count: it reads
// the spans, each cut to whole probeGrains and in all to at most limit
// bytes (0: no limit), once untimed, so that every page is mapped and its
// address translation warm; then it times windows of about probeWindow
// bytes in turn (each a stretch of the spans laid end to end), each read
// by all the threads together (each its contiguous share, as probeStreams
// streams), until probeMaxWindows were timed or probeBudget spent, and
// keeps the upper quartile, the median and the best. Spans smaller than a
// window make one window, read several times in a row per timing so that
// a timing is not a few microseconds. Windows are short (about a
// millisecond) so that many of them run undisturbed even under load. Each
// thread count costs at most about half a second plus one untimed pass.
// It returns no ceilings when the spans hold less than one grain.
func ReadCeiling(ctx context.Context, spans [][]byte, limit int64, threads []int) ([]Ceiling, error) {
	p := newProbePlan(spans, limit, probeWindow)
	if p.total == 0 {
		return nil, nil
	}
	out := make([]Ceiling, 0, len(threads))
	for _, th := range threads {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := Ceiling{Threads: th, Statistic: StatUpperQuartile, Loop: fmt.Sprintf("%s, %d streams per thread", probeSet, probeStreams),
			Source: SourceWeights, Bytes: p.total, WindowBytes: p.window, Repeats: p.repeats}
		l0 := LoadAvg()[0]
		for k := range p.windows { // untimed: map the pages, warm the TLB
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			readShares(p.shares(k, th), 1)
		}
		var spent time.Duration
		for k := 0; len(c.samples) < probeMaxWindows && spent < probeBudget; k = (k + 1) % p.windows {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			sh := p.shares(k, th)
			t0 := time.Now()
			readShares(sh, p.repeats)
			dt := time.Since(t0)
			spent += dt
			c.samples = append(c.samples, float64(p.window*int64(p.repeats))/dt.Seconds()/1e9)
		}
		c.Load = (l0 + LoadAvg()[0]) / 2
		c.summarise()
		c.Before = c.GBPerSec
		out = append(out, c)
	}
	return out, nil
}

// probePlan lays the spans end to end and cuts them into windows of at
// most maxWindow bytes.
type probePlan struct {
	spans   [][]byte // each whole grains
	starts  []int64  // offset of each span in the whole
	total   int64    // bytes read: windows × window
	window  int64    // bytes of each window, whole grains
	windows int
	repeats int // reads of a window per timing
}

func newProbePlan(spans [][]byte, limit, maxWindow int64) *probePlan {
	p := &probePlan{}
	for _, s := range spans {
		n := int64(len(s)) - int64(len(s))%probeGrain
		if limit > 0 {
			n = min(n, limit-limit%probeGrain-p.total)
		}
		if n <= 0 {
			continue
		}
		p.spans = append(p.spans, s[:n])
		p.starts = append(p.starts, p.total)
		p.total += n
	}
	if p.total == 0 {
		return p
	}
	// As many windows as maxWindow needs, all of one size: the whole is
	// read but for less than a grain per window.
	p.windows = int((p.total + maxWindow - 1) / maxWindow)
	p.window = p.total / int64(p.windows)
	p.window -= p.window % probeGrain
	p.total = p.window * int64(p.windows)
	p.repeats = int(max(1, maxWindow/p.window))
	return p
}

// shares returns window k cut into th contiguous shares of whole grains:
// the pieces of the spans each thread reads.
func (p *probePlan) shares(k, th int) [][][]byte {
	grains := p.window / probeGrain
	out := make([][][]byte, th)
	for t := range th {
		lo := int64(k)*p.window + grains*int64(t)/int64(th)*probeGrain
		hi := int64(k)*p.window + grains*int64(t+1)/int64(th)*probeGrain
		out[t] = p.pieces(lo, hi)
	}
	return out
}

// pieces returns the spans' bytes [lo, hi) of the whole.
func (p *probePlan) pieces(lo, hi int64) [][]byte {
	var out [][]byte
	i, _ := slices.BinarySearch(p.starts, lo+1) // the first span starting after lo
	for i--; lo < hi && i < len(p.spans); i++ {
		a := lo - p.starts[i]
		b := min(hi-p.starts[i], int64(len(p.spans[i])))
		out = append(out, p.spans[i][a:b])
		lo = p.starts[i] + b
	}
	return out
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

// readShares reads each share reps times, a goroutine per share, as the
// runtime's workers split a matrix's rows.
func readShares(shares [][][]byte, reps int) {
	var wg sync.WaitGroup
	sums := make([]uint64, len(shares))
	for t, pieces := range shares {
		if len(pieces) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range reps {
				sums[t] ^= xorPieces(pieces)
			}
		}()
	}
	wg.Wait()
	for _, s := range sums {
		probeSink ^= s
	}
}

// xorPieces is the XOR of every 64-bit word of the pieces (whole grains):
// each read as probeStreams streams but for a tail of fewer grains than
// streams, read as one.
func xorPieces(pieces [][]byte) uint64 {
	var x uint64
	for _, b := range pieces {
		n := len(b) - len(b)%(probeStreams*probeGrain)
		x ^= xorStreams(b[:n], probeStreams)
		if n < len(b) {
			x ^= xorStreams(b[n:], 1)
		}
	}
	return x
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
