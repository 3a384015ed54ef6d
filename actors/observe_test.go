package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// ---------------------------------------------------------------- fakes

// obsClock is a clock the test moves by hand.
type obsClock struct{ ms atomic.Int64 }

func (c *obsClock) Now() time.Time    { return time.UnixMilli(c.ms.Load()) }
func (c *obsClock) set(ms uint64)     { c.ms.Store(int64(ms)) }
func (c *obsClock) nowMs() uint64     { return uint64(c.ms.Load()) }
func newObsClock(ms uint64) *obsClock { c := &obsClock{}; c.set(ms); return c }

// obsTimers records armed timers; fireDue sends the ones due by the clock.
type obsTimers struct {
	clock *obsClock
	mu    sync.Mutex
	armed []*obsTimer
	root  *actor.RootContext
}

type obsTimer struct {
	due       uint64
	delay     time.Duration
	pid       *actor.PID
	msg       any
	cancelled bool
}

func (f *obsTimers) SendOnce(delay time.Duration, pid *actor.PID, msg any) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &obsTimer{due: f.clock.nowMs() + uint64(max(0, delay)/time.Millisecond), delay: delay, pid: pid, msg: msg}
	f.armed = append(f.armed, t)
	return func() {
		f.mu.Lock()
		t.cancelled = true
		f.mu.Unlock()
	}
}

func (f *obsTimers) fireDue() int {
	f.mu.Lock()
	var due []*obsTimer
	keep := f.armed[:0]
	for _, t := range f.armed {
		switch {
		case t.cancelled:
		case t.due <= f.clock.nowMs():
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	f.armed = keep
	f.mu.Unlock()
	for _, t := range due {
		f.root.Send(t.pid, t.msg)
	}
	return len(due)
}

// ---------------------------------------------------------------- helpers

type obsBundle struct {
	engine *Engine
	clock  *obsClock
	timers *obsTimers
	sub    *Subscription
	seen   []Event
}

// obsStart starts a real engine on an in-memory store with a subscription
// open from the start. With fake, the clock and the timers are the test's.
func obsStart(t *testing.T, fake bool) *obsBundle {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	require.NoError(t, err)
	tr := NewTracer()
	b := &obsBundle{sub: tr.Subscribe(1 << 14)}
	cfg := Config{Store: store, Logger: log, Tracer: tr}
	if fake {
		b.clock = newObsClock(1_800_000_000_000)
		b.timers = &obsTimers{clock: b.clock}
		cfg.Clock, cfg.Timers = b.clock, b.timers
	}
	e, err := Start(cfg)
	require.NoError(t, err)
	if fake {
		b.timers.root = e.system.Root
	}
	b.engine = e
	t.Cleanup(func() {
		b.sub.Close()
		e.Stop()
		_ = store.Close()
	})
	return b
}

func (b *obsBundle) dump() string {
	var sb strings.Builder
	for _, e := range b.seen {
		fmt.Fprintf(&sb, "  %-18s %-12s job=%s budget=%s cost=%d pos=%d due=%d reason=%s worker=%s\n", e.Kind, e.Actor, e.JobID, e.Budget, e.Cost, e.Position, e.DueAt, e.Reason, e.WorkerID)
	}
	return sb.String()
}

// waitFor reads events until cond holds over all events seen so far.
func (b *obsBundle) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case e := <-b.sub.C:
			b.seen = append(b.seen, e)
		case <-deadline.C:
			t.Fatalf("no %s within 10s; events:\n%s", what, b.dump())
		}
	}
}

// count counts seen events of a kind matching an optional job id.
func (b *obsBundle) count(kind EventKind, job string) int {
	n := 0
	for _, e := range b.seen {
		if e.Kind == kind && (job == "" || e.JobID == job) {
			n++
		}
	}
	return n
}

func (b *obsBundle) find(kind EventKind, job string) (Event, bool) {
	for _, e := range b.seen {
		if e.Kind == kind && (job == "" || e.JobID == job) {
			return e, true
		}
	}
	return Event{}, false
}

