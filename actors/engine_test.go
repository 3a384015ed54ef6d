package actors

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// recordingOutbox commits nothing and records what the engine asks for.
type recordingOutbox struct {
	persisted int
	scheduled map[string]uint64
	toBudgets []budgetMsg
	cron      *cronSchedule
	cronFolds []cronFoldCall
}

func (o *recordingOutbox) persist(b *persistence.Batch, done func(error)) {
	o.persisted++
	if done != nil {
		done(nil)
	}
}

// toSelf runs a commit's continuation at once, as the commit itself was.
func (o *recordingOutbox) toSelf(m queueMsg) {
	if d, ok := m.(*commitDone); ok {
		d.then(0, d.err)
	}
}
func (o *recordingOutbox) toBudget(_ string, m budgetMsg) { o.toBudgets = append(o.toBudgets, m) }
func (o *recordingOutbox) spawnBudget(protocol.Budget)    {}
func (o *recordingOutbox) stopBudget(string)              {}
func (o *recordingOutbox) schedule(id string, at uint64) {
	o.scheduled[id] = at
}
func (o *recordingOutbox) unschedule(id string)    { delete(o.scheduled, id) }
func (o *recordingOutbox) clearSchedule()          {}
func (o *recordingOutbox) queuesChanged()          {}
func (o *recordingOutbox) scheduleCron(s CronSlot) { o.crons().put(s.Group, s.Entry, s.Slot) }
func (o *recordingOutbox) clearCrons()             { o.crons().clear() }
func (o *recordingOutbox) foldCron(s CronSlot, job *protocol.NewJob) {
	o.cronFolds = append(o.cronFolds, cronFoldCall{s, job})
}

// cronFoldCall is a batched firing handed to the outbox for planning.
type cronFoldCall struct {
	slot CronSlot
	job  *protocol.NewJob
}

// crons is the recorded cron schedule (made on first use: some tests build
// the outbox by hand).
func (o *recordingOutbox) crons() *cronSchedule {
	if o.cron == nil {
		o.cron = newCronSchedule()
	}
	return o.cron
}

func testEngine(cfg EngineConfig) (*queueCore, *recordingOutbox) {
	out := &recordingOutbox{scheduled: map[string]uint64{}, cron: newCronSchedule()}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return newQueueCore(cfg.WithDefaults(), out, log, newConsumedSet(), NewTracer()), out
}

func TestBackoffFormula(t *testing.T) {
	e, _ := testEngine(EngineConfig{DefaultBackoff: protocol.Backoff{Exponent: 4, BaseMs: 15000, JitterMs: 30000}, Random: func() float64 { return 0.5 }})
	cases := []struct {
		attempts uint32
		backoff  *protocol.Backoff
		want     uint64
	}{
		{1, nil, 1000 + 15000 + 15000},  // 1^4 s + base + 0.5*30 s*1
		{3, nil, 81000 + 15000 + 45000}, // 3^4 s + base + 0.5*30 s*3
		{2, &protocol.Backoff{Exponent: 0, BaseMs: 300, JitterMs: 0}, 1300},
		{2, &protocol.Backoff{Exponent: 1.5, BaseMs: 0, JitterMs: 100}, 2828 + 100}, // floor(2^1.5*1000 + 0.5*100*2)
	}
	for _, c := range cases {
		j := &protocol.Job{Attempts: c.attempts, Backoff: c.backoff}
		if got := e.backoff(j); got != c.want {
			t.Errorf("attempts %d backoff %+v: delay %d, want %d", c.attempts, c.backoff, got, c.want)
		}
	}
}

// TestLoadLeavesOutIDsPastTheClock: a stored job whose ID is valid SCRU128
// but dated past the year 6429 (the top bit of its key set, which the
// ready index uses as a hint) is left out of memory like a malformed one,
// rather than dispatched under another key.
func TestLoadLeavesOutIDsPastTheClock(t *testing.T) {
	e, _ := testEngine(EngineConfig{})
	for _, id := range []string{"9zzzzzzzzzzzzzzzzzzzzzzzz", "f5lxx1zz5pnorynqglhzmsp33"} {
		j := &protocol.Job{ID: id, Type: "t", Queue: "q", Status: protocol.StatusReady}
		e.loadJob(0, j, persistence.Ref{}, persistence.NewBatch(false))
	}
	e.loadJob(0, &protocol.Job{ID: testID(1), Type: "t", Queue: "q", Status: protocol.StatusReady}, persistence.Ref{}, persistence.NewBatch(false))
	if n := e.jobs.len(); n != 1 {
		t.Fatalf("%d jobs loaded, want only the one minted in this era", n)
	}
}

