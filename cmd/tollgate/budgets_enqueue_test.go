package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// budQueuesHas reports whether GET /queues lists q.
func budQueuesHas(t *testing.T, s *servertest.Server, q string) bool {
	t.Helper()
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/queues", nil), http.StatusOK)
	qs, _ := m["queues"].([]any)
	for _, x := range qs {
		if x == q {
			return true
		}
	}
	return false
}

// TestBudgetsEnqueueBindings: the enqueue-side rows of §4.10 and the rules
// of §4.5/§4.6 on POST /jobs.
func TestBudgetsEnqueueBindings(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "wif", budWIF(3))
	budMustPut(t, s, "tb", budTB(10, 60000, 2))
	budMustPut(t, s, "tbhi", budTB(5, 60000, 20))
	const rej = "rejected" // every rejected enqueue uses this queue

	post := func(bindings ...any) apitest.Response {
		t.Helper()
		j := budJob(rej)
		j["budgets"] = bindings
		return apitest.DoJSON(t, s.URL, "POST", "/jobs", j)
	}
	cw := func(key string, def any) map[string]any { return map[string]any{"key": key, "create_with": def} }

	// State checks (422).
	apitest.RequireError(t, post(budBind("ghost", 0)), 422, "budget 'ghost' does not exist. Create it first or pass create_with.")
	apitest.RequireError(t, post(budBind("wif", 1), budBind("ghost", 2)), 422, "budget 'ghost' does not exist. Create it first or pass create_with.")
	apitest.RequireError(t, post(budBind("wif", 4)), 422, "budget 'wif' cannot accept a job costing 4: its allocation is 3. Lower the cost or raise the allocation.")
	apitest.RequireError(t, post(budBind("tb", 3)), 422, "budget 'tb' cannot accept a job costing 3: its burst is 2. Lower the cost or raise the burst.")
	apitest.RequireError(t, post(budBind("tbhi", 6)), 422, "budget 'tbhi' cannot accept a job costing 6: its allocation is 5. Lower the cost or raise the allocation.")
	// create_with is ignored when the budget exists: the stored one decides.
	apitest.RequireError(t, post(map[string]any{"key": "wif", "cost": 4, "create_with": budWIF(100)}), 422,
		"budget 'wif' cannot accept a job costing 4: its allocation is 3. Lower the cost or raise the allocation.")
	// A new budget's create_with definition decides; nothing is created on failure.
	apitest.RequireError(t, post(map[string]any{"key": "cw-small", "cost": 3, "create_with": budWIF(2)}), 422,
		"budget 'cw-small' cannot accept a job costing 3: its allocation is 2. Lower the cost or raise the allocation.")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/cw-small", nil), 404, "budget 'cw-small' not found")
	// create_with values are validated even when ignored (§4.6 Decision).
	apitest.RequireError(t, post(cw("new-bad", map[string]any{"allocation": 0, "strategy": map[string]any{"type": "while_in_flight"}})), 422,
		"budgets[0].create_with: allocation must be at least 1")
	apitest.RequireError(t, post(budBind("wif", 1), cw("tb", map[string]any{"allocation": 5, "strategy": map[string]any{"type": "time_based"}})), 422,
		"budgets[1].create_with: time_based strategy requires duration_ms")
	apitest.RequireError(t, post(cw("wif", map[string]any{"allocation": 2000000, "strategy": map[string]any{"type": "while_in_flight"}})), 422,
		"budgets[0].create_with: allocation must be at most 1000000")
	apitest.RequireError(t, post(cw("wif", map[string]any{"allocation": 2, "strategy": map[string]any{"type": "while_in_flight", "burst": 1}})), 422,
		"budgets[0].create_with: while_in_flight strategy does not accept burst")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/new-bad", nil), 404, "budget 'new-bad' not found")

	// Shape checks (400), which come before the state checks.
	apitest.RequireError(t, post(budBind("wif", 1), map[string]any{"key": "wif", "cost": 0}), 400, "budgets[1]: cost must be at least 1")
	apitest.RequireError(t, post(map[string]any{"key": "wif", "cost": 0}), 400, "budgets[0]: cost must be at least 1")
	apitest.RequireError(t, post(budBind("ghost", 1), map[string]any{"key": "wif", "cost": 0}), 400, "budgets[1]: cost must be at least 1")
	apitest.RequireError(t, post(budBind("a,b", 1)), 400, "budgets[0]: invalid budget key 'a,b': must not contain ','")
	apitest.RequireError(t, post(budBind("wif", 1), budBind("", 1)), 400, "budgets[1]: invalid budget key '': must not be empty")
	apitest.RequireError(t, post(budBind("x{y", 1)), 400, "budgets[0]: invalid budget key 'x{y': must not contain '{' (reserved)")
	apitest.RequireError(t, post(budBind("wif", 1), budBind("tb", 1), budBind("wif", 2)), 400, "budgets: duplicate key 'wif'")
	var many []any
	for i := 0; i < 33; i++ {
		many = append(many, budBind(fmt.Sprintf("many-%02d", i), 1))
	}
	apitest.RequireError(t, post(many...), 400, "budgets: at most 32 bindings per job")
	for _, raw := range []string{
		`[{"key":"wif","cost":-1}]`,
		`[{"key":"wif","cost":4294967296}]`,
		`[{"key":"wif","cost":"1"}]`,
		`[{"key":"wif","cost":1.5}]`,
		`[{"cost":1}]`,
		`[{"key":5}]`,
		`[{"key":"new-shape","create_with":{"allocation":5}}]`,
		`[{"key":"new-shape","create_with":{"strategy":{"type":"while_in_flight"}}}]`,
		`[{"key":"new-shape","create_with":"while_in_flight"}]`,
		`"wif"`,
		`[ "wif" ]`,
	} {
		r := apitest.DoJSON(t, s.URL, "POST", "/jobs", `{"type":"t","queue":"`+rej+`","payload":{},"budgets":`+raw+`}`)
		apitest.RequireErrorPrefix(t, r, 400, "invalid JSON: ")
	}
	if budQueuesHas(t, s, rej) {
		t.Fatalf("a rejected enqueue stored a job")
	}

	// Valid forms.
	for _, raw := range []string{``, `,"budgets":null`, `,"budgets":[]`} {
		r := apitest.DoJSON(t, s.URL, "POST", "/jobs", `{"type":"t","queue":"unbudgeted","payload":{}`+raw+`}`)
		j := apitest.Object(t, r, http.StatusCreated)
		if _, has := j["budgets"]; has {
			t.Fatalf("unbudgeted job %q shows budgets: %v", raw, j)
		}
	}
	j := budEnqueue(t, s, budJob("ok", budBind("wif", 3), budBind("tb", 2), budBind("tbhi", 5)))
	want := `[{"cost":3,"key":"wif"},{"cost":2,"key":"tb"},{"cost":5,"key":"tbhi"}]`
	if b := budCanon(t, j["budgets"]); b != want {
		t.Fatalf("budgets %s, want %s", b, want)
	}
	if b := budCanon(t, budGetJob(t, s, budStr(t, j, "id"))["budgets"]); b != want {
		t.Fatalf("GET budgets %s, want %s", b, want)
	}

	// 32 bindings, each created by create_with, in one enqueue.
	var b32 []map[string]any
	for i := 0; i < 32; i++ {
		b32 = append(b32, cw(fmt.Sprintf("many-%02d", i), budWIF(i+1)))
	}
	j = budEnqueue(t, s, budJob("ok", b32...))
	if arr, _ := j["budgets"].([]any); len(arr) != 32 {
		t.Fatalf("32 bindings -> %s", budCanon(t, j["budgets"]))
	}
	for i := 0; i < 32; i++ {
		k := fmt.Sprintf("many-%02d", i)
		m := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", budPath(k), nil), http.StatusOK)
		c, u := budCheckBudget(t, m, k, int64(i+1), `{"type":"while_in_flight"}`)
		if c != u {
			t.Fatalf("create_with budget %s: created_at %d != updated_at %d", k, c, u)
		}
	}
}

