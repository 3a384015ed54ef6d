package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestBudgetHoldAPI: SPEC §10.2 — the routes' statuses and texts, never
// shortened, the budget object untouched, kept by PUT of the budget, and
// DELETE releasing; JSON and msgpack.
func TestBudgetHoldAPI(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/nope/hold", map[string]any{"for_ms": 1000}), http.StatusNotFound, "budget 'nope' not found")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/nope/hold", nil), http.StatusNotFound, "budget 'nope' not found")
	before := budMustPut(t, s, "api", budTB(10, 1000, 0))
	const exactlyOne = "hold needs exactly one of until and for_ms"
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/api/hold", map[string]any{}), http.StatusBadRequest, exactlyOne)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/api/hold", map[string]any{"until": 1, "for_ms": 1}), http.StatusBadRequest, exactlyOne)
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/api/hold", `{"for_ms":"soon"}`), http.StatusBadRequest, "invalid JSON: ")
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/api/hold", `{"for_ms":-1}`), http.StatusBadRequest, "invalid JSON: ")

	t0 := budNowMs()
	st := apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/api/hold", map[string]any{"for_ms": 60000}), http.StatusOK)
	until := budInt(t, st, "held_until")
	if until < t0+60000 || until > budNowMs()+60000 {
		t.Fatalf("held_until %d, want now+60000 (now %d)", until, t0)
	}
	if budStr(t, st, "key") != "api" || budFloat(t, st, "tokens") != 10 {
		t.Fatalf("hold answered %v, want the budget's state with a full pool", st)
	}
	// never shortened, by for_ms or by a past until (which holds nothing)
	st = apitest.Object(t, apitest.DoMsgpack(t, s.URL, "PUT", "/budgets/api/hold", map[string]any{"for_ms": 10}), http.StatusOK)
	if got := budInt(t, st, "held_until"); got != until {
		t.Fatalf("a shorter hold moved held_until %d -> %d", until, got)
	}
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/api/hold", map[string]any{"until": 5}), http.StatusOK)
	if got := budInt(t, st, "held_until"); got != until {
		t.Fatalf("a past until moved held_until %d -> %d", until, got)
	}
	// the budget object is unchanged; PUT of the budget keeps the hold
	after := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/api", nil), http.StatusOK)
	if budCanon(t, before) != budCanon(t, after) {
		t.Fatalf("a hold changed the budget: %v -> %v", before, after)
	}
	budMustPut(t, s, "api", budTB(20, 1000, 0))
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/api/state", nil), http.StatusOK)
	if got := budInt(t, st, "held_until"); got != until {
		t.Fatalf("held_until %d after PUT of the budget, want %d", got, until)
	}
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/api/hold", nil))
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/api/state", nil), http.StatusOK)
	if _, ok := st["held_until"]; ok {
		t.Fatalf("held_until shown after DELETE: %v", st)
	}
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/api/hold", nil)) // nothing held: 204 too
	// a past until with drain holds nothing but drains
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/api/hold", map[string]any{"until": 0, "drain": true}), http.StatusOK)
	if _, ok := st["held_until"]; ok || budFloat(t, st, "tokens") > 1 {
		t.Fatalf("past until with drain answered %v, want no held_until and an empty pool", st)
	}
	if !strings.Contains(budMetrics(t, s), "tollgate_budget_drains_total 1") {
		t.Fatal("/metrics does not count the drain")
	}
}

