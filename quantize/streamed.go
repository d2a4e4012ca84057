package quantize

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// streamed is Run's portable path: a producer encodes one tensor at a
// time (rows spread over the workers) while the writer streams the
// previous one into the file. It returns the file size.
func (o *output) streamed(ctx context.Context) (int64, error) {
	total := o.rep.SourceBytes
	// Two output buffers circulate: the producer fills one while the writer
	// drains the other. Reusing them keeps the heap at about two of the
	// largest output tensors, with no garbage for the collector to let grow.
	results := make(chan encoded)
	free := make(chan []byte, 2)
	free <- nil
	free <- nil
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var prodErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(results)
		var done int64
		for i, t := range o.m.Tensors {
			if ctx.Err() != nil {
				prodErr = ctx.Err()
				return
			}
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				prodErr = ctx.Err()
				return
			}
			e, err := encodeTensor(t, o.decisions[i], o.workers, buf)
			if err != nil {
				prodErr = err
				return
			}
			e.index = i
			select {
			case results <- e:
			case <-ctx.Done():
				prodErr = ctx.Err()
				return
			}
			done += t.Bytes()
			if o.opts.Progress != nil {
				o.opts.Progress(done, total)
			}
		}
	}()

	w := &gguf.Writer{Metadata: o.md}
	src := sha256.New()
	reports := make([]TensorReport, len(o.m.Tensors))
	for i, t := range o.m.Tensors {
		d := o.decisions[i]
		w.Tensors = append(w.Tensors, gguf.WriterTensor{
			Name: t.Name, Dims: t.Dims, Type: d.Kind.Type,
			Data: writerFunc(func(wr io.Writer) (int64, error) {
				e, ok := <-results
				if !ok {
					if prodErr != nil {
						return 0, prodErr
					}
					return 0, fmt.Errorf("tensor %s: producer stopped early", t.Name)
				}
				if e.index != i {
					return 0, fmt.Errorf("tensor %s: internal ordering error", t.Name)
				}
				fingerprintTensor(src, t, e.sourceSum)
				reports[i] = e.report(t, d)
				n, err := wr.Write(e.data)
				free <- e.data[:0]
				return int64(n), err
			}),
		})
	}

	f, err := atomicfile.Create(o.out)
	if err != nil {
		return 0, err
	}
	defer f.Abort()
	n, werr := w.WriteTo(f)
	cancel()
	for range results { // let the producer exit if the writer failed
	}
	wg.Wait()
	if prodErr != nil && !errors.Is(prodErr, context.Canceled) {
		return 0, prodErr
	}
	if werr != nil {
		return 0, fmt.Errorf("write %s: %w", o.out, werr)
	}
	if err := ctxErr(ctx, prodErr); err != nil {
		return 0, err
	}
	sum := hex.EncodeToString(src.Sum(nil))
	if err := patchPlaceholder(f, sum); err != nil {
		return 0, fmt.Errorf("write %s: %w", o.out, err)
	}
	if err := f.Commit(); err != nil {
		return 0, err
	}
	o.rep.SourceSHA256 = sum
	o.rep.Tensors = reports
	return n, nil
}

func ctxErr(ctx context.Context, prodErr error) error {
	if prodErr != nil {
		return prodErr
	}
	return nil
}

type writerFunc func(io.Writer) (int64, error)

func (f writerFunc) WriteTo(w io.Writer) (int64, error) { return f(w) }
