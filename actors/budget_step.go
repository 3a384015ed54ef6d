package actors

// The budget's step function: one message and the time in, everything the
// budget decided out. budgetCore.step is the only way a budget's state
// changes; the budget actor (budget_actor.go) and the model test's simulated
// budget both call it and apply its output with applyStep, so what a budget
// does, and how its decisions leave it, is written once.
//
// Adding a message: give it an isBudgetMsg marker (messages.go), add one case
// to step calling an onXxx method of the core, and, if it changes the pool or
// the parked list, end that method with b.wake (answers woken jobs and
// re-arms the timer) or b.syncTimer.

// stepOutput is what one step decided. The caller keeps one and passes it to
// every step: its buffers are reused, so a step that sends nothing new and
// traces nothing allocates nothing.
type stepOutput struct {
	// trace is set by the caller when someone listens: the step then
	// fills events.
	trace bool

	// sends are the messages for the queue actor, in the order decided.
	sends []budgetSend
	// reply is the answer to the sender of a query (nil: none).
	reply any
	// The wake timer: stop the armed one (fired: it has fired already, so
	// only forget it), then arm one for armNs (exact, Unix ns; armAt is the
	// same moment rounded up to the millisecond) carrying armGen.
	stop, fired          bool
	armNs, armAt, armGen uint64
	events               []Event   // trace events, in order
	unhandled            budgetMsg // a message step has no case for
}

// budgetSend is one message for the queue actor: a reservation's answer,
// (woken set) jobs handed back, or (other set) any other message.
type budgetSend struct {
	answer ReserveResponse
	woken  *JobsWoken
	other  queueMsg
}

// reset empties o for the next step, keeping its buffers and trace.
func (o *stepOutput) reset() {
	clear(o.sends)
	o.sends = o.sends[:0]
	clear(o.events)
	o.events = o.events[:0]
	o.reply, o.unhandled = nil, nil
	o.stop, o.fired = false, false
	o.armNs, o.armAt, o.armGen = 0, 0, 0
}

// step handles one message at now (Unix ns) and writes into out (reset
// first) everything decided: answers and wakes for the queue actor, the
// reply to a query, the timer to stop or arm, the trace events.
func (b *budgetCore) step(now uint64, msg budgetMsg, out *stepOutput) {
	out.reset()
	switch m := msg.(type) {
	case *ReserveRequest:
		b.onReserve(now, m, out)
	case *CommitReservation:
		b.commit(now, m.JobID)
		b.traceJob(out, now, EventCommit, m.JobID)
		b.syncTimer(now, out)
	case *ReleaseReservation:
		woken := b.release(now, m.JobID)
		b.traceJob(out, now, EventRelease, m.JobID)
		b.wake(now, out, woken, "release")
	case *ReturnTokens:
		woken := b.finish(now, m.Cost)
		b.traceJob(out, now, EventReturned, m.JobID)
		b.wake(now, out, woken, "release")
	case *RefundTokens:
		if m.Incarnation != b.incarnation {
			return // another budget of this key made the debit
		}
		woken := b.refund(now, m.JobID, m.Cost)
		b.traceJob(out, now, EventRelease, m.JobID)
		b.wake(now, out, woken, "release")
	case *SettleCost:
		b.onSettle(now, m, out)
	case *PrepaidDispatched:
		b.confirmProvisional(m)
	case *HoldBudget:
		b.onHold(now, m, out)
	case *budgetIdleQuery:
		b.onIdleQuery(now, m, out)
	case *UnparkJob:
		woken := b.unpark(now, m.JobID, m.Priority)
		b.traceJob(out, now, EventUnparked, m.JobID)
		b.wake(now, out, woken, "release")
	case *restorePool:
		b.restoreLevel(now, m.level)
		b.traceBudget(out, now, EventPoolRestored)
		b.syncTimer(now, out)
	case *ApplyDefinition:
		woken := b.update(now, m.Definition)
		b.traceBudget(out, now, EventBudgetUpdated)
		b.wake(now, out, woken, "update")
	case *QueuesChanged, *Reevaluate:
		b.wake(now, out, b.evaluate(now), "update")
	case *budgetWake:
		b.onWake(now, m, out)
	case *RestoreBudget:
		b.restore(m)
		b.wake(now, out, b.evaluate(now), "update")
	case *budgetStarted:
		b.traceBudget(out, now, EventBudgetCreated)
	case *budgetStopping:
		b.disarm(now, out)
	case *BudgetStateRequest, *budgetStateQuery:
		out.reply = b.state(now)
	case *parkedJobQuery:
		out.reply = b.waiting(now, m.JobID, m.Priority)
	case *budgetLineQuery:
		out.reply = b.line(m.Limit)
	default:
		out.unhandled = msg
	}
}

