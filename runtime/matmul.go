package runtime

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/int8"
	"github.com/qnnprep/qnnprep/quant1bit"
	"github.com/qnnprep/qnnprep/runtime/kernels"
)

// actKind is the form activations take before a dot product with a weight
// row, chosen like llama.cpp's CPU backend (the weight type's vec_dot_type)
// so that the runtime rounds exactly where the peer does.
type actKind uint8

const (
	actF32       actKind = iota // F32 weights, and types decoded row by row
	actF16                      // F16 weights: activations rounded to binary16
	actBF16                     // BF16 weights: activations rounded to bfloat16
	actQ8                       // Q8_0 weights: Q8_0 blocks of 32
	actQ1                       // Q1_0 and Q2_0 weights: the Q8_0 rows unpacked (quant1bit.Acts)
	actQ8f                      // decoded types with vec_dot_type Q8_0/Q8_1: Q8_0-rounded values
	actQ8Kf                     // decoded types with vec_dot_type Q8_K (K-quants, IQ, TQ): Q8_K-rounded values
	actQ8Batch                  // Q8_0 weights and a prompt: the Q8_0 rows widened (int8.Q8_0Batch)
	actF16Batch                 // F16 weights and a prompt: the binary16 rows reordered (kernels.F16Batch)
	actBF16Batch                // BF16 weights and a prompt: the bfloat16 rows reordered (kernels.F16Batch)
	numActKinds
)

// matrix is a weight in its stored type: rows of cols elements, ggml
// order (Dims[0] = cols). Nothing is converted at load time; F32, F16 and
// BF16 bytes that are not aligned for in-place views (possible in a
// safetensors file) are copied once to aligned memory.
type matrix struct {
	name       string
	typ        gguf.Type
	rows, cols int
	rowBytes   int
	data       []byte
}

func newMatrix(name string, typ gguf.Type, cols, rows int, data []byte) (*matrix, error) {
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	if int64(len(data)) != rb*int64(rows) {
		return nil, fmt.Errorf("tensor %q: %d bytes of data, want %d (%d rows of %d %s)", name, len(data), rb*int64(rows), rows, cols, typ)
	}
	m := &matrix{name: name, typ: typ, rows: rows, cols: cols, rowBytes: int(rb), data: data}
	switch typ {
	case gguf.F32:
		m.data = aligned(data, 4)
	case gguf.F16, gguf.BF16:
		m.data = aligned(data, 2)
	case gguf.Q8_0, gguf.Q1_0, gguf.Q2_0:
	default:
		if !gguf.CanDequantize(typ) {
			return nil, fmt.Errorf("tensor %q: type %s is not supported by the runtime", name, typ)
		}
	}
	return m, nil
}

// aligned returns b, or a copy of b in memory aligned to a (a power of two
// up to 8) when b is not.
func aligned(b []byte, a uintptr) []byte {
	if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%a == 0 {
		return b
	}
	buf := make([]uint64, (len(b)+7)/8)
	c := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(b))
	copy(c, b)
	return c
}

func (m *matrix) kind() actKind {
	switch m.typ {
	case gguf.F16:
		return actF16
	case gguf.BF16:
		return actBF16
	case gguf.Q1_0, gguf.Q2_0:
		return actQ1
	case gguf.Q8_0:
		return actQ8
	case gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.IQ4_NL, gguf.MXFP4, gguf.NVFP4:
		return actQ8f
	case gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.IQ2_XXS, gguf.IQ2_XS,
		gguf.IQ3_XXS, gguf.IQ1_S, gguf.IQ3_S, gguf.IQ2_S, gguf.IQ4_XS, gguf.IQ1_M, gguf.TQ1_0, gguf.TQ2_0:
		return actQ8Kf
	}
	return actF32
}

// decodeRow writes row r as float32 into dst (len cols).
func (m *matrix) decodeRow(r int, dst []float32) error {
	if err := gguf.Dequantize(m.typ, m.data[r*m.rowBytes:(r+1)*m.rowBytes], dst); err != nil {
		return fmt.Errorf("tensor %q row %d: %w", m.name, r, err)
	}
	return nil
}