func (b *obsBundle) last(kind EventKind) Event {
	for i := len(b.seen) - 1; i >= 0; i-- {
		if b.seen[i].Kind == kind {
			return b.seen[i]
		}
	}
	return Event{}
}

func obsJobs(n int, queue, budget string) []*protocol.NewJob {
	jobs := make([]*protocol.NewJob, n)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: queue, Priority: protocol.DefaultPriority, Payload: []byte(`{}`),
			Budgets: []protocol.Binding{{Key: budget, Cost: 1}}}}
	}
	return jobs
}

// obsOpen opens a stream that reports every batch written at once.
// obsRecv is the next job delivered, failing the test after d.
func obsRecv(t *testing.T, delivered <-chan protocol.Job, d time.Duration) protocol.Job {
	t.Helper()
	select {
	case j := <-delivered:
		return j
	case <-time.After(d):
		t.Fatalf("no job delivered within %v", d)
		return protocol.Job{}
	}
}

func obsOpen(t *testing.T, e *Engine, worker string, prefetch int) (uint64, chan protocol.Job) {
	t.Helper()
	delivered := make(chan protocol.Job, 1024)
	var id atomic.Uint64
	ready := make(chan struct{})
	sid, err := e.OpenStream(context.Background(), &OpenStream{Prefetch: prefetch, WorkerID: worker, Deliver: func(jobs []protocol.Job) {
		<-ready
		for _, j := range jobs {
			delivered <- j
		}
		e.StreamWritten(id.Load())
	}})
	require.NoError(t, err)
	id.Store(sid)
	close(ready)
	return sid, delivered
}

// ---------------------------------------------------------------- tests

// TestObserveDropsAreCountedAndAnnounced: a full subscription never blocks
// the emitter; the next event that fits is preceded by a "dropped" event
// with the count, and TakeDropped announces a gap no event followed.
func TestObserveDropsAreCountedAndAnnounced(t *testing.T) {
	tr := NewTracer()
	sub := tr.SubscribeFiltered(2, TraceFilter{Budgets: []string{"a"}})
	defer sub.Close()
	ev := func(budget string, n int) {
		for i := 0; i < n; i++ {
			tr.emit(Event{Kind: EventCommit, Budget: budget, JobID: fmt.Sprint(i)})
		}
	}
	ev("b", 3) // filtered out: neither delivered nor dropped
	ev("a", 5)
	require.Equal(t, 2, len(sub.C))
	require.EqualValues(t, 3, sub.Dropped())
	<-sub.C
	<-sub.C
	ev("a", 1)
	marker := <-sub.C
	require.Equal(t, EventDropped, marker.Kind)
	require.EqualValues(t, 3, marker.Count)
	require.Equal(t, EventCommit, (<-sub.C).Kind)
	require.Zero(t, sub.TakeDropped(), "the marker already announced the loss")

	ev("a", 3) // 2 fit, 1 lost, nothing after it
	require.EqualValues(t, 1, sub.TakeDropped())
	require.Zero(t, sub.TakeDropped())
	require.EqualValues(t, 4, sub.Dropped())
	sub.Close()
	require.Zero(t, tr.Subscribers())
}

func TestObserveFilterMatch(t *testing.T) {
	e := Event{Kind: EventParked, JobID: "j1", Queue: "q1", Budget: "b1"}
	cases := []struct {
		f    *TraceFilter
		want bool
	}{
		{nil, true},
		{&TraceFilter{}, true},
		{&TraceFilter{Jobs: []string{"j2", "j1"}}, true},
		{&TraceFilter{Jobs: []string{"j2"}}, false},
		{&TraceFilter{Budgets: []string{"b1"}, Queues: []string{"q1"}}, true},
		{&TraceFilter{Budgets: []string{"b1"}, Queues: []string{"q2"}}, false},
	}
	for i, c := range cases {
		require.Equal(t, c.want, c.f.match(&e), "case %d", i)
	}
	require.True(t, (&TraceFilter{Jobs: []string{"x"}}).match(&Event{Kind: EventDropped}), "drops always reach the reader")
	require.True(t, (&TraceFilter{Budgets: []string{"b2"}}).match(&Event{Kind: EventDispatched, Budgets: []string{"b1", "b2"}}), "a queue event of a job bound to the budget")
}