// TestBudgetsBulkEnqueue: §3.3/§4.6 — create_with twice for the same missing
// key (the first creates), all-or-nothing with prefixed errors.
func TestBudgetsBulkEnqueue(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "wif", budWIF(3))
	cw := func(key string, def any) map[string]any { return map[string]any{"key": key, "create_with": def} }
	bulk := func(jobs ...map[string]any) apitest.Response {
		t.Helper()
		return apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": jobs})
	}

	m := apitest.Object(t, bulk(
		budJob("bulk-ok", cw("bk", budWIF(7))),
		budJob("bulk-ok", cw("bk", budWIF(9))),
		budJob("bulk-ok", budBind("bk", 7), budBind("wif", 0)),
	), http.StatusCreated)
	jobs, _ := m["jobs"].([]any)
	if len(jobs) != 3 {
		t.Fatalf("bulk response %s", budCanon(t, m))
	}
	for i, w := range []string{`[{"cost":1,"key":"bk"}]`, `[{"cost":1,"key":"bk"}]`, `[{"cost":7,"key":"bk"},{"cost":1,"key":"wif"}]`} {
		jm := jobs[i].(map[string]any)
		if b := budCanon(t, jm["budgets"]); b != w {
			t.Fatalf("jobs[%d].budgets %s, want %s", i, b, w)
		}
		if jm["duplicate"] != false || jm["folded"] != false {
			t.Fatalf("jobs[%d] duplicate/folded %v/%v", i, jm["duplicate"], jm["folded"])
		}
	}
	bk := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/bk", nil), http.StatusOK)
	budCheckBudget(t, bk, "bk", 7, `{"type":"while_in_flight"}`)

	// All or nothing: a failing binding in job 2 writes no job and no budget.
	const rq = "bulk-rejected"
	apitest.RequireError(t, bulk(
		budJob(rq, cw("bn1", budWIF(5))),
		budJob(rq, budBind("ghost", 1)),
	), 422, "jobs[1]: budget 'ghost' does not exist. Create it first or pass create_with.")
	apitest.RequireError(t, bulk(
		budJob(rq, cw("bn1", budWIF(2))),
		budJob(rq, budBind("bn1", 3)),
	), 422, "jobs[1]: budget 'bn1' cannot accept a job costing 3: its allocation is 2. Lower the cost or raise the allocation.")
	apitest.RequireError(t, bulk(
		budJob(rq, cw("bn1", budWIF(5))),
		budJob(rq, map[string]any{"key": "wif", "cost": 0}),
	), 400, "jobs[1]: budgets[0]: cost must be at least 1")
	apitest.RequireError(t, bulk(
		budJob(rq, cw("bn1", budWIF(5))),
		budJob(rq, budBind("wif", 1), budBind("wif", 1)),
	), 400, "jobs[1]: budgets: duplicate key 'wif'")
	apitest.RequireError(t, bulk(
		budJob(rq, cw("bn1", budWIF(5))),
		budJob(rq, cw("bn2", budWIF(0))),
	), 422, "jobs[1]: budgets[0].create_with: allocation must be at least 1")
	apitest.RequireError(t, bulk(
		budJob(rq, cw("bn1", budWIF(5))),
		budJob(rq, budBind("wif", 4)),
	), 422, "jobs[1]: budget 'wif' cannot accept a job costing 4: its allocation is 3. Lower the cost or raise the allocation.")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/bn1", nil), 404, "budget 'bn1' not found")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/bn2", nil), 404, "budget 'bn2' not found")
	if budQueuesHas(t, s, rq) {
		t.Fatalf("a rejected bulk stored a job")
	}
	l := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets", nil), http.StatusOK)
	if arr, _ := l["budgets"].([]any); len(arr) != 2 {
		t.Fatalf("budgets after rejected bulks: %s", budCanon(t, l))
	}
}

