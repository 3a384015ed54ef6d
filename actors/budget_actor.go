package actors

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/protocol"
)

// budgetActor is the shell of one budget: it feeds each message to its
// budgetCore's step function (budget_step.go) and carries out what the step
// decided, arming and stopping the one wake timer and sending the answers.
// It decides nothing itself.
//
// Owns: a budgetCore (definition copy, pool, holds, parked jobs in
// (priority, id) order, timer bookkeeping) and at most one armed wake timer.
// Accepts: the budgetMsg set in messages.go, from the queue actor.
// Answers: ReserveResponse and JobsWoken, to the queue actor; queries to
// their sender.
// Supervision: it handles its own failure. A panic in Receive is recovered
// there: what the failing message decided is dropped, what the messages
// before it decided is sent, BudgetFailed goes to the queue actor with the
// pool as it stood before the failing message, and the actor stops; the
// queue actor makes it anew from its own state (budget_recovery.go). It
// never restarts in place, since its state may be half changed.
// Writes no keys: the queue actor persists definitions, pools are memory
// only (SPEC §4.9).
type budgetActor struct {
	core   *budgetCore
	clock  Clock
	timers Timers
	log    *slog.Logger
	tracer *Tracer

	ctx         actor.Context // during Receive
	cancelTimer func()
	out         *stepOutput // during Receive, from stepOutputs

	// The checkpoint before each step: the answers pending then and the
	// time_based pool. A step that panics is undone to it.
	sentBefore  int
	levelBefore float64
	atNsBefore  uint64
	stepping    budgetMsg // the message being stepped
	failed      bool      // it failed and is stopping

	toQueue outLink[queueMsg] // to the queue actor, flushed at the end of each Receive (batching.go)

	// answers holds the ReserveResponses of the batch being handled,
	// allocated together (answers are many and die together: the queue
	// actor handles a batch of them at once); empty outside a batch.
	answers []ReserveResponse
}

func (a *budgetActor) Receive(ctx actor.Context) {
	a.ctx = ctx
	if a.failed {
		a.stopTimer(false)
		return // stopping: it has reported its failure
	}
	a.out = stepOutputs.Get().(*stepOutput)
	defer a.releaseOut()
	a.checkpoint()
	defer a.recoverFailure()
	// The pool is kept in ns (SPEC §4.4, precision).
	now := nanos(a.clock.Now())
	switch m := ctx.Message().(type) {
	case *budgetBatch:
		a.answers = make([]ReserveResponse, countReserves(m.Msgs))
		for _, inner := range m.Msgs {
			a.step(now, inner)
		}
		a.answers = nil
	case budgetMsg:
		a.step(now, m)
	case *actor.Started:
		a.step(now, &budgetStarted{})
	case *actor.Stopping:
		a.step(now, &budgetStopping{})
	case *actor.Restarting, *actor.Stopped:
	default:
		a.log.Warn("budget actor: unknown message", "type", fmt.Sprintf("%T", m))
	}
	a.toQueue.flush(ctx, newQueueBatch)
	a.ctx = nil
}

// step runs the core's step on m and applies its output.
func (a *budgetActor) step(now uint64, m budgetMsg) {
	a.checkpoint()
	a.stepping = m
	a.out.trace = a.tracer.on()
	a.core.step(now, m, a.out)
	if a.out.unhandled != nil {
		a.log.Warn("budget actor: unhandled message", "type", fmt.Sprintf("%T", m))
	}
	applyStep(a.out, a, a.tracer)
}

// stepOutputs are the budget actors' step outputs: one is taken for each
// Receive and given back at its end, so an idle budget keeps no buffers (a
// server may hold a hundred thousand budgets; a buffer of its own, grown by
// one batch of answers, cost each about 300 bytes for good: many-budgets
// 12,946 -> 12,636 bytes per budget).
var stepOutputs = sync.Pool{New: func() any { return new(stepOutput) }}

// releaseOut gives the step output back to stepOutputs.
func (a *budgetActor) releaseOut() {
	a.out.reset()
	stepOutputs.Put(a.out)
	a.out = nil
}

// checkpoint notes what a failing step is undone to.
func (a *budgetActor) checkpoint() {
	a.sentBefore = len(a.toQueue.pending)
	a.levelBefore, a.atNsBefore = a.core.level, a.core.at
	a.stepping = nil
}

// recoverFailure handles a panic of Receive (see the type's comment).
func (a *budgetActor) recoverFailure() {
	r := recover()
	if r == nil {
		return
	}
	ctx := a.ctx
	a.failed = true
	a.log.Error("budget actor failed; the queue actor makes it anew", "panic", r)
	clear(a.toQueue.pending[a.sentBefore:])
	a.toQueue.pending = a.toQueue.pending[:a.sentBefore]
	a.toQueue.flush(ctx, newQueueBatch)
	ctx.Send(a.toQueue.pid, &BudgetFailed{
		Key: a.core.key, Incarnation: a.core.incarnation, Reason: fmt.Sprint(r), epoch: a.core.epoch,
		Level: a.levelBefore, At: a.atNsBefore, Pool: a.core.def.Strategy.Type == protocol.TimeBased,
		Held: a.core.heldBefore(a.stepping),
	})
	a.stopTimer(false)
	ctx.Stop(ctx.Self())
	a.ctx = nil
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

// The budgetShell the actor is.

func (a *budgetActor) send(m queueMsg) { a.toQueue.add(m) }

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

func (a *budgetActor) stopTimer(fired bool) {
	if a.cancelTimer != nil && !fired {
		a.cancelTimer()
	}
	a.cancelTimer = nil
}

func (a *budgetActor) armTimer(atNs, _, gen uint64) {
	// measure the delay from the clock itself, not from the start of this
	// Receive, so the timer fires at the exact moment
	a.cancelTimer = a.timers.SendOnce(delayUntilNs(atNs, a.clock.Now()), a.ctx.Self(), &budgetWake{gen: gen})
}

func (a *budgetActor) respond(m any) { a.ctx.Respond(m) }
