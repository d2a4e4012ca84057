package onnx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	goruntime "runtime"
	"slices"
	"sync"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// Container is the integer width Q1_0 and Q2_0 codes are declared in;
// the plan records it (shard.Plan.Container) and sizes stages in it.
type Container = shard.Container

const (
	Container4Bit = shard.Container4Bit // default: symmetric 4-bit, offset −8
	Container8Bit = shard.Container8Bit // symmetric 8-bit, offset −128
)

// blockScale reads a block's fp16 scale as the positive encoding scale
// |d| and refuses a non-finite one. (Q2_0's MSE scale search may pick a
// negative d; its codes are then negated, see Codes.)
func blockScale(t *model.Tensor, b []byte, row, blk int) (float32, error) {
	d := half.F16ToF32(binary.LittleEndian.Uint16(b))
	if math.IsNaN(float64(d)) || math.IsInf(float64(d), 0) {
		return 0, fmt.Errorf("tensor %q: row %d block %d: scale %v, want a finite number", t.Name, row, blk, d)
	}
	return float32(math.Abs(float64(d))), nil
}

// ParamEncoding returns the QNN encoding whose scales reproduce the
// integer codes of t exactly, or nil for types that are exported as plain
// floats (F32, F16, BF16 and the other ggml types). Its form is
// shard.WeightLayout's, the rule plan sizes follow:
//
//   - Q8_0 whose blocks in every row share one scale (the int8 recipe):
//     PER_CHANNEL, 8-bit symmetric, the row scale per output channel.
//   - other Q8_0: PER_BLOCK, block 32, 8-bit symmetric.
//   - Q1_0 (block 128) and Q2_0 (block 64): PER_BLOCK in the container's
//     width, symmetric, the block scale d.
//
// A block whose scale is 0 holds only zeros; it gets scale 1 (every
// encoding scale must be positive) and its codes become 0.
func ParamEncoding(t *model.Tensor, c Container) (*Encoding, error) {
	l, err := shard.WeightLayout(t, c)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	if !l.Integer {
		return nil, nil
	}
	bs, bw := t.Type.BlockSize(), l.Bits
	cols, rows := t.Dims[0], t.Rows()
	data, err := t.Data()
	if err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: %w", t.Name, err)
	}
	defer t.Release() // the scales are read again when the weights are written
	if int64(len(data)) != t.Bytes() {
		return nil, fmt.Errorf("onnx: tensor %q: %d bytes, want %d", t.Name, len(data), t.Bytes())
	}
	nb := int(cols) / bs
	blockBytes := int(t.Type.BlockBytes())
	scales := make([]float32, 0, int(rows)*nb)
	for r := 0; r < int(rows); r++ {
		row := data[r*nb*blockBytes : (r+1)*nb*blockBytes]
		for j := 0; j < nb; j++ {
			d, err := blockScale(t, row[j*blockBytes:], r, j)
			if err != nil {
				return nil, fmt.Errorf("onnx: %w", err)
			}
			if d == 0 {
				d = 1
			}
			scales = append(scales, d)
		}
	}
	perChannel := l.BlockSize == 0
	e := &Encoding{Name: t.Name, DType: "INT", EncType: PerBlock, IsSym: true, BW: bw, BlockSize: bs}
	if perChannel {
		e.EncType, e.BlockSize = PerChannel, 0
		ch := make([]float32, rows)
		for r := range ch {
			ch[r] = scales[r*nb]
		}
		scales = ch
	}
	e.Scale = scales
	e.Offset = make([]int64, len(scales))
	for i := range e.Offset {
		e.Offset[i] = -1 << (bw - 1)
	}
	return e, nil
}

