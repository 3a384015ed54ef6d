package main

// Core black-box tests of failure reports, backoff, retry limits, scheduled
// promotion, retention visibility and the server-default flags.

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

const (
	coreWeekMS = 7 * 24 * 3600 * 1000
	// coreLate is the honest upper tolerance for timer-driven deliveries
	// (2 cores, server and tests built with -race).
	coreLate = 3000
)

// coreTakeOne enqueues body on its queue, opens a take stream for that queue
// and returns the delivered job and the stream.
func coreTakeOne(t *testing.T, base string, body map[string]any) (apitest.Job, *apitest.Stream) {
	t.Helper()
	j := apitest.Enqueue(t, base, body)
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=" + body["queue"].(string)})
	got := st.NextJob(t, 10*time.Second)
	require.Equal(t, j.ID, got.ID)
	return got, st
}

// coreRequireFailResponse checks the common shape of a failure response.
func coreRequireFailResponse(t *testing.T, r apitest.Response, taken apitest.Job, attempts uint32, before, after uint64) apitest.Job {
	t.Helper()
	apitest.RequireStatus(t, r, http.StatusOK)
	j := r.Job(t)
	require.Equal(t, taken.ID, j.ID)
	require.Equal(t, attempts, j.Attempts)
	require.NotNil(t, j.FailedAt, "failed_at set on failure")
	require.GreaterOrEqual(t, *j.FailedAt, before)
	require.LessOrEqual(t, *j.FailedAt, after)
	require.Equal(t, taken.DequeuedAt, j.DequeuedAt, "dequeued_at kept")
	require.False(t, j.Has("payload"), "failure response is the job without payload")
	require.False(t, j.Has("duplicate"))
	require.False(t, j.Has("folded"))
	return j
}

// coreRequireRedelivery waits for the job on st and checks it arrived no
// earlier than readyAt and at most coreLate ms after it.
func coreRequireRedelivery(t *testing.T, st *apitest.Stream, id string, readyAt uint64) apitest.Job {
	t.Helper()
	wait := time.Duration(int64(readyAt)-int64(apitest.NowMS())+coreLate+2000) * time.Millisecond
	fr := st.NextJobFrame(t, max(wait, 5*time.Second))
	arrived := uint64(fr.At.UnixMilli())
	require.Equal(t, id, fr.Job.ID)
	require.GreaterOrEqual(t, arrived, readyAt, "delivered before ready_at")
	require.LessOrEqual(t, arrived, readyAt+coreLate, "delivered more than %d ms after ready_at", coreLate)
	require.NotNil(t, fr.Job.DequeuedAt)
	require.GreaterOrEqual(t, *fr.Job.DequeuedAt, readyAt, "dequeued_at >= ready_at")
	require.Equal(t, readyAt, fr.Job.ReadyAt, "promotion does not change ready_at")
	require.Equal(t, "in_flight", fr.Job.Status)
	return *fr.Job
}

