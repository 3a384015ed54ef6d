package actors

import (
	"unique"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Cold jobs. Most jobs of a backlog are plain, ready and unbound, and wait
// with nothing pointing at them but their key in the ready index and the
// ID indexes. Such a job needs no entry: the job table keeps it as a cold
// record of 48 bytes (its compact form and where the store keeps it), in
// pages of a slab, found by its key through an index of 32-bit slab
// positions. Where a compact waiting job cost an entry, its queuedJob and a
// pointer slot of the table (64 + 48 + ~18 bytes), a cold one costs its
// record and ~8 bytes of index.
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
// reservation, budget or slot refers to it, and it is counted in its
// queue's states (jobMap.freeze).

// coldJob is a cold job's record: the fields of its queuedJob (its status
// is ready, its bindings none) and its persistence.Ref, packed.
type coldJob struct {
	key      protocol.IDKey
	kind     unique.Handle[jobKind] // zero: a free record
	group    *persistence.Group
	readyAt  uint64 // of a free record: the next free one (position + 1)
	attempts uint32
	priority uint16
	flags    queuedFlags
	refBits  uint8
}

// canFreeze reports whether en may become cold (see above).
func canFreeze(en *entry) bool {
	return en.jb == nil && en.q.budgets == nil && en.q.flags&queuedScheduled == 0 &&
		en.state == stReady && en.flags == entryCounted &&
		en.stream == nil && en.resv == nil && en.parkedOn == (unique.Handle[string]{}) && en.slot == 0
}

// coldOf is the cold record of en (canFreeze(en)).
func coldOf(en *entry) coldJob {
	g, bits := en.ref.Packed()
	q := en.q
	return coldJob{key: q.key, kind: q.kind, group: g, readyAt: q.readyAt, attempts: q.attempts,
		priority: q.priority, flags: q.flags, refBits: bits}
}

// fillEntry sets en, with q as its compact form, to the entry c was made of.
func (c *coldJob) fillEntry(en *entry, q *queuedJob) {
	*q = queuedJob{key: c.key, kind: c.kind, readyAt: c.readyAt, attempts: c.attempts, priority: c.priority, flags: c.flags}
	*en = entry{q: q, ref: persistence.UnpackRef(c.group, c.refBits), state: stReady, flags: entryCounted}
}

// entryScratch is where a cold job is read without thawing it.
type entryScratch struct {
	en entry
	q  queuedJob
}

// coldPage is how many records a slab page holds (48 KiB).
const coldPage = 1024

// coldTable is the cold jobs: a slab of records in pages and an
// open-addressing index by key of their positions (linear probing,
// deletion by shifting back, as jobMap). Freed records are reused first;
// once at most a quarter of the slab is in use the records are moved
// together and the slab shrinks.
type coldTable struct {
	pages [][]coldJob
	free  uint32   // first free record (position + 1; 0: none)
	used  int      // records handed out, free ones included: the slab's end
	index []uint32 // position + 1 (0: empty); a power of two long, or empty
	meta  []slotMeta
	n     int
	// kinds counts the records per (type, queue): the counts by type that
	// the ID indexes, which do not hold cold jobs, cannot give
	kinds map[unique.Handle[jobKind]]int
}

func (t *coldTable) rec(pos uint32) *coldJob { return &t.pages[pos/coldPage][pos%coldPage] }

// find returns the index slot of key k, or the free slot where it would go.
func (t *coldTable) find(k protocol.IDKey) (int, bool) {
	home, tag := idHash(k, len(t.index))
	for i, mask := home, len(t.index)-1; ; i = (i + 1) & mask {
		p := t.index[i]
		if p == 0 {
			return i, false
		}
		if t.meta[i].tag() == tag && t.rec(p-1).key == k {
			return i, true
		}
	}
}

// lookup returns the record of key k, or nil.
func (t *coldTable) lookup(k protocol.IDKey) *coldJob {
	if t.n == 0 {
		return nil
	}
	if i, found := t.find(k); found {
		return t.rec(t.index[i] - 1)
	}
	return nil
}

// add keeps c (whose key is not in the table).
func (t *coldTable) add(c coldJob) {
	if (t.n+1)*4 > len(t.index)*3 {
		t.resize(max(jobMapMinSlots, 2*len(t.index)))
	}
	pos := t.alloc()
	// the record is written once indexed: a resize on the way indexes the
	// records in use, and this one must not be twice
	for !t.insert(c.key, pos) {
		t.resize(2 * len(t.index))
	}
	*t.rec(pos) = c
	t.n++
	if t.kinds == nil {
		t.kinds = make(map[unique.Handle[jobKind]]int)
	}
	t.kinds[c.kind]++
}

// alloc hands out a record's position: a freed one, or one past the end.
func (t *coldTable) alloc() uint32 {
	if t.free != 0 {
		pos := t.free - 1
		t.free = uint32(t.rec(pos).readyAt)
		return pos
	}
	if t.used == len(t.pages)*coldPage {
		t.pages = append(t.pages, make([]coldJob, coldPage))
	}
	t.used++
	return uint32(t.used - 1)
}

// take removes the record of key k and returns it.
func (t *coldTable) take(k protocol.IDKey) (coldJob, bool) {
	if t.n == 0 {
		return coldJob{}, false
	}
	i, found := t.find(k)
	if !found {
		return coldJob{}, false
	}
	pos := t.index[i] - 1
	r := t.rec(pos)
	c := *r
	*r = coldJob{readyAt: uint64(t.free)}
	t.free = pos + 1
	t.unindex(i)
	t.n--
	if t.kinds[c.kind]--; t.kinds[c.kind] == 0 {
		delete(t.kinds, c.kind)
	}
	switch {
	case t.n == 0:
		*t = coldTable{}
	case t.used > 4*coldPage && t.n*4 < t.used:
		t.pack()
	case len(t.index) > jobMapMinSlots && t.n*8 < len(t.index):
		t.resize(len(t.index) / 2)
	}
	return c, true
}

// unindex frees index slot i, shifting back the slots after it whose home
// is not between it and them (cyclically), so that probes still find them.
func (t *coldTable) unindex(i int) {
	mask := len(t.index) - 1
	for j := (i + 1) & mask; t.index[j] != 0; j = (j + 1) & mask {
		home := (j - t.meta[j].dist()) & mask
		if (j-home)&mask >= (j-i)&mask {
			t.index[i] = t.index[j]
			t.meta[i] = metaOf(t.meta[j].tag(), (i-home)&mask)
			i = j
		}
	}
	t.index[i], t.meta[i] = 0, 0
}

// insert indexes position pos under key k in the first free slot from
// k's home; it reports false when that slot is too far to record.
func (t *coldTable) insert(k protocol.IDKey, pos uint32) bool {
	home, tag := idHash(k, len(t.index))
	mask := len(t.index) - 1
	for d := 0; d <= jobMapMaxDist; d++ {
		i := (home + d) & mask
		if t.index[i] == 0 {
			t.index[i], t.meta[i] = pos+1, metaOf(tag, d)
			return true
		}
	}
	return false
}

// resize rebuilds the index with n slots (or more, if a probe is too long).
func (t *coldTable) resize(n int) {
	for !t.reindex(n) {
		n *= 2
	}
}

// reindex makes an index of n slots for the records in use; it reports
// false if one did not fit.
func (t *coldTable) reindex(n int) bool {
	t.index, t.meta = make([]uint32, n), make([]slotMeta, n)
	for pos := range uint32(t.used) {
		if r := t.rec(pos); r.kind != (unique.Handle[jobKind]{}) && !t.insert(r.key, pos) {
			return false
		}
	}
	return true
}

// pack moves the records in use to the front of a new slab, with no free
// ones between them, and indexes them again.
func (t *coldTable) pack() {
	old, used := t.pages, t.used
	t.pages, t.free, t.used = nil, 0, 0
	for pos := range uint32(used) {
		if r := &old[pos/coldPage][pos%coldPage]; r.kind != (unique.Handle[jobKind]{}) {
			*t.rec(t.alloc()) = *r
		}
	}
	size := jobMapMinSlots
	for t.n*8 > size*3 { // 3/8 full at most, as after a growth
		size *= 2
	}
	t.resize(size)
}

// each calls fn with every record until it returns false.
func (t *coldTable) each(fn func(*coldJob) bool) {
	for pos := range uint32(t.used) {
		if r := t.rec(pos); r.kind != (unique.Handle[jobKind]{}) && !fn(r) {
			return
		}
	}
}
