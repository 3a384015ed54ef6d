package actors

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// budgetActor owns one budget's pool, parked list and wake timer.
//
// Owns: a budgetCore (definition copy, pool, holds, parked jobs in
// (priority, id) order) and at most one armed wake timer.
// Accepts: the budgetMsg set in messages.go, from the queue actor.
// Answers: ReserveResponse and JobsWoken, to the queue actor.
// Supervisor: the root (stopping it on failure); it writes no keys: the
// queue actor persists definitions, pools are memory only (SPEC §4.9).
type budgetActor struct {
	core   *budgetCore
	clock  Clock
	timers Timers
	log    *slog.Logger
	tracer *Tracer

	gen         uint64
	armedAt     uint64 // wake moment armed, Unix ms (as reported)
	armedNs     uint64 // the same, exact (Unix ns)
	nowNs       uint64 // the clock when this Receive began (Unix ns)
	cancelTimer func()

	obs budgetObs // trace bookkeeping (observe.go)

	// epoch is the queue actor's engine this budget was made for; its
	// answers carry it, so a restarted queue actor ignores what budgets of
	// its former life sent (engine.epoch).
	epoch uint64

	durablePools bool   // answers carry pool notes (budget_pools.go)
	poolSeq      uint64 // the last poolNote's seq

	toQueue outLink[queueMsg] // to the queue actor, flushed at the end of each Receive (batching.go)

	// answers holds the ReserveResponses of the batch being handled,
	// allocated together (answers are many and die together: the queue
	// actor handles a batch of them at once); empty outside a batch.
	answers []ReserveResponse
}

func (a *budgetActor) Receive(ctx actor.Context) {
	// The pool is kept in ns (SPEC §4.4, precision); traces and wire
	// fields use the same moment in ms.
	a.nowNs = nanos(a.clock.Now())
	now := a.nowNs / nsPerMs
	msg := ctx.Message()
	if b, ok := msg.(*budgetBatch); ok {
		a.answers = make([]ReserveResponse, countReserves(b.Msgs))
	}
	a.handle(ctx, msg, now)
	a.answers = nil
	a.toQueue.flush(ctx, newQueueBatch)
}

func countReserves(msgs []budgetMsg) int {
	n := 0
	for _, m := range msgs {
		if _, ok := m.(*ReserveRequest); ok {
			n++
		}
	}
	return n
}

// newAnswer returns a ReserveResponse to fill in: the batch's next one, or
// a new one outside a batch.
func (a *budgetActor) newAnswer() *ReserveResponse {
	if len(a.answers) == 0 {
		return new(ReserveResponse)
	}
	r := &a.answers[0]
	a.answers = a.answers[1:]
	return r
}

