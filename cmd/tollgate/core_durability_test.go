package main

// Core black-box tests of crash recovery (SIGKILL) and graceful shutdown
// (SIGTERM): acknowledged writes survive, in-flight jobs return to ready.

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// §3.9, §7, §2.5: after SIGKILL and a restart on the same root dir, every
// unacked job is delivered again exactly once and no acked job comes back.
func TestCoreCrashRecovery(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	const n = 200
	var bodies []map[string]any
	for i := 0; i < n; i++ {
		bodies = append(bodies, apitest.SimpleJob("crash", map[string]any{"i": i}))
	}
	var jobs []apitest.Job
	for i := 0; i < n; i += 50 {
		jobs = append(jobs, apitest.Bulk(t, s.URL, bodies[i:i+50])...)
	}
	// A scheduled job and a retained completed one survive as well.
	sched := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "crash-later", "payload": 1, "ready_at": apitest.NowMS() + 3_600_000})
	kept, keptStream := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "crash-kept", "payload": 1,
		"retention": map[string]any{"completed_ms": 3_600_000}})
	apitest.Ack(t, s.URL, kept.ID)
	keptStream.Close()

	// A failed (backing off) job and a dead one survive with their state.
	failed, fs := coreTakeOne(t, s.URL, apitest.SimpleJob("crash-failed", 1))
	fr := apitest.Fail(t, s.URL, failed.ID, map[string]any{"message": "x", "retry_at": apitest.NowMS() + 3_600_000})
	apitest.RequireStatus(t, fr, http.StatusOK)
	failedView := fr.Job(t)
	fs.Close()
	dead, ds := coreTakeOne(t, s.URL, apitest.SimpleJob("crash-dead", 1))
	dr := apitest.Fail(t, s.URL, dead.ID, map[string]any{"message": "x", "kill": true})
	apitest.RequireStatus(t, dr, http.StatusOK)
	deadView := dr.Job(t)
	ds.Close()

	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=crash&prefetch=60"})
	taken := st.Jobs(t, 60, 30*time.Second)
	require.Equal(t, apitest.IDs(jobs[:60]), apitest.IDs(taken))

	acked := map[string]bool{}
	for _, j := range taken[:15] { // one by one
		apitest.Ack(t, s.URL, j.ID)
		acked[j.ID] = true
	}
	var bulk []string
	for _, j := range taken[15:40] { // in bulk
		bulk = append(bulk, j.ID)
		acked[j.ID] = true
	}
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/success", map[string]any{"ids": bulk}))
	// taken[40:60] stay in flight; the stream got refills for the 40 acked.
	refill := st.Jobs(t, 40, 30*time.Second)
	require.Equal(t, apitest.IDs(jobs[60:100]), apitest.IDs(refill))
	inflight := map[string]apitest.Job{}
	for _, j := range append(append([]apitest.Job{}, taken[40:]...), refill...) {
		inflight[j.ID] = j
	}

	keptBefore := apitest.MustGet(t, s.URL, kept.ID)
	s.Kill()
	st.WaitEnd(t, 10*time.Second)
	s.Restart()

	// Before any stream opens: recovered in-flight jobs are ready, attempts
	// and dequeued_at unchanged.
	for _, id := range []string{taken[40].ID, taken[59].ID, refill[0].ID, refill[39].ID} {
		g := apitest.MustGet(t, s.URL, id)
		require.Equal(t, "ready", g.Status, "in-flight job recovered as ready")
		require.Equal(t, uint32(0), g.Attempts)
		require.Equal(t, inflight[id].DequeuedAt, g.DequeuedAt, "dequeued_at kept by recovery")
	}
	for _, id := range []string{taken[0].ID, taken[39].ID} {
		_, found := apitest.Get(t, s.URL, id)
		require.False(t, found, "acked job %s must stay gone", id)
	}
	require.Equal(t, "scheduled", apitest.MustGet(t, s.URL, sched.ID).Status)
	gk := apitest.MustGet(t, s.URL, kept.ID)
	require.Equal(t, "completed", gk.Status)
	require.Equal(t, keptBefore.CompletedAt, gk.CompletedAt)
	require.Equal(t, keptBefore.PurgeAt, gk.PurgeAt)
	gf := apitest.MustGet(t, s.URL, failed.ID)
	require.Equal(t, "scheduled", gf.Status)
	require.Equal(t, uint32(1), gf.Attempts)
	require.Equal(t, failedView.ReadyAt, gf.ReadyAt)
	require.Equal(t, failedView.FailedAt, gf.FailedAt)
	gd := apitest.MustGet(t, s.URL, dead.ID)
	require.Equal(t, "dead", gd.Status)
	require.Equal(t, deadView.PurgeAt, gd.PurgeAt)
	require.Equal(t, []string{"crash", "crash-dead", "crash-failed", "crash-kept", "crash-later"}, apitest.Queues(t, s.URL))

	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=crash&prefetch=0", Accept: apitest.AcceptMsgpack})
	want := n - len(acked)
	got := st2.Jobs(t, want, 60*time.Second)
	st2.NoJobFor(t, time.Second, true)

	seen := map[string]bool{}
	for _, j := range got {
		require.False(t, seen[j.ID], "job %s delivered twice after restart", j.ID)
		seen[j.ID] = true
		require.False(t, acked[j.ID], "acked job %s delivered again after restart", j.ID)
		require.Equal(t, uint32(0), j.Attempts)
	}
	var wantIDs []string
	for _, j := range jobs {
		if !acked[j.ID] {
			wantIDs = append(wantIDs, j.ID)
		}
	}
	require.Equal(t, wantIDs, apitest.IDs(got), "every unacked job once, in (priority, id) order")
	for _, j := range got {
		if i, ok := j.Payload.(map[string]any); ok {
			require.NotNil(t, i["i"], "payload survived")
		} else {
			require.Failf(t, "payload lost", "job %s payload %v", j.ID, j.Payload)
		}
	}
}

// §1.1, §3.4 step 6: SIGTERM ends take streams, returns their jobs to ready
// and exits 0; after a restart they are delivered again.
func TestCoreGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	jobs := apitest.EnqueueN(t, s.URL, "term", 3)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=term&prefetch=2", Accept: apitest.AcceptSSE})
	held := st.Jobs(t, 2, 10*time.Second)
	require.Equal(t, apitest.IDs(jobs[:2]), apitest.IDs(held))
	idle := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=nothing-here"})

	s.Stop() // SIGTERM; fails the test unless the process exits 0 within 30 s
	st.WaitEnd(t, 5*time.Second)
	idle.WaitEnd(t, 5*time.Second)

	s.Restart()
	for i, h := range held {
		g := apitest.MustGet(t, s.URL, h.ID)
		require.Equal(t, "ready", g.Status)
		require.Equal(t, uint32(0), g.Attempts)
		require.Equal(t, held[i].DequeuedAt, g.DequeuedAt, "dequeued_at kept")
	}
	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=term&prefetch=0"})
	require.Equal(t, apitest.IDs(jobs), apitest.IDs(st2.Jobs(t, 3, 20*time.Second)))
	st2.NoJobFor(t, 300*time.Millisecond, true)
}