// §3.7: POST /jobs/{id}/failure.
func TestCoreFailure(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	t.Run("backoff timing", func(t *testing.T) {
		taken, st := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-bo", "payload": "p",
			"backoff": map[string]any{"exponent": 0, "base_ms": 300, "jitter_ms": 0}})
		before := apitest.NowMS()
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "boom", "error_type": "RuntimeError", "backtrace": "at main.go:1"})
		after := apitest.NowMS()
		j := coreRequireFailResponse(t, r, taken, 1, before, after)
		require.Equal(t, "scheduled", j.Status)
		require.Equal(t, *j.FailedAt+1300, j.ReadyAt, "delay = 1^0*1000 + 300 + 0 = 1300 ms after failed_at")
		require.Equal(t, &apitest.Backoff{Exponent: 0, BaseMS: 300, JitterMS: 0}, j.Backoff)

		asked := apitest.NowMS()
		g := apitest.MustGet(t, s.URL, taken.ID)
		if apitest.NowMS() < j.ReadyAt {
			require.Equal(t, "scheduled", g.Status, "GET at %d before ready_at %d", asked, j.ReadyAt)
		}
		require.Equal(t, uint32(1), g.Attempts)
		require.Equal(t, j.FailedAt, g.FailedAt)

		// The freed slot delivers nothing else; the job comes back at ready_at.
		again := coreRequireRedelivery(t, st, taken.ID, j.ReadyAt)
		require.Equal(t, uint32(1), again.Attempts)
		require.Equal(t, j.FailedAt, again.FailedAt)
		require.Equal(t, "p", again.Payload)
		apitest.Ack(t, s.URL, taken.ID)
	})

	t.Run("backoff uses attempts after this failure", func(t *testing.T) {
		taken, st := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-bo2", "payload": 1,
			"backoff": map[string]any{"exponent": 2, "base_ms": 50, "jitter_ms": 0}})
		retryAt := apitest.NowMS() - 1000
		before := apitest.NowMS()
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "first", "retry_at": retryAt})
		j := coreRequireFailResponse(t, r, taken, 1, before, apitest.NowMS())
		require.Equal(t, "scheduled", j.Status, "retry_at in the past is still scheduled")
		require.Equal(t, retryAt, j.ReadyAt, "ready_at = retry_at")

		// Promoted at once.
		fr := st.NextJobFrame(t, 10*time.Second)
		require.Equal(t, taken.ID, fr.Job.ID)
		require.LessOrEqual(t, uint64(fr.At.UnixMilli()), *j.FailedAt+coreLate, "a past retry_at is promoted at once")
		require.Equal(t, uint32(1), fr.Job.Attempts)

		before = apitest.NowMS()
		r = apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "second"})
		j2 := coreRequireFailResponse(t, r, *fr.Job, 2, before, apitest.NowMS())
		require.Equal(t, "scheduled", j2.Status)
		require.Equal(t, *j2.FailedAt+4050, j2.ReadyAt, "delay = 2^2*1000 + 50 = 4050 ms")
		apitest.RequireNoContent(t, apitest.Request(t, nil, s.URL, http.MethodDelete, "/jobs/"+taken.ID, nil, nil))
	})

	t.Run("backoff is floored", func(t *testing.T) {
		taken, st := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-floor", "payload": 1,
			"backoff": map[string]any{"exponent": 0.5, "base_ms": 7, "jitter_ms": 0}})
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "first", "retry_at": apitest.NowMS() - 1})
		apitest.RequireStatus(t, r, http.StatusOK)
		again := st.NextJob(t, 10*time.Second)
		require.Equal(t, taken.ID, again.ID)
		r = apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "second"})
		j := coreRequireFailResponse(t, r, again, 2, 0, apitest.NowMS())
		require.Equal(t, *j.FailedAt+1421, j.ReadyAt, "delay = floor(2^0.5*1000 + 7) = floor(1421.21) = 1421 ms")
		apitest.RequireNoContent(t, apitest.Request(t, nil, s.URL, http.MethodDelete, "/jobs/"+taken.ID, nil, nil))
	})

	t.Run("jitter range", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			taken, st := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-jit", "payload": i,
				"backoff": map[string]any{"exponent": 0, "base_ms": 0, "jitter_ms": 1000}})
			r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "j"})
			apitest.RequireStatus(t, r, http.StatusOK)
			j := r.Job(t)
			require.NotNil(t, j.FailedAt)
			d := j.ReadyAt - *j.FailedAt
			require.GreaterOrEqual(t, d, uint64(1000))
			require.Less(t, d, uint64(2000), "delay in [1000, 1000 + jitter*attempts)")
			apitest.RequireNoContent(t, apitest.Request(t, nil, s.URL, http.MethodDelete, "/jobs/"+taken.ID, nil, nil))
			st.Close()
		}
	})

	t.Run("server default backoff", func(t *testing.T) {
		taken, _ := coreTakeOne(t, s.URL, apitest.SimpleJob("f-def", 1))
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "d"})
		apitest.RequireStatus(t, r, http.StatusOK)
		j := r.Job(t)
		require.Equal(t, "scheduled", j.Status)
		d := j.ReadyAt - *j.FailedAt
		require.GreaterOrEqual(t, d, uint64(16_000), "default first delay = 1^4*1000 + 15000 + U*30000")
		require.Less(t, d, uint64(46_000))
		require.False(t, j.Has("backoff"), "server defaults are not echoed")
		require.False(t, j.Has("retry_limit"))
	})

	t.Run("kill", func(t *testing.T) {
		jobs := apitest.EnqueueN(t, s.URL, "f-kill", 2)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=f-kill"})
		taken := st.NextJob(t, 10*time.Second)
		require.Equal(t, jobs[0].ID, taken.ID)
		before := apitest.NowMS()
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "fatal", "kill": true})
		j := coreRequireFailResponse(t, r, taken, 1, before, apitest.NowMS())
		require.Equal(t, "dead", j.Status)
		require.NotNil(t, j.PurgeAt)
		require.Equal(t, *j.FailedAt+coreWeekMS, *j.PurgeAt, "default dead retention is 7 days")

		g := apitest.MustGet(t, s.URL, taken.ID)
		require.Equal(t, "dead", g.Status)
		require.Equal(t, j.PurgeAt, g.PurgeAt)
		require.Equal(t, map[string]any{"n": "i:0"}, apitest.Canon(t, g.Payload))

		r = apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "again"})
		apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+taken.ID+"/success", nil, nil)
		apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
		require.Equal(t, jobs[1].ID, st.NextJob(t, 10*time.Second).ID, "a killed job frees its slot")
		st.NoJobFor(t, 300*time.Millisecond, true)
		require.Equal(t, "dead", apitest.MustGet(t, s.URL, taken.ID).Status, "dead is terminal")
		apitest.Ack(t, s.URL, jobs[1].ID)
	})

	t.Run("retry_limit 0 dies on the first failure", func(t *testing.T) {
		taken, _ := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-rl0", "payload": 1, "retry_limit": 0})
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "x"})
		j := coreRequireFailResponse(t, r, taken, 1, 0, apitest.NowMS())
		require.Equal(t, "dead", j.Status)
		require.NotNil(t, j.RetryLimit)
		require.Equal(t, uint32(0), *j.RetryLimit)
		require.Equal(t, "dead", apitest.MustGet(t, s.URL, taken.ID).Status)
	})

	t.Run("retry_limit 2 allows two retries", func(t *testing.T) {
		taken, st := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-rl2", "payload": 1, "retry_limit": 2,
			"backoff": map[string]any{"exponent": 0, "base_ms": 0, "jitter_ms": 0}})
		cur := taken
		for attempt := uint32(1); attempt <= 2; attempt++ {
			r := apitest.Fail(t, s.URL, cur.ID, map[string]any{"message": "retry"})
			j := coreRequireFailResponse(t, r, cur, attempt, 0, apitest.NowMS())
			require.Equal(t, "scheduled", j.Status, "failure %d of limit 2 is retried", attempt)
			require.Equal(t, *j.FailedAt+1000, j.ReadyAt)
			cur = coreRequireRedelivery(t, st, taken.ID, j.ReadyAt)
			require.Equal(t, attempt, cur.Attempts)
		}
		r := apitest.Fail(t, s.URL, cur.ID, map[string]any{"message": "last"})
		j := coreRequireFailResponse(t, r, cur, 3, 0, apitest.NowMS())
		require.Equal(t, "dead", j.Status, "the 3rd failure exceeds retry_limit 2")
	})

	t.Run("retry_at reschedules even when retries are exhausted", func(t *testing.T) {
		taken, st := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-rat", "payload": 1, "retry_limit": 0})
		retryAt := apitest.NowMS() + 400
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "later", "retry_at": retryAt})
		j := coreRequireFailResponse(t, r, taken, 1, 0, apitest.NowMS())
		require.Equal(t, "scheduled", j.Status)
		require.Equal(t, retryAt, j.ReadyAt)
		again := coreRequireRedelivery(t, st, taken.ID, retryAt)
		require.Equal(t, uint32(1), again.Attempts)
		r = apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "now dead"})
		j = coreRequireFailResponse(t, r, again, 2, 0, apitest.NowMS())
		require.Equal(t, "dead", j.Status)
	})

	t.Run("dead retention 0 deletes at once", func(t *testing.T) {
		taken, _ := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-dr0", "payload": 1, "retention": map[string]any{"dead_ms": 0}})
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "x", "kill": true})
		j := coreRequireFailResponse(t, r, taken, 1, 0, apitest.NowMS())
		require.Equal(t, "dead", j.Status)
		require.False(t, j.Has("purge_at"), "deleted at once: no purge_at")
		_, found := apitest.Get(t, s.URL, taken.ID)
		require.False(t, found)
	})

	t.Run("per-job dead retention", func(t *testing.T) {
		taken, _ := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "f-dr", "payload": 1, "retry_limit": 0,
			"retention": map[string]any{"dead_ms": 90_000}})
		r := apitest.Fail(t, s.URL, taken.ID, map[string]any{"message": "x"})
		j := coreRequireFailResponse(t, r, taken, 1, 0, apitest.NowMS())
		require.Equal(t, "dead", j.Status)
		require.NotNil(t, j.PurgeAt)
		require.Equal(t, *j.FailedAt+90_000, *j.PurgeAt)
	})

	t.Run("errors", func(t *testing.T) {
		const unknown = "03fr1jkpcsipbsckqj0y6pgr7"
		r := apitest.Fail(t, s.URL, unknown, map[string]any{"message": "x"})
		apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
		r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs/"+unknown+"/failure", map[string]any{"message": "x"})
		require.Equal(t, apitest.Msgpack, r.Format(t))
		apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
		r = apitest.Fail(t, s.URL, unknown, map[string]any{"error_type": "x"})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")

		ready := apitest.Enqueue(t, s.URL, apitest.SimpleJob("f-err-ready", 1))
		r = apitest.Fail(t, s.URL, ready.ID, map[string]any{"message": "x"})
		apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
		require.Equal(t, "ready", apitest.MustGet(t, s.URL, ready.ID).Status)

		taken, _ := coreTakeOne(t, s.URL, apitest.SimpleJob("f-err", 1))
		for _, body := range []map[string]any{{}, {"message": 5}, {"message": "x", "retry_at": -1}, {"message": "x", "kill": "yes"}} {
			r = apitest.Fail(t, s.URL, taken.ID, body)
			apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")
		}
		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+taken.ID+"/failure", nil, map[string]string{"Content-Type": apitest.CTJSON})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")
		r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs/"+taken.ID+"/failure", map[string]any{"retry_at": 1})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid MessagePack: ")
		g := apitest.MustGet(t, s.URL, taken.ID)
		require.Equal(t, "in_flight", g.Status, "rejected failure reports change nothing")
		require.Equal(t, uint32(0), g.Attempts)

		// msgpack failure report and response.
		r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs/"+taken.ID+"/failure", map[string]any{"message": "mp", "kill": true})
		require.Equal(t, apitest.Msgpack, r.Format(t))
		j := coreRequireFailResponse(t, r, taken, 1, 0, apitest.NowMS())
		require.Equal(t, "dead", j.Status)
	})
}

