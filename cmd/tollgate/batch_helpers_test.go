package main

// Helpers for the batched-jobs integration tests (SPEC §8.2), prefixed
// "bat". They build on the bud* helpers (plain HTTP to the real binary).

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// The official Node helper's programs (SPEC §8.2.8).
const (
	batWhen       = `(($existing | .) + ($new | .)) | length <= 100`
	batFoldConcat = `$existing | . += ($new | .)`
	batFoldUnique = `$existing | . = ((.) + ($new | .) | unique)`
)

// batBatch is a batch object with the helper's when and the given fold.
func batBatch(key, fold string) map[string]any {
	return map[string]any{"key": key, "when": batWhen, "fold": fold}
}

// batJob is an enqueue body on queue q with payload and batch.
func batJob(q string, payload any, batch map[string]any) map[string]any {
	j := map[string]any{"type": "batched", "queue": q, "payload": payload}
	if batch != nil {
		j["batch"] = batch
	}
	return j
}

// batEnqueue enqueues one job and checks the status (201 or 200) and the
// folded flag; it returns the response object.
func batEnqueue(t testing.TB, s *servertest.Server, job map[string]any, folded bool) map[string]any {
	t.Helper()
	status := http.StatusCreated
	if folded {
		status = http.StatusOK
	}
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", job), status)
	if m["folded"] != folded || m["duplicate"] != false {
		t.Fatalf("enqueue %v: folded=%v duplicate=%v, want folded=%v duplicate=false", job, m["folded"], m["duplicate"], folded)
	}
	return m
}

// batPayload returns a job's payload (GET /jobs/{id}) as canonical JSON.
func batPayload(t testing.TB, s *servertest.Server, id string) string {
	t.Helper()
	return budCanon(t, budGetJob(t, s, id)["payload"])
}

// batCount returns GET /jobs/count for the query.
func batCount(t testing.TB, s *servertest.Server, query string) int64 {
	t.Helper()
	return budInt(t, apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/jobs/count?"+query, nil), http.StatusOK), "count")
}

// batWaitFoldWorkerBusy polls /metrics until a fold worker is busy; it fails
// the test if finished reports true first (the evaluation ended unseen).
func batWaitFoldWorkerBusy(t testing.TB, s *servertest.Server, finished func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(string(apitest.DoJSON(t, s.URL, "GET", "/metrics", nil).Body), "tollgate_fold_workers_busy 1") {
		if finished() {
			t.Fatal("the evaluation finished before it was seen running")
		}
		if time.Now().After(deadline) {
			t.Fatal("no fold worker was seen busy")
		}
	}
}
