package quantize

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/int8"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quant1bit"
)

// Options controls a quantization run.
type Options struct {
	Recipe    *Recipe
	Overrides []Rule
	// Workers quantize the rows of a tensor in parallel; 0 means all CPUs.
	Workers int
	// Metadata is added to the model's own keys (tokenizer.* for example).
	Metadata gguf.Metadata
	// Progress, if set, is called with source bytes done and total.
	Progress func(done, total int64)
}

// TensorReport describes one output tensor.
type TensorReport struct {
	Name     string  `json:"name"`
	Dims     []int64 `json:"dims"`
	Source   string  `json:"source_type"`
	Type     string  `json:"type"`
	BPW      float64 `json:"bits_per_weight"`
	Bytes    int64   `json:"bytes"`
	RelRMSE  float64 `json:"rel_rmse"`
	Cosine   float64 `json:"cosine"`
	Reason   string  `json:"reason"`
	Fallback bool    `json:"fallback,omitempty"`
	Copied   bool    `json:"copied,omitempty"`
}

// Report is the outcome of a run, written as JSON by `quantize --report`.
type Report struct {
	Recipe       string         `json:"recipe"`
	Source       string         `json:"source"`
	Output       string         `json:"output"`
	SourceSHA256 string         `json:"source_sha256"`
	SourceBytes  int64          `json:"source_bytes"`
	OutputBytes  int64          `json:"output_bytes"`
	Weights      int64          `json:"weights"`
	BPW          float64        `json:"bits_per_weight"`
	Seconds      float64        `json:"seconds"`
	Tensors      []TensorReport `json:"tensors"`
	Fallbacks    []string       `json:"fallbacks"`
}

// Metadata keys qnnprep adds to a qmodel.
const (
	KeyRecipe       = "qnnprep.quantization.recipe"
	KeyOverrides    = "qnnprep.quantization.overrides"
	KeyInt8         = "qnnprep.quantization.int8_granularity"
	KeySourceSHA256 = "qnnprep.source.sha256"
)

// hashPlaceholder reserves the source hash's place in the header; the real
// hash is only known once every tensor has streamed through, and is then
// written over it in place (same length).
var hashPlaceholder = string(make([]byte, 64))

// Plan decides every tensor's encoding without reading tensor data.
func Plan(m *model.Model, opts Options) ([]Decision, error) {
	shapes := make([]TensorShape, len(m.Tensors))
	for i, t := range m.Tensors {
		shapes[i] = TensorShape{Name: t.Name, Dims: t.Dims, Type: t.Type}
	}
	return opts.Recipe.Decide(shapes, opts.Overrides, m.Config.TiedEmbeddings)
}

