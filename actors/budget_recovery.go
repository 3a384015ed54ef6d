package actors

// Recovery from a failed budget actor. A panic inside a budget actor's
// Receive (a bug in its step, or in what applies it) is caught by the actor
// itself: it drops whatever the failing message decided, sends what the
// messages before it decided, reports BudgetFailed with its pool level as
// it stood before that message, and stops. The queue actor then makes the
// budget anew and rebuilds its state from its own view, which is the truth
// for everything a budget knows of jobs:
//
//   - in flight: the cost of the jobs in flight bound to the budget;
//   - holds: the jobs reserving that the budget granted already (a key
//     before the one they await);
//   - parked: the jobs parked on it, with the priority they parked with;
//   - the jobs awaiting its answer ask the new budget again (an answer the
//     old one never sent is the same as one lost with the failing message);
//   - a time_based pool keeps the level the report carries, less the
//     debits of the commits the old budget may never have handled: every
//     job the report says it held tokens for that is not reserving on it
//     still (such a job may have run and finished since, so the view
//     cannot tell a commit from a release; a release taken for a commit
//     only leaves tokens to drip in again).
//
// Messages the queue sent the old budget after it failed are lost, but none
// matters: each changed something the view already shows (a commit, a
// release, a return, an unpark, a new definition) or is re-sent (a
// reservation). The failed budget sends nothing after its report, so no
// answer of it can arrive once the new one stands. So no parked job is
// stranded, and no token is counted twice
// (TestBudgetActorPanicRecovers, TestModelBudgetFailures). One exception,
// on the safe side: time_based tokens a refund sent to the failed budget
// would have given back are not given back (they drip in again).

import (
	"slices"

	"github.com/tollgate/tollgate/protocol"
)

// BudgetFailed reports that a budget actor failed and stopped.
type BudgetFailed struct {
	Key         string
	Incarnation uint64 // the failed budget's
	// Level and At are its time_based pool (Unix ns) before the message it
	// failed on (Pool is false for a while_in_flight budget).
	Level float64
	At    uint64
	Pool  bool
	// Held lists the jobs it held tokens for then (granted, not yet
	// committed or released).
	Held []JobHold
	// Reason is what the panic said, for the log.
	Reason string
	epoch  uint64
}

// RestoreBudget is the first message of a budget made anew after a
// failure: the state the queue actor's view gives it.
type RestoreBudget struct {
	// Level and At (Unix ns) are the time_based pool to resume, when
	// Pool is set; otherwise the new pool starts as any new one does.
	Level    float64
	At       uint64
	Pool     bool
	InFlight uint64
	Holds    []JobHold
	Parked   []JobRef
}

// JobHold is a reservation a budget granted and the job still holds.
type JobHold struct {
	JobID string
	Cost  uint32
}

func (*BudgetFailed) isQueueMsg()   {}
func (*RestoreBudget) isBudgetMsg() {}

// restore takes over the state a failed predecessor had, as the queue
// actor's view gives it.
func (b *budgetCore) restore(m *RestoreBudget) {
	if m.Pool && b.def.Strategy.Type == protocol.TimeBased {
		b.level = min(m.Level, float64(b.def.Capacity()))
		b.at = m.At
	}
	b.inFlight = m.InFlight
	if len(m.Holds) > 0 && b.holds == nil {
		b.holds = make(map[string]uint32, len(m.Holds)) // made on first use (budgetcore.go)
	}
	for _, h := range m.Holds {
		b.holds[h.JobID] = h.Cost
		b.held += uint64(h.Cost)
	}
	for _, r := range m.Parked {
		b.park(r)
	}
}

// heldBefore lists the jobs the core held tokens for before the step on m
// began, with their costs, m having failed: a step changes at most the hold
// of m's job, and a commit's job is listed whether or not its step took the
// hold already.
func (b *budgetCore) heldBefore(m budgetMsg) []JobHold {
	held := make([]JobHold, 0, len(b.holds)+1)
	c, commit := m.(*CommitReservation)
	for id, cost := range b.holds {
		if !commit || id != c.JobID {
			held = append(held, JobHold{JobID: id, Cost: cost})
		}
	}
	if commit {
		held = append(held, JobHold{JobID: c.JobID, Cost: c.Cost})
	}
	return held
}

// onBudgetFailed makes the failed budget anew from the view (see above).
// It walks every unfinished job: O(jobs), once per failure.
func (e *queueCore) onBudgetFailed(m *BudgetFailed) {
	if m.epoch != e.epoch {
		return
	}
	be := e.budgets[m.Key]
	if be == nil {
		return // deleted meanwhile
	}
	e.log.Error("budget actor failed; made anew from the queue's state", "budget", m.Key, "err", m.Reason)
	key := m.Key
	e.out.spawnBudget(be.budget)
	r := &RestoreBudget{Level: m.Level, At: m.At, Pool: m.Pool}
	// held: the jobs the old budget held tokens for, less those still
	// reserving on it (restored as holds below). Each of the others was
	// committed or released since, and the old budget may not have handled
	// it; a commit it never handled is a debit the level must still take.
	// Which it was the view cannot always tell (the job may have run and
	// finished, or failed and be ready again, since), so every one is taken
	// as committed: on the safe side, a release the old budget missed
	// leaves time_based tokens that drip in again, never a second grant.
	held := make(map[string]uint32, len(m.Held))
	for _, h := range m.Held {
		held[h.JobID] = h.Cost
	}
	var ask []*entry
	for en := range e.jobs.all() {
		switch en.state {
		case stInFlight:
			if c, ok := bindingCost(en.full().Budgets, key); ok {
				r.InFlight += uint64(c)
			}
		case stParked:
			if en.parkedKey() == key {
				// read without rebuilding a compact job (queued_compact.go)
				bindings := en.budgets()
				c, _ := bindingCost(bindings, key)
				r.Parked = append(r.Parked, JobRef{ID: en.id(), Queue: en.queue(), Cost: c, Priority: en.parkedPrio, Sole: len(bindings) == 1})
			}
		case stReserving:
			for i, b := range en.resv.bindings {
				switch {
				case b.Key != key:
				case i < en.resv.idx:
					r.Holds = append(r.Holds, JobHold{JobID: en.id(), Cost: b.Cost})
					delete(held, en.id())
				case i == en.resv.idx:
					ask = append(ask, en)
				}
			}
		}
	}
	if r.Pool {
		for _, cost := range held {
			r.Level -= float64(cost)
		}
	}
	e.out.toBudget(key, r)
	if be.life.hold.Until != 0 {
		// the hold is the budget's, not its actor's (an ended one holds nothing)
		e.out.toBudget(key, &HoldBudget{Until: be.life.hold.Until})
	}
	// ask again in dispatch order, as the pump asked first
	slices.SortFunc(ask, func(a, b *entry) int {
		if refLess(JobRef{ID: a.id(), Priority: a.priority()}, JobRef{ID: b.id(), Priority: b.priority()}) {
			return -1
		}
		return 1
	})
	for _, en := range ask {
		e.askNext(en)
	}
}

// bindingCost is the cost of the binding to key.
func bindingCost(bs []protocol.Binding, key string) (uint32, bool) {
	for _, b := range bs {
		if b.Key == key {
			return b.Cost, true
		}
	}
	return 0, false
}
