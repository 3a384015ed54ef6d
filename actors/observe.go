package actors

// Observability: the trace events the budget and queue actors emit at each
// step of dispatch, the filters and drop accounting of trace subscriptions,
// the questions about a parked job and a budget's state (the budget answers
// them: budget_reads.go), and the counters the metrics endpoint gathers from
// the actors on scrape.
//
// Nothing here takes a lock or allocates on the dispatch path while nobody
// subscribes to the tracer: a queue trace hook returns after one atomic
// load, a budget's after one flag its step was given
// (BenchmarkObserveHooksOff, TestObserveHooksDoNotAllocate,
// TestBudgetStepDoesNotAllocate), and the counters are plain fields of actor
// state, read by the actor itself when a scrape asks.

import (
	"context"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/protocol"
)

// The traced steps added for observability (see trace.go for the others).
const (
	EventReserveRequested EventKind = "reserve_requested"
	EventReturned         EventKind = "returned" // a dispatched job's tokens came back
	EventUnparked         EventKind = "unparked" // a parked job left (deleted, moved)
	EventBudgetCreated    EventKind = "budget_created"
	EventBudgetUpdated    EventKind = "budget_updated"
	EventBudgetDeleted    EventKind = "budget_deleted"
	EventDropped          EventKind = "dropped" // Count events were lost by a slow reader
)

// ---------------------------------------------------------------- subscriptions

// TraceFilter selects events: each non-empty list must contain the event's
// field (job id, budget key, queue); a queue event of a budgeted job
// matches a budget it is bound to. The zero filter selects everything.
type TraceFilter struct {
	Jobs    []string
	Budgets []string
	Queues  []string
}

func (f *TraceFilter) match(e *Event) bool {
	if e.Kind == EventDropped {
		return true
	}
	return f == nil || (inList(f.Jobs, e.JobID) && f.matchBudget(e) && inList(f.Queues, e.Queue))
}

// matchBudget: an event of a budget, or a queue event of a job bound to it.
func (f *TraceFilter) matchBudget(e *Event) bool {
	if len(f.Budgets) == 0 || inList(f.Budgets, e.Budget) {
		return true
	}
	for _, b := range e.Budgets {
		if inList(f.Budgets, b) {
			return true
		}
	}
	return false
}

// bindingKeys lists a job's budget keys (nil for an unbudgeted job).
func bindingKeys(bs []protocol.Binding) []string {
	if len(bs) == 0 {
		return nil
	}
	keys := make([]string, len(bs))
	for i, b := range bs {
		keys[i] = b.Key
	}
	return keys
}