// §3.8, §2.5: scheduled jobs are promoted at ready_at, not before.
func TestCoreScheduled(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	t.Run("promotion", func(t *testing.T) {
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=sch"})
		readyAt := apitest.NowMS() + 500
		j := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "sch", "payload": 1, "ready_at": readyAt})
		require.Equal(t, "scheduled", j.Status)
		require.Equal(t, readyAt, j.ReadyAt)
		g := apitest.MustGet(t, s.URL, j.ID)
		if apitest.NowMS() < readyAt {
			require.Equal(t, "scheduled", g.Status)
		}
		coreRequireRedelivery(t, st, j.ID, readyAt)
		apitest.Ack(t, s.URL, j.ID)
	})

	t.Run("an earlier job wakes the scheduler", func(t *testing.T) {
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=sch2"})
		late := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "sch2", "payload": "late", "ready_at": apitest.NowMS() + 8000})
		readyAt := apitest.NowMS() + 300
		early := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "sch2", "payload": "early", "ready_at": readyAt})
		require.Equal(t, "scheduled", early.Status)
		coreRequireRedelivery(t, st, early.ID, readyAt)
		require.Equal(t, "scheduled", apitest.MustGet(t, s.URL, late.ID).Status)
		apitest.Ack(t, s.URL, early.ID)
	})

	t.Run("in order of ready_at", func(t *testing.T) {
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=sch3&prefetch=0"})
		now := apitest.NowMS()
		var jobs []apitest.Job
		for _, off := range []uint64{900, 300, 600} {
			jobs = append(jobs, apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "sch3", "payload": off, "ready_at": now + off}))
		}
		for _, idx := range []int{1, 2, 0} {
			coreRequireRedelivery(t, st, jobs[idx].ID, jobs[idx].ReadyAt)
		}
	})
}