func (a *budgetActor) handle(ctx actor.Context, msg any, now uint64) {
	switch m := msg.(type) {
	case *actor.Started:
		a.traceBudget(EventBudgetCreated, now)
	case *actor.Restarting:
	case *actor.Stopping:
		a.disarm(now)
	case *actor.Stopped:
	case *ReserveRequest:
		before := a.traceRequested(m.Job, now)
		out := a.core.reserve(a.nowNs, m.Job, m.Commit)
		a.traceReserved(m.Job, out.granted, before, now)
		committed := out.granted && m.Commit
		if committed {
			a.traceJob(EventCommit, m.Job.ID, now)
		}
		r := a.newAnswer()
		*r = ReserveResponse{Key: a.core.key, JobID: m.Job.ID, Priority: m.Job.Priority, Granted: out.granted, Committed: committed, Cost: m.Job.Cost, en: m.en, by: a.core, epoch: a.epoch}
		if out.granted {
			r.Pool = a.poolNote()
		}
		a.toQueue.add(r)
		a.wake(ctx, out.woken, "refill", now)
	case *CommitReservation:
		a.core.commit(a.nowNs, m.JobID)
		a.traceJob(EventCommit, m.JobID, now)
		a.syncTimer(ctx, now)
	case *ReleaseReservation:
		woken := a.core.release(a.nowNs, m.JobID)
		a.traceJob(EventRelease, m.JobID, now)
		a.wake(ctx, woken, "release", now)
	case *ReturnTokens:
		woken := a.core.finish(a.nowNs, m.Cost)
		a.traceJob(EventReturned, m.JobID, now)
		a.wake(ctx, woken, "release", now)
	case *RefundTokens:
		if m.by != a.core {
			return // another budget of this key made the debit
		}
		woken := a.core.refund(a.nowNs, m.Cost)
		a.traceJob(EventRelease, m.JobID, now)
		a.wake(ctx, woken, "release", now)
	case *UnparkJob:
		woken := a.core.unpark(a.nowNs, m.JobID, m.Priority)
		a.traceJob(EventUnparked, m.JobID, now)
		a.wake(ctx, woken, "release", now)
	case *restorePool:
		a.core.restore(a.nowNs, m.level)
		a.traceBudget(EventPoolRestored, now)
	case *ApplyDefinition:
		woken := a.core.update(a.nowNs, m.Definition)
		a.traceBudget(EventBudgetUpdated, now)
		a.wake(ctx, woken, "update", now)
	case *QueuesChanged, *Reevaluate:
		a.wake(ctx, a.core.evaluate(a.nowNs), "update", now)
	case *budgetWake:
		if m.gen != a.gen {
			return // stale timer
		}
		due := a.armedAt
		a.armedAt, a.armedNs = 0, 0
		a.cancelTimer = nil
		a.traceTimer(EventTimerFired, due, now)
		a.wake(ctx, a.core.evaluate(a.nowNs), "refill", now)
	case *budgetBatch:
		for _, inner := range m.Msgs {
			a.handle(ctx, inner, now)
		}
	case *BudgetStateRequest, *budgetStateQuery:
		ctx.Respond(a.state(now))
	case *parkedJobQuery:
		ctx.Respond(a.waiting(m.JobID, m.Priority, now))
	case *budgetLineQuery:
		ctx.Respond(a.line(m.Limit))
	default:
		a.log.Warn("budget actor: unknown message", "type", fmt.Sprintf("%T", m))
	}
}

// wake sends woken jobs to the queue and re-arms the timer to the core's
// wake moment (only when that moment changed).
func (a *budgetActor) wake(ctx actor.Context, woken []string, reason string, now uint64) {
	if len(woken) > 0 {
		a.traceWoken(woken, reason, now)
		a.toQueue.add(&JobsWoken{Key: a.core.key, JobIDs: woken, epoch: a.epoch})
	}
	a.syncTimer(ctx, now)
}

func (a *budgetActor) syncTimer(ctx actor.Context, now uint64) {
	want := a.core.wakeNs
	if want == a.armedNs {
		return
	}
	a.disarm(now)
	if want == 0 {
		return
	}
	a.gen++
	a.armedAt, a.armedNs = a.core.wakeAt, want
	// measure the delay from the clock itself, not from the start of this
	// Receive, so the timer fires at the exact moment
	a.cancelTimer = a.timers.SendOnce(delayUntilNs(want, a.clock.Now()), ctx.Self(), &budgetWake{gen: a.gen})
	a.traceTimer(EventTimerArmed, a.armedAt, now)
}

func (a *budgetActor) disarm(now uint64) {
	if a.cancelTimer != nil {
		a.cancelTimer()
		a.cancelTimer = nil
		a.traceTimer(EventTimerCancelled, a.armedAt, now)
	}
	a.gen++
	a.armedAt, a.armedNs = 0, 0
}

func (a *budgetActor) state(now uint64) *BudgetState {
	s := &BudgetState{
		Key:        a.core.key,
		Tokens:     a.core.tokens(a.nowNs),
		InFlight:   a.core.inFlight,
		Held:       a.core.held,
		Parked:     a.core.parkedCount(),
		WakeAt:     a.armedAt,
		Dispatches: a.core.dispatches,
		Refusals:   a.core.refusals,
	}
	if h, ok := a.core.head(); ok {
		s.HeadID, s.HeadCost = h.ID, h.Cost
	}
	a.observeState(s, now)
	return s
}