// acts holds a batch of T activation rows (len cols each) and, on demand,
// their rounded forms. A batch is prepared once per input and shared by
// every matrix that reads it (q, k and v; gate and up).
type acts struct {
	t, cols   int
	f32       []float32
	f16       []float32 // binary16-rounded values
	bf16      []float32 // bfloat16-rounded values
	q8        []byte
	q8Bytes   int              // bytes per row of q8
	q8Sym     bool             // no code of q8 is −128: int8.DotQ8_0Sym applies
	q8Batch   int8.Q8_0Batch   // q8 widened for int8.MulQ8_0 (Q8_0 weights, panelTokens or more tokens)
	f16Batch  kernels.F16Batch // f16 reordered for kernels.MulF16 (F16 weights, panelTokens or more)
	bf16Batch kernels.F16Batch // bf16 reordered for kernels.MulBF16 (BF16 weights, panelTokens or more)
	q1        []quant1bit.Acts
	q8f       []float32 // Q8_0-rounded values
	q8kf      []float32 // Q8_K-rounded values
	have      [numActKinds]bool
}

func (a *acts) reset(x []float32, t, cols int) {
	a.t, a.cols, a.f32 = t, cols, x[:t*cols]
	a.have = [numActKinds]bool{actF32: true}
}

func (a *acts) prepare(k actKind) {
	if a.have[k] {
		return
	}
	n := a.t * a.cols
	switch k {
	case actF16:
		// binary16 values held as float32: the same products, and the
		// kernel converts only the weights.
		a.f16 = growF32(a.f16, n)
		kernels.RoundF16F32(a.f16, a.f32)
	case actBF16:
		a.bf16 = growF32(a.bf16, n)
		kernels.RoundBF16F32(a.bf16, a.f32)
	case actQ8:
		rb := a.cols / 32 * 34
		a.q8Bytes = rb
		if cap(a.q8) < rb*a.t {
			a.q8 = make([]byte, rb*a.t)
		}
		a.q8 = a.q8[:rb*a.t]
		for t := 0; t < a.t; t++ {
			int8.QuantizeRowQ8_0(a.f32[t*a.cols:(t+1)*a.cols], a.q8[t*rb:(t+1)*rb])
		}
		// Finite activations never quantize to −128; NaN or ±Inf may.
		a.q8Sym = int8.SymmetricQ8_0(a.q8)
	case actQ8Batch:
		a.prepare(actQ8)
		a.q8Batch.Set(a.q8, a.q8Bytes, a.t, a.cols)
	case actF16Batch:
		a.prepare(actF16)
		a.f16Batch.Set(a.f16, a.cols, a.t, a.cols)
	case actBF16Batch:
		a.prepare(actBF16)
		a.bf16Batch.Set(a.bf16, a.cols, a.t, a.cols)
	case actQ8f:
		a.prepare(actQ8)
		a.q8f = growF32(a.q8f, n)
		for t := 0; t < a.t; t++ {
			// Cannot fail: the bytes were just made for this length.
			_ = gguf.Dequantize(gguf.Q8_0, a.q8[t*a.q8Bytes:(t+1)*a.q8Bytes], a.q8f[t*a.cols:(t+1)*a.cols])
		}
	case actQ8Kf:
		a.q8kf = growF32(a.q8kf, n)
		roundQ8K(a.q8kf, a.f32)
	case actQ1:
		a.prepare(actQ8)
		if cap(a.q1) < a.t {
			a.q1 = append(a.q1[:cap(a.q1)], make([]quant1bit.Acts, a.t-cap(a.q1))...)
		}
		a.q1 = a.q1[:a.t]
		for t := range a.q1 {
			a.q1[t].Set(a.q8[t*a.q8Bytes:(t+1)*a.q8Bytes], a.cols)
		}
	}
	a.have[k] = true
}

func growF32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// roundQ8K stores in dst the values src takes after ggml's
// quantize_row_q8_K_ref (which llama.cpp's x86 CPU backend uses for the
// activations of K-quant, IQ and TQ weights): per block of 256, with m the
// element of largest magnitude (the first on ties), iscale = −127/m,
// q = round-half-even(iscale·x) capped at 127, value q·(1/iscale).
func roundQ8K(dst, src []float32) {
	for b := 0; b+256 <= len(src); b += 256 {
		x, y := src[b:b+256], dst[b:b+256]
		var mx, amax float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			clear(y)
			continue
		}
		iscale := -127 / mx
		d := 1 / iscale
		for i, v := range x {
			q := math.RoundToEven(float64(iscale * v))
			y[i] = float32(min(q, 127)) * d
		}
	}
}

