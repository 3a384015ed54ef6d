package actors

import (
	"math"
	"sync/atomic"

	"github.com/tollgate/tollgate/protocol"
)

// tokenEpsilon is the tolerance of time_based comparisons (SPEC §4.4).
const tokenEpsilon = 1e-9

// JobRef is what a budget knows of a job: its order, its queue and its cost.
// (Fields ordered so the struct packs into 40 bytes: a budget's parked
// list holds one per parked job.)
type JobRef struct {
	ID       string
	Queue    string
	Cost     uint32
	Priority uint16
	// Sole: the job is bound to this budget alone (prepaid.go).
	Sole bool
}

func refLess(a, b JobRef) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.ID < b.ID
}

// budgetCore is the pure state machine of one budget: its definition, its
// token pool, its reservations, its parked jobs in (priority, id) order and
// its wake timer. It has no clock, no actor and no I/O. Its one entry point
// is step (budget_step.go): a message and the time in, everything decided
// out; the budget actor and the model test both drive it.
//
// Time is Unix nanoseconds throughout, settled (SPEC §4.4, precision): a
// pool settled in whole milliseconds would drop the sub-millisecond
// remainder at every settle, and a rounded wake moment the rest of an
// awkward interval. Only what leaves for the wire (wake_at, affordable_at,
// traces' due times) is rounded to milliseconds, always up.
type budgetCore struct {
	key string
	def protocol.Definition

	// incarnation tells this core from any other made under the same key
	// (after a reset, a delete and create, a restart after a failure): a
	// refund names the incarnation that made the debit (RefundTokens).
	incarnation uint64
	// epoch is the queue core's this budget was made for; the budget's
	// answers carry it (queueCore.epoch).
	epoch uint64
	name  string // "budget/<key>", the actor name traces give

	// time_based pool: level tokens, settled at time at (Unix ns).
	level float64
	at    uint64

	held     uint64            // reserved, not yet committed
	holds    map[string]uint32 // job id -> reserved cost
	inFlight uint64            // committed cost of jobs still in flight

	// parked is the parked jobs in (priority, id) order; messages about a
	// parked job carry its priority, which finds it there.
	parked *orderedSet[JobRef]

	// consumed reports whether some open take stream consumes a queue; a
	// parked job of an unconsumed queue holds nobody back.
	consumed func(queue string) bool

	// wakeNs is the exact moment (Unix ns) the wake timer should fire, and
	// wakeAt the same rounded up to the millisecond, as reported on the
	// wire (0: no timer wanted).
	wakeNs uint64
	wakeAt uint64

	// The timer the shell has armed: its moment (exact, and as reported)
	// and its generation; a budgetWake of another generation is stale.
	armedNs, armedAt uint64
	timerGen         uint64
	// pause is the budget's hold, if any (budget_hold.go)
	pause budgetPause
	// prov is a wake's debit the queue has not confirmed or refunded yet
	// (prepaid.go); nil: none.
	prov *provisional

	// counters for observation
	dispatches  uint64
	refusals    uint64
	settlements uint64 // budget_settle.go

	// durablePools: granted answers carry a note of the pool
	// (budget_pools.go).
	durablePools bool

	obs budgetObs // trace bookkeeping (observe.go)
}

// budgetIncarnations numbers budget cores (budgetCore.incarnation).
var budgetIncarnations atomic.Uint64

func newBudgetCore(key string, def protocol.Definition, now uint64, consumed func(string) bool) *budgetCore {
	if consumed == nil {
		consumed = func(string) bool { return true }
	}
	b := &budgetCore{
		key:         key,
		def:         def,
		incarnation: budgetIncarnations.Add(1),
		name:        "budget/" + key,
		parked:      newOrderedSet(refLess),
		consumed:    consumed,
	}
	b.fill(now)
	return b
}

// fill starts a fresh, full time_based pool.
func (b *budgetCore) fill(now uint64) {
	b.level = float64(b.def.Capacity())
	b.at = now
	b.prov = nil
}

// rate is the time_based refill in tokens per millisecond.
func (b *budgetCore) rate() float64 {
	return float64(b.def.Allocation) / float64(b.def.Strategy.DurationMs)
}

// levelAt is the time_based level settled to now (Unix ns), without
// storing it.
func (b *budgetCore) levelAt(now uint64) float64 {
	if now <= b.at {
		return b.level
	}
	return math.Min(float64(b.def.Capacity()), b.level+float64(now-b.at)/nsPerMs*b.rate())
}

