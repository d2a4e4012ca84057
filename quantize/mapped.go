package quantize

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/internal/mmapfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize/internal/sha256pair"
)

// pwriteOutput writes encoded rows with pwrite from a cache-sized buffer
// rather than storing them through the mapping: the kernel then fills
// fresh page-cache pages by copying, without zeroing them first.
var pwriteOutput = true

// errNoMapping makes Run fall back to streaming through a writer.
var errNoMapping = errors.New("output cannot be mapped")

// zeroData writes n zero bytes without holding them.
type zeroData int64

var zeros [1 << 20]byte

func (z zeroData) WriteTo(w io.Writer) (int64, error) {
	var done int64
	for done < int64(z) {
		n, err := w.Write(zeros[:min(int64(len(zeros)), int64(z)-done)])
		done += int64(n)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// capWriter counts what is written and keeps the first limit bytes.
type capWriter struct {
	n     int64
	limit int64
	buf   bytes.Buffer
}

func (c *capWriter) Write(p []byte) (int, error) {
	if keep := c.limit - c.n; keep > 0 {
		c.buf.Write(p[:min(int64(len(p)), keep)])
	}
	c.n += int64(len(p))
	return len(p), nil
}

// fileLayout returns the exact bytes gguf.Writer puts before the tensor
// data (header, tensor infos, alignment padding), each tensor's data
// offset in the file and the file size, by letting the writer stream
// zeros for the data into a counter.
func fileLayout(md gguf.Metadata, m *model.Model, decisions []Decision) (header []byte, offs []int64, size int64, err error) {
	w := &gguf.Writer{Metadata: md}
	for i, t := range m.Tensors {
		w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: t.Name, Dims: t.Dims, Type: decisions[i].Kind.Type, Data: zeroData(0)})
	}
	align, _, infos, err := w.Layout()
	if err != nil {
		return nil, nil, 0, err
	}
	var data int64
	for i := range infos {
		w.Tensors[i].Data = zeroData(infos[i].Bytes())
		data = int64(infos[i].Offset) + (infos[i].Bytes()+align-1)&^(align-1)
	}
	var cw capWriter
	if size, err = w.WriteTo(&cw); err != nil {
		return nil, nil, 0, err
	}
	start := size - data
	if start < 0 || start%align != 0 {
		return nil, nil, 0, fmt.Errorf("quantize: unexpected GGUF layout (data at %d)", start)
	}
	cw = capWriter{limit: start}
	if _, err := w.WriteTo(&cw); err != nil {
		return nil, nil, 0, err
	}
	offs = make([]int64, len(infos))
	for i := range infos {
		offs[i] = start + int64(infos[i].Offset)
	}
	return cw.buf.Bytes(), offs, size, nil
}

// tensorJob is one tensor's share of the mapped pipeline.
type tensorJob struct {
	t       *model.Tensor
	d       Decision
	dst     []byte // the tensor's bytes in the output mapping
	out     *os.File
	outOff  int64 // file offset of dst, for writing through out
	rows    int64
	srcRow  int64
	dstRow  int64
	chunkRs int64
	chunks  int64
	stride  int64

	load sync.Once
	src  []byte
	perm []int // row r is src's row perm[r] (nil: in order)
	err  error

	left  atomic.Int64 // chunks not yet finished
	sums  [][32]byte
	parts []partial
	e     encoded
}

// partial holds a chunk's error figures over its sampled rows: Σx², the
// squared error, Σy² and Σxy, x the source row and y its encoding decoded.
type partial struct{ x2, err2, y2, xy float64 }

// add adds one sampled row.
func (p *partial) add(x, y []float32) {
	for i := range x {
		xv, yv := float64(x[i]), float64(y[i])
		p.x2 += xv * xv
		p.y2 += yv * yv
		p.xy += xv * yv
		p.err2 += (xv - yv) * (xv - yv)
	}
}

