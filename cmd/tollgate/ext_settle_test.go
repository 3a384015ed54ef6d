package main

// Black-box tests of SPEC §10.1 (settling a job's real cost) against the
// real binary.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// settleJob enqueues one job on queue bound to key with cost.
func settleJob(t *testing.T, s *servertest.Server, queue, key string, cost int) string {
	t.Helper()
	return apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": queue, "payload": 1,
		"budgets": []any{map[string]any{"key": key, "cost": cost}}}).ID
}

func settleBody(entries ...any) map[string]any { return map[string]any{"settle": entries} }

func settleEntry(key string, cost any) map[string]any {
	return map[string]any{"key": key, "cost": cost}
}

// TestExtSettleDebt: a job reserved 5 on a 10-per-second pool of capacity
// 10 and really used 30. The ack leaves the pool 20 in debt, the state
// shows the negative level, and the next job bound to the budget is
// dispatched no earlier than the moment the refill covers the debt and its
// cost (2.5 s after the ack, on the server clock), and not much later.
func TestExtSettleDebt(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	budMustPut(t, s, "llm", budTB(10, 1000, 0))
	first := settleJob(t, s, "sd", "llm", 5)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=sd&prefetch=1"})
	require.Equal(t, first, st.NextJob(t, 10*time.Second).ID)

	r := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/"+first+"/success", settleBody(settleEntry("llm", 30)))
	apitest.RequireNoContent(t, r)
	state := apitest.Object(t, apitest.DoJSON(t, s.URL, http.MethodGet, "/budgets/llm/state", nil), http.StatusOK)
	at, tokens := obsNum(t, state, "at"), obsNum(t, state, "tokens")
	// -20 at the ack, plus what dripped in since (10 per second)
	require.Less(t, tokens, -15.0, "the state shows the debt: %v", state)
	require.GreaterOrEqual(t, tokens, -20.0-1e-6)
	repaid := at + (5-tokens)*100 // ms: 0.01 token per ms

	second := settleJob(t, s, "sd", "llm", 5)
	j := st.NextJob(t, 15*time.Second)
	require.Equal(t, second, j.ID)
	got := float64(apitest.U64(j.DequeuedAt))
	t.Logf("debt %.3f at %.0f: covered at %.1f, dispatched at %.0f (%+.1f ms)", tokens, at, repaid, got, got-repaid)
	require.GreaterOrEqual(t, got, repaid-1, "dispatched %v ms before the debt and its cost were covered", repaid-got)
	require.Less(t, got, repaid+1500, "dispatched %v ms after the debt and its cost were covered", got-repaid)
	require.Equal(t, `[{"cost":5,"key":"llm"}]`, compactJSON(t, j.Raw["budgets"]), "settlement never changes the bindings")
	apitest.Ack(t, s.URL, second)

	fams := obsMetrics(t, s)
	obsRequireMetric(t, fams, "tollgate_budget_settlements_total", map[string]string{"budget": "llm"}, 1)
}

