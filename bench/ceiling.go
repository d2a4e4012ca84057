package bench

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Ceiling is the memory-read ceiling of a model with a number of threads:
// how fast that many threads stream the model's own weights, the bytes
// decoding reads for every token where the engine holds them (for a GGUF
// file its mapping), window after window, each thread its contiguous
// share of a window as four streams side by side with the widest loads the
// CPU has, with and without software prefetch, keeping the loop that read
// fastest (Loop, Loops). Decode rows report their weight stream as a fraction of
// GBPerSec (Result.ReadFraction). Weights that fit in the last-level cache
// are read from it, as decoding reads them: the ceiling is then the
// cache's rate, and the decode is judged against that.
type Ceiling struct {
	Threads int `json:"threads"`
	// GBPerSec is the ceiling, in 1e9 bytes/s: Statistic over every
	// window the fastest loop timed, before and after the model's
	// timings.
	GBPerSec float64 `json:"gb_per_s"`
	// Statistic is what GBPerSec is: "upper quartile" (StatUpperQuartile);
	// absent in reports written before it was recorded, whose ceiling is
	// the best window.
	Statistic string  `json:"statistic,omitempty"`
	Median    float64 `json:"median_gb_per_s,omitempty"`
	Best      float64 `json:"best_gb_per_s,omitempty"`
	// Before and After are the upper quartiles of the probe run before
	// the model's timings and of the one after them (0: not run), each
	// of its own fastest loop.
	Before float64 `json:"before_gb_per_s,omitempty"`
	After  float64 `json:"after_gb_per_s,omitempty"`
	// Loop is the read loop of GBPerSec, the fastest of Loops: "avx512,
	// 4 streams per thread, prefetch 1 KiB ahead".
	Loop string `json:"loop,omitempty"`
	// Loops are every loop timed, interleaved window by window (absent
	// in reports written before the probe timed more than one).
	Loops []LoopRate `json:"loops,omitempty"`
	// Source is what was read: SourceWeights; absent in reports written
	// before it was recorded, whose probe read a buffer of its own.
	Source      string `json:"source,omitempty"`
	Bytes       int64  `json:"bytes"`        // bytes read window after window
	WindowBytes int64  `json:"window_bytes"` // bytes of each window
	// Repeats is how many times each timed window is read in a row when
	// the bytes are fewer than probeWindow (0 or 1: once).
	Repeats int     `json:"window_repeats,omitempty"`
	Windows int     `json:"windows"` // windows Loop timed, after one untimed pass
	Load    float64 `json:"load"`    // 1-minute load average

	samples []loopSamples // each loop's windows, for merging a later probe
}

// LoopRate is one read loop's upper quartile.
type LoopRate struct {
	Loop     string  `json:"loop"`
	GBPerSec float64 `json:"gb_per_s"`
	Windows  int     `json:"windows"`
}

// loopSamples are the GB/s of each window a loop read.
type loopSamples struct {
	loop string
	gbps []float64
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
	probeMaxWindows = 128                    // windows timed at most by each loop…
	probeBudget     = 400 * time.Millisecond // …or until this much time was spent timing, all loops
)

