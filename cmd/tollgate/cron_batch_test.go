package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// cronBatchEntry is an entry firing every second whose template is batched
// under key and whose fold appends the new payload's items.
func cronBatchEntry(name, queue, key string) map[string]any {
	return map[string]any{"name": name, "expression": "*/1 * * * * *",
		"job": map[string]any{"type": "t", "queue": queue, "payload": map[string]any{"items": []any{1}},
			"batch": map[string]any{"key": key, "when": "true", "fold": `{items: ($existing.items + $new.items)}`}}}
}

// TestCronBatchedTemplateFolds: a firing of a batched template is a POST
// /jobs of it, so with no worker taking jobs the firings fold into one
// pending job (SPEC §8.1.7, §8.2) and each firing counts (last_enqueue_at).
func TestCronBatchedTemplateFolds(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	cronPut(t, s.URL, "fold", map[string]any{"entries": []any{cronBatchEntry("sec", "cron-fold", "k")}})
	var jobs []apitest.Job
	cronWaitFor(t, func() bool {
		jobs = cronJobs(t, s.URL, "cron-fold")
		if len(jobs) != 1 {
			return len(jobs) > 1 // fails below with the jobs listed
		}
		items, _ := jobs[0].Payload.(map[string]any)["items"].([]any)
		return len(items) >= 3
	})
	require.Len(t, jobs, 1, "the firings fold into one pending job: %+v", jobs)
	require.Equal(t, "ready", jobs[0].Status)
	items := jobs[0].Payload.(map[string]any)["items"].([]any)
	for _, it := range items {
		require.Equal(t, "1", fmt.Sprint(it), "items: %v", items)
	}
	e := cronDecodeEntry(t, apitest.DoJSON(t, s.URL, http.MethodGet, "/crons/fold/entries/sec", nil), http.StatusOK)
	require.NotZero(t, e.LastEnqueueAt, "a folded firing counts")
	require.Greater(t, e.NextEnqueueAt, e.LastEnqueueAt)
}

// TestCronBatchTemplateChecks: a template's batch is checked at install
// (key, compile, dry run on the template payload) with 400s, before any
// budget check (SPEC §8.1.5).
func TestCronBatchTemplateChecks(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	put := func(batch map[string]any, budgets ...any) apitest.Response {
		job := map[string]any{"type": "t", "queue": "q", "payload": map[string]any{"n": 1}, "batch": batch}
		if budgets != nil {
			job["budgets"] = budgets
		}
		return apitest.DoJSON(t, s.URL, http.MethodPut, "/crons/g", map[string]any{"entries": []any{
			map[string]any{"name": "e", "expression": "* * * * *", "job": job}}})
	}
	apitest.RequireError(t, put(map[string]any{"key": "", "when": "true", "fold": "$new"}), http.StatusBadRequest,
		"entries[0]: batch.key must not be empty")
	apitest.RequireErrorPrefix(t, put(map[string]any{"key": "k", "when": "(", "fold": "$new"}), http.StatusBadRequest,
		"entries[0]: batch expression: when: ")
	apitest.RequireErrorPrefix(t, put(map[string]any{"key": "k", "when": "true", "fold": "$existing | error(\"x\")"}), http.StatusBadRequest,
		"entries[0]: batch dry-run: fold: ")
	// before the budget checks: a missing budget is not what answers
	missing := []any{map[string]any{"key": "no-such-budget", "cost": 1}}
	apitest.RequireErrorPrefix(t, put(map[string]any{"key": "k", "when": "true", "fold": "1, 2"}, missing...), http.StatusBadRequest,
		"entries[0]: batch dry-run: fold: ")
	r := apitest.DoJSON(t, s.URL, http.MethodGet, "/crons/g", nil)
	apitest.RequireStatus(t, r, http.StatusNotFound)
}