// TestReaperRemovesExpiredFinishedJobs checks the reaper deletes retained
// jobs only once purge_at has passed, oldest first, and that their queue
// disappears from /queues with them.
func TestReaperRemovesExpiredFinishedJobs(t *testing.T) {
	e, out := testEngine(EngineConfig{})
	for i, purgeAt := range []uint64{3000, 1000, 2000} {
		j := &protocol.Job{ID: testID(i), Queue: "q", Status: protocol.StatusCompleted, PurgeAt: purgeAt}
		e.loadJob(0, j, persistence.Ref{}, persistence.NewBatch(false))
	}
	if got := e.listQueues(); len(got) != 1 {
		t.Fatalf("queues = %v", got)
	}
	e.reap(999)
	if len(e.terminal) != 3 {
		t.Fatalf("reaped before purge_at: %d left", len(e.terminal))
	}
	e.reap(2000)
	if _, ok := e.terminal[testID(2)]; ok || len(e.terminal) != 1 {
		t.Fatalf("after reap(2000) terminal = %v, want only %s left", e.terminal, testID(0))
	}
	e.reap(5000)
	if len(e.terminal) != 0 || len(e.listQueues()) != 0 {
		t.Fatalf("after reap(5000): terminal %v queues %v", e.terminal, e.listQueues())
	}
	if out.persisted == 0 {
		t.Fatal("reaper persisted nothing")
	}
}

func TestFailureDecisions(t *testing.T) {
	limit := uint32(1)
	e, out := testEngine(EngineConfig{DeadRetention: time.Hour, Random: func() float64 { return 0 }})
	s := &stream{id: 1, prefetch: 10, inFlight: map[string]*entry{}, deliver: func([]protocol.Job) {}}
	e.streams[1] = s
	e.order = append(e.order, s)
	msg := "boom"
	var last any
	reply := func(m any) { last = m }
	run := func(j *protocol.Job, req *protocol.FailureRequest) *protocol.JobView {
		t.Helper()
		en := &entry{jb: j, state: stInFlight, stream: s}
		e.jobs.put(j.ID, en)
		s.inFlight[j.ID] = en
		e.inFlightTotal++
		req.Message = &msg
		e.fail(10_000, &FailJob{ID: j.ID, Req: req}, reply)
		r, ok := last.(*JobResponse)
		if !ok {
			t.Fatalf("reply %T %v", last, last)
		}
		return r.Job
	}
	v := run(&protocol.Job{ID: testID(101), Queue: "q", RetryLimit: &limit, Backoff: &protocol.Backoff{BaseMs: 5}}, &protocol.FailureRequest{})
	if v.Status != protocol.StatusScheduled || v.ReadyAt != 10_000+1000+5 || v.Attempts != 1 || out.scheduled[testID(101)] != v.ReadyAt {
		t.Fatalf("first failure: %+v", v)
	}
	v = run(&protocol.Job{ID: testID(102), Queue: "q", RetryLimit: &limit, Attempts: 1}, &protocol.FailureRequest{})
	if v.Status != protocol.StatusDead || v.PurgeAt != 10_000+3_600_000 {
		t.Fatalf("retries exhausted: %+v", v)
	}
	past := uint64(5)
	v = run(&protocol.Job{ID: testID(103), Queue: "q", RetryLimit: &limit, Attempts: 5}, &protocol.FailureRequest{RetryAt: &past})
	if v.Status != protocol.StatusScheduled || v.ReadyAt != 5 {
		t.Fatalf("retry_at beats an exhausted limit: %+v", v)
	}
	kill := true
	v = run(&protocol.Job{ID: testID(104), Queue: "q"}, &protocol.FailureRequest{Kill: &kill, RetryAt: &past})
	if v.Status != protocol.StatusDead {
		t.Fatalf("kill: %+v", v)
	}
	if e.inFlightTotal != 0 || len(s.inFlight) != 0 {
		t.Fatalf("failed jobs still in flight: %d / %d", e.inFlightTotal, len(s.inFlight))
	}
}