// obsHooks is a budget core, the output of its steps (nobody tracing) and
// an engine with no subscriber.
type obsHooks struct {
	b      *budgetCore
	out    stepOutput
	tracer *Tracer
}

// obsHooksActor builds a budget core and an engine with no subscriber.
func obsHooksActor() (*obsHooks, *queueCore, *entry, *stream, []string) {
	tr := NewTracer()
	def := protocol.Definition{Allocation: 10, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 1000}}
	a := &obsHooks{b: newBudgetCore("k", def, atMs(1000), nil), tracer: tr}
	e := newQueueCore(EngineConfig{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), newConsumedSet(), tr)
	job := &protocol.Job{ID: "j", Queue: "q"}
	en := &entry{jb: job}
	s := &stream{id: 1, workerID: "w"}
	e.observeEnqueued(job) // the first job of a queue creates its counters
	return a, e, en, s, []string{"j"}
}

// obsAllHooks calls every trace and counter hook of the dispatch path once.
func obsAllHooks(a *obsHooks, e *queueCore, en *entry, s *stream, ids []string) {
	ref := JobRef{ID: "j", Queue: "q", Cost: 1}
	b, out, now := a.b, &a.out, atMs(1000)
	out.trace = a.tracer.on()
	before := b.traceRequested(out, now, ref)
	b.traceReserved(out, now, ref, true, before)
	b.traceJob(out, now, EventCommit, "j")
	b.traceJob(out, now, EventRelease, "j")
	b.traceJob(out, now, EventReturned, "j")
	b.traceWoken(out, now, ids, "refill")
	b.traceTimer(out, now, EventTimerArmed, 1500)
	b.traceTimer(out, atMs(1500), EventTimerFired, 1500)
	b.traceBudget(out, now, EventBudgetUpdated)
	applyStep(out, nopShell{}, a.tracer)
	a.tracer.budgetDeleted("k")
	e.makeReadyTraceOnly(en)
	e.observeEnqueued(en.full())
	e.observeDispatched(1000, en, s)
	e.observeAcked(1000, en)
	e.observeFailed(1000, en.full())
}

// nopShell applies a budget step's output nowhere.
type nopShell struct{}

func (nopShell) send(queueMsg)                   {}
func (nopShell) newAnswer() *ReserveResponse     { return &nopAnswer }
func (nopShell) stopTimer(bool)                  {}
func (nopShell) armTimer(uint64, uint64, uint64) {}
func (nopShell) respond(any)                     {}

var nopAnswer ReserveResponse

// makeReadyTraceOnly is the trace call makeReady makes.
func (e *queueCore) makeReadyTraceOnly(en *entry) { e.tracer.job(EventReady, en.full(), 0) }

// TestObserveHooksDoNotAllocate proves that with no subscriber the trace
// and counter hooks of the dispatch path allocate nothing.
func TestObserveHooksDoNotAllocate(t *testing.T) {
	a, e, en, s, ids := obsHooksActor()
	allocs := testing.AllocsPerRun(1000, func() { obsAllHooks(a, e, en, s, ids) })
	require.Zero(t, allocs, "trace hooks allocate with no subscriber")
	require.EqualValues(t, 1001+1, e.obs.queues["q"].enqueued)
}

// budgetCycle is one job's reserve, commit and return through the budget's
// step function, applied as the actor applies it.
func budgetCycle(b *budgetCore, out *stepOutput, tracer *Tracer, reserve *ReserveRequest, commit *CommitReservation, ret *ReturnTokens) {
	for _, m := range []budgetMsg{reserve, commit, ret} {
		out.trace = tracer.on()
		b.step(atMs(1000), m, out)
		applyStep(out, nopShell{}, tracer)
	}
}

