package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/protocol"
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
	EventCronFired      EventKind = "cron_fired"
	EventCronSkipped    EventKind = "cron_skipped"
	EventFolded         EventKind = "folded"
	EventBatchSealed    EventKind = "batch_sealed"
	EventTimedOut       EventKind = "timed_out" // SPEC §10.5 (timeouts.go)
	EventSettled        EventKind = "settled"   // SPEC §10.1 (settle.go)
)

// Event is one traced step. Tokens is the budget's pool level after the
// step (free tokens: time_based level settled to now, or while_in_flight
// allocation, both minus what is held and in flight); TokensBefore the
// level before it, on reservations.
type Event struct {
	Time         time.Time `json:"time"`
	Kind         EventKind `json:"kind"`
	Actor        string    `json:"actor"`
	JobID        string    `json:"job_id,omitempty"`
	Queue        string    `json:"queue,omitempty"`
	Budget       string    `json:"budget,omitempty"`
	Budgets      []string  `json:"budgets,omitempty"` // queue events: the job's budgets
	Cost         uint32    `json:"cost,omitempty"`
	TokensBefore *float64  `json:"tokens_before,omitempty"`
	Tokens       *float64  `json:"tokens,omitempty"`
	DueAt        uint64    `json:"due_at,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Stream       uint64    `json:"stream,omitempty"`
	WorkerID     string    `json:"worker_id,omitempty"`
	Position     int       `json:"position,omitempty"` // parked: place in the budget's line, from 1
	Count        uint64    `json:"count,omitempty"`    // dropped: events lost
	CronGroup    string    `json:"group,omitempty"`    // cron events: the entry's group
	CronEntry    string    `json:"entry,omitempty"`    // cron events: the entry
	Slot         uint64    `json:"slot,omitempty"`     // cron events: the slot fired (Unix ms)
	// settled: the cost the dispatch debited and the real cost reported
	Reserved *uint32 `json:"reserved,omitempty"`
	RealCost *uint32 `json:"real_cost,omitempty"`
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
// in Dropped and announced by a "dropped" event (see observe.go).
type Subscription struct {
	C       chan Event
	dropped atomic.Uint64
	pending atomic.Uint64 // lost and not yet announced
	filter  *TraceFilter  // nil: every event
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
		if s.filter.match(&e) {
			s.deliver(e)
		}
	}
	t.mu.Unlock()
}

func tokensPtr(v float64) *float64 { return &v }

func (t *Tracer) job(kind EventKind, j *protocol.Job, stream uint64) {
	if !t.on() {
		return
	}
	t.emit(Event{Kind: kind, Actor: "queue", JobID: j.ID, Queue: j.Queue, Budgets: bindingKeys(j.Budgets), Stream: stream})
}

// cron traces a cron tick: fired (with the job made, or the duplicate's
// holder) or skipped (paused, or the enqueue failed: reason says).
func (t *Tracer) cron(kind EventKind, s CronSlot, jobID, queue, reason string) {
	if !t.on() {
		return
	}
	t.emit(Event{Kind: kind, Actor: "cron", JobID: jobID, Queue: queue, CronGroup: s.Group, CronEntry: s.Entry, Slot: s.Slot, Reason: reason})
}
