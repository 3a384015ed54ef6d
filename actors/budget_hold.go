// Holds on the budget's side (SPEC §10.2): while a hold is in force the
// budget grants nothing and wakes nobody, its jobs park in their usual
// order, and its wake timer is armed for the later of the hold's end and
// the moment its tokens allow; a drain empties a time_based pool.
//
// The queue actor decides the hold (it keeps the stored record, takes the
// later of the old and new ends and persists it) and tells the budget its
// exact end with HoldBudget; the budget only applies it.

package actors

import (
	"math"

	"github.com/tollgate/tollgate/protocol"
)

// Trace events of holds.
const (
	EventHoldSet      EventKind = "hold_set"      // a hold was put or extended (due_at: its end; reason "drain" when it drained the pool)
	EventHoldReleased EventKind = "hold_released" // DELETE /budgets/{key}/hold ended a hold early
	EventHoldEnded    EventKind = "hold_ended"    // the wake timer fired at the hold's end
)

// budgetPause is a budget's hold as the budget core keeps it. (Named so to
// keep it apart from budgetCore.holds, the reservations.)
type budgetPause struct {
	untilNs uint64 // Unix ns; 0: no hold
}

// HoldBudget sets the budget's hold to end at Until (Unix ms; 0 or a past
// moment: no hold) and, with Drain, empties a time_based pool now.
type HoldBudget struct {
	Until uint64
	Drain bool
}

func (*HoldBudget) isBudgetMsg() {}

// paused reports whether a hold is in force at now (Unix ns); a hold found
// over is forgotten.
func (b *budgetCore) paused(now uint64) bool {
	if b.pause.untilNs == 0 {
		return false
	}
	if now >= b.pause.untilNs {
		b.pause.untilNs = 0
		return false
	}
	return true
}

// heldUntil is the end of the hold in force at now (Unix ms), 0 without one.
func (b *budgetCore) heldUntil(now uint64) uint64 {
	if b.pause.untilNs == 0 || now >= b.pause.untilNs {
		return 0
	}
	return b.pause.untilNs / nsPerMs
}

// hold sets the hold's end to untilMs (no hold when it is not after now)
// and, with drain, takes a time_based level down to 0 (a debt stays a
// debt). It returns the jobs a shortened or lifted hold wakes.
func (b *budgetCore) hold(now, untilMs uint64, drain bool) []string {
	b.pause.untilNs = 0
	if untilMs > now/nsPerMs {
		b.pause.untilNs = untilMs * nsPerMs
		if b.pause.untilNs/nsPerMs != untilMs { // beyond what ns count
			b.pause.untilNs = math.MaxUint64
		}
	}
	if drain && b.def.Strategy.Type == protocol.TimeBased {
		b.settle(now)
		b.level = min(b.level, 0)
		if b.prov != nil {
			b.prov.shadow = min(b.prov.shadow, 0)
		}
	}
	return b.evaluate(now)
}

// holdTimer moves the wake moment setTimer chose to the hold's end when the
// hold ends later (or setTimer chose none) and a parked job waits for it.
func (b *budgetCore) holdTimer() {
	if b.pause.untilNs == 0 || b.pause.untilNs <= b.wakeNs {
		return
	}
	if _, ok := b.head(); !ok {
		return
	}
	b.wakeNs = b.pause.untilNs
	b.wakeAt = ceilDiv(b.pause.untilNs, nsPerMs)
}

func ceilDiv(a, d uint64) uint64 {
	q := a / d
	if a%d != 0 {
		q++
	}
	return q
}

// holdExpected is when a parked job may expect to go (waiting.affordable_at)
// given when its tokens allow (0: unknown, while_in_flight): the later of
// that and the hold's end. On a while_in_flight budget whose free tokens
// cover the job already, the hold's end is the answer.
func (b *budgetCore) holdExpected(now uint64, tokensAt uint64, covered bool) uint64 {
	end := b.heldUntil(now)
	if end == 0 {
		return tokensAt
	}
	if tokensAt == 0 && !covered {
		return 0
	}
	return max(end, tokensAt)
}

// freshAt is the moment (Unix ms) from which the budget is, as far as the
// budget itself can tell, indistinguishable from a new one if nothing binds
// to it meanwhile (SPEC §10.3): the end of a hold in force, and the moment a
// time_based pool is (or will be) back to full; 0 when both are behind it
// already. ok is false while it holds, parks or has in flight any job.
func (b *budgetCore) freshAt(now uint64) (at uint64, ok bool) {
	if b.parked.Len() > 0 || b.inFlight > 0 || b.held > 0 {
		return 0, false
	}
	at = b.heldUntil(now)
	if b.def.Strategy.Type == protocol.TimeBased {
		full := b.at
		if capacity := float64(b.def.Capacity()); b.level < capacity-tokenEpsilon {
			full = addMs(b.at, ceilMs((capacity-b.level)*nsPerMs/b.rate()))
		}
		at = max(at, ceilDiv(full, nsPerMs))
	}
	return at, true
}

// ---------------------------------------------------------------- step

// onHold applies a HoldBudget and traces it.
func (b *budgetCore) onHold(now uint64, m *HoldBudget, out *stepOutput) {
	woken := b.hold(now, m.Until, m.Drain)
	if out.trace {
		kind, reason := EventHoldSet, ""
		if b.heldUntil(now) == 0 {
			kind = EventHoldReleased
		}
		if m.Drain && b.def.Strategy.Type == protocol.TimeBased {
			reason = "drain"
		}
		b.event(out, Event{Kind: kind, DueAt: b.heldUntil(now), Reason: reason, Tokens: tokensPtr(b.tokens(now))})
	}
	b.wake(now, out, woken, "hold")
}

// traceHoldEnd traces hold_ended when the wake timer fires at or after the
// end of a hold still recorded.
func (b *budgetCore) traceHoldEnd(now uint64, out *stepOutput) {
	if b.pause.untilNs == 0 || now < b.pause.untilNs || !out.trace {
		return
	}
	b.event(out, Event{Kind: EventHoldEnded, DueAt: b.pause.untilNs / nsPerMs, Tokens: tokensPtr(b.tokens(now))})
}
