package actors

import (
	"testing"
	"time"
	"unique"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

var allStatuses = []protocol.Status{protocol.StatusScheduled, protocol.StatusReady, protocol.StatusInFlight,
	protocol.StatusCompleted, protocol.StatusDead}

// checkStatusCounts compares the status index with a full walk of the
// engine's records, at several clock values (no scheduler runs here, so
// scheduled jobs past ready_at stay unpromoted: they must count as ready).
func checkStatusCounts(t *testing.T, e *queueCore, step string, nows ...uint64) {
	t.Helper()
	byType := map[string]int{}
	for en := range e.jobs.all() {
		byType[en.look().Type]++
	}
	for _, tj := range e.terminal {
		byType[tj.meta.Type]++
	}
	indexed := map[string]int{}
	for _, types := range e.byQueue {
		for typ, s := range types {
			indexed[typ] += s.Len()
		}
	}
	e.jobs.cold.eachKind(func(kind unique.Handle[jobKind], n int) { // in no ID index (coldjobs.go)
		indexed[kind.Value().typ] += n
	})
	if len(byType) != len(indexed) {
		t.Fatalf("%s: %d types indexed, %d stored", step, len(indexed), len(byType))
	}
	for typ, n := range byType {
		if indexed[typ] != n {
			t.Fatalf("%s: type %q indexes hold %d jobs, want %d", step, typ, indexed[typ], n)
		}
	}
	byKey := map[string]int{}
	for en := range e.jobs.all() {
		for _, b := range en.look().Budgets {
			byKey[b.Key]++
		}
	}
	for _, tj := range e.terminal {
		for _, b := range tj.meta.Budgets {
			byKey[b.Key]++
		}
	}
	if len(byKey) != len(e.byKey) {
		t.Fatalf("%s: %d budget keys indexed, %d bound", step, len(e.byKey), len(byKey))
	}
	for k, n := range byKey {
		if tr := e.byKey[k]; tr == nil || tr.Len() != n {
			t.Fatalf("%s: budget key %q index does not hold its %d jobs", step, k, n)
		}
	}
	for _, now := range nows {
		want := map[protocol.Status]uint64{}
		for en := range e.jobs.all() {
			want[en.look().VisibleStatus(now)]++
		}
		for _, tj := range e.terminal {
			if tj.purgeAt == 0 || tj.purgeAt > now {
				want[tj.meta.Status]++
			}
		}
		var total uint64
		for _, st := range allStatuses {
			total += want[st]
			if got := e.statusCount(now, []protocol.Status{st}); got != want[st] {
				t.Fatalf("%s, now=%d: count status=%s = %d, full scan %d", step, now, st, got, want[st])
			}
		}
		if got := e.statusCount(now, allStatuses); got != total {
			t.Fatalf("%s, now=%d: all statuses = %d, full scan %d", step, now, got, total)
		}
	}
}

// TestStatusIndexMatchesFullScan drives jobs through load, enqueue,
// dispatch, failure (rescheduled, also into the past), ack, death, patch,
// promotion, deletion, reaping and reset, checking the status counts after
// each step.
func TestStatusIndexMatchesFullScan(t *testing.T) {
	e, _ := testEngine(EngineConfig{DeadRetention: time.Hour, CompletedRetention: time.Hour, Random: func() float64 { return 0 }})
	s := &stream{id: 1, prefetch: 100, inFlight: map[string]*entry{}, deliver: func([]protocol.Job) {}}
	e.streams[1] = s
	e.order = append(e.order, s)
	reply := func(any) {}
	nows := []uint64{0, 999, 1000, 1500, 5000, 10_000, 1 << 40}
	const now = 1000

	b := persistence.NewBatch(false)
	e.loadJob(now, &protocol.Job{ID: testID(1), Queue: "q", Status: protocol.StatusScheduled, ReadyAt: 3000}, persistence.Ref{}, b)
	e.loadJob(now, &protocol.Job{ID: testID(2), Queue: "q", Status: protocol.StatusInFlight, ReadyAt: 10}, persistence.Ref{}, b)
	e.loadJob(now, &protocol.Job{ID: testID(3), Queue: "q", Status: protocol.StatusCompleted, PurgeAt: 4000}, persistence.Ref{}, b)
	e.loadJob(now, &protocol.Job{ID: testID(4), Queue: "q", Status: protocol.StatusDead, PurgeAt: 20_000}, persistence.Ref{}, b)
	e.finishLoad()
	checkStatusCounts(t, e, "load", nows...)

	var jobs []*protocol.NewJob
	for i := 0; i < 12; i++ {
		nj := &protocol.NewJob{Job: protocol.Job{Type: []string{"t", "u"}[i%2], Queue: "q", Payload: []byte("1")}}
		if i%3 == 0 { // scheduled: no reservation starts (no budget actors here)
			nj.Job.Budgets = []protocol.Binding{{Key: "k1", Cost: 1}}
		}
		if i%3 == 0 {
			nj.Job.ReadyAt, nj.ReadyAtSet = now+uint64(i)*500, true
		}
		jobs = append(jobs, nj)
	}
	var views []*protocol.JobView
	e.enqueue(now, &EnqueueJobs{Jobs: jobs, Bulk: true}, func(m any) { views = m.(*EnqueueJobsResponse).Jobs })
	checkStatusCounts(t, e, "enqueue", nows...)

	// Dispatch the ready ones by hand, as TestFailureDecisions does.
	var inflight []string
	for _, v := range views {
		en := e.jobs.get(v.ID)
		if en.state == stReady {
			e.detach(en)
			e.dispatch(now, en, s)
		}
		if en.state == stInFlight {
			inflight = append(inflight, v.ID)
		}
	}
	s.outbox = nil
	if len(inflight) < 7 {
		t.Fatalf("only %d jobs in flight", len(inflight))
	}
	checkStatusCounts(t, e, "dispatch", nows...)

	msg := "boom"
	past, future := uint64(500), uint64(8000)
	kill := true
	e.fail(now, &FailJob{ID: inflight[0], Req: &protocol.FailureRequest{Message: &msg, RetryAt: &past}}, reply)
	e.fail(now, &FailJob{ID: inflight[1], Req: &protocol.FailureRequest{Message: &msg, RetryAt: &future}}, reply)
	e.fail(now, &FailJob{ID: inflight[2], Req: &protocol.FailureRequest{Message: &msg, Kill: &kill}}, reply)
	e.fail(now, &FailJob{ID: inflight[3], Req: &protocol.FailureRequest{Message: &msg}}, reply)
	e.ack(now, []string{inflight[4]}, reply)
	checkStatusCounts(t, e, "fail/ack", nows...)

	p, err := protocol.DecodeJobPatch(protocol.JSON, []byte(`{"ready_at":9000,"priority":3}`))
	if err != nil {
		t.Fatal(err)
	}
	e.patchJobs(now, &PatchJobs{IDs: []string{views[0].ID, views[3].ID, inflight[1], inflight[5], testID(2)}, Patch: p}, reply)
	checkStatusCounts(t, e, "patch ready_at", nows...)
	p, _ = protocol.DecodeJobPatch(protocol.JSON, []byte(`{"ready_at":null}`))
	e.patchJobs(now, &PatchJobs{IDs: []string{views[6].ID, inflight[1]}, Patch: p}, reply)
	checkStatusCounts(t, e, "patch ready_at null", nows...)

	for _, v := range views {
		if en := e.jobs.get(v.ID); en != nil {
			e.applyBindings(en, []protocol.Binding{{Key: "k2", Cost: 1}, {Key: "k3", Cost: 2}})
			break
		}
	}
	checkStatusCounts(t, e, "rebind", nows...)

	e.onJobsDue(2500, []string{views[3].ID, views[9].ID, inflight[0], testID(1)})
	checkStatusCounts(t, e, "promote", nows...)

	for _, id := range []string{views[9].ID, inflight[2], testID(1), testID(3), inflight[6], "nope"} {
		e.deleteJob(now, id, reply)
	}
	checkStatusCounts(t, e, "delete", nows...)
	e.reap(25_000)
	checkStatusCounts(t, e, "reap", nows...)

	e.closeStream(now, 1, reply)
	checkStatusCounts(t, e, "disconnect", nows...)
	e.reset(now, reply)
	checkStatusCounts(t, e, "reset", nows...)
	if e.sched.Len() != 0 || e.completedTotal != 0 || e.deadTotal != 0 {
		t.Fatalf("reset left %d scheduled, %d completed, %d dead", e.sched.Len(), e.completedTotal, e.deadTotal)
	}
}
