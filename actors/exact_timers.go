package actors

import (
	"container/heap"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ExactTimers is the Timers of the budgets' wake timers (SPEC §4.4,
// precision): it sends each message as close to its moment as the kernel
// can wake the process.
//
// Go's runtime timers are late by up to about a millisecond when the
// process is idle: the runtime then sleeps in epoll_wait, whose timeout is
// whole milliseconds and is rounded so as never to wake early. At burst 1 a
// saturated budget loses each wake's lateness at the cap (its pool holds at
// most one token), so 0.8 ms of lateness per 50 ms interval costs a 20/s
// budget 1.6 % of its rate. Where the kernel has timer file descriptors
// (Linux), ExactTimers also arms one for its earliest message: the runtime's
// poller wakes on it to the microsecond. Each message is sent by whichever
// of its runtime timer and the descriptor comes first, exactly once; where
// there is no descriptor, it is sent by its runtime timer alone.
type ExactTimers struct {
	root *actor.RootContext
	log  *slog.Logger

	mu      sync.Mutex
	pending exactHeap   // armed, not yet sent, earliest first
	kernel  kernelTimer // nil until first used, or when there is none
	started bool        // the kernel timer was tried (kernel may be nil)
	armed   time.Time   // the moment the kernel timer is set for (zero: none)
	stopped bool
}

// kernelTimer is a timer the runtime's poller waits on (exact_timers_linux.go).
type kernelTimer interface {
	// set arms it to expire after d (d <= 0: disarm).
	set(d time.Duration) error
	// wait blocks until it expires; it fails once closed.
	wait() error
	close() error
}

// exactTimer is one armed message.
type exactTimer struct {
	due   time.Time // with the monotonic reading
	pid   *actor.PID
	msg   any
	index int // in pending; -1 once sent or cancelled
	rt    *time.Timer
}

// NewExactTimers returns ExactTimers sending through root; log reports a
// kernel timer that cannot be made (it then relies on runtime timers).
func NewExactTimers(root *actor.RootContext, log *slog.Logger) *ExactTimers {
	return &ExactTimers{root: root, log: log}
}

// SendOnce sends msg to pid after delay; the returned function cancels the
// send if it has not happened yet.
func (t *ExactTimers) SendOnce(delay time.Duration, pid *actor.PID, msg any) func() {
	delay = max(0, delay)
	e := &exactTimer{due: time.Now().Add(delay), pid: pid, msg: msg}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return func() {}
	}
	// made under the lock, so its callback waits until e is pending
	e.rt = time.AfterFunc(delay, func() { t.fire(e) })
	heap.Push(&t.pending, e)
	t.startKernel()
	t.rearm()
	return func() { t.cancel(e) }
}

// Stop cancels every pending message and releases the kernel timer.
func (t *ExactTimers) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	for _, e := range t.pending {
		e.rt.Stop()
		e.index = -1
	}
	t.pending = nil
	if t.kernel != nil {
		_ = t.kernel.close()
		t.kernel = nil
	}
}

func (t *ExactTimers) cancel(e *exactTimer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.index < 0 {
		return
	}
	e.rt.Stop()
	heap.Remove(&t.pending, e.index)
	t.rearm()
}

// fire sends e, its runtime timer having expired, unless it was sent or
// cancelled already.
func (t *ExactTimers) fire(e *exactTimer) {
	t.mu.Lock()
	if e.index < 0 {
		t.mu.Unlock()
		return
	}
	heap.Remove(&t.pending, e.index)
	t.rearm()
	t.mu.Unlock()
	t.root.Send(e.pid, e.msg)
}

// fireDue sends every message whose moment has come, the kernel timer
// having expired.
func (t *ExactTimers) fireDue() {
	var due []*exactTimer
	t.mu.Lock()
	t.armed = time.Time{}
	now := time.Now()
	for len(t.pending) > 0 && !t.pending[0].due.After(now) {
		e := heap.Pop(&t.pending).(*exactTimer)
		e.rt.Stop()
		due = append(due, e)
	}
	t.rearm()
	t.mu.Unlock()
	for _, e := range due {
		t.root.Send(e.pid, e.msg)
	}
}

// startKernel makes the kernel timer and its waiting goroutine on first
// use (called with mu held).
func (t *ExactTimers) startKernel() {
	if t.started {
		return
	}
	t.started = true
	k, err := newKernelTimer()
	if err != nil {
		if t.log != nil {
			t.log.Warn("exact timers: no kernel timer, budget wakes rely on runtime timers", "err", err)
		}
		return
	}
	if k == nil {
		return // none on this platform
	}
	t.kernel = k
	go func() {
		for k.wait() == nil {
			t.fireDue()
		}
	}()
}

// rearm sets the kernel timer for the earliest pending message (called
// with mu held).
func (t *ExactTimers) rearm() {
	if t.kernel == nil {
		return
	}
	if len(t.pending) == 0 {
		if !t.armed.IsZero() {
			t.armed = time.Time{}
			_ = t.kernel.set(0)
		}
		return
	}
	due := t.pending[0].due
	if due.Equal(t.armed) {
		return
	}
	t.armed = due
	if err := t.kernel.set(max(time.Nanosecond, time.Until(due))); err != nil && t.log != nil {
		t.log.Warn("exact timers: arming the kernel timer failed; the runtime timer sends", "err", err)
	}
}

// exactHeap orders pending messages by moment (container/heap).
type exactHeap []*exactTimer

func (h exactHeap) Len() int           { return len(h) }
func (h exactHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h exactHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *exactHeap) Push(x any) {
	e := x.(*exactTimer)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *exactHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
