package actors

import (
	"cmp"
	"slices"

	"github.com/tollgate/tollgate/protocol"
)

// readyItem is a ready job as the ready index gives it: its key and
// priority, in (priority, id) order. The index keeps it as a 16-byte
// readyKey in the set of its queue and priority; neither the queue nor the
// entry is kept (dispatch finds the entry in the job map by the key), so
// there is no pointer for the collector to scan.
type readyItem struct {
	key      protocol.IDKey
	priority uint16
	// cold says the job went cold after it was added (coldjobs.go), so
	// that walks of cold jobs pass over the others without looking them
	// up; a job that thaws keeps it until it leaves the index, so it is a
	// hint the walk checks
	cold bool
}

// readyItemOf is the item of en's job.
func readyItemOf(en *entry) readyItem {
	return readyItem{key: en.key(), priority: en.priority()}
}

func readyLess(a, b readyItem) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.key.Less(b.key)
}

// readyKey is a ready job's key in its priority's set: the ID's key, 16
// bytes, with the cold hint (readyItem.cold) in the top bit of Hi, which
// no ID minted before the year 6429 sets (mintedInEra).
type readyKey struct{ hi, lo uint64 }

// coldBit is the cold hint's bit in readyKey.hi.
const coldBit = 1 << 63

// readyKeyOf is the ready key of k (whose top bit is clear: mintedInEra)
// with the cold hint.
func readyKeyOf(k protocol.IDKey, cold bool) readyKey {
	r := readyKey{hi: k.Hi &^ coldBit, lo: k.Lo}
	if cold {
		r.hi |= coldBit
	}
	return r
}

// key is the ID's key.
func (r readyKey) key() protocol.IDKey { return protocol.IDKey{Hi: r.hi &^ coldBit, Lo: r.lo} }

// cold is the cold hint.
func (r readyKey) cold() bool { return r.hi&coldBit != 0 }

// mintedInEra reports whether k's top bit is clear, as in every ID minted
// before the year 6429: only such keys go in the ready index (the load
// leaves other stored IDs out).
func mintedInEra(k protocol.IDKey) bool { return k.Hi&coldBit == 0 }

// readyKeyLess orders ready keys by ID, ignoring the cold hint, so that a
// key is found (Update, Delete) whatever its hint.
func readyKeyLess(a, b readyKey) bool {
	ah, bh := a.hi&^coldBit, b.hi&^coldBit
	return ah < bh || (ah == bh && a.lo < b.lo)
}

// prioritySet is the ready jobs of one priority of a queue.
type prioritySet struct {
	priority uint16
	set      *orderedSet[readyKey]
}

// queueReady is the ready jobs of a queue: a set per priority in use, in
// priority order (a queue uses a few priorities), so that an item needs
// no priority beside its key.
type queueReady struct {
	prios []prioritySet
	n     int // items in all of prios
}

// of returns the set of priority p, made if create, and its place.
func (q *queueReady) of(p uint16, create bool) (*orderedSet[readyKey], int) {
	i, found := slices.BinarySearchFunc(q.prios, p, func(ps prioritySet, p uint16) int { return cmp.Compare(ps.priority, p) })
	if found {
		return q.prios[i].set, i
	}
	if !create {
		return nil, i
	}
	set := newOrderedSet(readyKeyLess)
	q.prios = slices.Insert(q.prios, i, prioritySet{priority: p, set: set})
	return set, i
}

// Len is the number of ready jobs of the queue.
func (q *queueReady) Len() int { return q.n }

// Min is the queue's first ready job.
func (q *queueReady) Min() (readyItem, bool) {
	if len(q.prios) == 0 {
		return readyItem{}, false
	}
	first := q.prios[0]
	k, _ := first.set.Min()
	return readyItem{key: k.key(), priority: first.priority, cold: k.cold()}, true
}

// readyIndex holds the ready jobs of every queue in (priority, id) order:
// one queueReady per queue, and the first item of each in heads, in the
// same order, so that the first ready job of all queues (for streams that
// take every queue) is the first head. Each ready job is in one set only
// (an index over all queues as well would cost a second item per job);
// heads holds one item per queue with ready jobs, and changes when a
// queue's first job does.
type readyIndex struct {
	byQueue map[string]*queueReady
	heads   *orderedSet[readyHead]
	n       int
}