// settle brings the time_based level up to now (Unix ns).
func (b *budgetCore) settle(now uint64) {
	if b.def.Strategy.Type != protocol.TimeBased {
		return
	}
	if now > b.at {
		if b.prov != nil {
			b.prov.shadow = math.Min(float64(b.def.Capacity()), b.prov.shadow+float64(now-b.at)/nsPerMs*b.rate())
		}
		b.level = b.levelAt(now)
		b.at = now
	}
}

// free is the number of tokens a new reservation may take now.
func (b *budgetCore) free() float64 {
	if b.def.Strategy.Type == protocol.TimeBased {
		return b.level - float64(b.held)
	}
	return float64(b.def.Allocation) - float64(b.inFlight) - float64(b.held)
}

// head is the earliest parked job whose queue has an open take stream.
func (b *budgetCore) head() (JobRef, bool) {
	var h JobRef
	found := false
	b.parked.Ascend(func(r JobRef) bool {
		if b.consumed(r.Queue) {
			h, found = r, true
			return false
		}
		return true
	})
	return h, found
}

// reserveOutcome is the answer to a reservation.
type reserveOutcome struct {
	granted bool
	woken   []string // jobs woken as a side effect (rare: see evaluate)
}

// reserve asks for cost tokens for job. It is granted when no earlier
// parked job is waiting and the tokens are free; otherwise the job parks.
// A final reservation (commit) is debited at once when granted, as if
// committed: the job's other budgets granted already.
func (b *budgetCore) reserve(now uint64, job JobRef, commit bool) reserveOutcome {
	b.settle(now)
	// (A job never asks a budget it holds on: the queue releases its holds
	// before the job can reserve anew, and messages keep their order.)
	if h, ok := b.head(); (!ok || refLess(job, h)) && !b.paused(now) {
		if b.free()+tokenEpsilon >= float64(job.Cost) {
			if commit {
				b.debit(job.Cost)
			} else {
				if b.holds == nil { // made on first use: most budgets of many never hold
					b.holds = make(map[string]uint32)
				}
				b.holds[job.ID] = job.Cost
				b.held += uint64(job.Cost)
			}
			b.evaluateTimer()
			return reserveOutcome{granted: true}
		}
	}
	b.refusals++
	b.park(job)
	return reserveOutcome{woken: b.evaluate(now)}
}

// park adds job to the parked list (a job parks on a budget only from a
// reservation, so it is not parked there already: the queue unparks a job,
// with the priority it parked with, before that priority changes).
func (b *budgetCore) park(job JobRef) {
	b.parked.ReplaceOrInsert(job)
}

// parkedRef returns the ref of parked job jobID of the given priority.
func (b *budgetCore) parkedRef(jobID string, priority uint16) (JobRef, bool) {
	return b.parked.Get(JobRef{ID: jobID, Priority: priority})
}

// commit turns a reservation into a debit: the job is being dispatched.
func (b *budgetCore) commit(now uint64, jobID string) {
	cost, ok := b.holds[jobID]
	if !ok {
		return
	}
	b.settle(now)
	delete(b.holds, jobID)
	b.held -= uint64(cost)
	b.debit(cost)
	b.evaluateTimer()
}

// debit takes cost tokens for a dispatch: spent (time_based, settled) and
// counted in flight.
func (b *budgetCore) debit(cost uint32) {
	if b.def.Strategy.Type == protocol.TimeBased {
		b.level -= float64(cost)
		b.shadowCredit(-float64(cost))
	}
	b.inFlight += uint64(cost)
	b.dispatches++
}

// refund undoes job's debit, whose job was not dispatched after all: the
// cost leaves flight and, for time_based, returns to the level (which never
// rises above capacity). The refund of a wake's provisional debit puts the
// level back to its shadow instead (prepaid.go).
func (b *budgetCore) refund(now uint64, jobID string, cost uint32) []string {
	b.settle(now)
	if uint64(cost) > b.inFlight {
		b.inFlight = 0
	} else {
		b.inFlight -= uint64(cost)
	}
	switch {
	case b.prov != nil && b.prov.jobID == jobID:
		b.level = b.prov.shadow
		b.prov = nil
	case b.def.Strategy.Type == protocol.TimeBased:
		b.level = math.Min(float64(b.def.Capacity()), b.level+float64(cost))
		b.shadowCredit(float64(cost))
	}
	if b.dispatches > 0 {
		b.dispatches--
	}
	return b.evaluate(now)
}

