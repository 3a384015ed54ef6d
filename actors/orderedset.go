package actors

import "sort"

// orderedSet is a sorted set of items, used for the engine's ID indexes,
// the ready index and each budget's parked list. Its items mostly arrive
// in increasing order (SCRU128 ids are minted in order, and a priority
// class is served oldest first) and mostly leave from the front. So it is
// a list of sorted chunks: an item past the end is appended to the last
// chunk, which fills completely (a B-tree splits its full right-most node
// in half and so leaves every node half empty under ordered inserts), and
// a chunk emptied at the front is dropped in O(1). An insert elsewhere
// splits a full chunk in two; a delete merges a chunk that fell below a
// quarter into a neighbour with room. A delete in a chunk's front half
// moves the items before it, so deletes from the front cost no copying.
// Method names follow google/btree's.
type orderedSet[T any] struct {
	less   func(a, b T) bool
	chunks [][]T // each sorted and non-empty; chunk k's items precede chunk k+1's
	n      int
}

// orderedChunk is the capacity of a chunk: 127 items, so that a full chunk
// of 32-byte items fills a 4096-byte allocation class even when the items
// hold a pointer (the cold records), for which Go puts an 8-byte header
// before an allocation this large; with 128 such items it took the
// 4,864-byte class, 38 bytes per item. A chunk of 16-byte items, which
// hold none, fills 2,032 bytes of its 2,048.
const orderedChunk = 127

func newOrderedSet[T any](less func(a, b T) bool) *orderedSet[T] {
	return &orderedSet[T]{less: less}
}

// Len is the number of items.
func (s *orderedSet[T]) Len() int { return s.n }

// Clear removes every item.
func (s *orderedSet[T]) Clear() {
	s.chunks = nil
	s.n = 0
}

// locate returns the chunk that holds item or would hold it (the first
// whose last item is not less than item; len(chunks) when item is past the
// end) and the item's position in it.
func (s *orderedSet[T]) locate(item T) (ci, i int, found bool) {
	if len(s.chunks) == 0 {
		return 0, 0, false
	}
	if last := s.chunks[len(s.chunks)-1]; s.less(last[len(last)-1], item) {
		return len(s.chunks), 0, false // the usual insert: past the end
	}
	if !s.less(s.chunks[0][len(s.chunks[0])-1], item) {
		ci = 0 // the usual delete: an item near the front
	} else {
		ci = sort.Search(len(s.chunks), func(k int) bool {
			c := s.chunks[k]
			return !s.less(c[len(c)-1], item)
		})
	}
	if ci == len(s.chunks) {
		return ci, 0, false
	}
	c := s.chunks[ci]
	if !s.less(c[0], item) {
		i = 0 // the usual delete again: the front item
	} else {
		i = sort.Search(len(c), func(k int) bool { return !s.less(c[k], item) })
	}
	return ci, i, i < len(c) && !s.less(item, c[i])
}

