package main

// Black-box test of the start-up on a backlog (SPEC §3.9): the server serves
// at once and loads its stored jobs in the background.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// §3.9: restarted (SIGKILL) on a backlog, the server takes a plain enqueue
// and a take stream as soon as it answers /health; the stream's first job
// is the lowest (priority, id) of the queue, stored last; the count, which
// waits for the load, counts every job, the new one included. Killed again
// while it may still be loading, it loses nothing.
func TestCoreServesWhileLoading(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	const bulks, per = 20, 1000
	for range bulks {
		jobs := make([]map[string]any, per)
		for i := range jobs {
			jobs[i] = apitest.SimpleJob("backlog", i)
		}
		apitest.Bulk(t, s.URL, jobs)
	}
	urgent := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "backlog", "payload": 1, "priority": 3})
	count := func() int64 {
		return budInt(t, apitest.Object(t, apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/count?queue=backlog", nil), http.StatusOK), "count")
	}

	s.Kill()
	s.Restart() // returns once /health answers
	late := apitest.Enqueue(t, s.URL, apitest.SimpleJob("backlog", "late"))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=backlog&prefetch=50"})
	got := st.Jobs(t, 50, 60*time.Second)
	require.Equal(t, urgent.ID, got[0].ID, "the first job delivered is the queue's lowest (priority, id)")
	for i := 2; i < len(got); i++ {
		require.Less(t, got[i-1].ID, got[i].ID, "the default-priority jobs in ID order")
	}
	st.Close()
	require.Equal(t, int64(bulks*per+2), count())

	s.Kill()
	s.Restart()
	require.Equal(t, int64(bulks*per+2), count(), "nothing lost by a kill during the load")
	require.Equal(t, "ready", apitest.MustGet(t, s.URL, late.ID).Status)
}

// §3.9: a queue of one priority is served while the load goes on. Restarted
// (SIGKILL) on a backlog with one job left in flight, the server's first
// job is that one (ready again, the lowest ID), then the others in ID
// order; acknowledged at once and killed again, perhaps still loading, the
// server brings back every job but those acknowledged, and the next stream
// starts where the first stopped.
func TestCoreDispatchesWhileLoading(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	const bulks, per, taken = 30, 1000, 500
	first := apitest.Enqueue(t, s.URL, apitest.SimpleJob("backlog", "first"))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=backlog&prefetch=1"})
	require.Equal(t, first.ID, st.NextJob(t, 10*time.Second).ID)
	for range bulks {
		jobs := make([]map[string]any, per)
		for i := range jobs {
			jobs[i] = apitest.SimpleJob("backlog", i)
		}
		apitest.Bulk(t, s.URL, jobs)
	}

	s.Kill()
	s.Restart()
	st = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=backlog&prefetch=100"})
	var got []apitest.Job
	for len(got) < taken {
		batch := st.Jobs(t, 100, 60*time.Second)
		apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/success", map[string]any{"ids": apitest.IDs(batch)}))
		got = append(got, batch...)
	}
	require.Equal(t, first.ID, got[0].ID, "the job left in flight comes first")
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1].ID, got[i].ID, "the jobs in ID order")
	}
	st.Close()

	s.Kill()
	s.Restart()
	st = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=backlog&prefetch=10"})
	next := st.Jobs(t, 10, 60*time.Second)
	require.Less(t, got[len(got)-1].ID, next[0].ID, "an acknowledged job came back")
	st.Close()
	count := budInt(t, apitest.Object(t, apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/count?queue=backlog", nil), http.StatusOK), "count")
	require.Equal(t, int64(1+bulks*per-len(got)), count, "every job but the acknowledged ones")
}
