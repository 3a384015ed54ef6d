package actors

import "github.com/tollgate/tollgate/protocol"

// readyItem orders ready jobs by (priority, id). en is the job's entry,
// which dispatch takes without looking it up (an item is in the index only
// while its job is ready; lookups by value leave en unset). The ID is its
// fixed-size key and the queue is not kept: an item is 32 bytes, two per
// ready job.
type readyItem struct {
	key      protocol.IDKey
	en       *entry
	priority uint16
}

// readyItemOf is the item of en's job.
func readyItemOf(en *entry) readyItem {
	return readyItem{key: en.key(), en: en, priority: en.priority()}
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

// get returns the item equal to it in queue's set, if there is one.
func (r *readyIndex) get(it readyItem, queue string) (readyItem, bool) {
	q := r.byQueue[queue]
	if q == nil {
		return readyItem{}, false
	}
	return q.Get(it)
}

func (r *readyIndex) len() int { return r.n }
