package actors

import (
	"unique"

	"github.com/tollgate/tollgate/protocol"
)

// The compact form of a waiting job. Most unfinished jobs of a backlog are
// plain: ready or scheduled, no budgets, no unique key, no batch, default
// retry settings, never failed, their payload only in the store. Such a
// job is rebuilt exactly from its ID, type, queue, priority, attempts,
// status, ready_at and InGroup, so memory keeps those in a queuedJob
// (48 bytes: the ID as its 16-byte key, type and queue as handles of their
// interned strings) instead of a protocol.Job (224 bytes, and 32 more for
// the ID string, which the job map does not keep either: jobmap.go). An
// entry holds one of the two: en.jb, or en.q while its job is compact.
//
// Code that needs the whole job calls en.full(), which turns a compact
// entry back into a full one for good; code that only reads a few fields
// uses the accessors below, and code that reads the whole job without
// keeping it uses en.peek. The engine compacts entries at two points only,
// where no caller still holds the job's pointer: at the end of loading a
// job and at the end of handling an enqueue (e.compact), and only once
// EngineConfig.CompactFrom jobs are unfinished: a short queue is served
// soon, and compacting its jobs only to rebuild them at dispatch would
// allocate ~300 bytes more per job for little memory saved.

// queuedJob is what memory keeps of a plain waiting job.
type queuedJob struct {
	key      protocol.IDKey
	typ      unique.Handle[string]
	queue    unique.Handle[string]
	readyAt  uint64
	attempts uint32
	priority uint16
	status   queuedStatus
	inGroup  bool
}

// queuedStatus is a compact job's status: only waiting statuses compact.
type queuedStatus uint8

const (
	queuedReady queuedStatus = iota
	queuedScheduled
)

func (s queuedStatus) status() protocol.Status {
	if s == queuedScheduled {
		return protocol.StatusScheduled
	}
	return protocol.StatusReady
}

// plainJob reports whether j is rebuilt exactly from its compact form:
// every field a queuedJob does not keep is zero (nil, not merely empty,
// for slices), and its status is ready or scheduled.
func plainJob(j *protocol.Job) bool {
	return (j.Status == protocol.StatusReady || j.Status == protocol.StatusScheduled) &&
		j.Payload == nil && j.RetryLimit == nil && j.Backoff == nil && j.Retention == nil &&
		j.DequeuedAt == 0 && j.FailedAt == 0 && j.CompletedAt == 0 && j.PurgeAt == 0 &&
		j.UniqueKey == "" && j.UniqueWhile == "" && j.Batch == nil && j.Budgets == nil &&
		j.TimeoutMs == nil
}

// compactOf is the compact form of a plain job.
func compactOf(j *protocol.Job, names *nameInterner) *queuedJob {
	q := &queuedJob{key: idKey(j.ID), typ: names.handle(j.Type), queue: names.handle(j.Queue), readyAt: j.ReadyAt,
		attempts: j.Attempts, priority: j.Priority, inGroup: j.InGroup}
	if j.Status == protocol.StatusScheduled {
		q.status = queuedScheduled
	}
	return q
}

// fill sets j to the job q is the compact form of.
func (q *queuedJob) fill(j *protocol.Job) { q.fillID(j, q.key.String()) }

// fillID is fill with the job's ID already at hand.
func (q *queuedJob) fillID(j *protocol.Job, id string) {
	*j = protocol.Job{ID: id, Type: q.typ.Value(), Queue: q.queue.Value(), Priority: q.priority, InGroup: q.inGroup,
		Attempts: q.attempts, Status: q.status.status(), ReadyAt: q.readyAt}
}

// compact keeps en's job in its compact form when it is waiting and plain.
// Callers make sure that nobody holds the job's pointer any more.
func (e *queueCore) compact(en *entry) {
	if len(e.jobs) < e.cfg.CompactFrom || en.jb == nil || (en.state != stReady && en.state != stScheduled) || !plainJob(en.jb) {
		return
	}
	en.q = compactOf(en.jb, &e.names)
	en.jb = nil
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
	return en.q.queue.Value()
}

// priority is the job's priority.
func (en *entry) priority() uint16 {
	if en.jb != nil {
		return en.jb.Priority
	}
	return en.q.priority
}

// budgets is the job's bindings (none while it is compact).
func (en *entry) budgets() []protocol.Binding {
	if en.jb != nil {
		return en.jb.Budgets
	}
	return nil
}

// status is the job's stored status.
func (en *entry) status() protocol.Status {
	if en.jb != nil {
		return en.jb.Status
	}
	return en.q.status.status()
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
	en.q.status = queuedReady
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
