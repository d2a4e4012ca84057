package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

// ConvertOptions configure Convert.
type ConvertOptions struct {
	Recipe  string // a built-in recipe name (quantize.Recipes)
	Workers int    // quantize.Options.Workers (0: all CPUs)
	// Dir receives the output files, which are deleted afterwards
	// (default: the system's temporary directory).
	Dir string
	// Scratch holds the output of the compute-only pass (default /dev/shm
	// when writable, so that pass writes to memory; else Dir).
	Scratch string
	Log     io.Writer
}

// ConvertReport is one `qnnprep bench convert` run: quantize.Run end to
// end and its stages.
type ConvertReport struct {
	Source      string  `json:"source"`
	Recipe      string  `json:"recipe"`
	SourceBytes int64   `json:"source_bytes"`
	OutputBytes int64   `json:"output_bytes"`
	Seconds     float64 `json:"seconds"` // the end-to-end run
	// SourceGBPerSec and OutputGBPerSec are the end-to-end run's
	// throughput: bytes read and written over its wall time (1 GB = 1e9 B).
	SourceGBPerSec float64 `json:"source_gb_per_s"`
	OutputGBPerSec float64 `json:"output_gb_per_s"`
	PeakRSS        int64   `json:"peak_rss_bytes"` // during the end-to-end run
	// SourceCached is the fraction of the source's pages that were in the
	// page cache before the run (-1: unknown); a warm source reads faster.
	SourceCached float64 `json:"source_cached"`
	Stages       []Stage `json:"stages"`
	Load         float64 `json:"load"` // 1-minute load average, mean of before and after
}

// Stage is one part of the conversion pipeline.
type Stage struct {
	Name     string  `json:"name"` // "read", "quantize", "write", "pipeline"
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	GBPerSec float64 `json:"gb_per_s"`
	PeakRSS  int64   `json:"peak_rss_bytes"`
	How      string  `json:"how"` // how the stage was isolated
}

// Convert measures quantize.Run on the model at src with a recipe.
// quantize.Run overlaps reading, quantizing and writing (workers take row
// chunks of every tensor in order and hash, encode and write each slice
// while it is in cache) and exposes no per-stage timings, so the stages are
// isolated from outside:
//
//   - pipeline: one end-to-end run into Dir, fsync included; its source
//     and output GB/s and peak RSS are the report's headline numbers.
//   - read: inside that run, the time spent faulting in each source
//     tensor's pages before quantize sees them (every tensor is wrapped so
//     that its bytes are touched, page by page, when Run asks for them).
//   - quantize: a second run with the source in memory and the output in
//     Scratch (tmpfs), minus its own read time: encoding, hashing and
//     an in-memory write.
//   - write: the output file's bytes written again to Dir and fsynced.
func Convert(ctx context.Context, src string, opt ConvertOptions) (*ConvertReport, error) {
	r, err := quantize.LookupRecipe(opt.Recipe)
	if err != nil {
		return nil, err
	}
	dir := opt.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	scratch := opt.Scratch
	if scratch == "" {
		scratch = dir
		if writable("/dev/shm") {
			scratch = "/dev/shm"
		}
	}
	m, err := model.Open(src)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	md := gguf.Metadata{}
	for _, kv := range m.Metadata {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			md = append(md, kv)
		}
	}
	rep := &ConvertReport{Source: src, Recipe: r.Name, SourceCached: cachedFraction(src)}
	load0 := LoadAvg()[0]
	logf := func(format string, args ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", args...)
		}
	}

	out := filepath.Join(dir, fmt.Sprintf("qnnprep-bench-convert-%d-%s.gguf", os.Getpid(), r.Name))
	defer atomicfile.Remove(out)
	logf("convert: %s → %s (recipe %s), end to end", src, out, r.Name)
	full, readSec, peak, err := timedRun(ctx, m, out, quantize.Options{Recipe: r, Workers: opt.Workers, Metadata: md})
	if err != nil {
		return nil, err
	}
	rep.SourceBytes, rep.OutputBytes, rep.Seconds, rep.PeakRSS = full.SourceBytes, full.OutputBytes, full.Seconds, peak
	rep.SourceGBPerSec = gbps(full.SourceBytes, full.Seconds)
	rep.OutputGBPerSec = gbps(full.OutputBytes, full.Seconds)
	rep.Stages = append(rep.Stages,
		Stage{Name: "read", Bytes: full.SourceBytes, Seconds: readSec, GBPerSec: gbps(full.SourceBytes, readSec), PeakRSS: peak,
			How: "page faults of the source tensors inside the end-to-end run"})

	hot := filepath.Join(scratch, fmt.Sprintf("qnnprep-bench-convert-%d-%s-mem.gguf", os.Getpid(), r.Name))
	defer atomicfile.Remove(hot)
	if err := touchAll(m); err != nil {
		return nil, err
	}
	logf("convert: compute-only pass → %s", hot)
	mem, memRead, memPeak, err := timedRun(ctx, m, hot, quantize.Options{Recipe: r, Workers: opt.Workers, Metadata: md})
	if err != nil {
		return nil, err
	}
	atomicfile.Remove(hot)
	q := max(mem.Seconds-memRead, 1e-9)
	rep.Stages = append(rep.Stages,
		Stage{Name: "quantize", Bytes: mem.SourceBytes, Seconds: q, GBPerSec: gbps(mem.SourceBytes, q), PeakRSS: memPeak,
			How: "second run, source in memory, output to " + scratch + ", minus its read time"})

	logf("convert: write pass")
	wsec, wpeak, err := timedWrite(out, dir)
	if err != nil {
		return nil, err
	}
	rep.Stages = append(rep.Stages,
		Stage{Name: "write", Bytes: full.OutputBytes, Seconds: wsec, GBPerSec: gbps(full.OutputBytes, wsec), PeakRSS: wpeak,
			How: "the output's bytes written again to " + dir + " with fsync"},
		Stage{Name: "pipeline", Bytes: full.SourceBytes, Seconds: full.Seconds, GBPerSec: rep.SourceGBPerSec, PeakRSS: peak,
			How: "quantize.Run end to end (GB/s of source bytes)"})
	rep.Load = (load0 + LoadAvg()[0]) / 2
	return rep, nil
}

