// Budget actors run on a pool of long-lived goroutines.
//
// protoactor's default dispatcher starts a goroutine for every run of a
// mailbox. When the queue actor writes to tens of thousands of budget
// actors at once (a wave of tenants' first jobs, the collector asking
// them whether they are idle), thousands of those goroutines wait at the
// same time, and the runtime keeps every goroutine descriptor it ever made
// (480 bytes each; ~4 MB in the heap profile after 100,000 tenants),
// scattered between the wave's objects. The pool runs them on one
// goroutine per processor, and on more (up to poolMaxWorkers) while runs
// wait and none is free: a run lasts until its mailbox is empty (protoactor
// only yields the goroutine every Throughput messages), so a budget fed
// without pause would otherwise hold a worker from every other budget.

package actors

import (
	"runtime"
	"sync"
)

// budgetThroughput is how many messages a budget actor's mailbox
// processes before it yields its goroutine, as with protoactor's default
// dispatcher.
const budgetThroughput = 300

// poolMaxWorkers is the most workers a pool runs at once: the extra ones
// (above one per processor) start while runs wait with no worker free,
// and leave when none waits.
const poolMaxWorkers = 64

// poolKeepRuns is the largest queue of runs whose array a drained pool
// keeps for the next burst; a larger one is let go.
const poolKeepRuns = 4096

// workerPool is a protoactor Dispatcher that runs mailboxes on a fixed
// set of goroutines, in the order they were scheduled. Schedule never
// blocks.
type workerPool struct {
	throughput int
	base       int // workers that stay: one per processor, two at least

	mu      sync.Mutex
	wake    sync.Cond
	runs    []func() // scheduled: runs[head:]
	head    int
	idle    int  // workers waiting for a run
	busy    int  // workers in a run
	workers int  // workers started and not left
	closed  bool // Stop was called: workers leave once nothing is queued or running
	left    bool // and they left: runs scheduled now get goroutines of their own
	done    sync.WaitGroup
}

// newWorkerPool starts a pool of one worker per processor (two at least);
// a mailbox yields its goroutine every throughput messages.
func newWorkerPool(throughput int) *workerPool {
	p := &workerPool{throughput: throughput, base: max(2, runtime.GOMAXPROCS(0))}
	p.wake.L = &p.mu
	p.mu.Lock()
	for range p.base {
		p.startWorker()
	}
	p.mu.Unlock()
	return p
}

// startWorker starts a worker; p.mu is held.
func (p *workerPool) startWorker() {
	p.workers++
	p.done.Add(1)
	go p.work()
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
	switch {
	case p.idle > 0:
		p.wake.Signal()
	case p.workers < poolMaxWorkers:
		p.startWorker()
	}
	p.mu.Unlock()
}

// Throughput is how many messages a mailbox processes before it yields.
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

// work runs what the pool is given until the worker may leave.
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
// (ran); it reports false when the worker is to leave: it is an extra one
// and nothing is queued, or the pool is stopped with nothing queued or
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
			p.workers--
			p.wake.Broadcast()
			return nil, false
		}
		if p.workers > p.base && !p.closed {
			p.workers--
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