// TestRebindWaitsForReservation: a rebinding that arrives while the job is
// gathering its budget holds is answered once the reservation has ended,
// and applies to the parked job.
// reservingJob enqueues one job of the given priority bound to budget "b"
// (while_in_flight, allocation 1) and opens a stream, so the job is
// reserving; replies collects every answer of the engine.
func reservingJob(e *queueCore, priority uint16) (id string, replies *[]any, reply func(any)) {
	def := protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	e.loadBudget(protocol.Budget{Key: "b", Allocation: def.Allocation, Strategy: def.Strategy})
	replies = new([]any)
	reply = func(m any) { *replies = append(*replies, m) }
	e.enqueue(0, &EnqueueJobs{Jobs: []*protocol.NewJob{{
		Job:      protocol.Job{Type: "t", Queue: "q", Priority: priority, Payload: []byte("1"), Budgets: []protocol.Binding{{Key: "b", Cost: 1}}},
		Bindings: []protocol.NewBinding{{Key: "b", Cost: 1}},
	}}}, reply)
	id = (*replies)[0].(*EnqueueJobsResponse).Jobs[0].ID
	e.openStream(0, &OpenStream{Prefetch: 1, Deliver: func([]protocol.Job) {}}, reply)
	return id, replies, reply
}

func TestRebindWaitsForReservation(t *testing.T) {
	e, out := testEngine(EngineConfig{})
	id, rp, reply := reservingJob(e, 0)
	req := out.toBudgets[len(out.toBudgets)-1].(*ReserveRequest)
	if e.jobs.get(id).state != stReserving {
		t.Fatalf("job state %d, want reserving", e.jobs.get(id).state)
	}
	n := len(*rp)
	e.rebindJob(0, &RebindJob{ID: id, Op: RebindClear}, reply)
	if len(*rp) != n {
		t.Fatalf("rebinding answered while the job was reserving: %v", (*rp)[n:])
	}
	e.onReserveResponse(0, &ReserveResponse{Key: "b", JobID: id, Granted: false, entry: req.entry, epoch: e.epoch})
	if len(*rp) != n+1 {
		t.Fatalf("rebinding not answered after the reservation ended (%d replies)", len(*rp)-n)
	}
	v, ok := (*rp)[n].(*JobResponse)
	if !ok || len(v.Job.Budgets) != 0 {
		t.Fatalf("reply %#v, want the job with no bindings", (*rp)[n])
	}
	if en := e.jobs.get(id); en.state == stParked {
		t.Fatal("an unbudgeted job is still parked")
	}
}

// TestUnparkNamesThePriorityParkedWith: a job's priority is patched while
// it reserves; the budget refuses and parks it with the priority it asked
// with. Removing it later must name that priority, by which the budget
// finds it in its list, not the patched one.
func TestUnparkNamesThePriorityParkedWith(t *testing.T) {
	e, out := testEngine(EngineConfig{})
	id, _, reply := reservingJob(e, 5)
	req, ok := out.toBudgets[len(out.toBudgets)-1].(*ReserveRequest)
	if !ok || req.Job.Priority != 5 {
		t.Fatalf("last budget message %#v, want a reservation with priority 5", out.toBudgets[len(out.toBudgets)-1])
	}
	patch := &protocol.JobPatch{}
	patch.Priority.Present, patch.Priority.Value = true, 9
	e.patchJobs(0, &PatchJobs{IDs: []string{id}, Patch: patch, Single: true}, reply)
	e.onReserveResponse(0, &ReserveResponse{Key: "b", JobID: id, Priority: req.Job.Priority, Granted: false, entry: req.entry, epoch: e.epoch})
	if en := e.jobs.get(id); en.state != stParked || en.look().Priority != 9 {
		t.Fatalf("job %s priority %d, want parked with the patched priority 9", modelStateName(en.state), en.look().Priority)
	}
	out.toBudgets = nil
	e.deleteJob(0, id, reply)
	for _, m := range out.toBudgets {
		if u, ok := m.(*UnparkJob); ok {
			if u.Priority != 5 {
				t.Fatalf("unpark names priority %d, the job parked with 5", u.Priority)
			}
			return
		}
	}
	t.Fatalf("no unpark sent: %#v", out.toBudgets)
}

// testID is a job ID of the minted form (25 base-36 digits) for job n of a
// test; the engine indexes IDs by their value.
func testID(n int) string { return fmt.Sprintf("%025d", n) }