// blockCodes writes the len(dst) signed integer codes of the whole
// blocks src of one row of a Q8_0, Q1_0 or Q2_0 tensor, on the positive
// scale |d| of their block, read straight from its bits: Q8_0 the int8s,
// Q1_0 +1 for a set bit and −1 for a clear one, Q2_0 the 2-bit field
// minus 1; negated in a block whose d is negative, so code × |d| is
// always the value. A block whose scale is 0 reads as codes 0, the values
// it holds.
func blockCodes(t *model.Tensor, src []byte, dst []int8) error {
	bb, bs := int(t.Type.BlockBytes()), int(t.Type.BlockSize())
	if t.Type != gguf.Q8_0 && t.Type != gguf.Q1_0 && t.Type != gguf.Q2_0 {
		return fmt.Errorf("onnx: tensor %q: no integer codes in %s", t.Name, t.Type)
	}
	for j := 0; j < len(dst)/bs; j++ {
		blk := src[j*bb : (j+1)*bb]
		out := dst[j*bs : (j+1)*bs]
		bits := binary.LittleEndian.Uint16(blk)
		if bits&0x7fff == 0 {
			clear(out)
			continue
		}
		qs := blk[2:]
		switch t.Type {
		case gguf.Q8_0:
			for i := range out {
				out[i] = int8(qs[i])
			}
		case gguf.Q1_0:
			for i := range out {
				out[i] = int8(qs[i/8]>>(i%8)&1)*2 - 1
			}
		case gguf.Q2_0:
			for i := range out {
				out[i] = int8(qs[i/4]>>(2*(i%4))&3) - 1
			}
		}
		if bits&0x8000 != 0 {
			for i := range out {
				out[i] = -out[i]
			}
		}
	}
	return nil
}

// tileBytes bounds each of the two float32 buffers a matrix is streamed
// through: a band of whole rows, or of a few columns of every row when
// transposing. Export's memory stays about these plus one tensor's
// (mapped, released) source bytes, whatever the model's size.
const tileBytes = 32 << 20

// matrixWorkers is how many goroutines dequantize one band; the band
// before it is written meanwhile. Every value is computed the same way
// whoever computes it, so the bytes do not depend on it.
var matrixWorkers = min(2, goruntime.GOMAXPROCS(0))

// writeMatrix dequantizes the ggml matrix t ({in, out}: out rows of in
// values) and streams it to w as little-endian float32 in ONNX MatMul
// layout [in, out]. With enc set, every value is re-quantized with its
// encoding and must give the code stored in t's bits (the round trip), so
// what is written is proven to carry the qmodel's integers.
//
// Without transpose the rows stay in ggml order ([out, in]: the embedding
// table that Gather indexes). Transposed, the output goes out a band of
// columns at a time (whole quantization blocks).
//
// It stops with ctx.Err() once ctx is cancelled, looking between rows.
func writeMatrix(ctx context.Context, w io.Writer, t *model.Tensor, enc *Encoding, transpose bool) error {
	in, out := int(t.Dims[0]), int(t.Rows())
	data, err := t.Data()
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	defer t.Release()
	rb, err := t.Type.RowBytes(int64(in))
	if err != nil || int64(len(data)) != rb*int64(out) {
		return fmt.Errorf("tensor %q: %d bytes for %d rows of %d %s values", t.Name, len(data), out, in, t.Type)
	}
	row := func(r int) []byte { return data[int64(r)*rb : int64(r+1)*rb] }
	if !transpose {
		// Bands of whole rows, in order.
		n := max(1, tileBytes/(4*in))
		return writeBands(ctx, w, (out+n-1)/n, 4*n*in, func(band int, buf []byte) (int, error) {
			r0, k := band*n, min(n, out-band*n)
			return 4 * k * in, parallel(k, func(lo, hi int) error {
				vals, codes := make([]float32, in), make([]int8, in)
				for i := lo; i < hi; i++ {
					if err := ctx.Err(); err != nil {
						return err
					}
					r := r0 + i
					if err := dequantRange(t, enc, row(r), r, 0, vals, codes); err != nil {
						return err
					}
					f32Into(buf[4*i*in:], vals)
				}
				return nil
			})
		})
	}
	// Bands of cb columns (whole blocks) of every row. A worker
	// dequantizes a strip of 64 rows into its tile, then stores it 16
	// columns at a time: each output row gets 64 consecutive values (256
	// bytes) while the 16 tile columns it reads stay in L1.
	bs, bb := int(t.Type.BlockSize()), int(t.Type.BlockBytes())
	cb := min(in, max(bs, tileBytes/(4*out)/bs*bs))
	const strip, cols = 64, 16
	return writeBands(ctx, w, (in+cb-1)/cb, 4*cb*out, func(band int, buf []byte) (int, error) {
		c0, n := band*cb, min(cb, in-band*cb)
		strips := (out + strip - 1) / strip
		return 4 * n * out, parallel(strips, func(lo, hi int) error {
			tile, codes := make([]float32, strip*n), make([]int8, n)
			for s := lo; s < hi; s++ {
				if err := ctx.Err(); err != nil {
					return err
				}
				r0, k := s*strip, min(strip, out-s*strip)
				for i := 0; i < k; i++ {
					r := r0 + i
					if err := dequantRange(t, enc, row(r)[c0/bs*bb:(c0+n)/bs*bb], r, c0, tile[i*n:(i+1)*n], codes); err != nil {
						return err
					}
				}
				for cc := 0; cc < n; cc += cols {
					for c := cc; c < min(cc+cols, n); c++ {
						dst := buf[4*(c*out+r0) : 4*(c*out+r0+k)]
						for i := 0; i < k; i++ {
							binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(tile[i*n+c]))
						}
					}
				}
			}
			return nil
		})
	})
}