// readyHead is the first ready item of a queue.
type readyHead struct {
	readyItem
	queue string
}

func headLess(a, b readyHead) bool { return readyLess(a.readyItem, b.readyItem) }

func newReadyIndex() *readyIndex {
	return &readyIndex{byQueue: make(map[string]*queueReady), heads: newOrderedSet(headLess)}
}

func (r *readyIndex) add(it readyItem, queue string) {
	q := r.byQueue[queue]
	if q == nil {
		q = &queueReady{}
		r.byQueue[queue] = q
	}
	head, had := q.Min()
	set, _ := q.of(it.priority, true)
	if _, replaced := set.ReplaceOrInsert(readyKeyOf(it.key, it.cold)); !replaced {
		q.n++
		r.n++
	}
	r.headChanged(q, queue, head, had)
}

// markCold notes on the item it of queue that its job went cold.
func (r *readyIndex) markCold(it readyItem, queue string) {
	q := r.byQueue[queue]
	if q == nil {
		return
	}
	set, _ := q.of(it.priority, false)
	if set == nil || !set.Update(readyKeyOf(it.key, true)) {
		return
	}
	it.cold = true
	if head, _ := q.Min(); head.key == it.key { // heads keeps a copy of it
		r.heads.Update(readyHead{readyItem: it, queue: queue})
	}
}

func (r *readyIndex) remove(it readyItem, queue string) bool {
	q := r.byQueue[queue]
	if q == nil {
		return false
	}
	set, i := q.of(it.priority, false)
	if set == nil {
		return false
	}
	head, _ := q.Min()
	if _, ok := set.Delete(readyKeyOf(it.key, false)); !ok {
		return false
	}
	q.n--
	r.n--
	if set.Len() == 0 {
		q.prios = slices.Delete(q.prios, i, i+1)
	}
	if q.n == 0 {
		delete(r.byQueue, queue)
	}
	r.headChanged(q, queue, head, true)
	return true
}

// headChanged updates heads after queue's set q changed; head was its
// first item before (had: it had one).
func (r *readyIndex) headChanged(q *queueReady, queue string, head readyItem, had bool) {
	now, ok := q.Min()
	if had && ok && now == head {
		return
	}
	if had && ok && r.heads.Move(readyHead{head, queue}, readyHead{now, queue}) {
		return // the usual case: one queue, or its place among the heads kept
	}
	if had {
		r.heads.Delete(readyHead{head, queue})
	}
	if ok {
		r.heads.ReplaceOrInsert(readyHead{now, queue})
	}
}

// best returns the first ready job among queues (nil = all queues).
func (r *readyIndex) best(queues map[string]bool) (readyItem, bool) {
	if queues == nil {
		h, ok := r.heads.Min()
		return h.readyItem, ok
	}
	var best readyItem
	found := false
	for q := range queues {
		t := r.byQueue[q]
		if t == nil {
			continue
		}
		it, ok := t.Min()
		if ok && (!found || readyLess(it, best)) {
			best, found = it, true
		}
	}
	return best, found
}

// bestWhere returns the first ready job among queues (nil = all queues) of
// those first in their queue that ok accepts: a queue whose first job ok
// refuses gives none.
func (r *readyIndex) bestWhere(queues map[string]bool, ok func(it readyItem, queue string) bool) (readyItem, bool) {
	var best readyItem
	found := false
	if queues == nil {
		r.heads.Ascend(func(h readyHead) bool {
			if ok(h.readyItem, h.queue) {
				best, found = h.readyItem, true
			}
			return !found
		})
		return best, found
	}
	for q := range queues {
		t := r.byQueue[q]
		if t == nil {
			continue
		}
		if it, has := t.Min(); has && (!found || readyLess(it, best)) && ok(it, q) {
			best, found = it, true
		}
	}
	return best, found
}

func (r *readyIndex) len() int { return r.n }
