package main

// Black-box tests of SPEC §10.5 (job timeouts) against the real binary.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestExtTimeoutHungWorker: a worker takes a job with timeout_ms and never
// answers. The server fails the job after its timeout exactly as a failure
// report would (attempts 1, the error "timed out after 300 ms" recorded,
// backoff), the late success gets 404, the take stream stays open (its
// heartbeats keep coming) and gets the retry in the slot the timeout freed.
func TestExtTimeoutHungWorker(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	// exponent 0: the retry comes 1^0 s = 1 s after the failure
	job := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "hung", "payload": 1, "timeout_ms": 300,
		"backoff": map[string]any{"exponent": 0, "base_ms": 0, "jitter_ms": 0}})
	require.EqualValues(t, "300", fmtNum(job.Raw["timeout_ms"]), "timeout_ms is echoed")

	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=hung&prefetch=1"})
	first := st.NextJob(t, 10*time.Second)
	require.Equal(t, job.ID, first.ID)
	require.EqualValues(t, "300", fmtNum(first.Raw["timeout_ms"]))

	failed := apitest.WaitStatus(t, s.URL, job.ID, "scheduled")
	require.Equal(t, uint32(1), failed.Attempts)
	ran := apitest.U64(failed.FailedAt) - apitest.U64(failed.DequeuedAt)
	// never before its timeout; late only by a timer and a busy machine
	require.GreaterOrEqual(t, ran, uint64(300), "failed before its timeout")
	require.Less(t, ran, uint64(300+2000), "failed long after its timeout")

	errs := apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/"+job.ID+"/errors", nil)
	apitest.RequireStatus(t, errs, http.StatusOK)
	list, _ := errs.Map(t)["errors"].([]any)
	require.Len(t, list, 1)
	rec := list[0].(map[string]any)
	require.Equal(t, "timed out after 300 ms", rec["message"])
	require.Equal(t, "1", fmtNum(rec["attempt"]))

	late := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/"+job.ID+"/success", nil)
	apitest.RequireError(t, late, http.StatusNotFound, "job not found in in-flight set")

	// the same stream, still open, gets the retry (it would not with its
	// one slot still taken)
	retry := st.NextJob(t, 10*time.Second)
	require.Equal(t, job.ID, retry.ID)
	require.Equal(t, uint32(1), retry.Attempts)
	apitest.Ack(t, s.URL, job.ID)

	body := apitest.DoJSON(t, s.URL, http.MethodGet, "/metrics", nil)
	require.Contains(t, string(body.Body), `tollgate_jobs_timed_out_total{queue="hung"} 1`)
}

// TestExtTimeoutDefaultAndPatch: --default-job-timeout applies to jobs
// without timeout_ms (and is not echoed); a job's own timeout_ms wins; a
// patch while in flight applies from the next dispatch; null clears it.
func TestExtTimeoutDefaultAndPatch(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat, "--default-job-timeout", "250")

	plain := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "dflt", "payload": 1})
	require.False(t, plain.Has("timeout_ms"), "the server default is not echoed")
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=dflt&prefetch=1"})
	require.Equal(t, plain.ID, st.NextJob(t, 10*time.Second).ID)
	apitest.WaitStatus(t, s.URL, plain.ID, "scheduled")
	errs := apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/"+plain.ID+"/errors", nil)
	require.Contains(t, string(errs.Body), `"message":"timed out after 250 ms"`)

	// own timeout 60 s; patched to 200 ms while in flight: this run keeps
	// its 60 s deadline, the next run gets 200 ms
	own := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "own", "payload": 1, "timeout_ms": 60000,
		"backoff": map[string]any{"exponent": 0, "base_ms": 0, "jitter_ms": 0}})
	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=own&prefetch=1"})
	require.Equal(t, own.ID, st2.NextJob(t, 10*time.Second).ID)
	p := apitest.DoJSON(t, s.URL, http.MethodPatch, "/jobs/"+own.ID, map[string]any{"timeout_ms": 200})
	apitest.RequireStatus(t, p, http.StatusOK)
	require.EqualValues(t, "200", fmtNum(p.Job(t).Raw["timeout_ms"]))
	time.Sleep(600 * time.Millisecond) // a wait for something that must not happen: longer than 200 ms + the default
	require.Equal(t, "in_flight", apitest.MustGet(t, s.URL, own.ID).Status, "a patch moved the running job's deadline")
	// fail it by hand: the retry runs with the patched 200 ms
	apitest.RequireStatus(t, apitest.Fail(t, s.URL, own.ID, map[string]any{"message": "x"}), http.StatusOK)
	retry := st2.NextJob(t, 10*time.Second)
	require.Equal(t, own.ID, retry.ID)
	j := apitest.WaitStatus(t, s.URL, own.ID, "scheduled")
	require.Equal(t, uint32(2), j.Attempts)
	errs = apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/"+own.ID+"/errors", nil)
	require.Contains(t, string(errs.Body), `"message":"timed out after 200 ms"`)

	p = apitest.DoJSON(t, s.URL, http.MethodPatch, "/jobs/"+own.ID, map[string]any{"timeout_ms": nil})
	apitest.RequireStatus(t, p, http.StatusOK)
	require.False(t, p.Job(t).Has("timeout_ms"), "null clears timeout_ms")
}

// TestExtTimeoutValidation: timeout_ms is an integer 1..2^31-1 on POST
// /jobs, bulk items, cron templates and patches, else 400 with the SPEC's
// text.
func TestExtTimeoutValidation(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	const text = "timeout_ms must be between 1 and 2147483647"
	for _, bad := range []any{0, -1, 2147483648, 1.5, "100"} {
		r := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "v", "payload": 1, "timeout_ms": bad})
		apitest.RequireError(t, r, http.StatusBadRequest, text)
	}
	r := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": []any{
		map[string]any{"type": "t", "queue": "v", "payload": 1, "timeout_ms": 5},
		map[string]any{"type": "t", "queue": "v", "payload": 1, "timeout_ms": 0},
	}})
	apitest.RequireError(t, r, http.StatusBadRequest, "jobs[1]: "+text)
	ok := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "v", "payload": 1, "timeout_ms": 2147483647})
	require.EqualValues(t, "2147483647", fmtNum(ok.Raw["timeout_ms"]))
	r = apitest.DoJSON(t, s.URL, http.MethodPatch, "/jobs/"+ok.ID, map[string]any{"timeout_ms": 0})
	apitest.RequireError(t, r, http.StatusBadRequest, text)

	r = apitest.DoJSON(t, s.URL, http.MethodPut, "/crons/tg", map[string]any{"entries": []any{map[string]any{
		"name": "e", "expression": "0 0 * * *", "job": map[string]any{"type": "t", "queue": "v", "payload": 1, "timeout_ms": 0}}}})
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r)
	require.True(t, strings.HasSuffix(r.Map(t)["error"].(string), text), "%s", r)
	r = apitest.DoJSON(t, s.URL, http.MethodPut, "/crons/tg", map[string]any{"entries": []any{map[string]any{
		"name": "e", "expression": "0 0 * * *", "job": map[string]any{"type": "t", "queue": "v", "payload": 1, "timeout_ms": 1000}}}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	require.Contains(t, string(r.Body), `"timeout_ms":1000`, "the template echoes timeout_ms")
}

// fmtNum prints a number as the helpers decode it (json.Number): as the
// server wrote it.
func fmtNum(v any) string { return fmt.Sprint(v) }
