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
// call it after any change of a job's status or ready_at.
func (e *queueCore) syncSched(en *entry) {
	want := en.status() == protocol.StatusScheduled
	if en.flags.has(entryInSched) && (!want || en.schedAt != en.readyAt()) {
		e.sched.Delete(schedItem{en.schedAt, en.id()})
		en.flags &^= entryInSched
	}
	if want && !en.flags.has(entryInSched) {
		en.schedAt = en.readyAt()
		en.flags |= entryInSched
		e.sched.ReplaceOrInsert(schedItem{en.schedAt, en.id()})
	}
}

// unsched takes a job leaving memory out of the scheduled set.
func (e *queueCore) unsched(en *entry) {
	if en.flags.has(entryInSched) {
		e.sched.Delete(schedItem{en.schedAt, en.id()})
		en.flags &^= entryInSched
	}
}

func (e *queueCore) countTerminal(t terminalJob, d int) {
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
		protocol.StatusReady:     len(e.jobs) - e.inFlightTotal - scheduled,
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
