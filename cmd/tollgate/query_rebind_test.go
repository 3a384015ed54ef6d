package main

// Black-box tests of budget rebinding, single-job routes (SPEC §8.3.4).

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

func queryBindings(t testing.TB, r apitest.Response) []string {
	t.Helper()
	apitest.RequireStatus(t, r, http.StatusOK)
	m := r.Map(t)
	_, hasPayload := m["payload"]
	require.False(t, hasPayload, "rebinding answers without payload: %s", r)
	require.NotContains(t, m, "duplicate")
	list, _ := m["budgets"].([]any)
	if _, ok := m["budgets"]; ok {
		require.NotEmpty(t, list, "budgets omitted when empty: %s", r)
	}
	out := []string{}
	for _, b := range list {
		bm := b.(map[string]any)
		out = append(out, fmt.Sprintf("%s:%v", bm["key"], bm["cost"]))
	}
	return out
}

func TestQueryRebindSingleJob(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	budMustPut(t, s, "r1", budWIF(1))
	budMustPut(t, s, "r2", budWIF(5))
	j := apitest.Enqueue(t, base, apitest.SimpleJob("rq", 1))
	path := "/jobs/" + j.ID + "/budgets"
	do := func(method, p string, body any) apitest.Response { return apitest.DoJSON(t, base, method, p, body) }

	require.Equal(t, []string{"r2:1"}, queryBindings(t, do("POST", path+"/r2", map[string]any{})))
	apitest.RequireError(t, do("POST", path+"/r2", map[string]any{"cost": 2}), http.StatusConflict,
		"job '"+j.ID+"' already draws on budget 'r2'. Use PUT to replace the binding, or PATCH to change its cost.")
	require.Equal(t, []string{"r2:3"}, queryBindings(t, do("PUT", path+"/r2", map[string]any{"cost": 3})))
	require.Equal(t, []string{"r2:3"}, queryBindings(t, do("PUT", path+"/r2", map[string]any{"cost": 3})), "no difference")
	require.Equal(t, []string{"r2:1"}, queryBindings(t, do("PUT", path+"/r2", map[string]any{})), "PUT without cost is 1")
	require.Equal(t, []string{"r2:4"}, queryBindings(t, do("PATCH", path+"/r2", map[string]any{"cost": 4})))
	apitest.RequireError(t, do("PATCH", path+"/r1", map[string]any{"cost": 1}), http.StatusNotFound, "job '"+j.ID+"' does not draw on budget 'r1'")
	apitest.RequireError(t, do("PATCH", path+"/r2", map[string]any{}), http.StatusBadRequest, "invalid JSON: missing field 'cost'")
	apitest.RequireError(t, do("PATCH", path+"/r2", map[string]any{"cost": 0}), http.StatusUnprocessableEntity, "budget 'r2' cost must be at least 1")
	apitest.RequireError(t, do("POST", path+"/r1", map[string]any{"cost": 0}), http.StatusUnprocessableEntity, "budget 'r1' cost must be at least 1")
	apitest.RequireErrorPrefix(t, do("POST", path+"/r1", map[string]any{"cost": 2}), http.StatusUnprocessableEntity, "budget 'r1' cannot accept a job costing 2")
	apitest.RequireError(t, do("POST", path+"/zz", map[string]any{}), http.StatusUnprocessableEntity, "budget 'zz' does not exist. Create it first or pass create_with.")
	apitest.RequireError(t, do("POST", path+"/r1", map[string]any{"bucket": "x"}), http.StatusUnprocessableEntity, "budget 'r1' sets bucket, which is reserved and not yet supported")
	apitest.RequireError(t, do("POST", path+"/a,b", map[string]any{}), http.StatusUnprocessableEntity, "invalid budget key 'a,b': must not contain ','")
	apitest.RequireErrorPrefix(t, do("POST", path+"/r1", nil), http.StatusBadRequest, "invalid JSON: ")
	apitest.RequireErrorPrefix(t, do("POST", path+"/r1", map[string]any{"create_with": map[string]any{"allocation": 1}}), http.StatusBadRequest, "invalid JSON: ")
	apitest.RequireError(t, do("POST", path+"/r1", map[string]any{"create_with": map[string]any{"allocation": 0, "strategy": map[string]any{"type": "while_in_flight"}}}),
		http.StatusUnprocessableEntity, "allocation must be at least 1")

	// Whole list: order as given; repeated key refused.
	require.Equal(t, []string{"r1:1", "r2:2"}, queryBindings(t, do("PUT", path, map[string]any{"budgets": []any{
		map[string]any{"key": "r1"}, map[string]any{"key": "r2", "cost": 2}}})))
	apitest.RequireError(t, do("PUT", path, map[string]any{"budgets": []any{map[string]any{"key": "r1"}, map[string]any{"key": "r1"}}}),
		http.StatusUnprocessableEntity, "budget 'r1' named more than once")
	apitest.RequireError(t, do("PUT", path, map[string]any{}), http.StatusBadRequest, "invalid JSON: missing field 'budgets'")
	// The bound count moved: r1 cannot be deleted while the job draws on it.
	apitest.RequireStatus(t, do("DELETE", "/budgets/r1", nil), http.StatusConflict)
	require.Equal(t, []string{"r2:2"}, queryBindings(t, do("DELETE", path+"/r1", nil)))
	require.Equal(t, []string{"r2:2"}, queryBindings(t, do("DELETE", path+"/r1", nil)), "absent key: no change")
	apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/budgets/r1", nil, nil))
	// A replaced binding keeps its place; a new one is appended.
	budMustPut(t, s, "r3", budWIF(5))
	require.Equal(t, []string{"r2:2", "r3:1"}, queryBindings(t, do("POST", path+"/r3", map[string]any{})))
	require.Equal(t, []string{"r2:5", "r3:1"}, queryBindings(t, do("PUT", path+"/r2", map[string]any{"cost": 5})))
	// create_with creates the budget in the same step.
	require.Equal(t, []string{"r2:5", "r3:1", "nb:2"}, queryBindings(t, do("POST", path+"/nb", map[string]any{"cost": 2,
		"create_with": map[string]any{"allocation": 2, "strategy": map[string]any{"type": "while_in_flight"}}})))
	apitest.RequireStatus(t, do("GET", "/budgets/nb", nil), http.StatusOK)
	require.Equal(t, []string{}, queryBindings(t, do("DELETE", path, nil)))
	require.Equal(t, []string{}, queryBindings(t, do("DELETE", path, nil)))
	require.Equal(t, uint64(0), queryCount(t, base, "budgets.key=r2,r3,nb"))
	for _, k := range []string{"r2", "r3", "nb"} {
		apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/budgets/"+k, nil, nil))
	}

	// Scheduled jobs can change; in-flight and finished ones cannot.
	sj := apitest.Enqueue(t, base, map[string]any{"type": "t", "queue": "rs", "payload": 1, "ready_at": apitest.NowMS() + 3_600_000})
	budMustPut(t, s, "r4", budWIF(1))
	r := do("POST", "/jobs/"+sj.ID+"/budgets/r4", map[string]any{})
	require.Equal(t, []string{"r4:1"}, queryBindings(t, r))
	require.Equal(t, "scheduled", r.Job(t).Status)
	missing := "0000000000000000000000000"
	apitest.RequireError(t, do("POST", "/jobs/"+missing+"/budgets/r4", map[string]any{}), http.StatusNotFound, "job '"+missing+"' not found")
	apitest.RequireError(t, do("DELETE", "/jobs/nope/budgets", nil), http.StatusNotFound, "job 'nope' not found")
	fj := apitest.Enqueue(t, base, apitest.SimpleJob("rf", 1))
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=rf"})
	require.Equal(t, fj.ID, st.NextJob(t, 10*time.Second).ID)
	apitest.RequireError(t, do("POST", "/jobs/"+fj.ID+"/budgets/r4", map[string]any{}), http.StatusUnprocessableEntity,
		"job '"+fj.ID+"' is InFlight \u2014 only queued jobs may have their budgets changed")
	apitest.RequireStatus(t, apitest.Fail(t, base, fj.ID, map[string]any{"message": "x", "kill": true}), http.StatusOK)
	st.Close()
	apitest.RequireError(t, do("DELETE", "/jobs/"+fj.ID+"/budgets", nil), http.StatusUnprocessableEntity,
		"job '"+fj.ID+"' is Dead \u2014 only queued jobs may have their budgets changed")

	// msgpack.
	r = apitest.DoMsgpack(t, base, http.MethodDelete, "/jobs/"+sj.ID+"/budgets/r4", nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, apitest.Msgpack, r.Format(t))
}