// writeBands writes n bands to w in order: fill(i, buf) puts band i into
// buf (of size bytes) and returns its length. Band i+1 is filled while
// band i is written.
func writeBands(ctx context.Context, w io.Writer, n, size int, fill func(i int, buf []byte) (int, error)) error {
	bufs := [2][]byte{getBuf(size), getBuf(size)}
	var wrote chan error
	defer func() {
		if wrote != nil {
			<-wrote // the writer still holds its buffer
		}
		putBuf(bufs[0])
		putBuf(bufs[1])
	}()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf := bufs[i%2]
		m, err := fill(i, buf)
		if wrote != nil {
			werr := <-wrote
			wrote = nil
			if werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
		wrote = make(chan error, 1)
		go func(b []byte, ch chan error) {
			_, err := w.Write(b)
			ch <- err
		}(buf[:m], wrote)
	}
	if wrote != nil {
		err := <-wrote
		wrote = nil
		return err
	}
	return nil
}

// bufPool keeps band buffers between tensors: allocating (and zeroing)
// two of them per tensor costs more than dequantizing a small one.
var bufPool sync.Pool

func getBuf(size int) []byte {
	if b, ok := bufPool.Get().(*[]byte); ok && cap(*b) >= size {
		return (*b)[:size]
	}
	return make([]byte, size)
}

func putBuf(b []byte) { bufPool.Put(&b) }

