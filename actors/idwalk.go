package actors

import (
	"container/heap"

	"github.com/tollgate/tollgate/protocol"
)

// Walks of job IDs in ID order over several disjoint ID indexes at once
// (the jobs of several queues or types, or of every queue, where a job is
// in one index only): a merge of cursors, one per index, so that no index
// of every job's ID is needed beside the per-queue ones.

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

// walkIDs calls fn in ID order (desc: reverse order) with the keys of sets,
// which share none, from pivot on (desc: down from it), until fn returns
// false.
func walkIDs(sets []*orderedSet[protocol.IDKey], pivot protocol.IDKey, desc bool, fn func(protocol.IDKey) bool) {
	if len(sets) == 1 {
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
		if c := s.seek(pivot, desc); c.valid() {
			h.at = append(h.at, c)
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		c := &h.at[0]
		if !fn(c.item()) {
			return
		}
		if desc {
			c.prev()
		} else {
			c.next()
		}
		if c.valid() {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
}

// idMerge is the heap of walkIDs: its cursors by their item, the next
// one to give first.
type idMerge struct {
	at   []setCursor[protocol.IDKey]
	desc bool
}

func (h *idMerge) Len() int { return len(h.at) }
func (h *idMerge) Less(a, b int) bool {
	if h.desc {
		return h.at[b].item().Less(h.at[a].item())
	}
	return h.at[a].item().Less(h.at[b].item())
}
func (h *idMerge) Swap(a, b int) { h.at[a], h.at[b] = h.at[b], h.at[a] }
func (h *idMerge) Push(x any)    { h.at = append(h.at, x.(setCursor[protocol.IDKey])) }
func (h *idMerge) Pop() any {
	c := h.at[len(h.at)-1]
	h.at = h.at[:len(h.at)-1]
	return c
}