// TestBudgetHold429Recipe: SPEC §10.2 — a worker whose call got a 429 fails
// its job with retry_at and holds the budget; no job bound to it is
// dispatched during the hold, the parked jobs' waiting names the hold's
// end, and they go when it ends, released by the budget's own timer.
func TestBudgetHold429Recipe(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "upstream", budTB(100, 1000, 10))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("calls", 10), Accept: apitest.AcceptNDJSON})
	first := budStr(t, budEnqueue(t, s, budJob("calls", budBind("upstream", 1))), "id")
	f := st.NextJobFrame(t, 5*time.Second)
	if f.Job.ID != first {
		t.Fatalf("got %s, want %s", f.Job.ID, first)
	}
	const holdMs = 1500
	retryAt := budNowMs() + holdMs
	apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/"+first+"/failure", map[string]any{"message": "429", "retry_at": retryAt}), http.StatusOK)
	held := apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/upstream/hold", map[string]any{"until": retryAt}), http.StatusOK)
	if budInt(t, held, "held_until") != retryAt {
		t.Fatalf("held_until %v, want %d", held["held_until"], retryAt)
	}
	var ids []string
	for range 5 {
		ids = append(ids, budStr(t, budEnqueue(t, s, budJob("calls", budBind("upstream", 1))), "id"))
	}
	budWaitWaiting(t, s, ids[0], retryAt)
	// nothing during the hold (the stream has free slots and the pool holds 9 tokens)
	wait := time.Until(time.UnixMilli(retryAt)) - 100*time.Millisecond
	st.NoJobFor(t, wait, false, "the budget is held")
	got := st.Frames(t, 6, 5*time.Second) // the five, and the failed job at its retry_at
	for _, f := range got {
		if at := f.At.UnixMilli(); at < retryAt-int64(budEarlySlack/time.Millisecond) {
			t.Errorf("job %s dispatched at %d, before the hold's end %d", f.Job.ID, at, retryAt)
		}
	}
	if late := got[len(got)-1].At.Sub(time.UnixMilli(retryAt)); late > budLateSlack {
		t.Errorf("the last job came %v after the hold's end, want within %v", late, budLateSlack)
	}
	sm := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/upstream/state", nil), http.StatusOK)
	if _, ok := sm["held_until"]; ok {
		t.Fatalf("held_until still shown after the hold: %v", sm)
	}
}

// budWaitWaiting polls a job until it is parked and requires its waiting
// object's expected time to be the hold's end.
func budWaitWaiting(t *testing.T, s *servertest.Server, id string, until int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		j := budGetJob(t, s, id)
		if w, ok := j["waiting"].(map[string]any); ok {
			if budStr(t, w, "budget") != "upstream" || budInt(t, w, "affordable_at") != until {
				t.Fatalf("waiting %v, want budget upstream expected at the hold's end %d", w, until)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not parked within 5 s: %v", id, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBudgetHoldDurable: SPEC §10.2 — a hold and its drain survive a
// restart (the pool starts empty while still held); DELETE of the budget
// and POST /reset remove the hold with it.
func TestBudgetHoldDurable(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "d", budTB(1000, 1000, 0))
	budMustPut(t, s, "keep", budWIF(3))
	st := apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/d/hold", map[string]any{"for_ms": 600000, "drain": true}), http.StatusOK)
	until := budInt(t, st, "held_until")
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/keep/hold", map[string]any{"for_ms": 600000}), http.StatusOK)
	s.Restart()
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/d/state", nil), http.StatusOK)
	if got := budInt(t, st, "held_until"); got != until {
		t.Fatalf("held_until %d after a restart, want %d", got, until)
	}
	// 1000 tokens per second: a pool not drained at the restart would be full
	if tokens := budFloat(t, st, "tokens"); tokens > 500 {
		t.Fatalf("tokens %v after a restart of a drained, held budget; want it empty at the restart", tokens)
	}
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/d", nil))
	budMustPut(t, s, "d", budTB(1000, 1000, 0))
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/d/state", nil), http.StatusOK)
	if _, ok := st["held_until"]; ok {
		t.Fatalf("a budget made again after DELETE is still held: %v", st)
	}
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "POST", "/reset", nil))
	budMustPut(t, s, "keep", budWIF(3))
	s.Restart()
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/keep/state", nil), http.StatusOK)
	if _, ok := st["held_until"]; ok {
		t.Fatalf("a budget made again after /reset is still held after a restart: %v", st)
	}
}

func budFloat(t testing.TB, m map[string]any, field string) float64 {
	t.Helper()
	v, ok := m[field]
	if !ok {
		t.Fatalf("%v: no field %q", m, field)
	}
	n, ok := v.(interface{ Float64() (float64, error) })
	if !ok {
		t.Fatalf("%v: %q is not a number", m, field)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// budMetrics reads /metrics as text.
func budMetrics(t testing.TB, s *servertest.Server) string {
	t.Helper()
	r := apitest.Request(t, nil, s.URL, "GET", "/metrics", nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("%v", r)
	}
	return string(r.Body)
}
