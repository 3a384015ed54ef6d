package actors

import (
	"math"
	"unique"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Cold jobs. Most jobs of a backlog are plain, ready and unbound, and wait
// with nothing pointing at them but their key in the ready index and the
// ID indexes. Such a job needs no entry: the job table keeps it as a cold
// record of 32 bytes (its compact form and where the store keeps it) in a
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

// coldJob is a cold job's record, 32 bytes: the fields of its queuedJob
// (its status is ready, its bindings none, its ready time its ID's; its
// type and queue the table's kind number) and its persistence.Ref, packed.
type coldJob struct {
	key      protocol.IDKey
	group    *persistence.Group
	kind     uint32 // coldTable.kinds' index
	priority uint16
	attempts uint8
	// bits: the queuedFlags in the low four bits, the Ref's packed bits in
	// the high four
	bits uint8
}

// canFreeze reports whether en may become cold (see above): a job retried
// more than a byte counts, or with flags past four bits, stays an entry.
func canFreeze(en *entry) bool {
	return en.jb == nil && en.q.budgets == nil && en.q.flags&queuedScheduled == 0 &&
		en.q.readyAt == en.q.key.Millis() && en.q.attempts <= math.MaxUint8 && en.q.flags < 1<<4 &&
		en.state == stReady && en.flags == entryCounted &&
		en.stream == nil && en.resv == nil && en.parkedOn == (unique.Handle[string]{}) && en.slot == 0
}

// fill sets en, with q as its compact form, to the entry c was made of;
// kind is c's (type, queue) pair (coldTable.kindOf, or take's).
func (c coldJob) fill(kind unique.Handle[jobKind], en *entry, q *queuedJob) {
	*q = queuedJob{key: c.key, kind: kind, readyAt: c.key.Millis(), attempts: uint32(c.attempts),
		priority: c.priority, flags: queuedFlags(c.bits & 0x0f)}
	*en = entry{q: q, ref: persistence.UnpackRef(c.group, c.bits>>4), state: stReady, flags: entryCounted}
}

// entryScratch is where a cold job is read without thawing it.
type entryScratch struct {
	en entry
	q  queuedJob
}

// coldLess orders records by key.
func coldLess(a, b coldJob) bool { return a.key.Less(b.key) }

// coldTable is the cold jobs: their records in a set sorted by key, and
// the (type, queue) pairs they are of, numbered: a record keeps a pair's
// 4-byte number where a handle would take 8.
type coldTable struct {
	set orderedSet[coldJob]
	// kinds are the pairs by number, each with the count of its records
	// (the counts by type that the ID indexes, which do not hold cold jobs,
	// cannot give); a pair with none is free for another (in free)
	kinds   []coldKind
	kindNum map[unique.Handle[jobKind]]uint32
	free    []uint32
}

// coldKind is a (type, queue) pair of the cold jobs and how many are of it.
type coldKind struct {
	kind unique.Handle[jobKind]
	n    int
}

// len is the number of cold jobs.
func (t *coldTable) len() int { return t.set.Len() }

// kindOf is the (type, queue) pair of record c.
func (t *coldTable) kindOf(c coldJob) unique.Handle[jobKind] { return t.kinds[c.kind].kind }

// eachKind calls fn with every pair of the cold jobs and how many are of it.
func (t *coldTable) eachKind(fn func(kind unique.Handle[jobKind], n int)) {
	for _, k := range t.kinds {
		if k.n > 0 {
			fn(k.kind, k.n)
		}
	}
}

// countKind counts one more record of kind and returns its number.
func (t *coldTable) countKind(kind unique.Handle[jobKind]) uint32 {
	if i, ok := t.kindNum[kind]; ok {
		t.kinds[i].n++
		return i
	}
	if t.kindNum == nil {
		t.kindNum = make(map[unique.Handle[jobKind]]uint32)
	}
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
		t.kinds[i] = coldKind{kind: kind, n: 1}
	} else {
		i = uint32(len(t.kinds))
		t.kinds = append(t.kinds, coldKind{kind: kind, n: 1})
	}
	t.kindNum[kind] = i
	return i
}

// uncountKind counts one record of number i less; a pair with none left
// frees its number.
func (t *coldTable) uncountKind(i uint32) {
	if t.kinds[i].n--; t.kinds[i].n == 0 {
		delete(t.kindNum, t.kinds[i].kind)
		t.kinds[i] = coldKind{}
		t.free = append(t.free, i)
	}
}

// lookup returns the record of key k.
func (t *coldTable) lookup(k protocol.IDKey) (coldJob, bool) {
	if t.set.Len() == 0 {
		return coldJob{}, false
	}
	return t.set.Get(coldJob{key: k})
}

// add keeps the record of en (canFreeze(en); its key is not in the table).
func (t *coldTable) add(en *entry) {
	if t.set.less == nil {
		t.set.less = coldLess
	}
	g, refBits := en.ref.Packed()
	q := en.q
	c := coldJob{key: q.key, group: g, kind: t.countKind(q.kind), priority: q.priority,
		attempts: uint8(q.attempts), bits: uint8(q.flags) | refBits<<4}
	if old, replaced := t.set.ReplaceOrInsert(c); replaced { // not expected: keep the counts right all the same
		t.uncountKind(old.kind)
	}
}

// take removes the record of key k and returns it with its (type, queue)
// pair, read before the record's number may go to another pair.
func (t *coldTable) take(k protocol.IDKey) (coldJob, unique.Handle[jobKind], bool) {
	if t.set.Len() == 0 {
		return coldJob{}, unique.Handle[jobKind]{}, false
	}
	c, ok := t.set.Delete(coldJob{key: k})
	if !ok {
		return coldJob{}, unique.Handle[jobKind]{}, false
	}
	kind := t.kindOf(c)
	t.uncountKind(c.kind)
	if t.set.Len() == 0 {
		*t = coldTable{} // lets the chunk list and the pairs go
	}
	return c, kind, true
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