// TestBudgetsCreateWithOnDuplicateWritesNothing: §4.6 Decision — a duplicate
// enqueue (unique key) creates no budget; the existing job keeps its bindings.
func TestBudgetsCreateWithOnDuplicateWritesNothing(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	first := budJob("uq")
	first["unique_key"] = "u1"
	j1 := budEnqueue(t, s, first)
	// Prerequisite (§6.9): a plain duplicate is recognised.
	plain := budJob("uq")
	plain["unique_key"] = "u1"
	if r := apitest.DoJSON(t, s.URL, "POST", "/jobs", plain); r.Status != http.StatusOK {
		t.Fatalf("prerequisite §6.9 unique jobs: a plain duplicate enqueue (no budgets) got %v, want 200 duplicate:true", r)
	}

	second := budJob("uq", map[string]any{"key": "dupb", "create_with": budWIF(4)})
	second["unique_key"] = "u1"
	j2 := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", second), http.StatusOK)
	if j2["duplicate"] != true || budStr(t, j2, "id") != budStr(t, j1, "id") {
		t.Fatalf("second enqueue %s is not a duplicate of %s", budCanon(t, j2), budStr(t, j1, "id"))
	}
	if _, has := j2["budgets"]; has {
		t.Fatalf("duplicate response shows the new bindings: %s", budCanon(t, j2))
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/dupb", nil), 404, "budget 'dupb' not found")
	// The binding is still validated first: a missing budget is a 422 even
	// for what would be a duplicate.
	third := budJob("uq", budBind("ghost", 1))
	third["unique_key"] = "u1"
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", third), 422, "budget 'ghost' does not exist. Create it first or pass create_with.")
}

// TestBudgetsReset: §6.8 — POST /reset deletes budgets too.
func TestBudgetsReset(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "r1", budWIF(2))
	budMustPut(t, s, "r2", budTB(2, 1000, 0))
	budEnqueue(t, s, budJob("rq", budBind("r1", 1), budBind("r2", 1)))
	budEnqueue(t, s, budJob("rq", budBind("r1", 2)))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rq", 1), Accept: apitest.AcceptNDJSON})
	inflight := st.NextJobFrame(t, 10*time.Second).Job.ID

	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "POST", "/reset", nil))
	l := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets", nil), http.StatusOK)
	if c := budCanon(t, l); c != `{"budgets":[]}` {
		t.Fatalf("after reset: %s", c)
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/r1", nil), 404, "budget 'r1' not found")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/"+inflight+"/success", nil), 404, "job not found in in-flight set")
	// The key is free again; a new budget starts afresh.
	before := budNowMs()
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/r1", budWIF(1)), http.StatusCreated)
	if c, _ := budCheckBudget(t, m, "r1", 1, `{"type":"while_in_flight"}`); c < before {
		t.Fatalf("re-created budget kept the old created_at %d", c)
	}
	// The stream stays open and serves the new budget's jobs.
	j := budEnqueue(t, s, budJob("rq", budBind("r1", 1)))
	if got := st.NextJobFrame(t, 10*time.Second).Job.ID; got != budStr(t, j, "id") {
		t.Fatalf("stream got %s, want %s", got, budStr(t, j, "id"))
	}
}
