package actors

// readyItem orders ready jobs by (priority, id). en is the job's entry,
// which dispatch takes without looking it up (an item is in the index only
// while its job is ready; lookups by value leave en unset).
type readyItem struct {
	priority uint16
	id       string
	queue    string
	en       *entry
}

func readyLess(a, b readyItem) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.id < b.id
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

func (r *readyIndex) add(it readyItem) {
	r.all.ReplaceOrInsert(it)
	q := r.byQueue[it.queue]
	if q == nil {
		q = newOrderedSet(readyLess)
		r.byQueue[it.queue] = q
	}
	q.ReplaceOrInsert(it)
}

func (r *readyIndex) remove(it readyItem) bool {
	if _, ok := r.all.Delete(it); !ok {
		return false
	}
	if q := r.byQueue[it.queue]; q != nil {
		q.Delete(it)
		if q.Len() == 0 {
			delete(r.byQueue, it.queue)
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
