package actors

import (
	"testing"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Budget answers travel through mailboxes, so the queue actor may read one
// after the budget or the engine that it concerns has gone. These tests
// play such races with real budget actors (driven without an actor system:
// a while_in_flight budget never arms a timer, so step needs no context)
// and check that a stale answer changes nothing.

// keyedOutbox is a recordingOutbox that also keeps the budget key of each
// message, as queueActor.toBudget routes by key to whichever budget holds
// it now.
type keyedOutbox struct {
	recordingOutbox
	sent []keyedMsg
}

type keyedMsg struct {
	key string
	m   budgetMsg
}

func (o *keyedOutbox) toBudget(k string, m budgetMsg) { o.sent = append(o.sent, keyedMsg{k, m}) }

// take returns the messages sent since the last take.
func (o *keyedOutbox) take() []keyedMsg { s := o.sent; o.sent = nil; return s }

// keyedEngine is an engine whose budget messages a keyedOutbox records.
func keyedEngine() (*queueCore, *keyedOutbox) {
	e, _ := testEngine(EngineConfig{})
	out := &keyedOutbox{recordingOutbox: recordingOutbox{scheduled: map[string]uint64{}}}
	e.out = out
	return e, out
}

func noReply(any) {}

// openCountingStream opens a stream on e and returns the count of jobs it
// has been handed.
func openCountingStream(e *queueCore) *int {
	var delivered int
	e.openStream(0, &OpenStream{Prefetch: 10, Deliver: func(j []protocol.Job) { delivered += len(j) }}, noReply)
	return &delivered
}

var inFlightOne = protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}

// newInFlightBudget is a budget actor of key "b", allocation 1, made for
// the engine of the given epoch.
func newInFlightBudget(epoch uint64) *budgetActor {
	core := newBudgetCore("b", inFlightOne, atMs(0), nil)
	core.epoch = epoch
	return &budgetActor{core: core, tracer: NewTracer(), out: new(stepOutput)}
}

// deliver hands msgs to the budget actor a and returns its answers to the
// queue actor.
func deliver(a *budgetActor, msgs []keyedMsg) []queueMsg {
	for _, km := range msgs {
		a.step(0, km.m)
	}
	out := a.toQueue.pending
	a.toQueue = outLink[queueMsg]{}
	return out
}

// answer passes the budget's answers to the engine.
func answer(e *queueCore, msgs []queueMsg) {
	for _, m := range msgs {
		switch m := m.(type) {
		case *ReserveResponse:
			e.onReserveResponse(0, m)
		case *JobsWoken:
			e.onJobsWoken(0, m)
		}
	}
}

// newJobOnB is one job bound to budget "b" (cost 1), created with it.
func newJobOnB() *protocol.NewJob {
	return &protocol.NewJob{
		Job:      protocol.Job{Type: "t", Queue: "q", Budgets: []protocol.Binding{{Key: "b", Cost: 1}}},
		Bindings: []protocol.NewBinding{{Key: "b", Cost: 1, CreateWith: &inFlightOne}},
	}
}

