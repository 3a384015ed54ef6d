package actors

import (
	"math"
	"unique"
	"unsafe"

	"github.com/tollgate/tollgate/protocol"
)

// The compact form of a waiting job. Most unfinished jobs of a backlog are
// plain: ready, scheduled or parked on a budget, no unique key, no batch,
// default retry settings, never failed, their payload only in the store.
// Such a job is rebuilt exactly from its ID, type, queue, priority,
// attempts, status, ready_at, InGroup and budget bindings, so memory keeps
// those in a queuedJob (48 bytes: the ID as its 16-byte key, type and queue
// as one handle of the interned pair, the bindings as a pointer into a list
// the jobs bound alike share) instead of a protocol.Job (232 bytes, and its
// ID string, which the job map does not keep either:
// jobmap.go). An entry holds one of the two: en.jb, or en.q while its job
// is compact.
//
// Code that needs the whole job calls en.full(), which turns a compact
// entry back into a full one for good; code that only reads a few fields
// uses the accessors below, and code that reads the whole job without
// keeping it uses en.peek. The engine compacts entries at three points
// only, where no caller still holds the job's pointer: at the end of
// loading a job, at the end of handling an enqueue, and when a job parks
// on a budget (e.compact); and only once EngineConfig.CompactFrom jobs are
// unfinished: a short queue is served soon, and compacting its jobs only to
// rebuild them at dispatch would allocate ~300 bytes more per job for
// little memory saved. A parked job is the common case of a budgeted
// backlog: it waits, often for long, and its reservation and wake read its
// ID, queue, priority and bindings only (reservations.go). A compact job
// that is ready, unbound and referred to by nothing goes further: it leaves
// its entry for a cold record (coldjobs.go).

// queuedJob is what memory keeps of a plain waiting job.
type queuedJob struct {
	key  protocol.IDKey
	kind unique.Handle[jobKind]
	// budgets is the first of the job's nBudgets bindings (nil: none): a
	// list the job shares with the jobs of its request bound alike, and
	// never changed in place (a rebind replaces a job's list).
	budgets  *protocol.Binding
	readyAt  uint64
	attempts uint32
	priority uint16
	flags    queuedFlags
	nBudgets uint8
}

// jobKind is a job's type and queue: a backlog holds few pairs, so a
// compact job keeps one handle of its pair rather than one of each.
type jobKind struct{ typ, queue string }

// queuedFlags are a compact job's status and InGroup, as bits.
type queuedFlags uint8

const (
	// queuedScheduled: the job's status is scheduled, else ready (only
	// waiting jobs compact)
	queuedScheduled queuedFlags = 1 << iota
	// queuedInGroup is protocol.Job.InGroup
	queuedInGroup
)

// status is the status the flags give.
func (f queuedFlags) status() protocol.Status {
	if f&queuedScheduled != 0 {
		return protocol.StatusScheduled
	}
	return protocol.StatusReady
}

// plainJob reports whether j is rebuilt exactly from its compact form:
// every field a queuedJob does not keep is zero (nil, not merely empty,
// for slices), its bindings are nil or a non-empty list, and its status is
// ready or scheduled.
func plainJob(j *protocol.Job) bool {
	return (j.Status == protocol.StatusReady || j.Status == protocol.StatusScheduled) &&
		j.Payload == nil && j.RetryLimit == nil && j.Backoff == nil && j.Retention == nil &&
		j.DequeuedAt == 0 && j.FailedAt == 0 && j.CompletedAt == 0 && j.PurgeAt == 0 &&
		j.UniqueKey == "" && j.UniqueWhile == "" && j.Batch == nil &&
		(j.Budgets == nil || len(j.Budgets) > 0 && len(j.Budgets) <= math.MaxUint8) &&
		j.TimeoutMs == nil
}

// compactOf is the compact form of a plain job.
func compactOf(j *protocol.Job, names *nameInterner) *queuedJob {
	q := &queuedJob{key: idKey(j.ID), kind: names.kind(j.Type, j.Queue), readyAt: j.ReadyAt,
		attempts: j.Attempts, priority: j.Priority}
	if j.Status == protocol.StatusScheduled {
		q.flags |= queuedScheduled
	}
	if j.InGroup {
		q.flags |= queuedInGroup
	}
	if len(j.Budgets) > 0 {
		q.budgets, q.nBudgets = &j.Budgets[0], uint8(len(j.Budgets))
	}
	return q
}

// bindings is the job's binding list, the one it was compacted with.
func (q *queuedJob) bindings() []protocol.Binding {
	if q.budgets == nil {
		return nil
	}
	return unsafe.Slice(q.budgets, q.nBudgets)
}

// fill sets j to the job q is the compact form of.
func (q *queuedJob) fill(j *protocol.Job) { q.fillID(j, q.key.String()) }

