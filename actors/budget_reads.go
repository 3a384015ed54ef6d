package actors

// What a budget answers when asked: its state, where a parked job stands,
// its parked line. Reading never changes the pool: the level is computed as
// settled to now without storing it (budgetCore.tokens), so a budget read a
// thousand times holds what it held before (TestBudgetReadsChangeNothing).

import "github.com/tollgate/tollgate/protocol"

// state is a snapshot of the pool at now (Unix ns).
func (b *budgetCore) state(now uint64) *BudgetState {
	s := &BudgetState{
		Key:        b.key,
		Tokens:     b.tokens(now),
		InFlight:   b.inFlight,
		Held:       b.held,
		Parked:     b.parkedCount(),
		WakeAt:     b.armedAt,
		Dispatches: b.dispatches,
		Refusals:   b.refusals,
		Definition: b.def,

		Settlements: b.settlements,
		HeldUntil:   b.heldUntil(now),
		At:          now / nsPerMs,
	}
	if h, ok := b.head(); ok {
		s.HeadID, s.HeadCost, s.HeadQueue = h.ID, h.Cost, h.Queue
		s.HeadAffordableAt = b.affordableAt(now, float64(h.Cost), s.Tokens)
	}
	return s
}

// position is a parked job's place in the line, from 1: the jobs ahead of
// it that hold it back (those of a consumed queue), plus one; need is the
// cost of those jobs and its own. ok is false when the job is not parked.
// It walks the jobs ahead: O(position).
func (b *budgetCore) position(jobID string, priority uint16) (pos int, need float64, ref JobRef, ok bool) {
	ref, ok = b.parkedRef(jobID, priority)
	if !ok {
		return 0, 0, ref, false
	}
	pos, need = 1, float64(ref.Cost)
	b.parked.AscendLessThan(ref, func(r JobRef) bool {
		if b.consumed(r.Queue) {
			pos++
			need += float64(r.Cost)
		}
		return true
	})
	return pos, need, ref, true
}

// affordableAt is when free tokens (settled at now, Unix ns) grow to need,
// in Unix ms rounded up: now when they already cover it, 0 for
// while_in_flight budgets (whose tokens come back with acks, not with
// time). The moment is counted from the nanosecond now, as the wake timer's
// is (setTimer), so every read names the same millisecond however far into
// one it is taken.
func (b *budgetCore) affordableAt(now uint64, need, free float64) uint64 {
	if b.def.Strategy.Type != protocol.TimeBased {
		return 0
	}
	if free+tokenEpsilon >= need {
		return now / nsPerMs
	}
	delay := (need-free)*nsPerMs/b.rate() - tokenEpsilon*nsPerMs // ns
	return addMs(now/nsPerMs, ceilMs((float64(now%nsPerMs)+delay)/nsPerMs))
}

// waiting answers where a parked job stands: its place in line and, on a
// time_based budget, when the tokens for it and every job ahead of it will
// have dripped in, or the end of a hold when that is later.
func (b *budgetCore) waiting(now uint64, jobID string, priority uint16) *JobWaitingResponse {
	pos, need, ref, ok := b.position(jobID, priority)
	if !ok {
		return &JobWaitingResponse{}
	}
	free := b.tokens(now)
	return &JobWaitingResponse{Waiting: &protocol.Waiting{
		Budget:       b.key,
		Cost:         ref.Cost,
		Position:     pos,
		AffordableAt: b.holdExpected(now, b.affordableAt(now, need, free), free+tokenEpsilon >= need),
	}}
}

// line is the first limit parked jobs, in the order they are served (none
// for a limit below one).
func (b *budgetCore) line(limit int) *BudgetLine {
	limit = max(limit, 0)
	l := &BudgetLine{Total: b.parkedCount(), Jobs: make([]ParkedJob, 0, min(limit, b.parkedCount()))}
	b.parked.Ascend(func(r JobRef) bool {
		if len(l.Jobs) >= limit {
			return false
		}
		l.Jobs = append(l.Jobs, ParkedJob{ID: r.ID, Queue: r.Queue, Priority: r.Priority, Cost: r.Cost, HoldsBack: b.consumed(r.Queue)})
		return true
	})
	return l
}