// A final reservation is granted (and debited) by budget b, then every
// budget is reset and b made again by the next enqueue's create_with. The
// old answer now finds its job gone and refunds the debit; the refund is
// routed by key to the new budget b, which must not count it, or the new
// budget lets two jobs in flight on allocation 1.
func TestStaleRefundLeavesRecreatedBudgetAlone(t *testing.T) {
	e, out := keyedEngine()
	e.enqueue(0, &EnqueueJobs{Jobs: []*protocol.NewJob{newJobOnB()}}, noReply)
	openCountingStream(e)

	oldB := newInFlightBudget(e.epoch)
	staleAnswer := deliver(oldB, out.take())
	if r, ok := staleAnswer[0].(*ReserveResponse); !ok || !r.Committed {
		t.Fatalf("old budget answered %#v, want a committed final reservation", staleAnswer[0])
	}

	e.reset(0, noReply) // ahead of the answer in the queue actor's mailbox
	out.take()
	e.enqueue(0, &EnqueueJobs{Jobs: []*protocol.NewJob{newJobOnB()}}, noReply)
	newB := newInFlightBudget(e.epoch)
	requestY := out.take()

	answer(e, staleAnswer)
	refund := out.take()
	if len(refund) != 1 {
		t.Fatalf("the stale answer sent %d messages, want the one refund", len(refund))
	}
	if _, ok := refund[0].m.(*RefundTokens); !ok || refund[0].key != "b" {
		t.Fatalf("the stale answer sent %T to %q, want RefundTokens to b", refund[0].m, refund[0].key)
	}

	// the new budget reads Y's request, then X's refund
	answer(e, deliver(newB, append(requestY, refund...)))
	out.take()
	if newB.core.inFlight != 1 || e.inFlightTotal != 1 {
		t.Fatalf("after Y's dispatch: new budget counts %d in flight, engine %d; want 1 and 1", newB.core.inFlight, e.inFlightTotal)
	}

	// Z must park: b's one token is Y's
	e.streamWritten(0, 1)
	e.enqueue(0, &EnqueueJobs{Jobs: []*protocol.NewJob{newJobOnB()}}, noReply)
	answer(e, deliver(newB, out.take()))
	if e.inFlightTotal != 1 || newB.core.inFlight != 1 {
		t.Fatalf("budget b (allocation 1) has %d jobs in flight (budget counts %d)", e.inFlightTotal, newB.core.inFlight)
	}

	// the budget that made the debit does take its refund
	before := oldB.core.inFlight
	deliver(oldB, refund)
	if oldB.core.inFlight != before-1 {
		t.Fatalf("the debiting budget's in-flight count went %d -> %d on its own refund, want one less", before, oldB.core.inFlight)
	}
}

// The queue actor restarts (after a panic) and builds a new engine from
// the store; answers of the former engine's budgets may still be in its
// mailbox. They name entries and holds the new engine never made: it must
// drop them, and go on to reserve the reloaded job itself.
func TestAnswersFromBeforeARestartAreDropped(t *testing.T) {
	e1, out1 := keyedEngine()
	e1.enqueue(0, &EnqueueJobs{Jobs: []*protocol.NewJob{newJobOnB()}}, noReply)
	oldDeliveries := openCountingStream(e1)
	var id string
	for en := range e1.jobs.all() {
		id = en.id()
	}
	oldB := newInFlightBudget(e1.epoch)
	staleAnswer := deliver(oldB, out1.take())
	staleAnswer = append(staleAnswer, &JobsWoken{Key: "b", JobIDs: []string{id}, epoch: e1.epoch})

	// the restart: a new engine loads the job, ready, from the store
	e2, out2 := keyedEngine()
	if e2.epoch == e1.epoch {
		t.Fatalf("two engines share epoch %d", e1.epoch)
	}
	e2.loadBudget(protocol.Budget{Key: "b", Allocation: 1, Strategy: inFlightOne.Strategy})
	j := *e1.jobs.get(id).look()
	j.Status = protocol.StatusReady
	e2.loadJob(0, &j, persistence.Ref{}, persistence.NewBatch(false))
	e2.finishLoad()
	out2.take()

	answer(e2, staleAnswer)
	if e2.reservingTotal != 0 || e2.inFlightTotal != 0 || *oldDeliveries != 0 || len(out2.sent) != 0 {
		t.Fatalf("an answer from before the restart acted: reserving %d, in flight %d, old stream deliveries %d, budget messages %d",
			e2.reservingTotal, e2.inFlightTotal, *oldDeliveries, len(out2.sent))
	}
	if st := e2.jobs.get(id).state; st != stReady {
		t.Fatalf("reloaded job is %s after the stale answers, want ready", modelStateName(st))
	}

	// the new engine's own reservation goes through
	openCountingStream(e2)
	answer(e2, deliver(newInFlightBudget(e2.epoch), out2.take()))
	e2.pump(0)
	if e2.inFlightTotal != 1 {
		t.Fatalf("the reloaded job is not in flight after the new budget's grant (in flight %d, state %s)", e2.inFlightTotal, modelStateName(e2.jobs.get(id).state))
	}
}
