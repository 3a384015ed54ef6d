// Indexes: the ID, queue, type and budget-key indexes of stored jobs, and
// per-queue counts.

package actors

import (
	"fmt"
	"sort"

	"github.com/tollgate/tollgate/protocol"
)

// The ID indexes hold jobs' IDs as protocol.IDKeys: compared without
// reading the ID strings, and nothing for the collector to scan.
func keyLess(a, b protocol.IDKey) bool { return a.Less(b) }

// idKey is the key of a job ID the engine stores (minted, or loaded after
// loadJob checked it).
func idKey(id string) protocol.IDKey {
	k, ok := protocol.ParseIDKey(id)
	if !ok {
		panic(fmt.Sprintf("actors: %q is not a job ID", id))
	}
	return k
}

// addStored counts a stored job in its queue and adds it to the indexes.
func (e *queueCore) addStored(j *protocol.Job) {
	k := idKey(j.ID)
	e.queueCounts[j.Queue]++
	e.addToKind(j.Queue, j.Type, k)
	e.indexKeys(j, k, true)
}

// addToKind adds key k to the index of its queue and type.
func (e *queueCore) addToKind(queue, typ string, k protocol.IDKey) {
	types := e.byQueue[queue]
	if types == nil {
		types = make(map[string]*orderedSet[protocol.IDKey])
		e.byQueue[queue] = types
	}
	addToIndex(types, typ, k)
}

// dropFromKind drops key k from the index of its queue and type.
func (e *queueCore) dropFromKind(queue, typ string, k protocol.IDKey) {
	if types := e.byQueue[queue]; types != nil {
		dropFromIndex(types, typ, k)
		if len(types) == 0 {
			delete(e.byQueue, queue)
		}
	}
}

// kindSets are the ID indexes of the jobs of the given queues (none: every
// queue) and types (none: every type): disjoint, a job being of one queue
// and one type, so that walkIDs merges them (idwalk.go).
func (e *queueCore) kindSets(queues, types []string) []*orderedSet[protocol.IDKey] {
	var sets []*orderedSet[protocol.IDKey]
	ofQueue := func(byType map[string]*orderedSet[protocol.IDKey]) {
		if len(types) == 0 {
			for _, s := range byType {
				sets = append(sets, s)
			}
			return
		}
		for _, typ := range types {
			if s := byType[typ]; s != nil {
				sets = append(sets, s)
			}
		}
	}
	if len(queues) == 0 {
		for _, byType := range e.byQueue {
			ofQueue(byType)
		}
		return sets
	}
	for _, q := range queues {
		if byType := e.byQueue[q]; byType != nil {
			ofQueue(byType)
		}
	}
	return sets
}

// indexKeys adds j (whose ID's key is k) to, or drops it from, the indexes
// of its budget keys.
func (e *queueCore) indexKeys(j *protocol.Job, k protocol.IDKey, add bool) {
	for _, b := range j.Budgets {
		if add {
			addToIndex(e.byKey, b.Key, k)
		} else {
			dropFromIndex(e.byKey, b.Key, k)
		}
	}
}

func addToIndex(m map[string]*orderedSet[protocol.IDKey], name string, k protocol.IDKey) {
	t := m[name]
	if t == nil {
		t = newOrderedSet(keyLess)
		m[name] = t
	}
	t.ReplaceOrInsert(k)
}

func dropFromIndex(m map[string]*orderedSet[protocol.IDKey], name string, k protocol.IDKey) {
	if t := m[name]; t != nil {
		t.Delete(k)
		if t.Len() == 0 {
			delete(m, name)
		}
	}
}

// decStored uncounts a stored job that is deleted and drops it from the
// indexes.
func (e *queueCore) decStored(j *protocol.Job) {
	k := idKey(j.ID)
	e.indexKeys(j, k, false)
	if e.queueCounts[j.Queue]--; e.queueCounts[j.Queue] <= 0 {
		delete(e.queueCounts, j.Queue)
	}
	e.dropFromKind(j.Queue, j.Type, k)
}

// moveQueue moves a stored job's ID (of type typ) from one queue's index
// and count to another's.
func (e *queueCore) moveQueue(id, typ, from, to string) {
	k := idKey(id)
	if e.queueCounts[from]--; e.queueCounts[from] <= 0 {
		delete(e.queueCounts, from)
	}
	e.dropFromKind(from, typ, k)
	e.queueCounts[to]++
	e.addToKind(to, typ, k)
}

func (e *queueCore) listQueues() []string {
	out := make([]string, 0, len(e.queueCounts))
	for q := range e.queueCounts {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}
