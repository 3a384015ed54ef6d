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
	addToIndex(e.byQueue, j.Queue, k)
	addToIndex(e.byType, j.Type, k)
	e.indexKeys(j, k, true)
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
	dropFromIndex(e.byType, j.Type, k)
	e.indexKeys(j, k, false)
	if e.queueCounts[j.Queue]--; e.queueCounts[j.Queue] <= 0 {
		delete(e.queueCounts, j.Queue)
	}
	dropFromIndex(e.byQueue, j.Queue, k)
}

// moveQueue moves a stored job's ID from one queue's index and count to
// another's.
func (e *queueCore) moveQueue(id, from, to string) {
	k := idKey(id)
	if e.queueCounts[from]--; e.queueCounts[from] <= 0 {
		delete(e.queueCounts, from)
	}
	dropFromIndex(e.byQueue, from, k)
	e.queueCounts[to]++
	addToIndex(e.byQueue, to, k)
}

func (e *queueCore) listQueues() []string {
	out := make([]string, 0, len(e.queueCounts))
	for q := range e.queueCounts {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}
