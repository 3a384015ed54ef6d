package main

// Helpers for the budgets integration tests (SPEC §4): shortcuts in the
// budgets' terms on the apitest client, prefixed "bud". The tests speak
// plain HTTP to the real binary started by servertest; nothing here knows
// the server's internals.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// budCanon renders a decoded value as canonical JSON (sorted keys), so that
// shapes can be compared exactly.
func budCanon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("canon: %v", err)
	}
	return string(b)
}

// budInt reads an integer field.
func budInt(t testing.TB, m map[string]any, field string) int64 {
	t.Helper()
	v, ok := m[field]
	if !ok {
		t.Fatalf("field %q missing in %v", field, m)
	}
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("field %q = %#v is not a number", field, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("field %q = %v is not an integer: %v", field, n, err)
	}
	return i
}

func budStr(t testing.TB, m map[string]any, field string) string {
	t.Helper()
	v, ok := m[field].(string)
	if !ok {
		t.Fatalf("field %q missing or not a string in %v", field, m)
	}
	return v
}

func budKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func budNowMs() int64 { return time.Now().UnixMilli() }

// budCheckBudget checks a budget object field by field: exactly the fields
// allocation, created_at, key, strategy, updated_at; strategy equal to want
// (canonical JSON, e.g. `{"duration_ms":3600000,"type":"time_based"}`).
// It returns created_at and updated_at.
func budCheckBudget(t testing.TB, m map[string]any, key string, allocation int64, strategy string) (created, updated int64) {
	t.Helper()
	if got := strings.Join(budKeys(m), ","); got != "allocation,created_at,key,strategy,updated_at" {
		t.Fatalf("budget fields %s, want allocation,created_at,key,strategy,updated_at: %v", got, m)
	}
	if k := budStr(t, m, "key"); k != key {
		t.Fatalf("budget key %q, want %q", k, key)
	}
	if a := budInt(t, m, "allocation"); a != allocation {
		t.Fatalf("budget %q allocation %d, want %d", key, a, allocation)
	}
	if s := budCanon(t, m["strategy"]); s != strategy {
		t.Fatalf("budget %q strategy %s, want %s", key, s, strategy)
	}
	created, updated = budInt(t, m, "created_at"), budInt(t, m, "updated_at")
	if updated < created {
		t.Fatalf("budget %q updated_at %d < created_at %d", key, updated, created)
	}
	return created, updated
}

// budPath builds /budgets/<escaped key>.
func budPath(key string) string { return "/budgets/" + url.PathEscape(key) }

// budMustPut creates or replaces a budget and returns the response object.
func budMustPut(t testing.TB, s *servertest.Server, key string, def any) map[string]any {
	t.Helper()
	return apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", budPath(key), def), http.StatusOK)
}

func budWIF(allocation int) map[string]any {
	return map[string]any{"allocation": allocation, "strategy": map[string]any{"type": "while_in_flight"}}
}

func budTB(allocation, durationMs int, burst int) map[string]any {
	st := map[string]any{"type": "time_based", "duration_ms": durationMs}
	if burst > 0 {
		st["burst"] = burst
	}
	return map[string]any{"allocation": allocation, "strategy": st}
}

// budBind is one binding; cost 0 means "omit cost".
func budBind(key string, cost int) map[string]any {
	b := map[string]any{"key": key}
	if cost != 0 {
		b["cost"] = cost
	}
	return b
}

func budJob(queue string, bindings ...map[string]any) map[string]any {
	j := map[string]any{"type": "bud", "queue": queue, "payload": map[string]any{"q": queue}}
	if len(bindings) > 0 {
		bs := make([]any, len(bindings))
		for i, b := range bindings {
			bs[i] = b
		}
		j["budgets"] = bs
	}
	return j
}

// budEnqueue posts one job and requires 201; returns the job object.
func budEnqueue(t testing.TB, s *servertest.Server, job map[string]any) map[string]any {
	t.Helper()
	return apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", job), http.StatusCreated)
}

// budEnqueueBulk posts jobs in one bulk and returns their ids in order.
func budEnqueueBulk(t testing.TB, s *servertest.Server, jobs ...map[string]any) []string {
	t.Helper()
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": jobs}), http.StatusCreated)
	arr, ok := m["jobs"].([]any)
	if !ok || len(arr) != len(jobs) {
		t.Fatalf("bulk response %v: want %d jobs", m, len(jobs))
	}
	ids := make([]string, len(arr))
	for i, j := range arr {
		ids[i] = budStr(t, j.(map[string]any), "id")
	}
	return ids
}

func budAck(t testing.TB, s *servertest.Server, id string) {
	t.Helper()
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/"+id+"/success", nil))
}

func budGetJob(t testing.TB, s *servertest.Server, id string) map[string]any {
	t.Helper()
	return apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/jobs/"+id, nil), http.StatusOK)
}

// budWaitStatus polls GET /jobs/{id} until every job has the status, within d.
func budWaitStatus(t testing.TB, s *servertest.Server, d time.Duration, status string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pending := ""
		for _, id := range ids {
			j := budGetJob(t, s, id)
			if budStr(t, j, "status") != status {
				pending = id + " is " + budStr(t, j, "status")
				break
			}
		}
		if pending == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not %s within %v: %s", status, d, pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// budSameSet reports whether a and b hold the same strings (any order).
func budSameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
