package runtime

import (
	"sync"
	"sync/atomic"
	"time"
)

// pool keeps an engine's helper goroutines alive between jobs. A decoded
// token is some 120 matrix products of a few hundred microseconds each;
// waking a parked goroutine for every one of them costs tens of
// microseconds on a VM, during which the second core idles. Helpers
// therefore spin for a short while after each job and only then park.
//
// A job's work is dealt out from a shared counter (see matmulJob), so
// the caller does whatever no helper has taken. When the caller runs out
// of work it closes the job: a helper that has not joined it by then (it
// was descheduled, say, by another process on its core) skips it, and the
// caller waits only for takes already in flight, spinning briefly and
// then parking so that a descheduled helper can have the caller's core.
type pool struct {
	helpers int
	busy    sync.Mutex // one job at a time; a concurrent caller runs its own goroutines

	// state is the job's number (high 32 bits), whether it is closed
	// (jobClosed) and how many helpers have joined it and not yet
	// returned (the rest of the low bits).
	state   atomic.Uint64
	task    func(worker int)
	waiting atomic.Bool   // the caller is parked on done
	done    chan struct{} // a helper left a closed job, the caller may be waiting

	park     sync.Mutex
	wake     *sync.Cond
	sleeping int
	closed   bool
}

const (
	jobClosed = 1 << 31
	jobCount  = jobClosed - 1
)

// spinFor is how long an idle helper waits for the next job before it
// parks: longer than the gaps between the products of one token, short
// enough that an idle engine gives its cores back at once.
const spinFor = 200 * time.Microsecond

// waitFor is how long the caller spins for a helper's take in flight
// before it parks: a take of decodeMinTake rows lasts a few
// microseconds, one much longer means the helper lost its core.
const waitFor = 20 * time.Microsecond

func newPool(helpers int) *pool {
	p := &pool{helpers: helpers, done: make(chan struct{}, 1)}
	p.state.Store(jobClosed) // job 0 is over
	p.wake = sync.NewCond(&p.park)
	for i := 1; i <= helpers; i++ {
		go p.loop(i)
	}
	return p
}

func (p *pool) loop(worker int) {
	seen := uint64(0)
	for {
		s := p.state.Load()
		if s>>32 == seen {
			deadline := time.Now().Add(spinFor)
			for spins := 0; s>>32 == seen; spins++ {
				if spins%256 == 255 && time.Now().After(deadline) {
					p.park.Lock()
					for p.state.Load()>>32 == seen && !p.closed {
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
				s = p.state.Load()
			}
		}
		if s&jobClosed != 0 { // too late: the caller did this job's work
			seen = s >> 32
			continue
		}
		if !p.state.CompareAndSwap(s, s+1) { // another helper joined, or the caller closed
			continue
		}
		seen = s >> 32
		p.task(worker)
		if p.state.Add(^uint64(0))&jobCount == 0 && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}

// run calls task(0) on the calling goroutine and task(i) on each helper
// i that joins before task(0) returns, and returns when all have
// returned. task must take its work from a shared counter so that task(0)
// alone does all that no helper took. run reports false, having run
// nothing, when another job holds the pool.
func (p *pool) run(task func(worker int)) bool {
	if !p.busy.TryLock() {
		return false
	}
	p.task = task
	p.state.Store((p.state.Load()>>32 + 1) << 32) // publishes task; no helper is in the last job
	p.park.Lock()
	if p.sleeping > 0 {
		p.wake.Broadcast()
	}
	p.park.Unlock()
	task(0)
	if p.state.Or(jobClosed)&jobCount != 0 {
		p.wait()
	}
	p.task = nil
	p.busy.Unlock()
	return true
}

// wait returns when no helper is in the closed job.
func (p *pool) wait() {
	deadline := time.Now().Add(waitFor)
	for spins := 0; p.state.Load()&jobCount != 0; spins++ {
		if spins%64 == 63 && time.Now().After(deadline) {
			p.waiting.Store(true)
			for p.state.Load()&jobCount != 0 {
				<-p.done
			}
			p.waiting.Store(false)
			return
		}
	}
}

// close ends the helpers once they are idle.
func (p *pool) close() {
	p.park.Lock()
	p.closed = true
	p.wake.Broadcast()
	p.park.Unlock()
}