func inList(list []string, v string) bool {
	if len(list) == 0 {
		return true
	}
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// SubscribeFiltered starts a subscription with a buffer of n events that
// receives only the events f selects.
func (t *Tracer) SubscribeFiltered(n int, f TraceFilter) *Subscription {
	s := &Subscription{C: make(chan Event, n), t: t}
	if len(f.Jobs)+len(f.Budgets)+len(f.Queues) > 0 {
		s.filter = &f
	}
	t.mu.Lock()
	t.subs[s] = struct{}{}
	t.active.Add(1)
	t.mu.Unlock()
	return s
}

// deliver queues e without ever blocking: when the buffer is full the event
// is lost and counted. The next event that fits is preceded by a "dropped"
// event carrying the count, so a reader knows where the gap is. It is called
// with t.mu held.
func (s *Subscription) deliver(e Event) {
	if n := s.pending.Swap(0); n > 0 {
		select {
		case s.C <- Event{Time: e.Time, Kind: EventDropped, Actor: "tracer", Count: n}:
		default:
			s.pending.Add(n)
			s.lose()
			return
		}
	}
	select {
	case s.C <- e:
	default:
		s.lose()
	}
}

func (s *Subscription) lose() {
	s.dropped.Add(1)
	s.pending.Add(1)
}

// TakeDropped returns the number of events lost since the last "dropped"
// event and resets it; a reader that caught up calls it to announce a gap
// no later event has announced yet.
func (s *Subscription) TakeDropped() uint64 { return s.pending.Swap(0) }

// Subscribers returns the number of open subscriptions.
func (t *Tracer) Subscribers() int { return int(t.active.Load()) }

// ---------------------------------------------------------------- budget trace hooks

// The budget's trace events, written by its step into the step's output
// (stepOutput.events) only when the caller asked for them (out.trace); the
// shell emits them. Without a listener each hook returns at once, allocating
// nothing.

// budgetObs is what a budget keeps only to trace: the queue and cost of the
// jobs it holds, has in flight or has parked (learned while someone listens;
// entries are removed whether or not anyone listens, so the map never grows
// without a subscriber), and the head job its wake timer was armed for.
type budgetObs struct {
	jobs     map[string]JobRef
	armedFor JobRef
}

func (b *budgetCore) remember(job JobRef) {
	if b.obs.jobs == nil {
		b.obs.jobs = make(map[string]JobRef)
	}
	b.obs.jobs[job.ID] = job
}

func (b *budgetCore) recall(id string) JobRef {
	if r, ok := b.obs.jobs[id]; ok {
		return r
	}
	return JobRef{ID: id}
}

func (b *budgetCore) forget(id string) {
	if len(b.obs.jobs) > 0 {
		delete(b.obs.jobs, id)
	}
}

// event adds e, as this budget's, to the step's trace events.
func (b *budgetCore) event(out *stepOutput, e Event) {
	e.Actor, e.Budget = b.name, b.key
	out.events = append(out.events, e)
}

// traceRequested traces reserve_requested and returns the tokens before the
// reservation.
func (b *budgetCore) traceRequested(out *stepOutput, now uint64, job JobRef) float64 {
	if !out.trace {
		return 0
	}
	before := b.tokens(now)
	b.event(out, Event{Kind: EventReserveRequested, JobID: job.ID, Queue: job.Queue, Cost: job.Cost, Tokens: tokensPtr(before)})
	return before
}

// traceReserved traces reserve_granted, or reserve_refused and parked with
// the job's place in line.
func (b *budgetCore) traceReserved(out *stepOutput, now uint64, job JobRef, granted bool, before float64) {
	if !out.trace {
		return
	}
	b.remember(job)
	kind := EventReserveRefused
	if granted {
		kind = EventReserveGranted
	}
	after := tokensPtr(b.tokens(now))
	b.event(out, Event{Kind: kind, JobID: job.ID, Queue: job.Queue, Cost: job.Cost, TokensBefore: tokensPtr(before), Tokens: after})
	if !granted {
		pos, _, _, _ := b.position(job.ID, job.Priority)
		b.event(out, Event{Kind: EventParked, JobID: job.ID, Queue: job.Queue, Cost: job.Cost, Tokens: after, Position: pos})
	}
}

// traceJob traces commit, release, returned or unparked for one job. Only a
// commit keeps the job remembered (its tokens come back later).
func (b *budgetCore) traceJob(out *stepOutput, now uint64, kind EventKind, jobID string) {
	if !out.trace {
		if kind != EventCommit {
			b.forget(jobID)
		}
		return
	}
	r := b.recall(jobID)
	if kind != EventCommit {
		b.forget(jobID)
	}
	b.event(out, Event{Kind: kind, JobID: jobID, Queue: r.Queue, Cost: r.Cost, Tokens: tokensPtr(b.tokens(now))})
}

// traceWoken traces one woken event per job handed back to the queue.
func (b *budgetCore) traceWoken(out *stepOutput, now uint64, ids []string, reason string) {
	if !out.trace {
		if len(b.obs.jobs) > 0 {
			for _, id := range ids {
				delete(b.obs.jobs, id)
			}
		}
		return
	}
	tokens := tokensPtr(b.tokens(now))
	for _, id := range ids {
		r := b.recall(id)
		b.forget(id)
		b.event(out, Event{Kind: EventWoken, JobID: id, Queue: r.Queue, Cost: r.Cost, Reason: reason, Tokens: tokens})
	}
}

// traceTimer traces timer_armed, timer_fired or timer_cancelled with the due
// time (Unix ms), the head job the timer was armed for and the pool level
// at now.
func (b *budgetCore) traceTimer(out *stepOutput, now uint64, kind EventKind, due uint64) {
	if !out.trace {
		if kind == EventTimerArmed {
			b.obs.armedFor = JobRef{}
		}
		return
	}
	if kind == EventTimerArmed {
		b.obs.armedFor, _ = b.head()
	}
	h := b.obs.armedFor
	b.event(out, Event{Kind: kind, JobID: h.ID, Queue: h.Queue, Cost: h.Cost, DueAt: due, Tokens: tokensPtr(b.tokens(now))})
}

// traceBudget traces budget_created or budget_updated with the pool level.
func (b *budgetCore) traceBudget(out *stepOutput, now uint64, kind EventKind) {
	if !out.trace {
		return
	}
	b.event(out, Event{Kind: kind, Tokens: tokensPtr(b.tokens(now))})
}

// budgetDeleted emits budget_deleted from the queue actor.
func (t *Tracer) budgetDeleted(key string) {
	if !t.on() {
		return
	}
	t.emit(Event{Kind: EventBudgetDeleted, Actor: "queue", Budget: key})
}

// ---------------------------------------------------------------- queue actor hooks

// engineObs holds the engine's counters for the metrics endpoint.
type engineObs struct {
	queues map[string]*queueCounters
}

type queueCounters struct {
	enqueued, dispatched, acked, failed uint64
	// wait: ready (the later of ready_at and the enqueue) to dispatched;
	// run: dispatched to success or failure.
	wait, run      Histogram
	folded, sealed uint64 // batched jobs (batch_core.go)
	timedOut       uint64 // jobs failed for their timeout (timeouts.go)
}

func (e *queueCore) counters(queue string) *queueCounters {
	c := e.obs.queues[queue]
	if c == nil {
		if e.obs.queues == nil {
			e.obs.queues = make(map[string]*queueCounters)
		}
		c = &queueCounters{}
		e.obs.queues[queue] = c
	}
	return c
}

func (e *queueCore) observeEnqueued(j *protocol.Job) { e.counters(j.Queue).enqueued++ }

func (e *queueCore) observeDispatched(now uint64, en *entry, s *stream) {
	c := e.counters(en.full().Queue)
	c.dispatched++
	c.wait.observeMs(elapsedMs(now, max(en.full().ReadyAt, protocol.IDTimeMs(en.full().ID))))
	if !e.tracer.on() {
		return
	}
	e.tracer.emit(Event{Kind: EventDispatched, Actor: "queue", JobID: en.full().ID, Queue: en.full().Queue, Budgets: bindingKeys(en.full().Budgets), Stream: s.id, WorkerID: s.workerID})
}

func (e *queueCore) observeAcked(now uint64, en *entry) {
	c := e.counters(en.full().Queue)
	c.acked++
	c.run.observeMs(elapsedMs(now, en.full().DequeuedAt))
	e.tracer.job(EventAcked, en.full(), 0)
}

func (e *queueCore) observeFailed(now uint64, j *protocol.Job) {
	c := e.counters(j.Queue)
	c.failed++
	c.run.observeMs(elapsedMs(now, j.DequeuedAt))
	e.tracer.job(EventFailed, j, 0)
}

// QueueMetrics counts one queue's jobs by visible status (a parked job is
// ready, and also counted in Parked) and its traffic since the start.
type QueueMetrics struct {
	Queue                               string
	Ready, Parked, Scheduled, InFlight  int
	Completed, Dead                     int
	Enqueued, Dispatched, Acked, Failed uint64
	// Wait: from ready to dispatched; Run: from dispatched to success or
	// failure (since the server started).
	Wait, Run Histogram
	// Folded counts enqueues folded into a pending batched job, Sealed
	// the batches that sealed (SPEC §8.2).
	Folded, Sealed uint64
	// TimedOut counts jobs the server failed for their timeout (SPEC §10.5).
	TimedOut uint64
}

// metrics answers a MetricsRequest from the per-queue counts kept as jobs
// move (queue_states.go).
func (e *queueCore) metrics(now uint64, m *MetricsRequest) *metricsSnapshot {
	per := e.queueMetrics(now)
	for q, c := range e.obs.queues {
		m := metricsOf(per, q)
		m.Enqueued, m.Dispatched, m.Acked, m.Failed = c.enqueued, c.dispatched, c.acked, c.failed
		m.Wait, m.Run = c.wait, c.run
		m.Folded, m.Sealed = c.folded, c.sealed
		m.TimedOut = c.timedOut
	}
	snap := &metricsSnapshot{Streams: len(e.streams)}
	for _, m := range per {
		snap.Queues = append(snap.Queues, *m)
	}
	sort.Slice(snap.Queues, func(i, j int) bool { return snap.Queues[i].Queue < snap.Queues[j].Queue })
	snap.Budgets, snap.BudgetTotals = e.budgetSeries(now, m.BudgetSeries) // budget_metrics.go
	return snap
}

// onJobWaiting answers a JobWaitingRequest: a job parked on a budget is
// asked about by that budget actor, which answers the original sender; any
// other job waits on nothing.
func (a *queueActor) onJobWaiting(ctx actor.Context, m *JobWaitingRequest) {
	var cold entryScratch
	en := a.eng.jobs.lookID(m.ID, &cold)
	if en == nil || en.state != stParked {
		ctx.Respond(&JobWaitingResponse{})
		return
	}
	l := a.budgets[en.parkedKey()]
	if l == nil {
		ctx.Respond(&JobWaitingResponse{})
		return
	}
	ctx.RequestWithCustomSender(l.pid, &parkedJobQuery{JobID: m.ID, Priority: en.parkedPrio}, ctx.Sender())
}

// ---------------------------------------------------------------- messages

// JobWaitingRequest asks where a ready job waits. The queue actor passes it
// on to the budget the job is parked on, which answers.
type JobWaitingRequest struct{ ID string }

// JobWaitingResponse answers it; Waiting is nil when the job is not parked.
type JobWaitingResponse struct{ Waiting *protocol.Waiting }

// MetricsRequest asks the queue actor for job counts, traffic counters and
// the budget keys.
type MetricsRequest struct {
	// BudgetSeries bounds the budgets whose state is gathered to those
	// with the most unfinished jobs bound (0: every budget).
	BudgetSeries int
}

// metricsSnapshot answers a MetricsRequest.
type metricsSnapshot struct {
	Queues       []QueueMetrics
	Budgets      []string
	BudgetTotals BudgetTotals
	Streams      int
}

// parkedJobQuery is JobWaitingRequest as the budget actor receives it.
type parkedJobQuery struct {
	JobID    string
	Priority uint16
}

func (*JobWaitingRequest) isQueueMsg() {}
func (*MetricsRequest) isQueueMsg()    {}
func (*parkedJobQuery) isBudgetMsg()   {}

// ---------------------------------------------------------------- facade

// waitingTimeout bounds the question GetJob asks the actors about a parked
// job; without an answer the job is shown without its waiting object.
const waitingTimeout = 5 * time.Second

// addWaiting adds the waiting object to the view of a ready budgeted job
// that is parked on a budget.
func (e *Engine) addWaiting(ctx context.Context, j *protocol.Job, v *protocol.JobView) {
	if v.Status != protocol.StatusReady || len(j.Budgets) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, waitingTimeout)
	defer cancel()
	res, err := e.call(ctx, &JobWaitingRequest{ID: j.ID})
	if err != nil {
		return
	}
	if r, ok := res.(*JobWaitingResponse); ok {
		v.Waiting = r.Waiting
	}
}