// §9, §3.7, §6.10: server-default flags for retries, backoff and retention;
// terminal jobs become invisible when purge_at passes, without the reaper.
func TestCoreServerDefaults(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat,
		"--default-retry-limit", "1",
		"--default-backoff-base", "200", // bare integer = ms
		"--default-backoff-exponent", "0",
		"--default-backoff-jitter", "0s",
		"--default-dead-job-retention", "1.5s",
		"--default-completed-job-retention", "2s",
		"--reaper-check-interval", "1h",
	)

	// Completed retention from the flag.
	y, _ := coreTakeOne(t, s.URL, apitest.SimpleJob("d-done", 1))
	apitest.Ack(t, s.URL, y.ID)
	gy := apitest.MustGet(t, s.URL, y.ID)
	require.Equal(t, "completed", gy.Status)
	require.NotNil(t, gy.CompletedAt)
	require.NotNil(t, gy.PurgeAt)
	require.Equal(t, *gy.CompletedAt+2000, *gy.PurgeAt, "--default-completed-job-retention 2s")

	// Per-job completed_ms 0 overrides the default.
	z, _ := coreTakeOne(t, s.URL, map[string]any{"type": "t", "queue": "d-z", "payload": 1, "retention": map[string]any{"completed_ms": 0}})
	apitest.Ack(t, s.URL, z.ID)
	_, found := apitest.Get(t, s.URL, z.ID)
	require.False(t, found, "retention.completed_ms 0 deletes at once")

	// Default retry limit 1 and default backoff 1^0*1000 + 200 + 0.
	x, st := coreTakeOne(t, s.URL, apitest.SimpleJob("d-retry", 1))
	r := apitest.Fail(t, s.URL, x.ID, map[string]any{"message": "one"})
	j := coreRequireFailResponse(t, r, x, 1, 0, apitest.NowMS())
	require.Equal(t, "scheduled", j.Status)
	require.Equal(t, *j.FailedAt+1200, j.ReadyAt, "default backoff from flags: 1000 + 200")
	require.False(t, j.Has("retry_limit"))
	require.False(t, j.Has("backoff"))
	again := coreRequireRedelivery(t, st, x.ID, j.ReadyAt)
	r = apitest.Fail(t, s.URL, x.ID, map[string]any{"message": "two"})
	j = coreRequireFailResponse(t, r, again, 2, 0, apitest.NowMS())
	require.Equal(t, "dead", j.Status, "--default-retry-limit 1: the 2nd failure kills")
	require.NotNil(t, j.PurgeAt)
	require.Equal(t, *j.FailedAt+1500, *j.PurgeAt, "--default-dead-job-retention 1.5s")
	if apitest.NowMS()+200 < *j.PurgeAt {
		require.Equal(t, "dead", apitest.MustGet(t, s.URL, x.ID).Status, "visible until purge_at")
	}

	// Invisible once purge_at has passed, although the reaper runs hourly.
	apitest.WaitUntilMS(t, *j.PurgeAt+1)
	_, found = apitest.Get(t, s.URL, x.ID)
	require.False(t, found, "dead job invisible after purge_at")
	apitest.WaitUntilMS(t, *gy.PurgeAt+1)
	_, found = apitest.Get(t, s.URL, y.ID)
	require.False(t, found, "completed job invisible after purge_at")
}