func (j *tensorJob) data() ([]byte, error) {
	j.load.Do(func() {
		if base, idx, ok := j.t.PermutedRows(); ok && base.Type == j.t.Type {
			// Read the rows in place rather than gathering a copy.
			src, err := base.Data()
			if err == nil && int64(len(src)) != j.t.Bytes() {
				err = fmt.Errorf("%d bytes of data, expected %d", len(src), j.t.Bytes())
			}
			if err != nil {
				j.err = fmt.Errorf("tensor %s: %w", j.t.Name, err)
			}
			j.src, j.perm = src, idx
			return
		}
		src, err := j.t.Data()
		if err == nil && int64(len(src)) != j.t.Bytes() {
			err = fmt.Errorf("%d bytes of data, expected %d", len(src), j.t.Bytes())
		}
		if err != nil {
			j.err = fmt.Errorf("tensor %s: %w", j.t.Name, err)
		}
		j.src = src
	})
	return j.src, j.err
}

// mapped is Run's fast path: the output file is sized from the GGUF
// layout and mapped, and a pool of workers takes chunks of rows from every
// tensor in order, each chunk hashed, decoded and encoded straight into
// the mapping while it is in cache. No tensor waits for another, so both
// cores stay busy across tensor boundaries, and nothing is copied into a
// write buffer. The bytes are those the streaming path writes: the same
// encoders, per-row, at the offsets gguf.Writer lays out.
func (o *output) mapped(ctx context.Context) (int64, error) {
	header, offs, size, err := fileLayout(o.md, o.m, o.decisions)
	if err != nil {
		return 0, err
	}
	f, err := atomicfile.Create(o.out)
	if err != nil {
		return 0, err
	}
	defer f.Abort()
	if err := f.Truncate(size); err != nil {
		return 0, fmt.Errorf("write %s: %w", o.out, err)
	}
	mapping, err := mmapfile.MapWritable(f.File, size)
	if err != nil {
		return 0, errNoMapping
	}
	unmapped := false
	defer func() {
		if !unmapped {
			mmapfile.Unmap(mapping)
		}
	}()
	copy(mapping, header)

	jobs := make([]*tensorJob, len(o.m.Tensors))
	// An item is one chunk, or two neighbours whose digests are hashed
	// together (sha256pair: two SHA-NI streams on one core).
	type item struct{ job, chunk, n int64 }
	var items []item
	for i, t := range o.m.Tensors {
		d := o.decisions[i]
		j := &tensorJob{t: t, d: d}
		jobs[i] = j
		n := t.Dims[0]
		j.rows = t.Rows()
		if j.srcRow, err = t.Type.RowBytes(n); err != nil {
			return 0, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		j.dstRow = j.srcRow
		if !d.Copy {
			if j.dstRow, err = d.Kind.Type.RowBytes(n); err != nil {
				return 0, fmt.Errorf("tensor %s: %w", t.Name, err)
			}
		}
		j.dst = mapping[offs[i] : offs[i]+j.dstRow*j.rows]
		if pwriteOutput {
			j.out, j.outOff = f.File, offs[i]
		}
		j.chunkRs = chunkRows(j.srcRow)
		j.chunks = (j.rows + j.chunkRs - 1) / j.chunkRs
		j.stride = max(1, j.rows/max(1, sampleElems/n))
		j.sums = make([][32]byte, j.chunks)
		j.parts = make([]partial, j.chunks)
		j.left.Store(j.chunks)
		for c := int64(0); c < j.chunks; c += 2 {
			items = append(items, item{int64(i), c, min(2, j.chunks-c)})
		}
	}

	var (
		next    atomic.Int64
		failed  atomic.Bool
		errMu   sync.Mutex
		first   error
		progMu  sync.Mutex
		done    int64
		wg      sync.WaitGroup
		pre     sync.WaitGroup // loads started ahead of their tensor
		scratch = make([][]float32, o.workers)
		bufs    = make([][]byte, o.workers)
		obufs   = make([][]byte, o.workers)
	)
	fail := func(err error) {
		errMu.Lock()
		if first == nil {
			first = err
		}
		errMu.Unlock()
		failed.Store(true)
	}
	finish := func(j *tensorJob) {
		j.e.sourceSum = combine(j.sums)
		if j.d.Copy {
			j.e.sumSq, j.e.sumOut, j.e.sumDot = 1, 1, 1
		} else {
			for _, p := range j.parts { // in chunk order: deterministic
				j.e.sumSq += p.x2
				j.e.sumErr += p.err2
				j.e.sumOut += p.y2
				j.e.sumDot += p.xy
			}
		}
		j.e.data = j.dst
		mmapfile.Release(j.dst)
		j.t.Release()
		if o.opts.Progress != nil {
			progMu.Lock()
			done += j.t.Bytes()
			o.opts.Progress(done, o.rep.SourceBytes)
			progMu.Unlock()
		}
	}
	for _, j := range jobs {
		if j.chunks == 0 {
			if _, err := j.data(); err != nil {
				return 0, err
			}
			finish(j)
		}
	}
	for w := range min(o.workers, max(1, len(items))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				k := next.Add(1) - 1
				if k >= int64(len(items)) {
					return
				}
				if ctx.Err() != nil {
					fail(ctx.Err())
					return
				}
				it := items[k]
				j := jobs[it.job]
				if it.chunk == 0 && it.job+1 < int64(len(jobs)) {
					// Load the next tensor (a gather, for permuted ones)
					// while this one is encoded, so that no worker waits
					// for it later.
					pre.Add(1)
					go func() {
						defer pre.Done()
						jobs[it.job+1].data()
					}()
				}
				if _, err := j.data(); err != nil {
					fail(err)
					return
				}
				var err error
				if it.n == 2 {
					err = j.chunkPair(it.chunk, &scratch[w], &bufs[w], &obufs[w])
				} else {
					err = j.chunk(it.chunk, &scratch[w], &bufs[w], &obufs[w])
				}
				if err != nil {
					fail(err)
					return
				}
				if j.left.Add(-it.n) == 0 {
					finish(j)
				}
			}
		}()
	}
	wg.Wait()
	pre.Wait() // no load may outlive Run: the caller may close the model
	if first != nil {
		return 0, first
	}

	h := sha256.New()
	for i, t := range o.m.Tensors {
		j := jobs[i]
		fingerprintTensor(h, t, j.e.sourceSum)
		o.rep.Tensors = append(o.rep.Tensors, j.e.report(t, j.d))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err := patchBytes(mapping[:len(header)], sum); err != nil {
		return 0, fmt.Errorf("write %s: %w", o.out, err)
	}
	unmapped = true
	if err := mmapfile.Unmap(mapping); err != nil {
		return 0, fmt.Errorf("write %s: %w", o.out, err)
	}
	if err := f.Commit(); err != nil {
		return 0, err
	}
	o.rep.SourceSHA256 = sum
	return size, nil
}

