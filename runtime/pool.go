package runtime

import (
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool keeps an engine's helper goroutines alive between jobs. A decoded
// token is some 120 matrix products of a few hundred microseconds each;
// waking a parked goroutine for every one of them costs tens of
// microseconds on a VM, during which the second core idles. Helpers
// therefore spin for a short while after each job and only then park.
type pool struct {
	helpers int
	busy    sync.Mutex // one job at a time; a concurrent caller runs its own goroutines

	seq     atomic.Uint64 // bumped once per job, after task is set
	task    func(worker int)
	pending atomic.Int32 // helpers that have not finished the current job

	park     sync.Mutex
	wake     *sync.Cond
	sleeping int
	closed   bool
}

// spinFor is how long an idle helper waits for the next job before it
// parks: longer than the gaps between the products of one token, short
// enough that an idle engine gives its cores back at once.
const spinFor = 200 * time.Microsecond

func newPool(helpers int) *pool {
	p := &pool{helpers: helpers}
	p.wake = sync.NewCond(&p.park)
	for i := 1; i <= helpers; i++ {
		go p.loop(i)
	}
	return p
}

func (p *pool) loop(worker int) {
	var seen uint64
	for {
		s := p.seq.Load()
		if s == seen {
			deadline := time.Now().Add(spinFor)
			for spins := 0; s == seen; spins++ {
				if spins%256 == 255 && time.Now().After(deadline) {
					p.park.Lock()
					for p.seq.Load() == seen && !p.closed {
						p.sleeping++
						p.wake.Wait()
						p.sleeping--
					}
					closed := p.closed
					p.park.Unlock()
					if closed {
						return
					}
					deadline = time.Now().Add(spinFor)
				}
				s = p.seq.Load()
			}
		}
		seen = s
		p.task(worker)
		p.pending.Add(-1)
	}
}

// run calls task(0) on the calling goroutine and task(1..helpers) on the
// helpers, and returns when all have returned. It reports false, having
// run nothing, when another job holds the pool.
func (p *pool) run(task func(worker int)) bool {
	if !p.busy.TryLock() {
		return false
	}
	p.task = task
	p.pending.Store(int32(p.helpers))
	p.seq.Add(1) // publishes task to the helpers
	p.park.Lock()
	if p.sleeping > 0 {
		p.wake.Broadcast()
	}
	p.park.Unlock()
	task(0)
	for spins := 0; p.pending.Load() > 0; spins++ {
		if spins%1024 == 1023 {
			goruntime.Gosched()
		}
	}
	p.task = nil
	p.busy.Unlock()
	return true
}

// close ends the helpers once they are idle.
func (p *pool) close() {
	p.park.Lock()
	p.closed = true
	p.wake.Broadcast()
	p.park.Unlock()
}
