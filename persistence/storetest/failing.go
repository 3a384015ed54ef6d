// Package storetest holds JobStore doubles for tests: Failing wraps a real
// store and refuses commits on demand, as a full disk or a lost device
// would, so tests can check that nothing a store refused shows in memory.
package storetest

import (
	"context"
	"sync"

	"github.com/tollgate/tollgate/persistence"
)

// Failing is a persistence.JobStore that passes everything to an inner
// store, except the commits it is told to refuse: those are sealed (group
// bookkeeping moves on, as for a real failed commit), never reach the inner
// store and are answered with the refusal's error. Reads always pass.
type Failing struct {
	persistence.JobStore

	mu       sync.Mutex
	err      error // refuse every commit while set
	next     int   // refuse this many commits from now
	nextErr  error
	refused  int
	accepted int
}

// NewFailing wraps inner; it refuses nothing until told to.
func NewFailing(inner persistence.JobStore) *Failing {
	return &Failing{JobStore: inner}
}

// FailAll refuses every commit with err until Heal.
func (f *Failing) FailAll(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// FailNext refuses the next n commits with err, then accepts again.
func (f *Failing) FailNext(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next, f.nextErr = n, err
}

// Heal accepts every commit from now on.
func (f *Failing) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.next, f.nextErr = nil, 0, nil
}

// Refused is the number of commits refused so far.
func (f *Failing) Refused() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// Accepted is the number of commits passed to the inner store so far.
func (f *Failing) Accepted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted
}

// refusal decides the fate of one commit: the error to refuse it with, or
// nil to pass it on.
func (f *Failing) refusal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	if err == nil && f.next > 0 {
		f.next--
		err = f.nextErr
	}
	if err != nil {
		f.refused++
	} else {
		f.accepted++
	}
	return err
}

// Submit refuses b or passes it to the inner store. An empty batch always
// passes: a real store answers it without writing anything.
func (f *Failing) Submit(b *persistence.Batch, done func(error)) {
	b.Seal()
	if b.Empty() {
		f.JobStore.Submit(b, done)
		return
	}
	if err := f.refusal(); err != nil {
		if done != nil {
			done(err)
		}
		return
	}
	f.JobStore.Submit(b, done)
}

// Commit submits b through Submit and waits for the outcome.
func (f *Failing) Commit(ctx context.Context, b *persistence.Batch) error {
	ch := make(chan error, 1)
	f.Submit(b, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