// onReserve answers a reservation: granted (a final one debited at once),
// or refused and parked.
func (b *budgetCore) onReserve(now uint64, m *ReserveRequest, out *stepOutput) {
	before := b.traceRequested(out, now, m.Job)
	res := b.reserve(now, m.Job, m.Commit)
	b.traceReserved(out, now, m.Job, res.granted, before)
	committed := res.granted && m.Commit
	if committed {
		b.traceJob(out, now, EventCommit, m.Job.ID)
	}
	answer := ReserveResponse{
		Key: b.key, JobID: m.Job.ID, Priority: m.Job.Priority, Granted: res.granted, Committed: committed, Cost: m.Job.Cost,
		entry: m.entry, Incarnation: b.incarnation, epoch: b.epoch,
	}
	if res.granted {
		answer.Pool = b.poolNote() // durable pools (budget_pools.go)
	}
	out.sends = append(out.sends, budgetSend{answer: answer})
	b.wake(now, out, res.woken, "refill")
}

// onWake handles the wake timer firing: a stale one (disarmed or re-armed
// since) is ignored.
func (b *budgetCore) onWake(now uint64, m *budgetWake, out *stepOutput) {
	if m.gen != b.timerGen || b.armedNs == 0 {
		return
	}
	due := b.armedAt
	b.armedNs, b.armedAt = 0, 0
	out.fired = true
	b.traceTimer(out, now, EventTimerFired, due)
	b.traceHoldEnd(now, out)
	b.wakeDebiting(now, out)
}

// wake hands woken jobs back to the queue and brings the timer in line with
// the wake moment.
func (b *budgetCore) wake(now uint64, out *stepOutput, woken []string, reason string) {
	if len(woken) > 0 {
		b.traceWoken(out, now, woken, reason)
		out.sends = append(out.sends, budgetSend{woken: &JobsWoken{Key: b.key, JobIDs: woken, epoch: b.epoch}})
	}
	b.syncTimer(now, out)
}

// syncTimer re-arms the timer when the wake moment changed.
func (b *budgetCore) syncTimer(now uint64, out *stepOutput) {
	want := b.wakeNs
	if want == b.armedNs {
		return
	}
	b.disarm(now, out)
	if want == 0 {
		return
	}
	b.timerGen++
	b.armedNs, b.armedAt = want, b.wakeAt
	out.armNs, out.armAt, out.armGen = want, b.wakeAt, b.timerGen
	b.traceTimer(out, now, EventTimerArmed, b.armedAt)
}

// disarm stops the armed timer, if any; a wake of its generation that is
// on its way is stale from now on.
func (b *budgetCore) disarm(now uint64, out *stepOutput) {
	if b.armedNs != 0 {
		out.stop = true
		b.traceTimer(out, now, EventTimerCancelled, b.armedAt)
	}
	b.timerGen++
	b.armedNs, b.armedAt = 0, 0
}

// budgetShell is what carries a step's decisions out: the budget actor, or
// the model test's simulated one.
type budgetShell interface {
	// send queues m for the queue actor.
	send(m queueMsg)
	// newAnswer returns a ReserveResponse to fill in and send.
	newAnswer() *ReserveResponse
	// stopTimer forgets the armed timer, cancelling it unless it fired.
	stopTimer(fired bool)
	// armTimer arms the wake timer for atNs (Unix ns; atMs rounded up),
	// to deliver budgetWake{gen}.
	armTimer(atNs, atMs, gen uint64)
	// respond answers the sender of the message handled.
	respond(m any)
}

// applyStep carries out what a step decided, in the order decided: the
// messages for the queue actor, the timer (stopped before re-armed), the
// reply, and the trace events.
func applyStep(out *stepOutput, sh budgetShell, tracer *Tracer) {
	for i := range out.sends {
		s := &out.sends[i]
		if s.woken != nil {
			sh.send(s.woken)
			continue
		}
		if s.other != nil {
			sh.send(s.other)
			continue
		}
		r := sh.newAnswer()
		*r = s.answer
		sh.send(r)
	}
	if out.stop || out.fired {
		sh.stopTimer(out.fired)
	}
	if out.armNs != 0 {
		sh.armTimer(out.armNs, out.armAt, out.armGen)
	}
	if out.reply != nil {
		sh.respond(out.reply)
	}
	for _, e := range out.events {
		tracer.emit(e)
	}
}

// budgetStarted and budgetStopping are the actor's lifecycle, as the step
// sees it.
type (
	budgetStarted  struct{}
	budgetStopping struct{}
)

func (*budgetStarted) isBudgetMsg()    {}
func (*budgetStopping) isBudgetMsg()   {}
func (*budgetStateQuery) isBudgetMsg() {}
