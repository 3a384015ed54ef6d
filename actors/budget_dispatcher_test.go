package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkerPoolRunsEverything schedules runs from several goroutines and
// from runs themselves; Stop returns once every one ran, and a run
// scheduled after Stop still runs.
func TestWorkerPoolRunsEverything(t *testing.T) {
	p := newWorkerPool(budgetThroughput)
	const senders, each = 4, 5_000
	var ran atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if i%2 == 0 {
					p.Schedule(func() { ran.Add(1) })
					continue
				}
				p.Schedule(func() { p.Schedule(func() { ran.Add(1) }) })
			}
		}()
	}
	wg.Wait()
	p.Stop()
	if got := ran.Load(); got != senders*each {
		t.Fatalf("%d runs done at Stop, want %d", got, senders*each)
	}
	late := make(chan struct{})
	p.Schedule(func() { close(late) })
	<-late
}

// TestWorkerPoolQueue takes runs from a pool without workers: first in,
// first out, with the array holding what is queued once many were taken
// while more came, and let go once a large queue drains.
func TestWorkerPoolQueue(t *testing.T) {
	p := &workerPool{workers: poolMaxWorkers} // none is started
	p.wake.L = &p.mu
	var order []int
	sched := func(i int) { p.Schedule(func() { order = append(order, i) }) }
	next := 0
	for i := range 3 * poolKeepRuns {
		sched(i)
		if i%2 == 1 { // taking half as fast as they come
			if p.head == len(p.runs) {
				t.Fatalf("run %d was not queued", i)
			}
			fn, _ := p.next(false)
			fn()
			next++
		}
	}
	if queued := len(p.runs) - p.head; queued != 3*poolKeepRuns-next {
		t.Fatalf("%d queued, want %d", queued, 3*poolKeepRuns-next)
	}
	if p.head >= poolKeepRuns {
		t.Fatalf("head %d: the taken runs were not moved out", p.head)
	}
	for p.head < len(p.runs) {
		fn, _ := p.next(false)
		fn()
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("run %d came %dth", v, i)
		}
	}
	if len(order) != 3*poolKeepRuns || p.runs != nil {
		t.Fatalf("%d runs, array kept %d: want %d and none", len(order), cap(p.runs), 3*poolKeepRuns)
	}
}

// TestWorkerPoolGrowsWhileWorkersAreHeld holds every base worker in a run
// and checks that a run scheduled then still runs, on an extra worker.
func TestWorkerPoolGrowsWhileWorkersAreHeld(t *testing.T) {
	p := newWorkerPool(budgetThroughput)
	defer p.Stop()
	release := make(chan struct{})
	var held sync.WaitGroup
	held.Add(p.base)
	for range p.base {
		p.Schedule(func() { held.Done(); <-release })
	}
	held.Wait()
	ran := make(chan struct{})
	p.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a run waited behind the held workers")
	}
	close(release)
}
