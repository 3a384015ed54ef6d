package actors

import "sync/atomic"

// consumedSet is the read-mostly set of queues some open take stream
// consumes. The queue actor swaps in a new immutable snapshot when streams
// open or close; budget actors read it without asking anyone.
type consumedSet struct {
	p atomic.Pointer[consumedSnapshot]
}

type consumedSnapshot struct {
	all    bool
	queues map[string]bool
}

func newConsumedSet() *consumedSet {
	c := &consumedSet{}
	c.p.Store(&consumedSnapshot{queues: map[string]bool{}})
	return c
}

// has reports whether a stream consumes queue q.
func (c *consumedSet) has(q string) bool {
	s := c.p.Load()
	return s.all || s.queues[q]
}

// set publishes a new snapshot and reports whether it differs.
func (c *consumedSet) set(all bool, queues map[string]bool) bool {
	old := c.p.Load()
	changed := old.all != all || len(old.queues) != len(queues)
	if !changed {
		for q := range queues {
			if !old.queues[q] {
				changed = true
				break
			}
		}
	}
	if changed {
		c.p.Store(&consumedSnapshot{all: all, queues: queues})
	}
	return changed
}
