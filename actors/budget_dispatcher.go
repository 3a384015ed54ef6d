// Budget actors run on a few long-lived goroutines.
//
// protoactor's default dispatcher starts a goroutine for every run of a
// mailbox. When the queue actor writes to tens of thousands of budget
// actors at once (a wave of tenants' first jobs, the collector asking
// them whether they are idle), thousands of those goroutines wait at the
// same time, and the runtime keeps every goroutine descriptor it ever made
// (480 bytes each, 4 MB after 100,000 tenants), scattered between the
// wave's objects. Budget actors never block (they compute and send), so
// a pool of one goroutine per processor runs them as fast.

package actors

import (
	"runtime"
	"sync"
)

// budgetThroughput is the most messages a budget actor's mailbox
// processes in one run, as protoactor's default dispatcher.
const budgetThroughput = 300

// poolKeepRuns is the largest queue of runs whose array a drained pool
// keeps for the next burst; a larger one is let go.
const poolKeepRuns = 4096

// workerPool is a protoactor Dispatcher that runs mailboxes on a fixed
// set of goroutines, in the order they were scheduled. Schedule never
// blocks.
type workerPool struct {
	throughput int

	mu     sync.Mutex
	wake   sync.Cond
	runs   []func() // scheduled: runs[head:]
	head   int
	idle   int  // workers waiting for a run
	busy   int  // workers in a run
	closed bool // Stop was called: workers leave once nothing is queued or running
	left   bool // and they left: runs scheduled now get goroutines of their own
	done   sync.WaitGroup
}

// newWorkerPool starts a pool of one worker per processor (two at least);
// throughput is the most messages a mailbox processes in one run.
func newWorkerPool(throughput int) *workerPool {
	p := &workerPool{throughput: throughput}
	p.wake.L = &p.mu
	n := max(2, runtime.GOMAXPROCS(0))
	p.done.Add(n)
	for range n {
		go p.work()
	}
	return p
}

// Schedule queues fn for a worker; once the workers left (Stop), it runs
// fn on a goroutine of its own.
func (p *workerPool) Schedule(fn func()) {
	p.mu.Lock()
	if p.left {
		p.mu.Unlock()
		go fn()
		return
	}
	p.runs = append(p.runs, fn)
	if p.idle > 0 {
		p.wake.Signal()
	}
	p.mu.Unlock()
}

// Throughput is the most messages a mailbox processes in one run.
func (p *workerPool) Throughput() int { return p.throughput }

// Stop waits until every run scheduled, before it or by a run, is done,
// and lets the workers go.
func (p *workerPool) Stop() {
	p.mu.Lock()
	p.closed = true
	p.wake.Broadcast()
	p.mu.Unlock()
	p.done.Wait()
}

func (p *workerPool) work() {
	defer p.done.Done()
	ran := false
	for {
		fn, ok := p.next(ran)
		if !ok {
			return
		}
		fn()
		ran = true
	}
}

// next waits for a run and takes it, after a run of the caller's ended
// (ran); it reports false once the pool is stopped with nothing queued or
// running.
func (p *workerPool) next(ran bool) (func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ran {
		p.busy--
	}
	for p.head == len(p.runs) {
		if p.closed && p.busy == 0 {
			p.left = true
			p.wake.Broadcast()
			return nil, false
		}
		p.idle++
		p.wake.Wait()
		p.idle--
	}
	p.busy++
	fn := p.runs[p.head]
	p.runs[p.head] = nil
	p.head++
	switch {
	case p.head == len(p.runs) && cap(p.runs) > poolKeepRuns:
		p.runs, p.head = nil, 0
	case p.head == len(p.runs):
		p.runs, p.head = p.runs[:0], 0
	case p.head >= poolKeepRuns && p.head*2 >= len(p.runs):
		// runs keep coming: move the rest to the front, so that the
		// array holds what is queued, not what was
		n := copy(p.runs, p.runs[p.head:])
		clear(p.runs[n:])
		p.runs, p.head = p.runs[:n], 0
	}
	return fn, true
}
