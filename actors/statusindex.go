package actors

import (
	"github.com/google/btree"
	"github.com/tollgate/tollgate/protocol"
)

// Status counts for GET /jobs/count?status=... (SPEC §6.1: filters that have
// an index use it). Visible status is time-dependent (a scheduled job past
// ready_at shows as ready until the scheduler promotes it), so the engine
// keeps the unfinished jobs whose stored status is scheduled ordered by
// (ready_at, id): the ones already due are the few at its front. In flight
// is e.inFlightTotal, ready is the rest of e.jobs, and completed/dead are
// counted as retained jobs are added and dropped (less those past purge_at
// the reaper has not dropped yet). Nothing here runs on dispatch.

type schedItem struct {
	readyAt uint64
	id      string
}

func schedLess(a, b schedItem) bool {
	if a.readyAt != b.readyAt {
		return a.readyAt < b.readyAt
	}
	return a.id < b.id
}

// syncSched puts en in the scheduled set at its current ready_at when its
// stored status is scheduled and takes it out otherwise. It is idempotent:
// call it after any change of a job's status. The set's item is found by
// the job's ready_at, which therefore must not change while the job is in
// the set: a change of ready_at takes it out first (unsched), then puts it
// back (syncSched), as patchEntry does. (The entry does not keep the
// ready_at it was added with, to stay 64 bytes.)
func (e *queueCore) syncSched(en *entry) {
	want := en.status() == protocol.StatusScheduled
	if en.flags.has(entryInSched) && !want {
		e.unsched(en)
	}
	if want && !en.flags.has(entryInSched) {
		en.flags |= entryInSched
		e.sched.ReplaceOrInsert(schedItem{en.readyAt(), en.id()})
	}
}

// unsched takes a job out of the scheduled set (it leaves memory, or its
// ready_at is about to change).
func (e *queueCore) unsched(en *entry) {
	if en.flags.has(entryInSched) {
		if _, ok := e.sched.Delete(schedItem{en.readyAt(), en.id()}); !ok {
			panic("actors: a scheduled job's ready_at changed while it was in the scheduled set")
		}
		en.flags &^= entryInSched
	}
}

func (e *queueCore) countTerminal(t terminalJob, d int) {
	e.countTerminalIn(t, d) // per queue (queue_states.go)
	if t.dead {
		e.deadTotal += d
	} else {
		e.completedTotal += d
	}
}

// statusCount counts the visible jobs whose status is in sts.
func (e *queueCore) statusCount(now uint64, sts []protocol.Status) uint64 {
	due := 0 // stored scheduled, visible ready
	e.sched.Ascend(func(it schedItem) bool {
		if it.readyAt > now {
			return false
		}
		due++
		return true
	})
	purgedDone, purgedDead := 0, 0
	e.purgeOrder.Ascend(func(t terminalJob) bool {
		if t.purgeAt > now {
			return false
		}
		if t.dead {
			purgedDead++
		} else {
			purgedDone++
		}
		return true
	})
	scheduled := e.sched.Len() - due
	counts := map[protocol.Status]int{
		protocol.StatusScheduled: scheduled,
		protocol.StatusInFlight:  e.inFlightTotal,
		protocol.StatusReady:     e.jobs.len() - e.inFlightTotal - scheduled,
		protocol.StatusCompleted: e.completedTotal - purgedDone,
		protocol.StatusDead:      e.deadTotal - purgedDead,
	}
	var n uint64
	for st, c := range counts {
		for _, s := range sts {
			if s == st {
				n += uint64(c)
				break
			}
		}
	}
	return n
}

func newSchedSet() *btree.BTreeG[schedItem] { return btree.NewG(32, schedLess) }