// TestExtSettleChecks: the 400 texts and the check order of §10.1 (400s,
// then the job lookup, then 422), a rejected request changing nothing,
// the bulk rules, bodies of other types ignored, failure reports settling,
// credits capped at the capacity, while_in_flight entries accepted with no
// effect.
func TestExtSettleChecks(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	budMustPut(t, s, "tb", budTB(100, 1000000, 0)) // a slow refill: 0.0001 token/ms, within the 0.5 tolerance below for 5 s
	budMustPut(t, s, "wif", budWIF(5))
	const queue = "sc"
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=" + queue + "&prefetch=10"})
	id := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": queue, "payload": 1,
		"budgets": []any{map[string]any{"key": "tb", "cost": 10}, map[string]any{"key": "wif", "cost": 1}}}).ID
	require.Equal(t, id, st.NextJob(t, 10*time.Second).ID)
	tokens := func(key string) float64 {
		return obsNum(t, apitest.Object(t, apitest.DoJSON(t, s.URL, http.MethodGet, "/budgets/"+key+"/state", nil), http.StatusOK), "tokens")
	}
	require.InDelta(t, 90, tokens("tb"), 0.5)

	success := "/jobs/" + id + "/success"
	const costText = "settle[1].cost must be an integer between 0 and 1000000"
	for _, bad := range []any{-1, 1000001, 1.5, "3"} {
		r := apitest.DoJSON(t, s.URL, http.MethodPost, success, settleBody(settleEntry("tb", 1), settleEntry("wif", bad)))
		apitest.RequireError(t, r, http.StatusBadRequest, costText)
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, http.MethodPost, success, settleBody(settleEntry("tb", 1), settleEntry("tb", 2))),
		http.StatusBadRequest, "settle: duplicate budget key 'tb'")
	r := apitest.DoJSON(t, s.URL, http.MethodPost, success, settleBody(map[string]any{"key": "tb"}))
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r)
	// 400 before the lookup, the lookup before the 422
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/nope/success", settleBody(settleEntry("tb", -1))),
		http.StatusBadRequest, "settle[0].cost must be an integer between 0 and 1000000")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/nope/success", settleBody(settleEntry("other", 1))),
		http.StatusNotFound, "job not found in in-flight set")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, http.MethodPost, success, settleBody(settleEntry("tb", 1), settleEntry("other", 1))),
		http.StatusUnprocessableEntity, "budget 'other' is not bound to job "+id)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/"+id+"/failure", map[string]any{"message": "x",
		"settle": []any{settleEntry("other", 1)}}), http.StatusUnprocessableEntity, "budget 'other' is not bound to job "+id)
	// bulk: a settle id not in ids, or an unbound key of an in-flight job,
	// fails the whole request
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/success", map[string]any{"ids": []string{id},
		"settle": map[string]any{"zzz": []any{settleEntry("tb", 1)}}}), http.StatusBadRequest, "settle names job zzz, which is not in ids")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/success", map[string]any{"ids": []string{"nope", id},
		"settle": map[string]any{id: []any{settleEntry("other", 1)}}}), http.StatusUnprocessableEntity, "budget 'other' is not bound to job "+id)
	// nothing changed
	require.Equal(t, "in_flight", apitest.MustGet(t, s.URL, id).Status)
	require.InDelta(t, 90, tokens("tb"), 0.5)

	// a body that is not JSON or msgpack is ignored, as before
	r = apitest.Request(t, apitest.HTTP, s.URL, http.MethodPost, success, []byte(`{"settle":[{"key":"tb","cost":99}]}`), map[string]string{"Content-Type": "text/plain"})
	apitest.RequireNoContent(t, r)
	require.InDelta(t, 90, tokens("tb"), 0.5, "a text/plain body settled")

	// bulk: a credit (reserved 10, used 4: +6) and an id not in flight,
	// whose entries are ignored; while_in_flight accepted, no effect
	a := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": queue, "payload": 1,
		"budgets": []any{map[string]any{"key": "tb", "cost": 10}, map[string]any{"key": "wif", "cost": 1}}}).ID
	require.Equal(t, a, st.NextJob(t, 10*time.Second).ID)
	require.InDelta(t, 80, tokens("tb"), 0.5)
	r = apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/success", map[string]any{"ids": []string{a, "nope"},
		"settle": map[string]any{a: []any{settleEntry("tb", 4), settleEntry("wif", 1000)}, "nope": []any{settleEntry("x", 1)}}})
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r)
	require.Equal(t, []any{"nope"}, r.Map(t)["not_found"])
	require.InDelta(t, 86, tokens("tb"), 0.5)
	require.InDelta(t, 5, tokens("wif"), 0.5)

	// failure with settle, msgpack: reserved 10, used 100: -90, a debt
	b := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": queue, "payload": 1,
		"budgets": []any{map[string]any{"key": "tb", "cost": 10}}}).ID
	require.Equal(t, b, st.NextJob(t, 10*time.Second).ID)
	r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs/"+b+"/failure", map[string]any{"message": "429", "kill": true, "settle": []any{settleEntry("tb", 100)}})
	apitest.RequireStatus(t, r, http.StatusOK)
	require.InDelta(t, -14, tokens("tb"), 0.5)

	// a credit never lifts the level above the capacity
	c := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": queue, "payload": 1,
		"budgets": []any{map[string]any{"key": "wif", "cost": 1}}}).ID
	require.Equal(t, c, st.NextJob(t, 10*time.Second).ID)
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/"+c+"/success", settleBody()))
	budMustPut(t, s, "cap", budTB(10, 1000000, 0))
	d := settleJob(t, s, queue, "cap", 3)
	require.Equal(t, d, st.NextJob(t, 10*time.Second).ID)
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/"+d+"/success", settleBody(settleEntry("cap", 0))))
	require.InDelta(t, 10, tokens("cap"), 0.5)
}

// compactJSON renders a decoded value as compact JSON.
func compactJSON(t *testing.T, v any) string {
	t.Helper()
	b := apitest.Encode(t, apitest.JSON, v)
	return strings.TrimSpace(string(b))
}