// subRows is how many rows a worker hashes, decodes and encodes at a time
// within a chunk: about 64 KiB of source, so the bytes the hash just read
// are still in L2 when they are decoded.
func subRows(rowBytes int64) int64 { return max(1, pieceBytes/rowBytes) }

// row is source row r.
func (j *tensorJob) row(r int64) []byte {
	if j.perm != nil {
		r = int64(j.perm[r])
	}
	return j.src[r*j.srcRow : (r+1)*j.srcRow]
}

// srcRange is source rows [lo, hi) as one slice, or nil if they are permuted.
func (j *tensorJob) srcRange(lo, hi int64) []byte {
	if j.perm != nil {
		return nil
	}
	return j.src[lo*j.srcRow : hi*j.srcRow]
}

// chunk hashes, converts and samples rows [c·chunkRs, (c+1)·chunkRs).
func (j *tensorJob) chunk(c int64, scratch *[]float32, buf, obuf *[]byte) error {
	lo, hi := c*j.chunkRs, min((c+1)*j.chunkRs, j.rows)
	h := sha256.New()
	step := subRows(j.srcRow)
	// Rows in file order are read with pread into a cache-sized buffer:
	// the page cache is copied once into L2 and nothing is mapped into
	// (or later dropped from) the process. Otherwise one call maps the
	// chunk's source pages instead of a fault per page.
	read := !j.d.Copy && mmapfile.CanReadInto(j.srcRange(lo, hi))
	if read {
		if need := int(step * j.srcRow); len(*buf) < need {
			*buf = make([]byte, need)
		}
	} else {
		mmapfile.Populate(j.srcRange(lo, hi), false)
	}
	// The chunk's output goes out in one pwrite: on tmpfs, two workers
	// writing 64 KiB pieces spent 3x the system time of 1 MiB pieces
	// (fresh pages under the file's lock), which bounded q8_0.
	write := j.out != nil && !j.d.Copy
	if write {
		if need := int((hi - lo) * j.dstRow); len(*obuf) < need {
			*obuf = make([]byte, need)
		}
	} else {
		mmapfile.Populate(j.dst[lo*j.dstRow:hi*j.dstRow], true)
	}
	hash := func(r0, r1 int64) {
		if b := j.srcRange(r0, r1); b != nil {
			h.Write(b)
			return
		}
		for r := r0; r < r1; r++ {
			h.Write(j.row(r))
		}
	}
	if j.d.Copy {
		for r0 := lo; r0 < hi; r0 += step {
			r1 := min(r0+step, hi)
			hash(r0, r1)
			for r := r0; r < r1; r++ {
				copy(j.dst[r*j.srcRow:], j.row(r))
			}
		}
		h.Sum(j.sums[c][:0])
		mmapfile.Release(j.srcRange(lo, hi))
		mmapfile.Release(j.dst[lo*j.dstRow : hi*j.dstRow])
		return nil
	}
	n := j.t.Dims[0]
	if int64(cap(*scratch)) < 2*n {
		*scratch = make([]float32, 2*n)
	}
	x, y := (*scratch)[:n], (*scratch)[n:2*n]
	var p partial
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		row := j.row
		if b := j.srcRange(r0, r1); read && mmapfile.ReadInto(*buf, b) {
			b = (*buf)[:len(b)]
			h.Write(b)
			row = func(r int64) []byte { return b[(r-r0)*j.srcRow : (r-r0+1)*j.srcRow] }
		} else {
			hash(r0, r1)
		}
		out := j.dst[r0*j.dstRow : r1*j.dstRow]
		if write {
			out = (*obuf)[(r0-lo)*j.dstRow : (r1-lo)*j.dstRow]
		}
		if err := j.encode(r0, r1, row, out, x, y, &p); err != nil {
			return err
		}
	}
	if write {
		if _, err := j.out.WriteAt((*obuf)[:(hi-lo)*j.dstRow], j.outOff+lo*j.dstRow); err != nil {
			return fmt.Errorf("tensor %s: %w", j.t.Name, err)
		}
	}
	h.Sum(j.sums[c][:0])
	j.parts[c] = p
	if !read {
		mmapfile.Release(j.srcRange(lo, hi))
	}
	if !write {
		mmapfile.Release(j.dst[lo*j.dstRow : hi*j.dstRow])
	}
	return nil
}