// Run quantizes m into the GGUF file out. Nothing is written under out's
// name unless every tensor succeeded.
func Run(ctx context.Context, m *model.Model, out string, opts Options) (*Report, error) {
	if opts.Recipe == nil {
		return nil, errors.New("quantize: no recipe")
	}
	decisions, err := Plan(m, opts)
	if err != nil {
		return nil, err
	}
	// A vocabulary that does not fit the embedding makes a file llama.cpp
	// refuses and the runtime mis-decodes; stop before writing it.
	if err := m.Config.CheckVocab(opts.Metadata); err != nil {
		return nil, fmt.Errorf("quantize: tokenizer metadata: %w", err)
	}
	start := time.Now()
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}

	md := append(gguf.Metadata(nil), m.GGUFMetadata()...)
	for _, kv := range opts.Metadata {
		md.Set(kv.Key, kv.Value)
	}
	md.Set("general.quantization_version", uint32(2))
	md.Set("general.file_type", fileType(decisions))
	md.Set(KeyRecipe, opts.Recipe.Name)
	var ovs []string
	for _, o := range opts.Overrides {
		ovs = append(ovs, o.Pattern+"="+o.Kind.String())
	}
	md.Set(KeyOverrides, append([]string{}, ovs...))
	gran := "none"
	for _, d := range decisions {
		if d.Kind.Type == gguf.Q8_0 {
			gran = "per-block"
			if d.Kind.PerChannel {
				gran = "per-channel"
			}
			break
		}
	}
	md.Set(KeyInt8, gran)
	md.Set(KeySourceSHA256, hashPlaceholder)
	setLineage(&md, m, opts.Recipe.Name, decisions)

	rep := &Report{Recipe: opts.Recipe.Name, Source: m.Path, Output: out}
	var total int64
	for _, t := range m.Tensors {
		total += t.Bytes()
	}
	rep.SourceBytes = total

	o := &output{m: m, out: out, md: md, decisions: decisions, workers: workers, opts: opts, rep: rep}
	n, err := int64(0), errNoMapping
	if mapOutput {
		n, err = o.mapped(ctx)
	}
	if errors.Is(err, errNoMapping) {
		n, err = o.streamed(ctx)
	}
	if err != nil {
		return nil, err
	}
	rep.OutputBytes = n
	for _, r := range rep.Tensors {
		n := product(r.Dims)
		rep.Weights += n
		if r.Fallback {
			rep.Fallbacks = append(rep.Fallbacks, r.Name+": "+r.Reason)
		}
	}
	var tb int64
	for _, r := range rep.Tensors {
		tb += r.Bytes
	}
	if rep.Weights > 0 {
		rep.BPW = float64(tb*8) / float64(rep.Weights)
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// output is one Run's file: the source, the output path and everything
// decided before the first byte is written. mapped and streamed are the
// two ways of writing it; both fill rep's Tensors and SourceSHA256 and
// return the file size.
type output struct {
	m         *model.Model
	out       string
	md        gguf.Metadata // with the source hash's placeholder
	decisions []Decision    // one per m.Tensors
	workers   int
	opts      Options
	rep       *Report
}

// mapOutput selects output.mapped where the platform allows (tests turn it
// off to compare the two paths).
var mapOutput = true

// fingerprintTensor folds one canonical source tensor into the source hash:
// name, type, dims and the SHA-256 of its bytes. The same model read from
// HF safetensors or from its lossless GGUF conversion hashes the same.
func fingerprintTensor(h io.Writer, t *model.Tensor, dataSum [32]byte) {
	var b [8]byte
	io.WriteString(h, t.Name)
	h.Write([]byte{0})
	binary.LittleEndian.PutUint32(b[:4], uint32(t.Type))
	h.Write(b[:4])
	for _, d := range t.Dims {
		binary.LittleEndian.PutUint64(b[:], uint64(d))
		h.Write(b[:])
	}
	h.Write(dataSum[:])
}

func patchPlaceholder(f *atomicfile.File, sum string) error {
	// The placeholder sits in the header, which is small next to the data;
	// read it back and find the 64 zero bytes that follow the key.
	key := []byte(KeySourceSHA256)
	buf := make([]byte, 1<<20)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return err
	}
	buf = buf[:n]
	for i := 0; i+len(key) <= len(buf); i++ {
		if string(buf[i:i+len(key)]) != string(key) {
			continue
		}
		// key, int32 type (8 = string), uint64 length, then the bytes.
		off := i + len(key) + 4 + 8
		if off+64 > len(buf) || string(buf[off:off+64]) != hashPlaceholder {
			continue
		}
		_, err := f.WriteAt([]byte(sum), int64(off))
		return err
	}
	return errors.New("source hash placeholder not found in header")
}

// encoded is one finished tensor.
type encoded struct {
	index     int
	data      []byte
	sourceSum [32]byte
	sumSq     float64 // Σ x²
	sumErr    float64 // Σ (x − y)²
	sumOut    float64 // Σ y²
	sumDot    float64 // Σ x·y
}

