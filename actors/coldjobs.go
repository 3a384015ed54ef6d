package actors

import (
	"unique"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Cold jobs. Most jobs of a backlog are plain, ready and unbound, and wait
// with nothing pointing at them but their key in the ready index and the
// ID indexes. Such a job needs no entry: the job table keeps it as a cold
// record of 40 bytes (its compact form and where the store keeps it) in a
// set sorted by key, found by binary search. Where a compact waiting job
// cost an entry, its queuedJob and a pointer slot of the table (64 + 48 +
// ~18 bytes), a cold one costs its record. Jobs are minted and loaded in
// key order, so records are appended (or inserted just before the few
// enqueued while a backlog loads) and the set's chunks fill; jobs are
// mostly served oldest first, so records mostly leave from the front.
// Records that leave from the middle (one queue of several drained) leave
// chunks mostly at least a quarter full (orderedSet's merge rule).
//
// A cold job is in the ready index of its queue but in no ID index: a walk
// of job IDs merges, beside the ID indexes, the ready index's runs of cold
// jobs (queueCore.coldRuns); freezing drops the job's ID from its index,
// thawing adds it back (jobMap.thawed).
//
// A cold job turns back into an entry (thaws) the moment the engine looks
// it up to change it (jobMap.get and at: to dispatch, patch, delete or
// rebind it); reads that change nothing look at it through a scratch entry
// (jobMap.look). An entry becomes cold only where the engine compacts a
// waiting job (queued_compact.go), when nothing holds the entry but the
// table: its state is ready, it is compact and unbound, no stream,
// reservation, budget or slot refers to it, it is counted in its queue's
// states, and it became ready when its ID was minted (the record keeps no
// ready time: it is the ID's; a job scheduled or retried stays an entry).

// coldJob is a cold job's record: the fields of its queuedJob (its status
// is ready, its bindings none, its ready time its ID's) and its
// persistence.Ref, packed.
type coldJob struct {
	key      protocol.IDKey
	kind     unique.Handle[jobKind]
	group    *persistence.Group
	attempts uint32
	priority uint16
	flags    queuedFlags
	refBits  uint8
}

// canFreeze reports whether en may become cold (see above).
func canFreeze(en *entry) bool {
	return en.jb == nil && en.q.budgets == nil && en.q.flags&queuedScheduled == 0 &&
		en.q.readyAt == en.q.key.Millis() &&
		en.state == stReady && en.flags == entryCounted &&
		en.stream == nil && en.resv == nil && en.parkedOn == (unique.Handle[string]{}) && en.slot == 0
}

// coldOf is the cold record of en (canFreeze(en)).
func coldOf(en *entry) coldJob {
	g, bits := en.ref.Packed()
	q := en.q
	return coldJob{key: q.key, kind: q.kind, group: g, attempts: q.attempts,
		priority: q.priority, flags: q.flags, refBits: bits}
}

// fillEntry sets en, with q as its compact form, to the entry c was made of.
func (c *coldJob) fillEntry(en *entry, q *queuedJob) {
	*q = queuedJob{key: c.key, kind: c.kind, readyAt: c.key.Millis(), attempts: c.attempts, priority: c.priority, flags: c.flags}
	*en = entry{q: q, ref: persistence.UnpackRef(c.group, c.refBits), state: stReady, flags: entryCounted}
}

// entryScratch is where a cold job is read without thawing it.
type entryScratch struct {
	en entry
	q  queuedJob
}

// coldLess orders records by key.
func coldLess(a, b coldJob) bool { return a.key.Less(b.key) }

// coldTable is the cold jobs: their records in a set sorted by key.
type coldTable struct {
	set orderedSet[coldJob]
	// kinds counts the records per (type, queue): the counts by type that
	// the ID indexes, which do not hold cold jobs, cannot give
	kinds map[unique.Handle[jobKind]]int
}

// len is the number of cold jobs.
func (t *coldTable) len() int { return t.set.Len() }

// lookup returns the record of key k.
func (t *coldTable) lookup(k protocol.IDKey) (coldJob, bool) {
	if t.set.Len() == 0 {
		return coldJob{}, false
	}
	return t.set.Get(coldJob{key: k})
}

// add keeps c (whose key is not in the table).
func (t *coldTable) add(c coldJob) {
	if t.set.less == nil {
		t.set.less = coldLess
	}
	old, replaced := t.set.ReplaceOrInsert(c)
	if t.kinds == nil {
		t.kinds = make(map[unique.Handle[jobKind]]int)
	}
	if replaced { // not expected: keep the counts right all the same
		t.kinds[old.kind]--
	}
	t.kinds[c.kind]++
}

// take removes the record of key k and returns it.
func (t *coldTable) take(k protocol.IDKey) (coldJob, bool) {
	if t.set.Len() == 0 {
		return coldJob{}, false
	}
	c, ok := t.set.Delete(coldJob{key: k})
	if !ok {
		return coldJob{}, false
	}
	if t.kinds[c.kind]--; t.kinds[c.kind] == 0 {
		delete(t.kinds, c.kind)
	}
	if t.set.Len() == 0 {
		*t = coldTable{} // lets the chunk list and the counts go
	}
	return c, true
}

// coldFinger finds the records of keys asked for in key order (desc: in
// reverse order), as a walk of a queue's cold jobs asks for them: it looks
// a few records on from where the last one was before it searches the
// whole set. The table must not change while it is used.
type coldFinger struct {
	t      *coldTable
	desc   bool
	c      setCursor[coldJob]
	placed bool // c was placed by a search
}

// coldFingerSteps is how many records a finger looks on before it searches.
const coldFingerSteps = 8

// find returns the record of key k.
func (f *coldFinger) find(k protocol.IDKey) (coldJob, bool) {
	if f.t.len() == 0 {
		return coldJob{}, false
	}
	if f.placed {
		for range coldFingerSteps {
			if !f.c.valid() {
				return coldJob{}, false // past the last record
			}
			switch it := f.c.item(); {
			case it.key == k:
				return it, true
			case f.desc && it.key.Less(k), !f.desc && k.Less(it.key):
				return coldJob{}, false // k would be before the cursor
			}
			if f.desc {
				f.c.prev()
			} else {
				f.c.next()
			}
		}
	}
	f.c, f.placed = f.t.set.seek(coldJob{key: k}, f.desc), true
	if f.c.valid() && f.c.item().key == k {
		return f.c.item(), true
	}
	return coldJob{}, false
}

// each calls fn with every record, in key order, until it returns false.
func (t *coldTable) each(fn func(coldJob) bool) {
	t.set.Ascend(fn)
}