// ReadCeiling measures the memory-read ceiling of spans (the model's
// weights, runtime.Engine.DecodeWeights) with each thread count: it reads
// the spans, each cut to whole probeGrains and in all to at most limit
// bytes (0: no limit), once untimed, so that every page is mapped and its
// address translation warm; then it times windows of about probeWindow
// bytes in turn (each a stretch of the spans laid end to end), each read
// by all the threads together (each its contiguous share, as probeStreams
// streams), until probeMaxWindows were timed or probeBudget spent, and
// keeps the upper quartile, the median and the best. Every loop of
// probeLoops reads the windows in turn, interleaved timing by timing (each
// window is read by the next loop on the next pass), so that they share
// the machine's moods alike; the ceiling is the loop with the highest
// upper quartile. Spans smaller than a
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
		c := Ceiling{Threads: th, Statistic: StatUpperQuartile, Source: SourceWeights, Bytes: p.total, WindowBytes: p.window, Repeats: p.repeats}
		for _, l := range probeLoops {
			c.samples = append(c.samples, loopSamples{loop: l.label()})
		}
		l0 := LoadAvg()[0]
		// Every window's shares, cut once: the timings allocate next to
		// nothing, so the probe does not grow the heap (bench's peak RSS
		// on a small model).
		shares := make([][][][]byte, p.windows)
		for k := range shares {
			shares[k] = p.shares(k, th)
		}
		sums := make([]uint64, th)
		for k := range p.windows { // untimed: map the pages, warm the TLB
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			readShares(shares[k], 1, probeLoops[0], sums)
		}
		var spent time.Duration
		for n := 0; n < probeMaxWindows*len(probeLoops) && spent < probeBudget; n++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			// Window after window, each loop in turn, shifted by one
			// every pass so that every loop reads every window. Never
			// one window twice in a row: the second read would find it
			// in the cache.
			k := n % p.windows
			i := (n/p.windows + k) % len(probeLoops)
			t0 := time.Now()
			readShares(shares[k], p.repeats, probeLoops[i], sums)
			dt := time.Since(t0)
			spent += dt
			c.samples[i].gbps = append(c.samples[i].gbps, float64(p.window*int64(p.repeats))/dt.Seconds()/1e9)
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

// summarise sets the statistics from the samples: each loop's upper
// quartile, and the ceiling's from the loop whose is highest (the first
// of equals).
func (c *Ceiling) summarise() {
	c.Loops = nil
	c.Windows, c.GBPerSec, c.Median, c.Best, c.Loop = 0, 0, 0, 0, ""
	for _, ls := range c.samples {
		s := slices.Sorted(slices.Values(ls.gbps))
		n := len(s)
		if n == 0 {
			continue
		}
		uq := s[(3*n+3)/4-1] // nearest rank: ⌈0.75 n⌉
		c.Loops = append(c.Loops, LoopRate{Loop: ls.loop, GBPerSec: uq, Windows: n})
		if uq > c.GBPerSec {
			c.Windows, c.GBPerSec, c.Loop = n, uq, ls.loop
			c.Median = (s[(n-1)/2] + s[n/2]) / 2
			c.Best = s[n-1]
		}
	}
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
			c.samples = mergeSamples(c.samples, a.samples)
			c.Load = (c.Load + a.Load) / 2
			c.summarise()
			c.After = a.GBPerSec
		}
	}
	return out
}

// mergeSamples returns a's windows and b's, loop by loop.
func mergeSamples(a, b []loopSamples) []loopSamples {
	out := make([]loopSamples, len(a))
	for i, ls := range a {
		out[i] = loopSamples{loop: ls.loop, gbps: slices.Clone(ls.gbps)}
	}
	for _, ls := range b {
		i := slices.IndexFunc(out, func(o loopSamples) bool { return o.loop == ls.loop })
		if i < 0 {
			i = len(out)
			out = append(out, loopSamples{loop: ls.loop})
		}
		out[i].gbps = append(out[i].gbps, ls.gbps...)
	}
	return out
}

// probeSink keeps the sums live so the reads cannot be optimised away.
var probeSink uint64

// readShares reads each share reps times with loop l, a goroutine per
// share, as the runtime's workers split a matrix's rows; sums (one per
// share) keeps each one's XOR.
func readShares(shares [][][]byte, reps int, l readLoop, sums []uint64) {
	var wg sync.WaitGroup
	for t, pieces := range shares {
		if len(pieces) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range reps {
				sums[t] ^= xorPieces(pieces, l)
			}
		}()
	}
	wg.Wait()
	for _, s := range sums {
		probeSink ^= s
	}
}

// xorPieces is the XOR of every 64-bit word of the pieces (whole grains)
// read by loop l: each read as probeStreams streams but for a tail of
// fewer grains than streams, read as one.
func xorPieces(pieces [][]byte, l readLoop) uint64 {
	var x uint64
	for _, b := range pieces {
		n := len(b) - len(b)%(probeStreams*probeGrain)
		x ^= l.xor(b[:n], probeStreams)
		if n < len(b) {
			x ^= l.xor(b[n:], 1)
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
