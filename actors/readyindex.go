package actors

import "github.com/tollgate/tollgate/protocol"

// readyItem orders ready jobs by (priority, id). The ID is its fixed-size
// key, and neither the queue nor the entry is kept (dispatch finds the
// entry in the job map by the key): an item is 24 bytes, one per ready
// job, with no pointer for the collector to scan.
type readyItem struct {
	key      protocol.IDKey
	priority uint16
	// cold says the job went cold after it was added (coldjobs.go), so
	// that walks of cold jobs pass over the others without looking them
	// up; a job that thaws keeps it until it leaves the index, so it is a
	// hint the walk checks (it fits in the item's padding)
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

// readyIndex holds the ready jobs of every queue in (priority, id) order:
// one set per queue, and the first item of each in heads, in the same
// order, so that the first ready job of all queues (for streams that take
// every queue) is the first head. Each ready job is in one set only (an
// index over all queues as well would cost a second item per job); heads
// holds one item per queue with ready jobs, and changes when a queue's
// first job does.
type readyIndex struct {
	byQueue map[string]*orderedSet[readyItem]
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
	return &readyIndex{byQueue: make(map[string]*orderedSet[readyItem]), heads: newOrderedSet(headLess)}
}

func (r *readyIndex) add(it readyItem, queue string) {
	q := r.byQueue[queue]
	if q == nil {
		q = newOrderedSet(readyLess)
		r.byQueue[queue] = q
	}
	head, had := q.Min()
	if _, replaced := q.ReplaceOrInsert(it); !replaced {
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
	it.cold = true
	q.Update(it)
	if head, _ := q.Min(); head.key == it.key { // heads keeps a copy of it
		r.heads.Update(readyHead{readyItem: it, queue: queue})
	}
}

func (r *readyIndex) remove(it readyItem, queue string) bool {
	q := r.byQueue[queue]
	if q == nil {
		return false
	}
	head, _ := q.Min()
	if _, ok := q.Delete(it); !ok {
		return false
	}
	r.n--
	if q.Len() == 0 {
		delete(r.byQueue, queue)
	}
	r.headChanged(q, queue, head, true)
	return true
}

// headChanged updates heads after queue's set q changed; head was its
// first item before (had: it had one).
func (r *readyIndex) headChanged(q *orderedSet[readyItem], queue string, head readyItem, had bool) {
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
