package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
)

// Client helpers for the cron black-box tests (cron_*_test.go).

// cronEntry is a cron entry object (SPEC §8.1.1) with its raw keys.
type cronEntry struct {
	Name          string         `json:"name" msgpack:"name"`
	Expression    string         `json:"expression" msgpack:"expression"`
	Timezone      string         `json:"timezone" msgpack:"timezone"`
	Paused        bool           `json:"paused" msgpack:"paused"`
	PausedAt      uint64         `json:"paused_at" msgpack:"paused_at"`
	ResumedAt     uint64         `json:"resumed_at" msgpack:"resumed_at"`
	Job           map[string]any `json:"job" msgpack:"job"`
	NextEnqueueAt uint64         `json:"next_enqueue_at" msgpack:"next_enqueue_at"`
	LastEnqueueAt uint64         `json:"last_enqueue_at" msgpack:"last_enqueue_at"`
	Raw           map[string]any `json:"-" msgpack:"-"`
}

// Has reports whether the key was on the wire.
func (e cronEntry) Has(key string) bool { _, ok := e.Raw[key]; return ok }

// cronGroup is a cron group object.
type cronGroup struct {
	Name      string         `json:"name" msgpack:"name"`
	Paused    bool           `json:"paused" msgpack:"paused"`
	PausedAt  uint64         `json:"paused_at" msgpack:"paused_at"`
	ResumedAt uint64         `json:"resumed_at" msgpack:"resumed_at"`
	Timezone  string         `json:"timezone" msgpack:"timezone"`
	Entries   []cronEntry    `json:"entries" msgpack:"entries"`
	Raw       map[string]any `json:"-" msgpack:"-"`
}

// Has reports whether the key was on the wire.
func (g cronGroup) Has(key string) bool { _, ok := g.Raw[key]; return ok }

// Entry returns the entry named name.
func (g cronGroup) Entry(t testing.TB, name string) cronEntry {
	t.Helper()
	for _, e := range g.Entries {
		if e.Name == name {
			return e
		}
	}
	require.Failf(t, "no such entry", "%q in %+v", name, g)
	return cronEntry{}
}

func cronRequireNoNulls(t testing.TB, raw map[string]any) {
	t.Helper()
	for k, v := range raw {
		if k != "payload" {
			require.NotNil(t, v, "field %q sent as null", k)
		}
		if m, ok := v.(map[string]any); ok {
			cronRequireNoNulls(t, m)
		}
	}
}

func cronDecodeEntry(t testing.TB, r apitest.Response, status int) cronEntry {
	t.Helper()
	apitest.RequireStatus(t, r, status)
	var e cronEntry
	r.Decode(t, &e)
	r.Decode(t, &e.Raw)
	cronRequireNoNulls(t, e.Raw)
	require.NotZero(t, e.NextEnqueueAt, "next_enqueue_at is always sent: %s", r)
	require.Zero(t, e.NextEnqueueAt%1000, "next_enqueue_at is a whole second")
	return e
}

func cronDecodeGroup(t testing.TB, r apitest.Response, status int) cronGroup {
	t.Helper()
	apitest.RequireStatus(t, r, status)
	var g cronGroup
	r.Decode(t, &g)
	r.Decode(t, &g.Raw)
	require.True(t, g.Has("entries"), "entries always present: %s", r)
	rawEntries, _ := g.Raw["entries"].([]any)
	for i := range g.Entries {
		g.Entries[i].Raw, _ = rawEntries[i].(map[string]any)
		cronRequireNoNulls(t, g.Entries[i].Raw)
		if i > 0 {
			require.Less(t, g.Entries[i-1].Name, g.Entries[i].Name, "entries ascending by name")
		}
	}
	cronRequireNoNulls(t, g.Raw)
	return g
}

// cronEntryBody is an entry request body with a minimal template.
func cronEntryBody(name, expr, queue string) map[string]any {
	return map[string]any{"name": name, "expression": expr,
		"job": map[string]any{"type": "t", "queue": queue, "payload": map[string]any{"n": 1}}}
}

// cronPut PUTs a group and requires 200.
func cronPut(t testing.TB, base, group string, body map[string]any) cronGroup {
	t.Helper()
	return cronDecodeGroup(t, apitest.DoJSON(t, base, http.MethodPut, "/crons/"+url.PathEscape(group), body), http.StatusOK)
}

// cronGet GETs a group and requires 200.
func cronGet(t testing.TB, base, group string) cronGroup {
	t.Helper()
	return cronDecodeGroup(t, apitest.DoJSON(t, base, http.MethodGet, "/crons/"+url.PathEscape(group), nil), http.StatusOK)
}

// cronJobs lists the jobs of a queue, oldest first.
func cronJobs(t testing.TB, base, queue string) []apitest.Job {
	t.Helper()
	r := apitest.DoJSON(t, base, http.MethodGet, "/jobs?limit=1000&queue="+url.QueryEscape(queue), nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	var page struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	r.Decode(t, &page)
	out := make([]apitest.Job, len(page.Jobs))
	for i, raw := range page.Jobs {
		out[i] = apitest.JobFrom(t, apitest.JSON, raw)
	}
	return out
}

// cronWaitFor polls cond every 50 ms until it holds (at most 15 s).
func cronWaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition not met within 15 s")
		time.Sleep(50 * time.Millisecond)
	}
}