// Metrics is what the metrics endpoint reports, gathered from the actors
// when asked.
type Metrics struct {
	Queues  []QueueMetrics // by queue name
	Budgets []BudgetState  // by key (with a bound: only the busiest, see MetricsRequest)
	// BudgetTotals counts over every budget, whatever the bound.
	BudgetTotals BudgetTotals
	Streams      int // open take streams
	Subscribers  int // open trace subscriptions
}

// Metrics asks the queue actor for its counts and every budget actor for
// its state (all budgets at once, then waits for each answer). A budget
// deleted in between is left out.
func (e *Engine) Metrics(ctx context.Context) (*Metrics, error) {
	return e.MetricsBounded(ctx, 0)
}

// MetricsBounded is Metrics with the per-budget states bounded to the
// budgetSeries budgets with the most unfinished jobs bound (0: all).
func (e *Engine) MetricsBounded(ctx context.Context, budgetSeries int) (*Metrics, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &MetricsRequest{BudgetSeries: budgetSeries})
	if err != nil {
		return nil, err
	}
	snap := res.(*metricsSnapshot)
	states, err := e.budgetStates(ctx, snap.Budgets)
	if err != nil {
		return nil, err
	}
	m := &Metrics{Queues: snap.Queues, Budgets: states, BudgetTotals: snap.BudgetTotals, Streams: snap.Streams, Subscribers: e.tracer.Subscribers()}
	return m, nil
}