// §9: durations take units ms, s, m, h, d, w and fractions.
func TestCoreDurationUnits(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, "0.1s",
		"--default-completed-job-retention", "1.5h",
		"--default-dead-job-retention", "2w",
		"--reaper-check-interval", "1d",
		"--default-backoff-base", "0.5m",
		"--default-backoff-exponent", "1",
		"--default-backoff-jitter", "0",
	)
	done, _ := coreTakeOne(t, s.URL, apitest.SimpleJob("u-done", 1))
	apitest.Ack(t, s.URL, done.ID)
	g := apitest.MustGet(t, s.URL, done.ID)
	require.Equal(t, "completed", g.Status)
	require.Equal(t, *g.CompletedAt+90*60*1000, *g.PurgeAt, "1.5h")

	retry, _ := coreTakeOne(t, s.URL, apitest.SimpleJob("u-retry", 1))
	r := apitest.Fail(t, s.URL, retry.ID, map[string]any{"message": "x"})
	j := coreRequireFailResponse(t, r, retry, 1, 0, apitest.NowMS())
	require.Equal(t, *j.FailedAt+1000+30_000, j.ReadyAt, "1^1*1000 + 0.5m")

	dead, _ := coreTakeOne(t, s.URL, apitest.SimpleJob("u-dead", 1))
	r = apitest.Fail(t, s.URL, dead.ID, map[string]any{"message": "x", "kill": true})
	j = coreRequireFailResponse(t, r, dead, 1, 0, apitest.NowMS())
	require.Equal(t, *j.FailedAt+2*coreWeekMS, *j.PurgeAt, "2w")
}