// TestBudgetStepDoesNotAllocate: with nobody tracing, a budget's steps for
// a job that reserves, commits and returns its tokens allocate nothing
// (the answer aside, which the shell allocates: here it reuses one).
func TestBudgetStepDoesNotAllocate(t *testing.T) {
	def := protocol.Definition{Allocation: 10, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	b, out, tr := newBudgetCore("k", def, atMs(1000), nil), &stepOutput{}, NewTracer()
	ref := JobRef{ID: "j", Queue: "q", Cost: 1}
	reserve, commit, ret := &ReserveRequest{Job: ref}, &CommitReservation{JobID: "j"}, &ReturnTokens{JobID: "j", Cost: 1}
	allocs := testing.AllocsPerRun(1000, func() { budgetCycle(b, out, tr, reserve, commit, ret) })
	require.Zero(t, allocs, "budget steps allocate with no subscriber")
	require.EqualValues(t, 0, b.inFlight)
	require.EqualValues(t, 1001, b.dispatches)
}

// BenchmarkObserveHooksOff is every dispatch-path trace and counter hook
// with no subscriber: 0 allocs/op.
func BenchmarkObserveHooksOff(b *testing.B) {
	a, e, en, s, ids := obsHooksActor()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		obsAllHooks(a, e, en, s, ids)
	}
}

// BenchmarkObserveBudgetCycle is a budget's reserve, commit and return
// through its step function, traced or not, without and with a subscriber
// that keeps up.
func BenchmarkObserveBudgetCycle(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("subscribed=%v", on), func(b *testing.B) {
			tr := NewTracer()
			def := protocol.Definition{Allocation: 10, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
			core, out := newBudgetCore("k", def, atMs(1000), nil), &stepOutput{}
			if on {
				sub := tr.Subscribe(1 << 12)
				done := make(chan struct{})
				go func() {
					defer close(done)
					for range sub.C {
					}
				}()
				defer func() { sub.Close(); close(sub.C); <-done }()
			}
			ref := JobRef{ID: "j", Queue: "q", Cost: 1}
			reserve, commit, ret := &ReserveRequest{Job: ref}, &CommitReservation{JobID: "j"}, &ReturnTokens{JobID: "j", Cost: 1}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				budgetCycle(core, out, tr, reserve, commit, ret)
			}
		})
	}
}

