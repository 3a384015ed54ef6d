package persistence

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// Batch is a set of writes committed atomically. Build it, then Submit it.
// Records are encoded when they are added, so the caller may keep changing
// its own copies afterwards.
type Batch struct {
	ops   []op
	size  int
	sync  bool
	err   error
	marks []pendingMarks // group marks, written when the batch is sealed
	kills []*Group       // groups whose last member left in this batch
	// removed and killed are what the batch did to groups' bookkeeping
	// (a member left; the group was deleted at Seal), for Revert.
	removed []*Group
	killed  []*Group
	// prios are the (queue, priority) pairs of the unfinished jobs the
	// batch stores; inUse, when pruning, is every pair in use, and
	// pruneAfter the store's refusal count at the load's snapshot
	// (priorities.go)
	prios        []PriorityPair
	lastPrio     uint16             // the priority and bindings of the last
	lastBindings []protocol.Binding // bound job noted (notePriority)
	inUse        map[PriorityPair]struct{}
	pruning      bool
	pruneAfter   uint64
	// budgetsGone are the budgets the batch deletes: their pairs' keys go
	// too (priorities.go)
	budgetsGone []string
}

// NewBatch returns an empty batch; sync asks for fsync before it counts as
// committed.
func NewBatch(sync bool) *Batch { return &Batch{sync: sync} }

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool {
	return len(b.ops) == 0 && len(b.marks) == 0 && len(b.kills) == 0 && b.err == nil && !b.pruning
}

// Sync marks the batch as needing fsync.
func (b *Batch) Sync() { b.sync = true }

// op is one write: a set, or a delete when val is nil.
type op struct {
	key, val []byte
}

func (o op) apply(txn *badger.Txn) error {
	if o.val == nil {
		return txn.Delete(o.key)
	}
	return txn.Set(o.key, o.val)
}

func (b *Batch) set(key []byte, v any) {
	val, err := protocol.MarshalRecord(v)
	if err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("persistence: encode %s: %w", key, err)
		}
		return
	}
	b.size += len(key) + len(val) + 32
	b.ops = append(b.ops, op{key: key, val: val})
}

func (b *Batch) del(key []byte) {
	b.size += len(key) + 32
	b.ops = append(b.ops, op{key: key})
}

// putJob stores the job record. A job's payload lives either inside its
// record (j.Payload set) or apart under its own key (j.Payload nil, see
// putApart); the caller keeps to one place for a job's lifetime.
func (b *Batch) putJob(j *protocol.Job) {
	b.notePriority(j)
	b.set(jobKey(j.ID), j)
}

// putApart stores j's payload under its own key and its record
// without it. Later rewrites of the record (putJob with a nil payload) then
// stay small, and nobody needs the payload in memory to write them.
func (b *Batch) putApart(j *protocol.Job) {
	b.notePriority(j)
	val := make([]byte, 0, 1+len(j.Payload))
	val = append(append(val, protocol.RecordVersion), j.Payload...)
	key := payloadKey(j.ID)
	b.size += len(key) + len(val) + 32
	b.ops = append(b.ops, op{key: key, val: val})
	meta := *j
	meta.Payload = nil
	b.set(jobKey(j.ID), &meta)
}

// deleteJob removes the job record, its payload when stored apart, and its
// error records (attempts 1..n).
func (b *Batch) deleteJob(id string, attempts uint32, payloadApart bool) {
	b.del(jobKey(id))
	if payloadApart {
		b.del(payloadKey(id))
	}
	for a := uint32(1); a <= attempts; a++ {
		b.del(errorKey(id, a))
	}
}

// PutError stores one error record of a job.
func (b *Batch) PutError(id string, rec *protocol.ErrorRecord) { b.set(errorKey(id, rec.Attempt), rec) }

// PutBudget stores a budget.
func (b *Batch) PutBudget(bu *protocol.Budget) { b.set(budgetKey(bu.Key), bu) }

// DeleteBudget removes a budget with its hold, on-the-fly mark (holds.go),
// stored pool level (pools.go) and the keys of its (budget, priority)
// pairs (priorities.go). No unfinished job may be bound to it.
func (b *Batch) DeleteBudget(key string) {
	b.del(budgetKey(key))
	b.del(holdKey(key))
	b.del(onTheFlyKey(key))
	b.DeletePool(key)
	b.budgetsGone = append(b.budgetsGone, key)
}

// Len is the number of writes in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Size is about how many bytes the batch's writes take in a transaction.
func (b *Batch) Size() int { return b.size }