// matmul computes out[t*rows+r] = dot(row r of w, activation t) for the
// whole batch. Rows are split into contiguous ranges, one per worker; each
// output element is one kernel call on the same operands whatever the split
// or the batch size, so results are bit-identical across thread counts and
// batchings. A weight row is loaded once and used for every token.
func (e *Engine) matmul(w *matrix, a *acts, out []float32) error {
	return e.matmuls(a, []*matrix{w}, [][]float32{out})
}

// matmuls is matmul for up to maxFused matrices reading the same input (q,
// k and v; gate and up; DeltaNet's qkv, z, β and α). While decoding they share one hand-off between
// threads, each worker taking its part of every matrix, instead of one
// hand-off per matrix.
func (e *Engine) matmuls(a *acts, ws []*matrix, outs [][]float32) error {
	for i, w := range ws {
		if err := e.prepareMatmul(w, a); err != nil {
			return err
		}
		outs[i] = outs[i][:a.t*w.rows]
	}
	if a.t >= panelTokens {
		// Prompts: each product is long enough to pay its own hand-off.
		for i := range ws {
			if err := e.splitMatmul(a, ws[i:i+1], outs[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	return e.splitMatmul(a, ws, outs)
}

// maxFused is the most matrices one matmuls call takes.
const maxFused = 4

// splitMatmul runs prepared products over the threads.
func (e *Engine) splitMatmul(a *acts, ws []*matrix, outs [][]float32) error {
	workers := e.threads
	work, rows := 0, 0
	for _, w := range ws {
		work += w.rows * w.cols
		rows = max(rows, w.rows)
	}
	if work < e.minWork || workers > rows {
		// Small products are not worth a goroutine hand-off.
		workers = 1
	}
	if workers == 1 {
		for i, w := range ws {
			if err := e.matmulRows(w, a, outs[i], 0, w.rows); err != nil {
				return err
			}
		}
		return nil
	}
	// Rows go out in chunks from a shared counter, and the caller works
	// too: it starts at once while a helper goroutine is still being woken,
	// and whoever is free takes the next chunk, so neither core idles at the
	// end of a product. Each row is one kernel call whatever chunk it is
	// in, so the result does not depend on the split.
	j := matmulJobs.Get().(*matmulJob)
	j.e, j.a, j.n = e, a, copy(j.ws[:], ws)
	copy(j.outs[:], outs)
	if a.t < panelTokens {
		// Decoding: long takes first, each covering its part of every
		// matrix, then shorter ones (see doGuided).
		j.chunks, j.units = 0, 0
		for _, w := range ws {
			j.units = max(j.units, w.rows)
		}
		j.first = max(j.units/(workers*decodeChunksPerWorker), 1)
		j.workers = workers
	} else {
		j.chunks, j.units = min(ws[0].rows, workers*matmulChunksPerWorker), 0
	}
	j.next.Store(0)
	if cap(j.errs) < workers {
		j.errs = make([]error, workers)
	}
	j.errs = j.errs[:workers]
	clear(j.errs)
	e.fork(workers, j.run)
	j.e, j.a, j.ws, j.outs = nil, nil, [maxFused]*matrix{}, [maxFused][]float32{}
	var err error
	for _, err = range j.errs {
		if err != nil {
			break
		}
	}
	clear(j.errs)
	matmulJobs.Put(j)
	return err
}

// prepareMatmul checks that w can multiply a and prepares the activation
// form w's kernels read.
func (e *Engine) prepareMatmul(w *matrix, a *acts) error {
	if a.cols != w.cols {
		return fmt.Errorf("runtime: tensor %q: input has %d columns, want %d", w.name, a.cols, w.cols)
	}
	e.observe(w, a) // calibration statistics (observe.go); no-op unless observed
	k := w.kind()
	if (k == actQ8 || k == actQ1 || k == actQ8f) && w.cols%32 != 0 {
		return fmt.Errorf("runtime: tensor %q: row length %d is not a multiple of 32", w.name, w.cols)
	}
	if w.typ == gguf.Q2_0 && w.cols%64 != 0 {
		return fmt.Errorf("runtime: tensor %q: row length %d is not a multiple of 64", w.name, w.cols)
	}
	if k == actQ8Kf && w.cols%256 != 0 {
		return fmt.Errorf("runtime: tensor %q: row length %d is not a multiple of 256", w.name, w.cols)
	}
	a.prepare(k)
	if a.t >= panelTokens {
		switch w.typ {
		case gguf.Q8_0:
			a.prepare(actQ8Batch)
		case gguf.F16:
			a.prepare(actF16Batch)
		case gguf.BF16:
			a.prepare(actBF16Batch)
		}
	}
	return nil
}

// matmulJob is one call of matmuls split over threads: the state its
// workers share, pooled like parallelJob so that a decode step allocates
// none per product.
type matmulJob struct {
	e      *Engine
	ws     [maxFused]*matrix
	outs   [maxFused][]float32
	n      int // matrices in ws and outs
	a      *acts
	chunks int // prompts: equal chunks
	// Decoding (units > 0): takes from [0, units), where unit u is row
	// rows·u/units of each matrix (units: the most rows among them).
	units, first, workers int
	next                  atomic.Int64
	errs                  []error
	run                   func(worker int) // do, bound once
}

var matmulJobs = sync.Pool{New: func() any {
	j := new(matmulJob)
	j.run = j.do
	return j
}}

func (j *matmulJob) do(i int) {
	if j.units > 0 {
		j.doGuided(i)
		return
	}
	for {
		c := int(j.next.Add(1)) - 1
		if c >= j.chunks {
			return
		}
		for m, w := range j.ws[:j.n] {
			r0, r1 := w.rows*c/j.chunks, w.rows*(c+1)/j.chunks
			if r0 == r1 { // a matrix with fewer rows than chunks
				continue
			}
			if err := j.e.matmulRows(w, j.a, j.outs[m], r0, r1); err != nil {
				j.errs[i] = err
				return
			}
		}
	}
}

// doGuided is do for decoding. The row kernels read a call's rows as long
// streams, so small takes shorten them and add a trip to the shared
// counter each; but equal chunks leave one thread idle at the end of a
// product for as long as the other is behind, up to a whole chunk. The
// takes are therefore first units/(workers·decodeChunksPerWorker), then
// 1/workers of what is left once that is less (guided scheduling), down to
// decodeMinTake: the threads end a product within about one small take of
// each other.
func (j *matmulJob) doGuided(i int) {
	u := int64(j.units)
	for {
		cur := j.next.Load()
		if cur >= u {
			return
		}
		n := min(int64(j.first), (u-cur)/int64(j.workers))
		n = max(n, decodeMinTake)
		end := min(u, cur+n)
		if !j.next.CompareAndSwap(cur, end) {
			continue
		}
		for m, w := range j.ws[:j.n] {
			r0, r1 := int(int64(w.rows)*cur/u), int(int64(w.rows)*end/u)
			if r0 == r1 { // a matrix with fewer rows than units
				continue
			}
			if err := j.e.matmulRows(w, j.a, j.outs[m], r0, r1); err != nil {
				j.errs[i] = err
				return
			}
		}
	}
}

// decodeMinTake is the fewest units (rows of the largest matrix) a
// decoding thread takes at once.
const decodeMinTake = 32

// decodeChunksPerWorker is matmulChunksPerWorker for one-token products.
// On the 2-vCPU Xeon (load 2.2-2.7, best of 5 reps over 5 interleaved
// rounds) 700M Q8_0 decoded at 38.1 tokens/s with 2, 38.0 with 1 and 37.4
// with 8 chunks per worker.
const decodeChunksPerWorker = 2

// matmulChunksPerWorker sets how finely a matrix product's rows are dealt
// out: enough chunks to absorb a late-starting helper, few enough that
// each is long compared with taking it.
const matmulChunksPerWorker = 8

// rangeTask is work that parallel splits: run(lo, hi) handles the indices
// [lo, hi). Callers keep their task in a State's scratch or a pool and
// pass a pointer, so that, unlike a closure over the call's variables, it
// costs no allocation per call.
type rangeTask interface{ run(lo, hi int) }

// parallel calls f.run on contiguous ranges covering [0, n) on up to
// Threads goroutines, or once on [0, n) when work (about the number of
// multiply-adds) is too small to pay for the hand-off. Callers make each
// index's result independent of the range it falls in.
func (e *Engine) parallel(n, work int, f rangeTask) {
	workers := min(e.threads, n)
	if workers <= 1 || work < e.minWork {
		f.run(0, n)
		return
	}
	// Chunks from a shared counter, as in matmul: the caller starts at once
	// and the load balances itself.
	j := parallelJobs.Get().(*parallelJob)
	j.f, j.n, j.chunks = f, n, min(n, workers*matmulChunksPerWorker)
	j.next.Store(0)
	e.fork(workers, j.run)
	j.f = nil
	parallelJobs.Put(j)
}

// parallelJob is what the goroutines splitting a parallel call share,
// pooled so that a decode step allocates none per call.
type parallelJob struct {
	f         rangeTask
	n, chunks int
	next      atomic.Int64
	run       func(worker int) // do, bound once
}

var parallelJobs = sync.Pool{New: func() any {
	j := new(parallelJob)
	j.run = j.do
	return j
}}

func (j *parallelJob) do(int) {
	for {
		c := int(j.next.Add(1)) - 1
		if c >= j.chunks {
			return
		}
		j.f.run(j.n*c/j.chunks, j.n*(c+1)/j.chunks)
	}
}

// fork calls f(0..workers-1), f(0) on the calling goroutine, and returns
// when all have returned: on the engine's pool when it is free and has
// exactly the helpers needed, else on fresh goroutines.
func (e *Engine) fork(workers int, f func(worker int)) {
	if e.pool != nil && e.pool.helpers == workers-1 && e.pool.run(f) {
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	f(0)
	wg.Wait()
}

func (e *Engine) matmulRows(w *matrix, a *acts, out []float32, r0, r1 int) error {
	n, rows, rb := w.cols, w.rows, w.rowBytes
	switch w.typ {
	case gguf.F32:
		for r := r0; r < r1; r++ {
			row := w.data[r*rb : (r+1)*rb]
			for t := 0; t < a.t; t++ {
				out[t*rows+r] = kernels.DotF32(row, a.f32[t*n:(t+1)*n])
			}
		}
	case gguf.F16, gguf.BF16:
		// BF16 takes the F16 kernels with a bfloat16 widening (fused BF16
		// dot products, see package kernels).
		k, x, batch := f16Products, a.f16, &a.f16Batch
		if w.typ == gguf.BF16 {
			k, x, batch = bf16Products, a.bf16, &a.bf16Batch
		}
		if a.t >= panelTokens {
			// Prompts: eight-row panels against the whole batch.
			k.mul(w.data[r0*rb:], rb, r1-r0, batch, out[r0:], rows)
			return nil
		}
		if a.t == 1 {
			// Decoding: the rows one after another in one call.
			k.rows(w.data[r0*rb:], rb, x[:n], out[r0:r1])
			return nil
		}
		// A short batch (2-3 tokens): each weight row read and widened
		// once for all the tokens, the decoding kernel's bits per token.
		// EPYC, run -t 1, CPU time, 50 interleaved rounds under
		// load: a 3-token prompt beyond a 1-token one 44 -> 20 ms, a
		// 2-token one 27 -> 9 ms.
		k.multi(w.data[r0*rb:], rb, r1-r0, x[:a.t*n], n, out[r0:], rows)
	case gguf.Q1_0:
		// The batch kernel expands each weight row's bits once for up to
		// four tokens; it is also the faster kernel for one.
		quant1bit.DotQ1_0ActsRows(w.data[r0*rb:], rb, r1-r0, a.q1, out[r0:], rows)
	case gguf.Q2_0:
		// The head of 1-bit models, against the unpacked activations
		// (the same bits as DotQ2_0 on the Q8_0 rows), all the rows in
		// one call: each row's codes are expanded once for up to four
		// tokens with AVX-512, two with AVX2. EPYC (Zen 5), one token,
		// 65536 rows of 2560 streamed: 100 (AVX-512) and 63 (AVX2)
		// against 33 G weights per CPU second for a loop of DotQ2_0Acts;
		// 48 tokens of a 1-bit model with 4 Qwen3-4B-shaped layers and a
		// 151936-token Q2_0 head 532-662 against 954-1026 ms task-clock
		// (run -t 1, 5 interleaved rounds; AVX2 805-1048 against
		// 1068-1200 ms).
		quant1bit.DotQ2_0ActsRows(w.data[r0*rb:], rb, r1-r0, a.q1, out[r0:], rows)
	case gguf.Q8_0:
		if a.t >= panelTokens {
			// Prompts: weight panels against the whole batch, exact for any
			// codes.
			int8.MulQ8_0(w.data[r0*rb:], rb, r1-r0, &a.q8Batch, out[r0:], rows)
			return nil
		}
		if a.q8Sym && a.t == 1 {
			// Decoding: all the rows in one call, which reads them in the
			// order the CPU's kernel streams fastest (two streams far
			// apart).
			int8.DotQ8_0SymRows(w.data[r0*rb:], rb, a.q8[:a.q8Bytes], n, out[r0:r1])
			return nil
		}
		if a.q8Sym {
			// A short batch: with AVX-512 or AVX2 each weight row is read
			// once for all the tokens (two or three at a time), so no
			// blocks of rows are needed (Go: the row kernel per token
			// over 256 KiB blocks of rows, inside
			// int8.DotQ8_0SymRowsTokens). EPYC (Zen 5), run -t 1 on the
			// 700M Q8_0 file, CPU time, interleaved rounds: a 3-token
			// prompt beyond a 1-token one 49 -> 15 ms with AVX-512 (load
			// 6-8), about 45 -> 27 ms with AVX2 (AVX-512 masked, load 2).
			int8.DotQ8_0SymRowsTokens(w.data[r0*rb:], rb, r1-r0, a.q8, a.q8Bytes, a.t, n, out[r0:], rows)
			return nil
		}
		dot := int8.DotQ8_0
		if a.q8Sym {
			dot = int8.DotQ8_0Sym
		}
		xb := a.q8Bytes
		for r := r0; r < r1; r++ {
			row := w.data[r*rb : (r+1)*rb]
			for t := 0; t < a.t; t++ {
				out[t*rows+r] = dot(row, a.q8[t*xb:(t+1)*xb], n)
			}
		}
	default:
		// Other types: decode one row at a time into scratch (correct,
		// slow) and take float32 dot products with the activations rounded
		// as llama.cpp rounds them for that type.
		xs := a.f32
		switch w.kind() {
		case actQ8f:
			xs = a.q8f
		case actQ8Kf:
			xs = a.q8kf
		}
		scratch := make([]float32, n)
		for r := r0; r < r1; r++ {
			if err := w.decodeRow(r, scratch); err != nil {
				return fmt.Errorf("runtime: %w", err)
			}
			for t := 0; t < a.t; t++ {
				out[t*rows+r] = kernels.Dot(scratch, xs[t*n:(t+1)*n])
			}
		}
	}
	return nil
}

// halfProducts are the products of a 16-bit float weight type (package
// kernels) with its rounded activations.
type halfProducts struct {
	mul   func(w []byte, rowBytes, rows int, x *kernels.F16Batch, out []float32, outStride int)
	rows  func(w []byte, rowBytes int, x, out []float32)
	multi func(w []byte, rowBytes, rows int, x []float32, n int, out []float32, ldo int)
}

var (
	f16Products  = halfProducts{kernels.MulF16, kernels.DotF16F32Rows, kernels.DotF16F32RowsMulti}
	bf16Products = halfProducts{kernels.MulBF16, kernels.DotBF16F32Rows, kernels.DotBF16F32RowsMulti}
)

// panelTokens is the batch from which Q8_0, F16 and BF16 products take
// weight panels (int8.MulQ8_0, kernels.MulF16, kernels.MulBF16); below it
// the rows go one by one against the tokens.
const panelTokens = 4