// parallel runs f over [0, n) split into matrixWorkers contiguous ranges
// and returns the first error.
func parallel(n int, f func(lo, hi int) error) error {
	k := min(matrixWorkers, n)
	if k <= 1 {
		return f(0, n)
	}
	errs := make([]error, k)
	var wg sync.WaitGroup
	for j := 0; j < k; j++ {
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			errs[j] = f(j*n/k, (j+1)*n/k)
		}(j)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// f32Into writes v into b as little-endian float32.
func f32Into(b []byte, v []float32) {
	b = b[:4*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// dequantRange dequantizes src, the whole blocks of row r of t that hold
// columns c0… , into dst and, with enc, checks the round trip of each.
func dequantRange(t *model.Tensor, enc *Encoding, src []byte, r, c0 int, dst []float32, codes []int8) error {
	if err := gguf.Dequantize(t.Type, src, dst); err != nil {
		return fmt.Errorf("tensor %q: row %d: %w", t.Name, r, err)
	}
	if enc == nil {
		return nil
	}
	return roundTrip(t, enc, src, r, c0, dst, codes[:len(dst)])
}

// roundTrip checks the values vals of row r, columns c0… (whose blocks
// are src): re-quantizing each with enc gives the tensor's code.
func roundTrip(t *model.Tensor, enc *Encoding, src []byte, r, c0 int, vals []float32, codes []int8) error {
	if err := blockCodes(t, src, codes); err != nil {
		return err
	}
	in := int(t.Dims[0])
	bs := in
	if enc.EncType == PerBlock {
		bs = enc.BlockSize
	}
	for c := range vals {
		col := c0 + c
		si := r
		if enc.EncType == PerBlock {
			si = r*(in/bs) + col/bs
		}
		s, off, top := enc.Scale[si], enc.Offset[si], int64(1)<<enc.BW-1
		q := int64(math.Round(float64(vals[c]/s))) - off
		q = max(0, min(q, top)) + off
		if q != int64(codes[c]) {
			return fmt.Errorf("tensor %q: row %d column %d: value %v re-quantizes to %d with scale %v, the qmodel holds %d",
				t.Name, r, col, vals[c], q, s, codes[c])
		}
	}
	return nil
}

// writeRows writes t as stored (rows of Dims[0] values, ggml memory
// order) as little-endian float32: vectors and the conv kernel, small
// tensors held whole.
func writeRows(w io.Writer, t *model.Tensor) error {
	vals, err := t.Float32()
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	defer t.Release()
	_, err = w.Write(f32Bytes(vals))
	return err
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// ForecastRows returns the ssd-q1 forecast embeddings rows (hidden values
// each) as the first stage's Gather table holds them after the rows of
// token embedding t: unchanged when t is exported as floats, else each
// quantized symmetrically on t's encoding (a scale per row, or per block)
// and written as code × scale, so the encodings cover them too. Give the
// result to the runtime so that it embeds what the device does.
func ForecastRows(t *model.Tensor, c Container, rows []float32) ([]float32, error) {
	enc, err := ParamEncoding(t, c)
	if err != nil {
		return nil, err
	}
	out, _, err := forecastRows(t, enc, rows)
	return out, err
}

// forecastRows quantizes rows on enc's form (see ForecastRows) and
// returns the values and their encoding scales, in enc's order.
func forecastRows(t *model.Tensor, enc *Encoding, rows []float32) ([]float32, []float32, error) {
	cols := int(t.Dims[0])
	if cols <= 0 || len(rows)%cols != 0 {
		return nil, nil, fmt.Errorf("onnx: %d forecast embedding values are not rows of %s's %d columns", len(rows), t.Name, cols)
	}
	for i, v := range rows {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, nil, fmt.Errorf("onnx: forecast embedding row %d holds %v", i/cols, v)
		}
	}
	out := slices.Clone(rows)
	if enc == nil {
		return out, nil, nil
	}
	block := cols
	if enc.EncType == PerBlock {
		block = enc.BlockSize
	}
	if block <= 0 || cols%block != 0 {
		return nil, nil, fmt.Errorf("onnx: %s: block %d does not divide %d columns", t.Name, block, cols)
	}
	qmax := float64(int64(1)<<(enc.BW-1) - 1)
	var scales []float32
	for b := 0; b < len(out); b += block {
		blk := out[b : b+block]
		var amax float64
		for _, v := range blk {
			amax = max(amax, math.Abs(float64(v)))
		}
		scale := float32(amax / qmax)
		if scale == 0 {
			scale = 1
		}
		for i, v := range blk {
			q := math.Max(-qmax-1, math.Min(qmax, math.Round(float64(v)/float64(scale))))
			blk[i] = float32(q) * scale
		}
		scales = append(scales, scale)
	}
	return out, scales, nil
}