func (e *encoded) report(t *model.Tensor, d Decision) TensorReport {
	r := TensorReport{
		Name: t.Name, Dims: t.Dims, Source: t.Type.String(), Type: d.Kind.String(),
		Bytes: int64(len(e.data)), Reason: d.Reason, Fallback: d.Fallback, Copied: d.Copy,
		BPW: d.Kind.Type.BitsPerWeight(), Cosine: 1,
	}
	if e.sumSq > 0 {
		r.RelRMSE = math.Sqrt(e.sumErr / e.sumSq)
	}
	if e.sumSq > 0 && e.sumOut > 0 {
		r.Cosine = e.sumDot / math.Sqrt(e.sumSq*e.sumOut)
	} else if e.sumSq != e.sumOut {
		r.Cosine = 0
	}
	return r
}

// encodeTensor converts one tensor. Rows are independent, so they are
// spread over workers in chunks of about chunkBytes of source; the bytes,
// the digest and the error figures do not depend on the split.
func encodeTensor(t *model.Tensor, d Decision, workers int, buf []byte) (encoded, error) {
	var e encoded
	src, err := t.Data()
	if err != nil {
		return e, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	if int64(len(src)) != t.Bytes() {
		return e, fmt.Errorf("tensor %s: %d bytes of data, expected %d", t.Name, len(src), t.Bytes())
	}
	// The source pages are not needed again: keep the resident set bounded
	// by the tensors in flight, not by the model.
	defer t.Release()
	n := t.Dims[0]
	rows := t.Rows()
	srcRow, err := t.Type.RowBytes(n)
	if err != nil {
		return e, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	chunkRows := chunkRows(srcRow)
	chunks := (rows + chunkRows - 1) / chunkRows
	sums := make([][32]byte, chunks)
	if d.Copy {
		// Nothing changes, so the error is zero by definition.
		e.data = append(buf[:0], src...)
		parallel(workers, chunks, func(c int64) error {
			lo, hi := c*chunkRows*srcRow, min((c+1)*chunkRows, rows)*srcRow
			sums[c] = sha256.Sum256(src[lo:hi])
			return nil
		})
		e.sourceSum = combine(sums)
		e.sumSq, e.sumOut, e.sumDot = 1, 1, 1
		return e, nil
	}
	dstRow, err := d.Kind.Type.RowBytes(n)
	if err != nil {
		return e, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	if int64(cap(buf)) < dstRow*rows {
		buf = make([]byte, dstRow*rows)
	}
	e.data = buf[:dstRow*rows]
	// Error figures come from a deterministic sample of rows (about
	// sampleElems values): exact enough for a report, and far cheaper than
	// decoding every row a second time.
	stride := max(1, rows/max(1, sampleElems/n))

	parts := make([]partial, chunks)
	err = parallel(workers, chunks, func(c int64) error {
		lo, hi := c*chunkRows, min((c+1)*chunkRows, rows)
		sums[c] = sha256.Sum256(src[lo*srcRow : hi*srcRow])
		x := make([]float32, n)
		var y []float32
		var p partial
		for r := lo; r < hi; r++ {
			if err := gguf.Dequantize(t.Type, src[r*srcRow:(r+1)*srcRow], x); err != nil {
				return fmt.Errorf("tensor %s row %d: %w", t.Name, r, err)
			}
			dst := e.data[r*dstRow : (r+1)*dstRow]
			EncodeRow(d.Kind, x, dst)
			if r%stride != 0 {
				continue
			}
			if y == nil {
				y = make([]float32, n)
			}
			if err := gguf.Dequantize(d.Kind.Type, dst, y); err != nil {
				return fmt.Errorf("tensor %s row %d: %w", t.Name, r, err)
			}
			p.add(x, y)
		}
		parts[c] = p
		return nil
	})
	if err != nil {
		return e, err
	}
	e.sourceSum = combine(sums)
	// Sum the chunk partials in chunk order so the report is deterministic.
	for _, p := range parts {
		e.sumSq += p.x2
		e.sumErr += p.err2
		e.sumOut += p.y2
		e.sumDot += p.xy
	}
	return e, nil
}

const sampleElems = 1 << 20 // values per tensor the error figures are taken from

// chunkBytes is the source bytes per work item and per digest chunk, and
// pieceBytes the part of a chunk a worker reads, hashes and converts at
// a time. Variables only so that tests can cut small models into many
// chunks; the digest (and so the source hash) depends on chunkBytes.
var (
	chunkBytes int64 = 4 << 20
	pieceBytes int64 = 64 << 10
)

// chunkRows is how many rows of rowBytes make one chunk (at least one).
func chunkRows(rowBytes int64) int64 { return max(1, chunkBytes/rowBytes) }

// tensorDigest is a tensor's data digest: SHA-256 over the SHA-256 of each
// chunk of chunkRows rows. Chunking lets the workers hash in parallel while
// the data is hot in cache; the digest depends only on the bytes and the
// row length.
func tensorDigest(b []byte, rowBytes int64) [32]byte {
	step := chunkRows(rowBytes) * rowBytes
	var sums [][32]byte
	for lo := int64(0); lo < int64(len(b)); lo += step {
		sums = append(sums, sha256.Sum256(b[lo:min(lo+step, int64(len(b)))]))
	}
	return combine(sums)
}

func combine(sums [][32]byte) [32]byte {
	h := sha256.New()
	for _, s := range sums {
		h.Write(s[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// parallel runs f for items 0..n-1 on up to workers goroutines and returns
// the first error.
func parallel(workers int, n int64, f func(int64) error) error {
	next := make(chan int64, n)
	for i := int64(0); i < n; i++ {
		next <- i
	}
	close(next)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := 0; w < min(workers, int(n)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = f(i)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// EncodeRow writes one row of x in kind k to dst (k must be Encodable;
// dst must hold exactly one row of k's type).
func EncodeRow(k Kind, x []float32, dst []byte) {
	switch k.Type {
	case gguf.F32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case gguf.F16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToF16(v))
		}
	case gguf.BF16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], half.F32ToBF16(v))
		}
	case gguf.Q8_0:
		if k.PerChannel {
			int8.QuantizeRowPerChannel(x, dst)
		} else {
			int8.QuantizeRowQ8_0(x, dst)
		}
	case gguf.Q1_0:
		quant1bit.QuantizeRowQ1_0(x, dst)
	case gguf.Q2_0:
		quant1bit.QuantizeRowQ2_0(x, dst)
	default:
		panic("quantize: encodeRow: unsupported " + k.String()) // Decide only yields encodable kinds
	}
}

// fileType is llama.cpp's general.file_type for the dominant matrix type.
func fileType(ds []Decision) uint32 {
	count := map[gguf.Type]int{}
	for _, d := range ds {
		count[d.Kind.Type]++
	}
	switch {
	case count[gguf.Q1_0] > 0:
		return 40 // MOSTLY_Q1_0
	case count[gguf.Q8_0] > 0:
		return 7
	case count[gguf.BF16] > 0:
		return 32
	case count[gguf.F16] > 0:
		return 1
	}
	return 0
}

func product(d []int64) int64 {
	p := int64(1)
	for _, v := range d {
		p *= v
	}
	return p
}

// Fingerprint is the source hash a qmodel records (qnnprep.source.sha256):
// SHA-256 over every canonical tensor's name, type, dims and data hash, in
// order. It identifies the model, not the file it came in.
func Fingerprint(m *model.Model) (string, error) {
	h := sha256.New()
	for _, t := range m.Tensors {
		b, err := t.Data()
		if err != nil {
			return "", fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		rb, err := t.Type.RowBytes(t.Dims[0])
		if err != nil {
			return "", fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		fingerprintTensor(h, t, tensorDigest(b, rb))
		t.Release()
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SourceFingerprint returns the fingerprint a model stands for: the
// recorded source hash of a qmodel, or the model's own fingerprint.
func SourceFingerprint(m *model.Model) (string, error) {
	if s, ok := m.Metadata.String(KeySourceSHA256); ok && s != "" {
		return s, nil
	}
	return Fingerprint(m)
}