// encode converts rows [r0, r1) (row gives their source bytes) into out
// and adds the sampled rows' error figures to p, in row order.
func (j *tensorJob) encode(r0, r1 int64, row func(int64) []byte, out []byte, x, y []float32, p *partial) error {
	for r := r0; r < r1; r++ {
		if err := gguf.Dequantize(j.t.Type, row(r), x); err != nil {
			return fmt.Errorf("tensor %s row %d: %w", j.t.Name, r, err)
		}
		dst := out[(r-r0)*j.dstRow : (r-r0+1)*j.dstRow]
		EncodeRow(j.d.Kind, x, dst)
		if r%j.stride != 0 {
			continue
		}
		if err := gguf.Dequantize(j.d.Kind.Type, dst, y); err != nil {
			return fmt.Errorf("tensor %s row %d: %w", j.t.Name, r, err)
		}
		p.add(x, y)
	}
	return nil
}

// chunkPair is chunk for chunks c and c+1 together: their 64 KiB pieces
// (or, for permuted rows, their rows) are read side by side and hashed as
// two streams at once, then each is converted as chunk converts it, so
// digests, bytes and error figures are chunk's. It handles output written
// with pwrite and hands the other cases to chunk.
func (j *tensorJob) chunkPair(c int64, scratch *[]float32, buf, obuf *[]byte) error {
	lo, mid, hi := c*j.chunkRs, (c+1)*j.chunkRs, min((c+2)*j.chunkRs, j.rows)
	if j.d.Copy || j.out == nil || j.perm == nil && !mmapfile.CanReadInto(j.srcRange(lo, hi)) {
		if err := j.chunk(c, scratch, buf, obuf); err != nil {
			return err
		}
		return j.chunk(c+1, scratch, buf, obuf)
	}
	step := subRows(j.srcRow)
	piece := step * j.srcRow
	if need := int(2 * piece); len(*buf) < need {
		*buf = make([]byte, need)
	}
	if need := int((hi - lo) * j.dstRow); len(*obuf) < need {
		*obuf = make([]byte, need)
	}
	n := j.t.Dims[0]
	if int64(cap(*scratch)) < 2*n {
		*scratch = make([]float32, 2*n)
	}
	x, y := (*scratch)[:n], (*scratch)[n:2*n]
	ha, hb := sha256pair.New(), sha256pair.New()
	var pa, pb partial
	done := func() error {
		if _, err := j.out.WriteAt((*obuf)[:(hi-lo)*j.dstRow], j.outOff+lo*j.dstRow); err != nil {
			return fmt.Errorf("tensor %s: %w", j.t.Name, err)
		}
		ha.Sum(j.sums[c][:0])
		hb.Sum(j.sums[c+1][:0])
		j.parts[c], j.parts[c+1] = pa, pb
		return nil
	}
	if j.perm != nil {
		// Rows in a permuted order (the q and k projections of an HF
		// llama): read from the mapping one row of each chunk at a time.
		for ra, rb := lo, mid; ra < mid || rb < hi; ra, rb = ra+1, rb+1 {
			var sa, sb []byte
			if ra < mid {
				sa = j.row(ra)
			}
			if rb < hi {
				sb = j.row(rb)
			}
			sha256pair.WritePair(ha, hb, sa, sb)
			if ra < mid {
				if err := j.encode(ra, ra+1, j.row, (*obuf)[(ra-lo)*j.dstRow:(ra-lo+1)*j.dstRow], x, y, &pa); err != nil {
					return err
				}
			}
			if rb < hi {
				if err := j.encode(rb, rb+1, j.row, (*obuf)[(rb-lo)*j.dstRow:(rb-lo+1)*j.dstRow], x, y, &pb); err != nil {
					return err
				}
			}
		}
		return done()
	}
	bufA, bufB := (*buf)[:piece], (*buf)[piece:2*piece]
	// read loads rows [r0, r1) of the chunk ending at end into b.
	read := func(r0, end int64, b []byte) ([]byte, int64, error) {
		r1 := min(r0+step, end)
		if r0 >= r1 {
			return nil, r0, nil
		}
		src := j.srcRange(r0, r1)
		if !mmapfile.ReadInto(b, src) {
			return nil, r0, fmt.Errorf("tensor %s: reading rows %d-%d failed", j.t.Name, r0, r1)
		}
		return b[:len(src)], r1, nil
	}
	for a0, b0 := lo, mid; a0 < mid || b0 < hi; {
		sa, a1, err := read(a0, mid, bufA)
		if err != nil {
			return err
		}
		sb, b1, err := read(b0, hi, bufB)
		if err != nil {
			return err
		}
		sha256pair.WritePair(ha, hb, sa, sb)
		for _, part := range [...]struct {
			r0, r1 int64
			src    []byte
			p      *partial
		}{{a0, a1, sa, &pa}, {b0, b1, sb, &pb}} {
			if part.r0 == part.r1 {
				continue
			}
			r0, src := part.r0, part.src
			row := func(r int64) []byte { return src[(r-r0)*j.srcRow : (r-r0+1)*j.srcRow] }
			out := (*obuf)[(r0-lo)*j.dstRow : (part.r1-lo)*j.dstRow]
			if err := j.encode(r0, part.r1, row, out, x, y, part.p); err != nil {
				return err
			}
		}
		a0, b0 = a1, b1
	}
	return done()
}

// patchBytes writes sum over the hash placeholder in header.
func patchBytes(header []byte, sum string) error {
	key := []byte(KeySourceSHA256)
	for i := 0; i+len(key) <= len(header); i++ {
		if !bytes.Equal(header[i:i+len(key)], key) {
			continue
		}
		off := i + len(key) + 4 + 8
		if off+64 > len(header) || string(header[off:off+64]) != hashPlaceholder {
			continue
		}
		copy(header[off:], sum)
		return nil
	}
	return errors.New("source hash placeholder not found in header")
}