// TestObserveTimeBasedDispatch drives a real engine with a frozen clock:
// a time_based budget of 6 per 3000 ms, 8 jobs, one stream. Six reserve and
// dispatch, two park; the wake timer is armed for the head's exact moment;
// the budget state, the parked jobs' waiting objects and the metrics say
// so; firing the timer wakes the head with reason refill.
func TestObserveTimeBasedDispatch(t *testing.T) {
	b := obsStart(t, true)
	e, ctx := b.engine, context.Background()
	t0 := b.clock.nowMs()
	def := protocol.Definition{Allocation: 6, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 3000}}
	_, _, err := e.CreateBudget(ctx, "tb", def, false)
	require.NoError(t, err)
	views, err := e.Enqueue(ctx, obsJobs(8, "q", "tb"), true)
	require.NoError(t, err)
	ids := make([]string, len(views))
	for i, v := range views {
		ids[i] = v.ID
	}
	_, delivered := obsOpen(t, e, "w1", 10)

	b.waitFor(t, "6 dispatches, 2 parked and an armed timer", func() bool {
		return b.count(EventDispatched, "") == 6 && b.count(EventParked, "") == 2 && b.count(EventCommit, "") == 6 && b.count(EventTimerArmed, "") == 1
	})
	require.Equal(t, 1, b.count(EventBudgetCreated, ""))
	require.Equal(t, 8, b.count(EventReserveRequested, ""))
	require.Equal(t, 6, b.count(EventReserveGranted, ""))
	require.Equal(t, 2, b.count(EventReserveRefused, ""))
	for i := 0; i < 6; i++ {
		d, ok := b.find(EventDispatched, ids[i])
		require.True(t, ok, "job %d not dispatched:\n%s", i, b.dump())
		require.Equal(t, "w1", d.WorkerID)
		require.Equal(t, "q", d.Queue)
		g, _ := b.find(EventReserveGranted, ids[i])
		require.InDelta(t, 6-float64(i), *g.TokensBefore, 1e-9)
		require.InDelta(t, 5-float64(i), *g.Tokens, 1e-9)
	}
	for i, id := range ids[6:] {
		p, ok := b.find(EventParked, id)
		require.True(t, ok, "job %d not parked:\n%s", 6+i, b.dump())
		require.Equal(t, i+1, p.Position)
		require.Equal(t, "tb", p.Budget)
		require.Equal(t, "q", p.Queue)
	}
	armed, _ := b.find(EventTimerArmed, "")
	require.Equal(t, t0+500, armed.DueAt, "1 token at 6 per 3000 ms takes 500 ms")
	require.Equal(t, ids[6], armed.JobID)

	st, err := e.BudgetState(ctx, "tb")
	require.NoError(t, err)
	require.InDelta(t, 0, st.Tokens, 1e-9)
	require.Equal(t, 2, st.Parked)
	require.Equal(t, ids[6], st.HeadID)
	require.Equal(t, "q", st.HeadQueue)
	require.Equal(t, t0+500, st.HeadAffordableAt)
	require.Equal(t, t0+500, st.WakeAt)
	require.EqualValues(t, 6, st.InFlight)
	require.EqualValues(t, 6, st.Dispatches)
	require.EqualValues(t, 2, st.Refusals)
	require.Equal(t, def, st.Definition)

	for i, want := range []protocol.Waiting{{Budget: "tb", Cost: 1, Position: 1, AffordableAt: t0 + 500}, {Budget: "tb", Cost: 1, Position: 2, AffordableAt: t0 + 1000}} {
		v, err := e.GetJob(ctx, ids[6+i])
		require.NoError(t, err)
		require.Equal(t, protocol.StatusReady, v.Status)
		require.NotNil(t, v.Waiting, "parked job %d has no waiting", 6+i)
		require.Equal(t, want, *v.Waiting)
	}
	v, err := e.GetJob(ctx, ids[0])
	require.NoError(t, err)
	require.Nil(t, v.Waiting, "an in-flight job waits on nothing")

	m, err := e.Metrics(ctx)
	require.NoError(t, err)
	require.Len(t, m.Queues, 1)
	got := m.Queues[0]
	require.EqualValues(t, 6, got.Wait.Count, "one queue-wait observation per dispatch")
	require.Zero(t, got.Run.Count, "nothing finished yet")
	got.Wait, got.Run = Histogram{}, Histogram{}
	require.Equal(t, QueueMetrics{Queue: "q", Ready: 2, Parked: 2, InFlight: 6, Enqueued: 8, Dispatched: 6}, got)
	require.Len(t, m.Budgets, 1)
	require.Equal(t, 2, m.Budgets[0].Parked)
	require.Equal(t, 1, m.Streams)
	require.Equal(t, 1, m.Subscribers)

	// 500 ms later the timer fires and wakes the head (reason refill), which
	// dispatches; the timer is re-armed for the next one.
	b.clock.set(t0 + 500)
	require.Equal(t, 1, b.timers.fireDue())
	// (Under load the woken head can reach the queue before the stream has
	// room for it: the wake's debit is released, the head reserves again
	// and the timer is armed a second time for the next job, before the
	// head is dispatched; seen in 1 of 10 runs beside other tests. So the
	// wait is for the dispatch, and the last timer armed is checked.)
	b.waitFor(t, "the head to be woken and dispatched", func() bool {
		return b.count(EventDispatched, ids[6]) == 1
	})
	fired, _ := b.find(EventTimerFired, "")
	require.Equal(t, t0+500, fired.DueAt)
	w, ok := b.find(EventWoken, ids[6])
	require.True(t, ok)
	require.Equal(t, "refill", w.Reason)
	require.Equal(t, t0+1000, b.last(EventTimerArmed).DueAt)
	require.Equal(t, ids[7], b.last(EventTimerArmed).JobID)
	for i := 0; i < 7; i++ {
		select {
		case <-delivered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d jobs delivered", i)
		}
	}
}

