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
	return readyItem{key: idKey(en.id()), en: en, priority: en.priority()}
}

func readyLess(a, b readyItem) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.key.Less(b.key)
}

// readyIndex holds the ready jobs of every queue in (priority, id) order:
// one tree per queue for streams that name their queues, and one over all
// queues for streams that take everything.
type readyIndex struct {
	all     *orderedSet[readyItem]
	byQueue map[string]*orderedSet[readyItem]
}

func newReadyIndex() *readyIndex {
	return &readyIndex{all: newOrderedSet(readyLess), byQueue: make(map[string]*orderedSet[readyItem])}
}

func (r *readyIndex) add(it readyItem, queue string) {
	r.all.ReplaceOrInsert(it)
	q := r.byQueue[queue]
	if q == nil {
		q = newOrderedSet(readyLess)
		r.byQueue[queue] = q
	}
	q.ReplaceOrInsert(it)
}

func (r *readyIndex) remove(it readyItem, queue string) bool {
	if _, ok := r.all.Delete(it); !ok {
		return false
	}
	if q := r.byQueue[queue]; q != nil {
		q.Delete(it)
		if q.Len() == 0 {
			delete(r.byQueue, queue)
		}
	}
	return true
}

// best returns the first ready job among queues (nil = all queues).
func (r *readyIndex) best(queues map[string]bool) (readyItem, bool) {
	if queues == nil {
		return r.all.Min()
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

func (r *readyIndex) len() int { return r.all.Len() }