// ReplaceOrInsert adds item, replacing an equal one; it returns the
// replaced item.
func (s *orderedSet[T]) ReplaceOrInsert(item T) (old T, replaced bool) {
	if len(s.chunks) == 0 {
		s.chunks = append(s.chunks, s.newChunk(item))
		s.n++
		return old, false
	}
	ci, i, found := s.locate(item)
	if found {
		old = s.chunks[ci][i]
		s.chunks[ci][i] = item
		return old, true
	}
	s.n++
	if ci == len(s.chunks) {
		// past the end: append to the last chunk, or start a new one
		last := s.chunks[ci-1]
		if len(last) < orderedChunk {
			if len(last) == cap(last) && cap(last) >= orderedChunk/2 {
				// a chunk deleted from the front has lost capacity there:
				// grow it to a full chunk, not to twice its length
				grown := make([]T, len(last), orderedChunk)
				copy(grown, last)
				clear(last)
				last = grown
			}
			s.chunks[ci-1] = append(last, item)
		} else {
			// the set is large and growing at the end: start full-size
			c := make([]T, 1, orderedChunk)
			c[0] = item
			s.chunks = append(s.chunks, c)
		}
		return old, false
	}
	c := s.chunks[ci]
	if len(c) < orderedChunk {
		s.chunks[ci] = insertAt(c, i, item)
		return old, false
	}
	if i >= orderedChunk*3/4 {
		// full, and the item goes near its end: most likely one of a run
		// of items arriving in order ahead of a few newer ones (a backlog
		// loading while new jobs are enqueued). Split where it goes, the
		// item first in the right chunk: the left one stays about three
		// quarters full (95 of 127 at least), and the rest of the run
		// fills the right one, where halves would leave every chunk of the
		// run half empty. (A run arriving in reverse order goes to the
		// front of the right chunk and fills it; after that its chunks
		// split in halves, half full, rather than one per item.)
		right := make([]T, orderedChunk-i+1, orderedChunk-i+2)
		right[0] = item
		copy(right[1:], c[i:])
		clear(c[i:])
		s.chunks[ci] = c[:i]
		s.chunks = insertAt(s.chunks, ci+1, right)
		return old, false
	}
	// full: split in two halves and insert into the half it belongs to
	half := orderedChunk / 2
	right := make([]T, orderedChunk-half, orderedChunk-half+1)
	copy(right, c[half:])
	clear(c[half:])
	left := c[:half]
	if i <= half {
		left = insertAt(left, i, item)
	} else {
		right = insertAt(right, i-half, item)
	}
	s.chunks[ci] = left
	s.chunks = insertAt(s.chunks, ci+1, right)
	return old, false
}

// newChunk starts a chunk small: a set that stays small (a budget with a
// few parked jobs) should not pay for a full chunk; append grows it.
func (s *orderedSet[T]) newChunk(item T) []T {
	c := make([]T, 1, 4)
	c[0] = item
	return c
}

func insertAt[E any](c []E, i int, item E) []E {
	var zero E
	c = append(c, zero)
	copy(c[i+1:], c[i:])
	c[i] = item
	return c
}

// Delete removes the item equal to item and returns it.
func (s *orderedSet[T]) Delete(item T) (old T, ok bool) {
	ci, i, found := s.locate(item)
	if !found {
		return old, false
	}
	c := s.chunks[ci]
	old = c[i]
	var zero T
	if i < len(c)/2 {
		// near the front (the usual delete): shift the items before it
		// one place up and drop the first slot, instead of moving the
		// rest of the chunk down
		copy(c[1:i+1], c[:i])
		c[0] = zero
		c = c[1:]
	} else {
		copy(c[i:], c[i+1:])
		c[len(c)-1] = zero
		c = c[:len(c)-1]
	}
	s.n--
	switch {
	case len(c) == 0 && ci == 0:
		s.chunks[0] = nil
		s.chunks = s.chunks[1:] // the usual case: served from the front
	case len(c) == 0:
		s.removeChunk(ci)
	default:
		s.chunks[ci] = c
		s.mergeSparse(ci)
	}
	return old, true
}

// mergeSparse folds chunk ci into a neighbour when it fell below a quarter
// and the neighbour has room, so that deletes in the middle do not leave
// many nearly empty chunks behind.
func (s *orderedSet[T]) mergeSparse(ci int) {
	c := s.chunks[ci]
	if len(c) >= orderedChunk/4 {
		return
	}
	if ci > 0 && len(s.chunks[ci-1])+len(c) <= orderedChunk {
		s.chunks[ci-1] = append(s.chunks[ci-1], c...)
		s.removeChunk(ci)
	} else if ci+1 < len(s.chunks) && len(s.chunks[ci+1])+len(c) <= orderedChunk {
		next := s.chunks[ci+1]
		s.chunks[ci] = append(c, next...)
		s.removeChunk(ci + 1)
	}
}

// removeChunk drops chunk ci by moving the shorter side of the list: the
// chunks before it when it lies in the front half. Jobs finish near the
// front, behind a few still in flight or parked, so a chunk emptied there
// costs the few chunks before it, not the whole backlog's list (at 10M
// queued jobs that list has 78,000 chunks, and moving it per emptied chunk
// made the drain quadratic).
func (s *orderedSet[T]) removeChunk(ci int) {
	if ci < len(s.chunks)/2 {
		copy(s.chunks[1:ci+1], s.chunks[:ci])
		s.chunks[0] = nil
		s.chunks = s.chunks[1:]
		return
	}
	copy(s.chunks[ci:], s.chunks[ci+1:])
	s.chunks[len(s.chunks)-1] = nil
	s.chunks = s.chunks[:len(s.chunks)-1]
}