// TestObserveWhileInFlightWake: an ack returns the token and wakes the
// parked head (reason release); updates and deletes of the budget are
// traced; the returned tokens show in the events.
func TestObserveWhileInFlightWake(t *testing.T) {
	b := obsStart(t, false)
	e, ctx := b.engine, context.Background()
	def := protocol.Definition{Allocation: 2, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	_, _, err := e.CreateBudget(ctx, "wif", def, false)
	require.NoError(t, err)
	views, err := e.Enqueue(ctx, obsJobs(3, "q", "wif"), true)
	require.NoError(t, err)
	_, delivered := obsOpen(t, e, "w2", 5)
	b.waitFor(t, "2 dispatched and 1 parked", func() bool {
		return b.count(EventDispatched, "") == 2 && b.count(EventParked, views[2].ID) == 1
	})
	st, err := e.BudgetState(ctx, "wif")
	require.NoError(t, err)
	require.Equal(t, views[2].ID, st.HeadID)
	require.Zero(t, st.HeadAffordableAt, "while_in_flight: no time can be promised")
	require.Zero(t, st.WakeAt)
	v, err := e.GetJob(ctx, views[2].ID)
	require.NoError(t, err)
	require.Equal(t, &protocol.Waiting{Budget: "wif", Cost: 1, Position: 1}, v.Waiting)

	first := <-delivered
	_, err = e.Ack(ctx, []string{first.ID})
	require.NoError(t, err)
	b.waitFor(t, "the parked job woken and dispatched", func() bool { return b.count(EventDispatched, views[2].ID) == 1 })
	ret, ok := b.find(EventReturned, first.ID)
	require.True(t, ok, "no returned event:\n%s", b.dump())
	require.Equal(t, "q", ret.Queue)
	require.InDelta(t, 1, *ret.Tokens, 1e-9)
	w, _ := b.find(EventWoken, views[2].ID)
	require.Equal(t, "release", w.Reason)
	require.Equal(t, "q", w.Queue)
	_, ok = b.find(EventAcked, first.ID)
	require.True(t, ok)

	_, err = e.PatchBudget(ctx, "wif", &protocol.BudgetPatch{})
	require.NoError(t, err)
	b.waitFor(t, "budget_updated", func() bool { return b.count(EventBudgetUpdated, "") == 1 })
	second, third := <-delivered, <-delivered
	_, err = e.Ack(ctx, []string{second.ID, third.ID})
	require.NoError(t, err)
	require.NoError(t, e.DeleteBudget(ctx, "wif"))
	b.waitFor(t, "budget_deleted", func() bool { return b.count(EventBudgetDeleted, "") == 1 })
	m, err := e.Metrics(ctx)
	require.NoError(t, err)
	require.Empty(t, m.Budgets)
	got := m.Queues[0]
	require.EqualValues(t, 3, got.Wait.Count, "one queue-wait observation per dispatch")
	require.EqualValues(t, 3, got.Run.Count, "one run-time observation per ack")
	got.Wait, got.Run = Histogram{}, Histogram{}
	require.Equal(t, QueueMetrics{Queue: "q", Enqueued: 3, Dispatched: 3, Acked: 3}, got)
}

// TestObserveTimerEventsCarryThePoolLevel: timer_armed, timer_fired and
// timer_cancelled all report the pool level at the moment of the event,
// as every other budget event does.
func TestObserveTimerEventsCarryThePoolLevel(t *testing.T) {
	a, _, _, _, _ := obsHooksActor()
	sub := a.tracer.Subscribe(16)
	defer sub.Close()
	a.out.trace = a.tracer.on()
	a.b.traceTimer(&a.out, atMs(1000), EventTimerArmed, 1500)
	a.b.traceTimer(&a.out, atMs(1500), EventTimerFired, 1500)
	a.b.traceTimer(&a.out, atMs(1200), EventTimerCancelled, 1500)
	applyStep(&a.out, nopShell{}, a.tracer)
	for _, kind := range []EventKind{EventTimerArmed, EventTimerFired, EventTimerCancelled} {
		e := <-sub.C
		require.Equal(t, kind, e.Kind)
		require.NotNil(t, e.Tokens, "%s carries no pool level", kind)
		require.InDelta(t, 10, *e.Tokens, 1e-9, "%s", kind)
	}
}
