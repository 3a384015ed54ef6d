package actors

import (
	"container/heap"

	"github.com/tollgate/tollgate/protocol"
)

// Walks of job IDs in ID order over several disjoint runs at once (the
// ID indexes of several (queue, type) pairs, where a job is in one index
// only, and the cold jobs of the ready index, which are in none): a merge
// of cursors, one per run, so that no index of every job's ID is needed.

// setCursor is a position in an orderedSet, valid while the set does not
// change.
type setCursor[T any] struct {
	s     *orderedSet[T]
	ci, i int
}

// seek returns a cursor at the first item not less than pivot (desc: the
// last item not greater than it).
func (s *orderedSet[T]) seek(pivot T, desc bool) setCursor[T] {
	ci, i, found := s.locate(pivot)
	c := setCursor[T]{s: s, ci: ci, i: i}
	if desc && !found {
		c.prev() // the last item before pivot's place
	}
	return c
}

// valid reports whether the cursor is at an item.
func (c *setCursor[T]) valid() bool {
	return c.ci >= 0 && c.ci < len(c.s.chunks) && c.i >= 0 && c.i < len(c.s.chunks[c.ci])
}

func (c *setCursor[T]) item() T { return c.s.chunks[c.ci][c.i] }

// next moves to the next item (past the end: invalid).
func (c *setCursor[T]) next() {
	if c.i++; c.ci < len(c.s.chunks) && c.i >= len(c.s.chunks[c.ci]) {
		c.ci, c.i = c.ci+1, 0
	}
}

// prev moves to the item before (before the first: invalid).
func (c *setCursor[T]) prev() {
	if c.ci >= len(c.s.chunks) {
		c.ci, c.i = len(c.s.chunks)-1, 0
		if c.ci >= 0 {
			c.i = len(c.s.chunks[c.ci])
		}
	}
	if c.i--; c.i < 0 && c.ci > 0 {
		c.ci--
		c.i = len(c.s.chunks[c.ci]) - 1
	}
}

// idCursor is a position in one ordered run of job IDs that a walk
// merges: an ID index, or the cold jobs of one priority of a queue's ready
// index.
type idCursor interface {
	valid() bool
	key() protocol.IDKey
	step() // to the next ID in the walk's direction
}

// setIDs is an ID index's cursor in a walk.
type setIDs struct {
	c    setCursor[protocol.IDKey]
	desc bool
}

func (s *setIDs) valid() bool         { return s.c.valid() }
func (s *setIDs) key() protocol.IDKey { return s.c.item() }
func (s *setIDs) step() {
	if s.desc {
		s.c.prev()
	} else {
		s.c.next()
	}
}

// coldRun is the cold jobs of one priority of a queue's ready index, which
// holds them in id order, that keep accepts (coldjobs.go: a cold job is in
// no ID index).
type coldRun struct {
	c    setCursor[readyKey]
	desc bool
	keep func(protocol.IDKey) bool
}

func (r *coldRun) valid() bool         { return r.c.valid() }
func (r *coldRun) key() protocol.IDKey { return r.c.item().key() }
func (r *coldRun) step()               { r.move(); r.skip() }

func (r *coldRun) move() {
	if r.desc {
		r.c.prev()
	} else {
		r.c.next()
	}
}

// skip moves past the jobs keep does not accept (cold jobs of other types,
// jobs thawed since) and those not marked cold (readyKey.cold), which are
// not looked up.
func (r *coldRun) skip() {
	for r.valid() && !(r.c.item().cold() && r.keep(r.key())) {
		r.move()
	}
}

// coldRuns are the runs of cold jobs that keep accepts in the ready jobs q
// of one queue, one per priority, each from pivot on (desc: down from it);
// keepFor makes each run's filter, which is given the run's keys in order.
func coldRuns(q *queueReady, pivot protocol.IDKey, desc bool, keepFor func() func(protocol.IDKey) bool) []idCursor {
	at := readyKeyOf(pivot, false)
	if !mintedInEra(pivot) { // above every ready key: the end
		at = readyKey{hi: ^uint64(coldBit), lo: ^uint64(0)}
	}
	var runs []idCursor
	for _, ps := range q.prios {
		r := &coldRun{c: ps.set.seek(at, desc), desc: desc, keep: keepFor()}
		if r.skip(); r.valid() {
			runs = append(runs, r)
		}
	}
	return runs
}

// walkIDs calls fn in ID order (desc: reverse order) with the keys of sets
// and runs, which share none, from pivot on (desc: down from it), until fn
// returns false.
func walkIDs(sets []*orderedSet[protocol.IDKey], runs []idCursor, pivot protocol.IDKey, desc bool, fn func(protocol.IDKey) bool) {
	if len(sets) == 1 && len(runs) == 0 {
		// the common case: one index, no merge
		if desc {
			sets[0].DescendLessOrEqual(pivot, fn)
		} else {
			sets[0].AscendGreaterOrEqual(pivot, fn)
		}
		return
	}
	h := &idMerge{desc: desc}
	for _, s := range sets {
		if c := (&setIDs{c: s.seek(pivot, desc), desc: desc}); c.valid() {
			h.at = append(h.at, c)
		}
	}
	h.at = append(h.at, runs...) // valid: coldRuns keeps only those
	heap.Init(h)
	for h.Len() > 0 {
		c := h.at[0]
		if !fn(c.key()) {
			return
		}
		if c.step(); c.valid() {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
}

// idMerge is the heap of walkIDs: its cursors by their ID, the next one to
// give first.
type idMerge struct {
	at   []idCursor
	desc bool
}

func (h *idMerge) Len() int { return len(h.at) }
func (h *idMerge) Less(a, b int) bool {
	if h.desc {
		return h.at[b].key().Less(h.at[a].key())
	}
	return h.at[a].key().Less(h.at[b].key())
}
func (h *idMerge) Swap(a, b int) { h.at[a], h.at[b] = h.at[b], h.at[a] }
func (h *idMerge) Push(x any)    { h.at = append(h.at, x.(idCursor)) }
func (h *idMerge) Pop() any {
	c := h.at[len(h.at)-1]
	h.at = h.at[:len(h.at)-1]
	return c
}