// §8.3.6: a parked job whose binding is removed is an ordinary ready job
// and dispatches at once.
func TestQueryRebindParkedJob(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	budMustPut(t, s, "rp", budWIF(1))
	bind := []any{map[string]any{"key": "rp"}}
	a := apitest.Enqueue(t, base, map[string]any{"type": "t", "queue": "pq", "payload": 1, "budgets": bind})
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=pq&prefetch=2"})
	require.Equal(t, a.ID, st.NextJob(t, 10*time.Second).ID)
	b := apitest.Enqueue(t, base, map[string]any{"type": "t", "queue": "pq", "payload": 2, "budgets": bind})
	deadline := time.Now().Add(10 * time.Second)
	parked := false
	for i := 0; i < 1000 && time.Now().Before(deadline) && !parked; i++ {
		r := apitest.DoJSON(t, base, http.MethodGet, "/budgets/rp/state", nil)
		apitest.RequireStatus(t, r, http.StatusOK)
		parked = fmt.Sprint(r.Map(t)["parked"]) == "1"
		if !parked {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.True(t, parked, "job b never parked")
	require.Equal(t, []string{}, queryBindings(t, apitest.DoJSON(t, base, http.MethodDelete, "/jobs/"+b.ID+"/budgets/rp", nil)))
	require.Equal(t, b.ID, st.NextJob(t, 10*time.Second).ID, "unbudgeted now: dispatched at once")
	apitest.Ack(t, base, a.ID)
	apitest.Ack(t, base, b.ID)
	st.Close()
	// Nothing draws on rp any more.
	apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/budgets/rp", nil, nil))
}

// §8.3.5: bulk rebinding by filter, blocked in-flight jobs, 422s.
func TestQueryRebindBulk(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	budMustPut(t, s, "k1", budWIF(10))
	budMustPut(t, s, "k2", budWIF(10))
	jobs := apitest.EnqueueN(t, base, "bq", 4)
	bound := apitest.Enqueue(t, base, map[string]any{"type": "t", "queue": "bq", "payload": map[string]any{"n": 9}, "budgets": []any{map[string]any{"key": "k1", "cost": 2}}})
	other := apitest.Enqueue(t, base, apitest.SimpleJob("bo", 1))
	type bulkResp struct {
		Changed int      `json:"changed"`
		Blocked []string `json:"blocked"`
	}
	bulk := func(method, p string, body any) bulkResp {
		t.Helper()
		r := apitest.DoJSON(t, base, method, p, body)
		apitest.RequireStatus(t, r, http.StatusOK)
		require.Len(t, r.Map(t), 2, "%s", r)
		var b bulkResp
		r.Decode(t, &b)
		require.NotNil(t, b.Blocked, "blocked is a list: %s", r)
		return b
	}

	// POST: the job already bound to k1 is left alone.
	require.Equal(t, bulkResp{Changed: 4, Blocked: []string{}}, bulk("POST", "/jobs/budgets/k1?queue=bq", map[string]any{}))
	require.Equal(t, uint64(5), queryCount(t, base, "budgets.key=k1"))
	require.Equal(t, []string{"k1:2"}, queryBindings(t, apitest.DoJSON(t, base, "PUT", "/jobs/"+bound.ID+"/budgets/k1", map[string]any{"cost": 2})))
	// PUT: identical bindings are left alone.
	require.Equal(t, 4, bulk("PUT", "/jobs/budgets/k1?queue=bq", map[string]any{"cost": 2}).Changed)
	// PATCH with jq: only n >= 2, and only where the cost differs.
	require.Equal(t, 3, bulk("PATCH", "/jobs/budgets/k1?filter=.n+>%3D+2&queue=bq", map[string]any{"cost": 3}).Changed)
	require.Equal(t, 0, bulk("PATCH", "/jobs/budgets/k1?filter=.n+>%3D+2&queue=bq", map[string]any{"cost": 3}).Changed, "cost already equal")
	require.Equal(t, []string{jobs[2].ID, jobs[3].ID, bound.ID}, queryIDs(t, base, "filter=.n+>%3D+2"))
	// DELETE key: not bound ones are left alone (other).
	require.Equal(t, 2, bulk("DELETE", "/jobs/budgets/k1?priority=32768&filter=.n+<+2", nil).Changed)
	require.Equal(t, uint64(3), queryCount(t, base, "budgets.key=k1"))
	// A filter that selects nothing.
	require.Equal(t, bulkResp{Changed: 0, Blocked: []string{}}, bulk("POST", "/jobs/budgets/k2?queue=none", map[string]any{}))
	// create_with creates the budget even when no job changes.
	require.Equal(t, 0, bulk("POST", "/jobs/budgets/cw?queue=none", map[string]any{"create_with": map[string]any{"allocation": 3, "strategy": map[string]any{"type": "while_in_flight"}}}).Changed)
	apitest.RequireStatus(t, apitest.DoJSON(t, base, "GET", "/budgets/cw", nil), http.StatusOK)

	// An in-flight job the change would alter is blocked and unchanged.
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=bo"})
	require.Equal(t, other.ID, st.NextJob(t, 10*time.Second).ID)
	b := bulk("POST", "/jobs/budgets/k2", map[string]any{})
	require.Equal(t, 5, b.Changed)
	require.Equal(t, []string{other.ID}, b.Blocked)
	require.Equal(t, bulkResp{Changed: 5, Blocked: []string{}}, bulk("DELETE", "/jobs/budgets", nil), "the in-flight job has no bindings: not altered, not listed")
	require.Equal(t, uint64(0), queryCount(t, base, "budgets.key=k1,k2"))
	// Not altering it: not listed.
	require.Equal(t, bulkResp{Changed: 0, Blocked: []string{}}, bulk("DELETE", "/jobs/budgets/k2", nil))
	apitest.Ack(t, base, other.ID)
	st.Close()

	// Whole-request 422s and 400s; nothing written.
	apitest.RequireError(t, apitest.DoJSON(t, base, "POST", "/jobs/budgets/zz", map[string]any{}), http.StatusUnprocessableEntity, "budget 'zz' does not exist. Create it first or pass create_with.")
	apitest.RequireError(t, apitest.DoJSON(t, base, "POST", "/jobs/budgets/k1", map[string]any{"cost": 0}), http.StatusUnprocessableEntity, "budget 'k1' cost must be at least 1")
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, base, "PUT", "/jobs/budgets/k1", map[string]any{"cost": 11}), http.StatusUnprocessableEntity, "budget 'k1' cannot accept a job costing 11")
	apitest.RequireError(t, apitest.DoJSON(t, base, "PATCH", "/jobs/budgets/k1", map[string]any{}), http.StatusBadRequest, "invalid JSON: missing field 'cost'")
	apitest.RequireError(t, apitest.DoJSON(t, base, "POST", "/jobs/budgets/a,b", map[string]any{}), http.StatusUnprocessableEntity, "invalid budget key 'a,b': must not contain ','")
	apitest.RequireError(t, apitest.DoJSON(t, base, "DELETE", "/jobs/budgets?id=nope", nil), http.StatusBadRequest, `invalid job ID: "nope"`)
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, base, "DELETE", "/jobs/budgets/k1?bogus=1", nil), http.StatusBadRequest, "invalid query parameters: ")
	require.Equal(t, uint64(0), queryCount(t, base, "budgets.key=k1,k2"))
}
