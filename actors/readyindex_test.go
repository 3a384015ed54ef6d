package actors

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// get returns the item equal to it in queue's set, if there is one.
func (r *readyIndex) get(it readyItem, queue string) (readyItem, bool) {
	q := r.byQueue[queue]
	if q == nil {
		return readyItem{}, false
	}
	set, _ := q.of(it.priority, false)
	if set == nil {
		return readyItem{}, false
	}
	k, ok := set.Get(readyKeyOf(it.key, false))
	return readyItem{key: k.key(), priority: it.priority, cold: k.cold()}, ok
}

// violation checks the ready index's own bookkeeping: heads holds exactly
// the first item of every queue's set, and n counts every item.
func (r *readyIndex) violation() string {
	n := 0
	for q, t := range r.byQueue {
		if t.Len() == 0 {
			return fmt.Sprintf("queue %s has an empty set", q)
		}
		inSets := 0
		for i, ps := range t.prios {
			if ps.set.Len() == 0 || (i > 0 && t.prios[i-1].priority >= ps.priority) {
				return fmt.Sprintf("queue %s: priority %d's set is empty or out of order", q, ps.priority)
			}
			inSets += ps.set.Len()
		}
		if inSets != t.Len() {
			return fmt.Sprintf("queue %s: %d items in its sets, counted %d", q, inSets, t.Len())
		}
		n += t.Len()
		first, _ := t.Min()
		if h, ok := r.heads.Get(readyHead{first, q}); !ok || h.queue != q || h.readyItem != first {
			return fmt.Sprintf("queue %s's first item %v is not its head (%v, %v)", q, first, h, ok)
		}
	}
	if r.heads.Len() != len(r.byQueue) {
		return fmt.Sprintf("%d heads for %d queues", r.heads.Len(), len(r.byQueue))
	}
	if n != r.n {
		return fmt.Sprintf("%d items, counted %d", n, r.n)
	}
	return ""
}

// TestReadyIndexOrdersAcrossQueues drives the ready index with random adds
// and removes over a few queues and checks, after each, that best finds
// the first ready job of all queues and of a queue subset, as a sorted
// reference list says.
func TestReadyIndexOrdersAcrossQueues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := newReadyIndex()
	type ref struct {
		it    readyItem
		queue string
	}
	var live []ref
	queues := []string{"a", "b", "c", "d"}
	firstOf := func(only map[string]bool) (readyItem, bool) {
		var best []readyItem
		for _, l := range live {
			if only == nil || only[l.queue] {
				best = append(best, l.it)
			}
		}
		if len(best) == 0 {
			return readyItem{}, false
		}
		sort.Slice(best, func(i, j int) bool { return readyLess(best[i], best[j]) })
		return best[0], true
	}
	for step := range 20000 {
		if len(live) == 0 || rng.IntN(5) < 3 {
			i := rng.IntN(4000)
			it := readyItem{key: protocol.IDKey{Hi: uint64(i / 7), Lo: uint64(i)}, priority: uint16(rng.IntN(3))}
			dup := false
			for _, l := range live {
				dup = dup || l.it.key == it.key
			}
			if dup {
				continue
			}
			q := queues[rng.IntN(len(queues))]
			r.add(it, q)
			live = append(live, ref{it, q})
		} else {
			k := rng.IntN(len(live))
			l := live[k]
			if !r.remove(readyItem{key: l.it.key, priority: l.it.priority}, l.queue) {
				t.Fatalf("step %d: remove %v from %s found nothing", step, l.it, l.queue)
			}
			live = append(live[:k], live[k+1:]...)
			if r.remove(readyItem{key: l.it.key, priority: l.it.priority}, l.queue) {
				t.Fatalf("step %d: removed %v twice", step, l.it)
			}
		}
		if msg := r.violation(); msg != "" {
			t.Fatalf("step %d: %s", step, msg)
		}
		if r.len() != len(live) {
			t.Fatalf("step %d: len %d, want %d", step, r.len(), len(live))
		}
		for _, only := range []map[string]bool{nil, {"b": true, "d": true}, {"c": true}} {
			got, ok := r.best(only)
			want, wok := firstOf(only)
			if ok != wok || got != want {
				t.Fatalf("step %d: best(%v) = %v %v, want %v %v", step, only, got, ok, want, wok)
			}
		}
	}
}