// fillID is fill with the job's ID already at hand.
func (q *queuedJob) fillID(j *protocol.Job, id string) {
	kind := q.kind.Value()
	*j = protocol.Job{ID: id, Type: kind.typ, Queue: kind.queue, Priority: q.priority, InGroup: q.flags&queuedInGroup != 0,
		Attempts: q.attempts, Status: q.flags.status(), ReadyAt: q.readyAt, Budgets: q.bindings()}
}

// compact keeps en's job in its compact form when it is waiting and plain.
// A bound job that is ready is not compacted: it is about to reserve, and
// is rebuilt at once when its budgets grant; one that is refused parks and
// compacts then. Callers make sure that nobody holds the job's pointer any
// more.
func (e *queueCore) compact(en *entry) {
	if e.jobs.len() < e.cfg.CompactFrom || en.jb == nil || !plainJob(en.jb) {
		return
	}
	switch {
	case en.state == stScheduled || en.state == stParked:
	case en.state == stReady && en.jb.Budgets == nil:
	default:
		return
	}
	en.q = compactOf(en.jb, &e.names)
	en.jb = nil
	// a plain ready job needs no entry, nor its ID in an ID index
	// (coldjobs.go)
	kind, k, prio := en.q.kind.Value(), en.q.key, en.q.priority
	if e.jobs.freeze(en) {
		e.dropFromKind(kind.queue, kind.typ, k)
		e.ready.markCold(readyItem{key: k, priority: prio}, kind.queue)
	}
}

// full returns en's job, rebuilding it from its compact form first if need
// be; the entry holds the whole job from then on.
func (en *entry) full() *protocol.Job {
	if en.jb == nil {
		j := new(protocol.Job)
		en.q.fill(j)
		en.jb, en.q = j, nil
	}
	return en.jb
}

// peek returns en's job to read without keeping it: the job itself, or
// scratch filled from the compact form.
func (en *entry) peek(scratch *protocol.Job) *protocol.Job {
	if en.jb != nil {
		return en.jb
	}
	en.q.fill(scratch)
	return scratch
}

// peekID is peek with the job's ID already at hand (id must be it).
func (en *entry) peekID(scratch *protocol.Job, id string) *protocol.Job {
	if en.jb != nil {
		return en.jb
	}
	en.q.fillID(scratch, id)
	return scratch
}

// id is the job's ID (made anew from its key while the job is compact).
func (en *entry) id() string {
	if en.jb != nil {
		return en.jb.ID
	}
	return en.q.key.String()
}

// key is the key of the job's ID.
func (en *entry) key() protocol.IDKey {
	if en.jb != nil {
		return idKey(en.jb.ID)
	}
	return en.q.key
}

// queue is the job's queue.
func (en *entry) queue() string {
	if en.jb != nil {
		return en.jb.Queue
	}
	return en.q.kind.Value().queue
}

// priority is the job's priority.
func (en *entry) priority() uint16 {
	if en.jb != nil {
		return en.jb.Priority
	}
	return en.q.priority
}

// budgets is the job's bindings. Callers do not change the list: it may be
// shared with other jobs.
func (en *entry) budgets() []protocol.Binding {
	if en.jb != nil {
		return en.jb.Budgets
	}
	return en.q.bindings()
}

// status is the job's stored status.
func (en *entry) status() protocol.Status {
	if en.jb != nil {
		return en.jb.Status
	}
	return en.q.flags.status()
}

// readyAt is the job's ready_at.
func (en *entry) readyAt() uint64 {
	if en.jb != nil {
		return en.jb.ReadyAt
	}
	return en.q.readyAt
}

// visibleStatus is the status a reader sees at now
// (protocol.Job.VisibleStatus).
func (en *entry) visibleStatus(now uint64) protocol.Status {
	if st := en.status(); st != protocol.StatusScheduled || en.readyAt() > now {
		return st
	}
	return protocol.StatusReady
}

// setReady sets the stored status of a scheduled job that came due.
func (en *entry) setReady() {
	if en.jb != nil {
		en.jb.Status = protocol.StatusReady
		return
	}
	en.q.flags &^= queuedScheduled
}

// traceEntry traces an event of en's job without keeping it whole.
func (e *queueCore) traceEntry(kind EventKind, en *entry, stream uint64) {
	if !e.tracer.on() {
		return
	}
	var scratch protocol.Job
	e.tracer.job(kind, en.peek(&scratch), stream)
}

// An entry keeps the key of the budget its job is parked on as a handle of
// the interned key (8 bytes instead of a string's 16), one of the savings
// that keep the entry at 64 bytes.

// noBudget is the zero parkedOn: parked on no budget.
var noBudget unique.Handle[string]

// parkedKey is the key of the budget the job is parked on ("": none).
func (en *entry) parkedKey() string {
	if en.parkedOn == noBudget {
		return ""
	}
	return en.parkedOn.Value()
}

// parkOn notes that the job is parked on budget key.
func (en *entry) parkOn(key string) { en.parkedOn = unique.Make(key) }
