package actors

import (
	"sync"
	"sync/atomic"
	"time"
)

// EventKind names one step of dispatch.
type EventKind string

// The traced steps of dispatch.
const (
	EventReady          EventKind = "ready"
	EventReserveGranted EventKind = "reserve_granted"
	EventReserveRefused EventKind = "reserve_refused"
	EventParked         EventKind = "parked"
	EventTimerArmed     EventKind = "timer_armed"
	EventTimerFired     EventKind = "timer_fired"
	EventTimerCancelled EventKind = "timer_cancelled"
	EventWoken          EventKind = "woken"
	EventCommit         EventKind = "commit"
	EventRelease        EventKind = "release"
	EventDispatched     EventKind = "dispatched"
	EventAcked          EventKind = "acked"
	EventFailed         EventKind = "failed"
	EventRequeued       EventKind = "requeued"
)

// Event is one traced step.
type Event struct {
	Time   time.Time `json:"time"`
	Kind   EventKind `json:"kind"`
	Actor  string    `json:"actor"`
	JobID  string    `json:"job_id,omitempty"`
	Queue  string    `json:"queue,omitempty"`
	Budget string    `json:"budget,omitempty"`
	Cost   uint32    `json:"cost,omitempty"`
	Tokens *float64  `json:"tokens,omitempty"`
	DueAt  uint64    `json:"due_at,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Stream uint64    `json:"stream,omitempty"`
}

// Tracer fans dispatch events out to subscribers. With no subscriber every
// method returns after one atomic load, without allocating.
type Tracer struct {
	active atomic.Int32
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
}

// NewTracer returns a tracer with no subscribers.
func NewTracer() *Tracer { return &Tracer{subs: make(map[*Subscription]struct{})} }

// Subscription receives events on C; a slow reader loses events, counted
// in Dropped.
type Subscription struct {
	C       chan Event
	dropped atomic.Uint64
	t       *Tracer
}

// Dropped returns how many events this subscriber lost so far.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription.
func (s *Subscription) Close() {
	s.t.mu.Lock()
	if _, ok := s.t.subs[s]; ok {
		delete(s.t.subs, s)
		s.t.active.Add(-1)
	}
	s.t.mu.Unlock()
}

// Subscribe starts a subscription with a buffer of n events.
func (t *Tracer) Subscribe(n int) *Subscription {
	s := &Subscription{C: make(chan Event, n), t: t}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.active.Add(1)
	t.mu.Unlock()
	return s
}

// on reports whether anyone listens.
func (t *Tracer) on() bool { return t != nil && t.active.Load() > 0 }

func (t *Tracer) emit(e Event) {
	e.Time = time.Now()
	t.mu.Lock()
	for s := range t.subs {
		select {
		case s.C <- e:
		default:
			s.dropped.Add(1)
		}
	}
	t.mu.Unlock()
}

func tokensPtr(v float64) *float64 { return &v }

func (t *Tracer) reserve(b *budgetCore, job JobRef, granted bool, now uint64) {
	if !t.on() {
		return
	}
	kind := EventReserveRefused
	if granted {
		kind = EventReserveGranted
	}
	t.emit(Event{Kind: kind, Actor: "budget/" + b.key, JobID: job.ID, Queue: job.Queue, Budget: b.key, Cost: job.Cost, Tokens: tokensPtr(b.tokens(now))})
	if !granted {
		t.emit(Event{Kind: EventParked, Actor: "budget/" + b.key, JobID: job.ID, Queue: job.Queue, Budget: b.key, Cost: job.Cost, Tokens: tokensPtr(b.tokens(now))})
	}
}

func (t *Tracer) budgetEvent(kind EventKind, b *budgetCore, jobID string, now uint64) {
	if !t.on() {
		return
	}
	t.emit(Event{Kind: kind, Actor: "budget/" + b.key, JobID: jobID, Budget: b.key, Tokens: tokensPtr(b.tokens(now))})
}

func (t *Tracer) budgetTimer(kind EventKind, b *budgetCore, due uint64, now uint64) {
	if !t.on() {
		return
	}
	t.emit(Event{Kind: kind, Actor: "budget/" + b.key, Budget: b.key, DueAt: due})
}

func (t *Tracer) woken(b *budgetCore, ids []string, reason string, now uint64) {
	if !t.on() {
		return
	}
	for _, id := range ids {
		t.emit(Event{Kind: EventWoken, Actor: "budget/" + b.key, JobID: id, Budget: b.key, Reason: reason, Tokens: tokensPtr(b.tokens(now))})
	}
}

func (t *Tracer) job(kind EventKind, jobID, queue string, stream uint64) {
	if !t.on() {
		return
	}
	t.emit(Event{Kind: kind, Actor: "queue", JobID: jobID, Queue: queue, Stream: stream})
}