func gbps(b int64, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(b) / s / 1e9
}

func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".qnnprep-bench-*")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

// timedRun runs quantize.Run on m with every tensor wrapped so that the
// time spent bringing its bytes into memory is counted (read seconds),
// and reports the peak RSS of the run.
func timedRun(ctx context.Context, m *model.Model, out string, opts quantize.Options) (*quantize.Report, float64, int64, error) {
	var mu sync.Mutex
	var read time.Duration
	var prev *model.Tensor
	wrapped := make([]*model.Tensor, len(m.Tensors))
	for i, t := range m.Tensors {
		wrapped[i] = model.LazyTensor(t.Name, t.Dims, t.Type, func() ([]byte, error) {
			t0 := time.Now()
			b, err := t.Data()
			if err == nil {
				touch(b)
			}
			mu.Lock()
			defer mu.Unlock()
			read += time.Since(t0)
			// Run releases a tensor's pages when it is done with it; the
			// wrapper cannot forward that, so the previous source tensor is
			// released here (Run loads a tensor while it still encodes the
			// one before, whose remaining rows it reads with pread, so this
			// costs at most some refaults).
			if prev != nil && prev != t {
				prev.Release()
			}
			prev = t
			return b, err
		})
	}
	wm, err := model.New(m.Config, wrapped)
	if err != nil {
		return nil, 0, 0, err
	}
	wm.Path = m.Path
	ResetPeakRSS()
	rep, err := quantize.Run(ctx, wm, out, opts)
	peak := PeakRSS()
	if prev != nil {
		prev.Release()
	}
	if err != nil {
		return nil, 0, 0, err
	}
	return rep, read.Seconds(), peak, nil
}

var sink byte // keeps touch from being optimised away

// touch reads one byte per page so that the pages are resident.
func touch(b []byte) {
	var s byte
	for i := 0; i < len(b); i += 4096 {
		s += b[i]
	}
	sink += s
}

// touchAll brings every source page into the page cache, then releases
// the process's mappings of them, so that the next run reads from memory
// without counting the whole source in its resident set.
func touchAll(m *model.Model) error {
	for _, t := range m.Tensors {
		b, err := t.Data()
		if err != nil {
			return err
		}
		touch(b)
		t.Release()
	}
	return nil
}

// timedWrite writes the bytes of file again into dir through atomicfile,
// fsyncs and discards the copy, returning the time of write + fsync.
func timedWrite(file, dir string) (float64, int64, error) {
	in, err := os.Open(file)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	// Read the source first so the pass measures writing only.
	fi, err := in.Stat()
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 4<<20)
	for {
		if _, err := in.Read(buf); err != nil {
			break
		}
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	f, err := atomicfile.Create(filepath.Join(dir, fmt.Sprintf("qnnprep-bench-write-%d.bin", os.Getpid())))
	if err != nil {
		return 0, 0, err
	}
	defer f.Abort()
	ResetPeakRSS()
	t0 := time.Now()
	n, err := io.CopyBuffer(f.File, in, buf)
	if err == nil {
		err = f.Sync()
	}
	sec := time.Since(t0).Seconds()
	if err != nil {
		return 0, 0, fmt.Errorf("bench: write pass in %s: %w", dir, err)
	}
	if n != fi.Size() {
		return 0, 0, fmt.Errorf("bench: write pass: wrote %d bytes of %d", n, fi.Size())
	}
	return sec, PeakRSS(), nil
}

// cachedFraction is the fraction of path's pages (every file of a
// directory) resident in the page cache, or −1 when unknown.
func cachedFraction(path string) float64 {
	var files []string
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	if fi.IsDir() {
		es, err := os.ReadDir(path)
		if err != nil {
			return -1
		}
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	} else {
		files = []string{path}
	}
	var in, total int64
	for _, p := range files {
		a, b, ok := residency(p)
		if !ok {
			return -1
		}
		in += a
		total += b
	}
	if total == 0 {
		return -1
	}
	return float64(in) / float64(total)
}

func writeConvertTable(b *strings.Builder, cs []*ConvertReport) {
	b.WriteString("| source | recipe | source GB | output GB | s | source GB/s | output GB/s | peak RSS | cached | load |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range cs {
		cached := "?"
		if c.SourceCached >= 0 {
			cached = fmt.Sprintf("%.0f%%", 100*c.SourceCached)
		}
		fmt.Fprintf(b, "| %s | %s | %.3f | %.3f | %.2f | %.3f | %.3f | %s | %s | %.1f |\n",
			filepath.Base(c.Source), c.Recipe, float64(c.SourceBytes)/1e9, float64(c.OutputBytes)/1e9, c.Seconds,
			c.SourceGBPerSec, c.OutputGBPerSec, sizeLabel(c.PeakRSS), cached, c.Load)
	}
	b.WriteString("\n| source | recipe | stage | GB | s | GB/s | peak RSS | how |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, c := range cs {
		for _, s := range c.Stages {
			fmt.Fprintf(b, "| %s | %s | %s | %.3f | %.2f | %.3f | %s | %s |\n",
				filepath.Base(c.Source), c.Recipe, s.Name, float64(s.Bytes)/1e9, s.Seconds, s.GBPerSec, sizeLabel(s.PeakRSS), s.How)
		}
	}
}