// release drops a reservation that will not be committed.
func (b *budgetCore) release(now uint64, jobID string) []string {
	cost, ok := b.holds[jobID]
	if !ok {
		return nil
	}
	delete(b.holds, jobID)
	b.held -= uint64(cost)
	return b.evaluate(now)
}

// finish returns a job's cost when it stops being in flight. Only
// while_in_flight pools get tokens back; time_based ones only drip.
func (b *budgetCore) finish(now uint64, cost uint32) []string {
	if uint64(cost) > b.inFlight {
		b.inFlight = 0
	} else {
		b.inFlight -= uint64(cost)
	}
	if b.def.Strategy.Type == protocol.WhileInFlight {
		return b.evaluate(now)
	}
	return nil
}

// unpark removes a job, parked with the given priority, from the parked
// list (deleted, rebound, moved).
func (b *budgetCore) unpark(now uint64, jobID string, priority uint16) []string {
	b.parked.Delete(JobRef{ID: jobID, Priority: priority})
	// Even when the job was no longer parked (woken a moment ago), its
	// cost may have been counted against the free tokens: look again.
	return b.evaluate(now)
}

// update applies a new definition (SPEC §4.9): same type settles with the
// old parameters and clamps to the new capacity; a switch to time_based
// starts a full pool; a switch to while_in_flight counts what is in flight.
func (b *budgetCore) update(now uint64, def protocol.Definition) []string {
	old := b.def
	b.settle(now)
	b.def = def
	if def.Strategy.Type == protocol.TimeBased {
		if old.Strategy.Type != protocol.TimeBased {
			b.fill(now)
		} else {
			b.level = math.Min(b.level, float64(def.Capacity()))
			b.shadowCredit(0)
			b.at = now
		}
	}
	return b.evaluate(now)
}

// evaluate wakes parked jobs in order for as long as the free tokens cover
// them (counting each woken job's cost), stops at the first that does not
// fit, and sets the wake timer for the moment the new head becomes
// affordable.
func (b *budgetCore) evaluate(now uint64) []string {
	b.settle(now)
	free := b.free()
	var woken []string
	for !b.paused(now) {
		h, ok := b.head()
		if !ok || free+tokenEpsilon < float64(h.Cost) {
			break
		}
		b.parked.Delete(h)
		woken = append(woken, h.ID)
		free -= float64(h.Cost)
	}
	b.setTimer(free)
	return woken
}

// evaluateTimer recomputes the wake moment without waking anyone.
func (b *budgetCore) evaluateTimer() { b.setTimer(b.free()) }

func (b *budgetCore) setTimer(free float64) {
	b.wakeAt, b.wakeNs = 0, 0
	defer b.holdTimer() // a hold ending later moves the moment (budget_hold.go)
	if b.def.Strategy.Type != protocol.TimeBased {
		return
	}
	h, ok := b.head()
	if !ok {
		return
	}
	need := float64(h.Cost) - free
	if need <= tokenEpsilon {
		need = 0
	}
	// The level never rises above capacity. When the head needs more than
	// the refill can bring because tokens are held by reservations, the
	// commit or release of those holds re-evaluates; the timer would only
	// fire early. Otherwise arm it for when the level gets there, or for
	// when the pool is full (the woken jobs counted against free may never
	// reserve, and a full pool is worth a fresh look).
	capacity := float64(b.def.Capacity())
	if b.level+need > capacity+tokenEpsilon {
		if b.held > 0 {
			return
		}
		if b.level < capacity-tokenEpsilon {
			need = capacity - b.level
		}
	}
	// The exact moment, in ns, and the same rounded up to the millisecond
	// (both saturating: a moment beyond what a uint64 of ns counts is
	// still a definite, if distant, number of ms).
	delay := max(1, need*nsPerMs/b.rate()-tokenEpsilon*nsPerMs) // ns
	b.wakeNs = addMs(b.at, max(1, ceilMs(delay)))
	b.wakeAt = addMs(b.at/nsPerMs, ceilMs((float64(b.at%nsPerMs)+delay)/nsPerMs))
}

// tokens is the pool level at now (Unix ns): time_based level settled to
// now minus holds, or while_in_flight allocation minus in-flight and held
// cost. Reading it changes nothing.
func (b *budgetCore) tokens(now uint64) float64 {
	if b.def.Strategy.Type == protocol.TimeBased {
		return b.levelAt(now) - float64(b.held)
	}
	return b.free()
}

// parkedCount is the number of parked jobs.
func (b *budgetCore) parkedCount() int { return b.parked.Len() }
