package actors

import (
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

func batchedJob(key, payload string) *protocol.NewJob {
	return &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Payload: []byte(payload),
		Batch: &protocol.Batch{Key: key, When: "true", Fold: "$existing + $new"}}}
}

// enqueueAnswer runs one enqueue on the core and returns its answer.
func enqueueAnswer(t *testing.T, e *queueCore, now uint64, m *EnqueueJobs) any {
	t.Helper()
	var got any
	e.enqueue(now, m, func(a any) { got = a })
	if got == nil {
		t.Fatal("enqueue did not answer")
	}
	return got
}

// TestFoldPlanAppliedOnlyWhilePending checks the core's side of a fold: a
// plan that assumes the pending job applies while it is pending; once the
// job was dispatched (sealed), the same plan is answered with the current
// state (no pending job) and nothing changes; a batched enqueue without a
// plan is never applied blind.
func TestFoldPlanAppliedOnlyWhilePending(t *testing.T) {
	e, _ := testEngine(EngineConfig{})
	start := &EnqueueJobs{Jobs: []*protocol.NewJob{batchedJob("k", "[1]")},
		Plan: &foldPlan{Expect: map[string]string{"k": ""}, Items: []foldAction{{Kind: foldStart, IntoIndex: -1}}}}
	res, ok := enqueueAnswer(t, e, 1, start).(*EnqueueJobsResponse)
	if !ok {
		t.Fatal("start answered no jobs")
	}
	p := res.Jobs[0].ID
	if e.pending["k"] != p {
		t.Fatalf("pending %q, want %s", e.pending["k"], p)
	}
	// no plan: the current state comes back instead
	st, ok := enqueueAnswer(t, e, 2, &EnqueueJobs{Jobs: []*protocol.NewJob{batchedJob("k", "[2]")}}).(*foldStale)
	if !ok || st.Pending["k"].ID != p || string(st.Pending["k"].Payload) != "[1]" {
		t.Fatalf("planless batched enqueue answered %#v", st)
	}
	fold := func() *EnqueueJobs {
		return &EnqueueJobs{Jobs: []*protocol.NewJob{batchedJob("k", "[2]")},
			Plan: &foldPlan{Expect: map[string]string{"k": p}, Items: []foldAction{{Kind: foldInto, Into: p, IntoIndex: -1}},
				Payloads: map[string][]byte{p: []byte("[1,2]")}}}
	}
	res = enqueueAnswer(t, e, 3, fold()).(*EnqueueJobsResponse)
	if v := res.Jobs[0]; v.ID != p || !*v.Folded {
		t.Fatalf("fold answered %+v", v)
	}
	if got := string(e.jobs.get(p).look().Payload); got != "[1,2]" {
		t.Fatalf("payload %s", got)
	}
	// dispatch seals: the same kind of plan is now stale
	e.openStream(4, &OpenStream{Prefetch: 1, Deliver: func([]protocol.Job) {}}, func(any) {})
	if e.jobs.get(p).state != stInFlight {
		t.Fatalf("job not dispatched: state %v", e.jobs.get(p).state)
	}
	if _, still := e.pending["k"]; still {
		t.Fatal("a dispatched job is still pending")
	}
	st, ok = enqueueAnswer(t, e, 5, fold()).(*foldStale)
	if !ok || len(st.Pending) != 0 {
		t.Fatalf("plan against a dispatched job answered %#v", st)
	}
	if got := string(e.jobs.get(p).look().Payload); got != "[1,2]" {
		t.Fatalf("a stale plan changed the payload in flight: %s", got)
	}
}
