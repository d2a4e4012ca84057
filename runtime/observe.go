package runtime

import (
	"sync"
	"sync/atomic"
)

// ObserveFunc receives the float32 input of a matrix product before any
// rounding: t rows of cols values (x, row-major) multiplied by the weight
// named tensor ("token_embd.weight" for a tied head). x is only valid
// during the call.
type ObserveFunc func(tensor string, x []float32, t, cols int)

// Observers by Engine; active counts them so that the matmul hook costs
// one atomic load when nothing observes.
var (
	observers sync.Map // *Engine → *observer
	active    atomic.Int32
)

// Observe calls f with the input of every matrix product the Engine runs
// (activation statistics for calibration, e.g. Wanda pruning) until the
// returned stop is called. f runs on the goroutine of the State doing the
// product and must be safe for concurrent use when several States run at
// once. One observer per Engine: a second Observe replaces the first.
func (e *Engine) Observe(f ObserveFunc) (stop func()) {
	o := &observer{f} // funcs are not comparable; the pointer is
	if _, loaded := observers.Swap(e, o); !loaded {
		active.Add(1)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if observers.CompareAndDelete(e, o) {
				active.Add(-1)
			}
		})
	}
}

// observe is the matmul hook.
func (e *Engine) observe(w *matrix, a *acts) {
	if active.Load() == 0 {
		return
	}
	if f, ok := observers.Load(e); ok {
		f.(*observer).f(w.name, a.f32[:a.t*a.cols], a.t, a.cols)
	}
}

type observer struct{ f ObserveFunc }

// DeltaNetSnapshots calls fn with DeltaNet layer i's conv and recurrent
// state after each token the State holds a snapshot of (SetRollback keeps
// them), oldest first, in DeltaNet's layouts; the slices alias the State.
// Calibration reads the state every token leaves this way from one
// many-token RunLayers call.
func (s *State) DeltaNetSnapshots(i int, fn func(conv, ssm []float32) error) error {
	for _, sn := range s.layers[i].snaps {
		if err := fn(sn.conv, sn.ssm); err != nil {
			return err
		}
	}
	return nil
}