// Move replaces the item equal to old by item when item sorts into the
// same place (no other item lies between the two) and reports whether it
// did. It changes an item's key without the delete and insert that could
// free and allocate a chunk (the ready index's heads: one item per queue).
func (s *orderedSet[T]) Move(old, item T) bool {
	ci, i, found := s.locate(old)
	if !found {
		return false
	}
	c := s.chunks[ci]
	// the neighbours of old's place, within its chunk or the next ones
	var prev, next *T
	if i > 0 {
		prev = &c[i-1]
	} else if ci > 0 {
		p := s.chunks[ci-1]
		prev = &p[len(p)-1]
	}
	if i+1 < len(c) {
		next = &c[i+1]
	} else if ci+1 < len(s.chunks) {
		next = &s.chunks[ci+1][0]
	}
	if (prev != nil && !s.less(*prev, item)) || (next != nil && !s.less(item, *next)) {
		return false
	}
	c[i] = item
	return true
}

// Update replaces the item equal to item, if there is one, and reports
// whether there was.
func (s *orderedSet[T]) Update(item T) bool {
	ci, i, found := s.locate(item)
	if found {
		s.chunks[ci][i] = item
	}
	return found
}

// Get returns the item equal to item.
func (s *orderedSet[T]) Get(item T) (T, bool) {
	ci, i, found := s.locate(item)
	if !found {
		var zero T
		return zero, false
	}
	return s.chunks[ci][i], true
}

// Has reports whether an item equal to item is in the set.
func (s *orderedSet[T]) Has(item T) bool {
	_, _, found := s.locate(item)
	return found
}

// Min returns the first item.
func (s *orderedSet[T]) Min() (T, bool) {
	if len(s.chunks) == 0 {
		var zero T
		return zero, false
	}
	return s.chunks[0][0], true
}

// Ascend calls fn with every item in order until fn returns false.
func (s *orderedSet[T]) Ascend(fn func(T) bool) {
	s.ascendFrom(0, 0, fn)
}

// AscendGreaterOrEqual calls fn in order with the items not less than
// pivot until fn returns false.
func (s *orderedSet[T]) AscendGreaterOrEqual(pivot T, fn func(T) bool) {
	ci, i, _ := s.locate(pivot)
	s.ascendFrom(ci, i, fn)
}

// AscendLessThan calls fn in order with the items less than pivot until fn
// returns false.
func (s *orderedSet[T]) AscendLessThan(pivot T, fn func(T) bool) {
	s.Ascend(func(item T) bool { return s.less(item, pivot) && fn(item) })
}

func (s *orderedSet[T]) ascendFrom(ci, i int, fn func(T) bool) {
	for ; ci < len(s.chunks); ci, i = ci+1, 0 {
		for _, item := range s.chunks[ci][i:] {
			if !fn(item) {
				return
			}
		}
	}
}

// Descend calls fn with every item in reverse order until fn returns false.
func (s *orderedSet[T]) Descend(fn func(T) bool) {
	if len(s.chunks) == 0 {
		return
	}
	last := len(s.chunks) - 1
	s.descendFrom(last, len(s.chunks[last])-1, fn)
}

// DescendLessOrEqual calls fn in reverse order with the items not greater
// than pivot until fn returns false.
func (s *orderedSet[T]) DescendLessOrEqual(pivot T, fn func(T) bool) {
	ci, i, found := s.locate(pivot)
	if !found {
		i-- // the last item before pivot's place
		if ci == len(s.chunks) {
			ci, i = ci-1, -1
			if ci >= 0 {
				i = len(s.chunks[ci]) - 1
			}
		}
	}
	s.descendFrom(ci, i, fn)
}

func (s *orderedSet[T]) descendFrom(ci, i int, fn func(T) bool) {
	for ci >= 0 {
		c := s.chunks[ci]
		for ; i >= 0; i-- {
			if !fn(c[i]) {
				return
			}
		}
		ci--
		if ci >= 0 {
			i = len(s.chunks[ci]) - 1
		}
	}
}
