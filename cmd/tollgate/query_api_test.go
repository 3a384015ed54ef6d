package main

// Black-box tests of the query and administration API (SPEC §6): shared
// filters, GET /jobs pagination, GET /jobs/count, job errors, DELETE /jobs,
// PATCH /jobs/{id} and PATCH /jobs.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// §6.1: every filter, at its range bounds, and the 400s.
func TestQueryFilters(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	future := apitest.NowMS() + 3_600_000

	budMustPut(t, s, "fk", budWIF(10))
	p0 := apitest.Enqueue(t, base, map[string]any{"type": "a", "queue": "q1", "payload": map[string]any{"n": 1}, "priority": 0})
	pMax := apitest.Enqueue(t, base, map[string]any{"type": "b", "queue": "q1", "payload": "text", "priority": 65535})
	sched := apitest.Enqueue(t, base, map[string]any{"type": "a", "queue": "q2", "payload": map[string]any{"n": 5}, "ready_at": future})
	bound := apitest.Enqueue(t, base, map[string]any{"type": "a", "queue": "q3", "payload": []any{1, 2},
		"budgets": []any{map[string]any{"key": "fk", "cost": 2}}})
	dead := apitest.Enqueue(t, base, map[string]any{"type": "c", "queue": "q4", "payload": map[string]any{"n": 9}})
	r := queryTakeFail(t, base, "q4", dead.ID, map[string]any{"message": "boom", "kill": true})
	apitest.RequireStatus(t, r, http.StatusOK)
	all := []string{p0.ID, pMax.ID, sched.ID, bound.ID, dead.ID}

	cases := []struct {
		query string
		want  []string
	}{
		{"", all},
		{"queue=", all},
		{"queue=q1", []string{p0.ID, pMax.ID}},
		{"queue=q2,,q1,", []string{p0.ID, pMax.ID, sched.ID}},
		{"type=a", []string{p0.ID, sched.ID, bound.ID}},
		{"type=a&queue=q1", []string{p0.ID}},
		{"status=scheduled", []string{sched.ID}},
		{"status=ready", []string{p0.ID, pMax.ID, bound.ID}},
		{"status=dead,completed", []string{dead.ID}},
		{"status=in_flight", nil},
		{"priority=0", []string{p0.ID}},
		{"priority=65535", []string{pMax.ID}},
		{"priority=..0", []string{p0.ID}},
		{"priority=65535..", []string{pMax.ID}},
		{"priority=1..65534", []string{sched.ID, bound.ID, dead.ID}},
		{"priority=..", all},
		{"priority=0..65535", all},
		{fmt.Sprintf("ready_at=%d", future), []string{sched.ID}},
		{fmt.Sprintf("ready_at=%d..", future), []string{sched.ID}},
		{fmt.Sprintf("ready_at=%d..", future+1), nil},
		{fmt.Sprintf("ready_at=..%d", future-1), []string{p0.ID, pMax.ID, bound.ID, dead.ID}},
		{"ready_at=18446744073709551615", nil},
		{"attempts=0", []string{p0.ID, pMax.ID, sched.ID, bound.ID}},
		{"attempts=1..", []string{dead.ID}},
		{"attempts=1..4294967295", []string{dead.ID}},
		{"budgets.key=fk", []string{bound.ID}},
		{"budgets.key=nope,fk", []string{bound.ID}},
		{"budgets.key=nope", nil},
		{"id=" + pMax.ID + "," + dead.ID, []string{pMax.ID, dead.ID}},
		{"id=" + pMax.ID + "&queue=q4", nil},
		// jq: .n errors on the string payload, and > on the array: no match, no error.
		{"filter=" + url.QueryEscape(".n > 1"), []string{sched.ID, dead.ID}},
		{"filter=" + url.QueryEscape(".n"), []string{p0.ID, sched.ID, dead.ID}},
		{"filter=" + url.QueryEscape(`type == "string"`), []string{pMax.ID}},
		{"filter=" + url.QueryEscape(".[]"), []string{p0.ID, sched.ID, bound.ID, dead.ID}},
		{"filter=" + url.QueryEscape("error(\"x\")"), nil},
		{"filter=" + url.QueryEscape(".n >= 5") + "&status=scheduled", []string{sched.ID}},
	}
	for _, c := range cases {
		got := queryIDs(t, base, c.query)
		if c.want == nil {
			c.want = []string{}
		}
		require.Equal(t, c.want, got, "GET /jobs?%s", c.query)
		require.Equal(t, uint64(len(c.want)), queryCount(t, base, c.query), "count ?%s", c.query)
	}

	bad := []struct {
		query string
		text  string
	}{
		{"bogus=1", "invalid query parameters: unknown field `bogus`"},
		{"status=ready,nope", "invalid query parameters: status: unknown status: nope"},
		{"priority=5..4", "invalid query parameters: priority: range lower bound exceeds upper bound"},
		{"attempts=3..1", "invalid query parameters: attempts: range lower bound exceeds upper bound"},
		{"id=" + p0.ID + ",nope", `invalid job ID: "nope"`},
		{"limit=0", "limit must be between 1 and 2000"},
		{"limit=2001", "limit must be between 1 and 2000"},
		{"limit=-1", "limit must be between 1 and 2000"},
	}
	for _, b := range bad {
		r := apitest.DoJSON(t, base, http.MethodGet, "/jobs?"+b.query, nil)
		apitest.RequireError(t, r, http.StatusBadRequest, b.text)
	}
	for _, q := range []string{"priority=-1", "priority=65536", "priority=a", "ready_at=1..x", "attempts=4294967296", "order=up", "limit=x", "from=nope"} {
		r := apitest.DoJSON(t, base, http.MethodGet, "/jobs?"+q, nil)
		apitest.RequireStatus(t, r, http.StatusBadRequest)
	}
	r = apitest.DoJSON(t, base, http.MethodGet, "/jobs?filter="+url.QueryEscape(".a =="), nil)
	apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid filter: ")
	// count takes no pagination parameters.
	for _, q := range []string{"limit=5", "from=" + p0.ID, "order=asc"} {
		r := apitest.DoJSON(t, base, http.MethodGet, "/jobs/count?"+q, nil)
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid query parameters: unknown field")
	}
	// msgpack works too.
	r = apitest.DoMsgpack(t, base, http.MethodGet, "/jobs/count?queue=q1", nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, apitest.Msgpack, r.Format(t))
	require.EqualValues(t, 2, r.Map(t)["count"])
}

// §6.2: cursor pagination forwards and backwards, link layout, payloads.
func TestQueryPagination(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	jobs := apitest.EnqueueN(t, base, "pg", 7)
	other := apitest.Enqueue(t, base, apitest.SimpleJob("other", 1))
	ids := apitest.IDs(jobs)

	p := queryList(t, base, "/jobs?limit=3&queue=pg&status=ready")
	require.Equal(t, ids[:3], apitest.IDs(p.Jobs))
	require.Equal(t, "/jobs?order=asc&limit=3&status=ready&queue=pg", p.Pages.Self)
	require.Nil(t, p.Pages.Prev)
	queryRequireLink(t, "/jobs?from="+ids[2]+"&order=asc&limit=3&status=ready&queue=pg", p.Pages.Next)
	require.Equal(t, `{"n":0}`, fmt.Sprint(queryJSON(t, p.Jobs[0].Payload)), "items carry payload")

	p2 := queryList(t, base, *p.Pages.Next)
	require.Equal(t, ids[3:6], apitest.IDs(p2.Jobs))
	require.Equal(t, *p.Pages.Next, p2.Pages.Self)
	queryRequireLink(t, "/jobs?from="+ids[3]+"&order=desc&limit=3&status=ready&queue=pg", p2.Pages.Prev)

	p3 := queryList(t, base, *p2.Pages.Next)
	require.Equal(t, ids[6:], apitest.IDs(p3.Jobs))
	require.Nil(t, p3.Pages.Next, "no more jobs")
	require.NotNil(t, p3.Pages.Prev)

	// Backwards from page 3: the previous page comes back in reverse order.
	back := queryList(t, base, *p3.Pages.Prev)
	require.Equal(t, []string{ids[5], ids[4], ids[3]}, apitest.IDs(back.Jobs))
	queryRequireLink(t, "/jobs?from="+ids[3]+"&order=desc&limit=3&status=ready&queue=pg", back.Pages.Next)
	back2 := queryList(t, base, *back.Pages.Next)
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, apitest.IDs(back2.Jobs))
	require.Nil(t, back2.Pages.Next)
	queryRequireLink(t, "/jobs?from="+ids[2]+"&order=asc&limit=3&status=ready&queue=pg", back2.Pages.Prev)

	// desc from the end, exactly one page.
	d := queryList(t, base, "/jobs?order=desc&limit=8")
	require.Equal(t, append([]string{other.ID}, reversed(ids)...), apitest.IDs(d.Jobs))
	require.Nil(t, d.Pages.Next)
	require.Nil(t, d.Pages.Prev)
	// A page exactly as long as what is left has no next.
	e := queryList(t, base, "/jobs?queue=pg&limit=7")
	require.Len(t, e.Jobs, 7)
	require.Nil(t, e.Pages.Next)
	// From the last id: empty page, no links.
	empty := queryList(t, base, "/jobs?queue=pg&from="+ids[6])
	require.Empty(t, empty.Jobs)
	require.Nil(t, empty.Pages.Next)
	require.Nil(t, empty.Pages.Prev)
	// Default limit 50 and canonical link rendering.
	q := queryList(t, base, "/jobs?priority=0..65535&ready_at=5..&attempts=0..0&queue=pg,other&filter="+url.QueryEscape(".n >= 0"))
	require.Len(t, q.Jobs, 7)
	require.Equal(t, "/jobs?order=asc&limit=50&queue=other,pg&priority=..&ready_at=5..&attempts=0&filter="+url.QueryEscape(".n >= 0"), q.Pages.Self)

	// Deleted and purged jobs are invisible.
	apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/jobs/"+ids[1], nil, nil))
	require.Equal(t, []string{ids[0], ids[2], ids[3], ids[4], ids[5], ids[6]}, queryIDs(t, base, "queue=pg"))
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// §6.5: error records, paginated, and one by attempt.
func TestQueryJobErrors(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	j := apitest.Enqueue(t, base, apitest.SimpleJob("errq", 1))
	for i := 1; i <= 3; i++ {
		body := map[string]any{"message": fmt.Sprintf("fail %d", i), "retry_at": 1}
		if i == 2 {
			body["error_type"] = "RuntimeError"
			body["backtrace"] = "line 1"
		}
		apitest.WaitStatus(t, base, j.ID, "ready")
		r := queryTakeFail(t, base, "errq", j.ID, body)
		apitest.RequireStatus(t, r, http.StatusOK)
	}

	type errPage struct {
		Errors []map[string]any `json:"errors"`
		Pages  queryPages       `json:"pages"`
	}
	get := func(link string) errPage {
		r := apitest.DoJSON(t, base, http.MethodGet, link, nil)
		apitest.RequireStatus(t, r, http.StatusOK)
		var p errPage
		r.Decode(t, &p)
		return p
	}
	attempts := func(p errPage) []string {
		var out []string
		for _, e := range p.Errors {
			out = append(out, fmt.Sprint(e["attempt"]))
		}
		return out
	}
	all := get("/jobs/" + j.ID + "/errors")
	require.Equal(t, []string{"1", "2", "3"}, attempts(all))
	require.Equal(t, "/jobs/"+j.ID+"/errors?order=asc&limit=50", all.Pages.Self)
	require.Nil(t, all.Pages.Next)
	require.Nil(t, all.Pages.Prev)
	require.Equal(t, "fail 1", all.Errors[0]["message"])
	require.NotContains(t, all.Errors[0], "error_type")
	require.NotContains(t, all.Errors[0], "backtrace")
	require.Equal(t, "RuntimeError", all.Errors[1]["error_type"])
	require.Equal(t, "line 1", all.Errors[1]["backtrace"])
	require.Contains(t, all.Errors[0], "dequeued_at")
	require.Contains(t, all.Errors[0], "failed_at")

	p1 := get("/jobs/" + j.ID + "/errors?limit=2")
	require.Equal(t, []string{"1", "2"}, attempts(p1))
	queryRequireLink(t, "/jobs/"+j.ID+"/errors?from=2&order=asc&limit=2", p1.Pages.Next)
	p2 := get(*p1.Pages.Next)
	require.Equal(t, []string{"3"}, attempts(p2))
	require.Nil(t, p2.Pages.Next)
	queryRequireLink(t, "/jobs/"+j.ID+"/errors?from=3&order=desc&limit=2", p2.Pages.Prev)
	back := get(*p2.Pages.Prev)
	require.Equal(t, []string{"2", "1"}, attempts(back))
	d := get("/jobs/" + j.ID + "/errors?order=desc&limit=1")
	require.Equal(t, []string{"3"}, attempts(d))
	queryRequireLink(t, "/jobs/"+j.ID+"/errors?from=3&order=desc&limit=1", d.Pages.Next)

	r := apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors/2", nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, "fail 2", r.Map(t)["message"])
	require.Equal(t, "2", fmt.Sprint(r.Map(t)["attempt"]))
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors/4", nil), http.StatusNotFound, "error record not found")
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors/0", nil), http.StatusNotFound, "error record not found")
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors/x", nil), http.StatusBadRequest, "invalid path parameter: ")
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors/4294967296", nil), http.StatusBadRequest, "invalid path parameter: ")
	missing := "0000000000000000000000000"
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+missing+"/errors", nil), http.StatusNotFound, "job not found")
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+missing+"/errors/1", nil), http.StatusNotFound, "job not found")
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors?status=ready", nil), http.StatusBadRequest, "invalid query parameters: ")
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors?limit=0", nil), http.StatusBadRequest, "limit must be between 1 and 2000")

	// Error records go with the job.
	apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/jobs/"+j.ID, nil, nil))
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/jobs/"+j.ID+"/errors", nil), http.StatusNotFound, "job not found")
}

// §6.7: DELETE /jobs by filter.
func TestQueryDeleteByFilter(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	a := apitest.EnqueueN(t, base, "da", 5)
	b := apitest.EnqueueN(t, base, "db", 3)
	keep := apitest.Enqueue(t, base, map[string]any{"type": "test", "queue": "dc", "payload": 1, "unique_key": "u1"})

	del := func(query string) int {
		r := apitest.DoJSON(t, base, http.MethodDelete, "/jobs?"+query, nil)
		apitest.RequireStatus(t, r, http.StatusOK)
		var body struct {
			Deleted int `json:"deleted"`
		}
		r.Decode(t, &body)
		require.Len(t, r.Map(t), 1)
		return body.Deleted
	}
	for _, q := range []string{"id=nope", "priority=3..1", "filter=" + url.QueryEscape("(("), "bogus=1", "status=x"} {
		r := apitest.DoJSON(t, base, http.MethodDelete, "/jobs?"+q, nil)
		apitest.RequireStatus(t, r, http.StatusBadRequest)
	}
	require.Equal(t, 2, del("queue=da&filter="+url.QueryEscape(".n >= 3")))
	require.Equal(t, apitest.IDs(a[:3]), queryIDs(t, base, "queue=da"))
	require.Equal(t, 1, del("id="+a[0].ID+","+b[0].ID+"&queue=da"))
	require.Equal(t, 0, del("queue=none"))

	// An in-flight job is deleted and its ack gets 404.
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=db"})
	inflight := st.NextJob(t, 10*time.Second)
	require.Equal(t, 1, del("status=in_flight"))
	r := apitest.Request(t, nil, base, http.MethodPost, "/jobs/"+inflight.ID+"/success", nil, nil)
	apitest.RequireStatus(t, r, http.StatusNotFound)
	st.Close()

	// No filters deletes every job; the unique key is released.
	require.Equal(t, 2+2+1, del(""))
	require.Equal(t, uint64(0), queryCount(t, base, ""))
	again := apitest.Enqueue(t, base, map[string]any{"type": "test", "queue": "dc", "payload": 1, "unique_key": "u1"})
	require.NotEqual(t, keep.ID, again.ID)
	require.Equal(t, []string{"dc"}, apitest.Queues(t, base))
}

func queryJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func queryRequireLink(t testing.TB, want string, got *string) {
	t.Helper()
	require.NotNil(t, got, "want link %s", want)
	require.Equal(t, want, *got)
}

// §6.6: PATCH /jobs/{id}: fields, merge semantics, statuses, errors.
func TestQueryPatchJob(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	patch := func(id string, body any) apitest.Response {
		return apitest.DoJSON(t, base, http.MethodPatch, "/jobs/"+id, body)
	}
	j := apitest.Enqueue(t, base, apitest.SimpleJob("pa", map[string]any{"x": 1}))

	r := patch(j.ID, map[string]any{"priority": 5, "queue": "pb", "retry_limit": 3,
		"backoff": map[string]any{"exponent": 2, "base_ms": 10, "jitter_ms": 0}, "retention": map[string]any{"completed_ms": 10},
		"type": "ignored", "payload": "ignored"})
	apitest.RequireStatus(t, r, http.StatusOK)
	v := r.Job(t)
	require.False(t, v.Has("payload"), "view without payload")
	require.Equal(t, uint16(5), v.Priority)
	require.Equal(t, "pb", v.Queue)
	require.Equal(t, "test", v.Type)
	require.Equal(t, "ready", v.Status)
	require.Equal(t, uint32(3), *v.RetryLimit)
	require.Equal(t, apitest.Backoff{Exponent: 2, BaseMS: 10}, *v.Backoff)
	require.Equal(t, uint64(10), apitest.U64(v.Retention.CompletedMS))
	g := apitest.MustGet(t, base, j.ID)
	require.Equal(t, uint16(5), g.Priority)
	require.Equal(t, "pb", g.Queue)
	require.Equal(t, []string{"pb"}, apitest.Queues(t, base))

	// Retention merges field by field; null resets.
	v = patch(j.ID, map[string]any{"retention": map[string]any{"dead_ms": 7}}).Job(t)
	require.Equal(t, uint64(10), apitest.U64(v.Retention.CompletedMS))
	require.Equal(t, uint64(7), apitest.U64(v.Retention.DeadMS))
	v = patch(j.ID, map[string]any{"retention": map[string]any{"completed_ms": nil}}).Job(t)
	require.Nil(t, v.Retention.CompletedMS)
	require.Equal(t, uint64(7), apitest.U64(v.Retention.DeadMS))
	r = patch(j.ID, map[string]any{"retry_limit": nil, "backoff": nil, "retention": nil})
	apitest.RequireStatus(t, r, http.StatusOK)
	v = r.Job(t)
	for _, k := range []string{"retry_limit", "backoff", "retention"} {
		require.False(t, v.Has(k), "%s reset: %s", k, r)
	}
	require.Equal(t, uint16(5), v.Priority, "absent fields unchanged")

	// ready + future ready_at -> scheduled; null -> ready now; past -> ready.
	future := apitest.NowMS() + 3_600_000
	v = patch(j.ID, map[string]any{"ready_at": future}).Job(t)
	require.Equal(t, "scheduled", v.Status)
	require.Equal(t, future, v.ReadyAt)
	require.Equal(t, "scheduled", apitest.MustGet(t, base, j.ID).Status)
	before := apitest.NowMS()
	v = patch(j.ID, map[string]any{"ready_at": nil}).Job(t)
	require.Equal(t, "ready", v.Status)
	require.GreaterOrEqual(t, v.ReadyAt, before)
	v = patch(j.ID, map[string]any{"ready_at": nil}).Job(t) // no effect on ready
	require.Equal(t, "ready", v.Status)
	v = patch(j.ID, map[string]any{"ready_at": future}).Job(t)
	require.Equal(t, "scheduled", v.Status)
	v = patch(j.ID, map[string]any{"ready_at": 1}).Job(t)
	require.Equal(t, "ready", v.Status)
	require.Equal(t, uint64(1), v.ReadyAt)

	// A job made scheduled is not dispatched; made ready again, it is.
	v = patch(j.ID, map[string]any{"ready_at": future}).Job(t)
	require.Equal(t, "scheduled", v.Status)
	other := apitest.Enqueue(t, base, map[string]any{"type": "test", "queue": "pb", "payload": 2, "priority": 9})
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=pb&prefetch=1"})
	require.Equal(t, other.ID, st.NextJob(t, 10*time.Second).ID, "the scheduled job (priority 5) must not be dispatched")
	apitest.Ack(t, base, other.ID)
	v = patch(j.ID, map[string]any{"ready_at": apitest.NowMS() - 1}).Job(t)
	require.Equal(t, "ready", v.Status)
	got := st.NextJob(t, 10*time.Second)
	require.Equal(t, j.ID, got.ID)
	// In flight: patchable, status unchanged.
	v = patch(j.ID, map[string]any{"priority": 1, "ready_at": future}).Job(t)
	require.Equal(t, "in_flight", v.Status)
	require.Equal(t, uint16(1), v.Priority)
	require.Equal(t, future, v.ReadyAt)
	apitest.Ack(t, base, j.ID)
	st.Close()

	// A scheduled job moved to the near future becomes ready via the scheduler.
	k := apitest.Enqueue(t, base, map[string]any{"type": "test", "queue": "pc", "payload": 1, "ready_at": future})
	v = patch(k.ID, map[string]any{"ready_at": apitest.NowMS() + 200}).Job(t)
	require.Equal(t, "scheduled", v.Status)
	apitest.WaitStatus(t, base, k.ID, "ready")
	st2 := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=pc"})
	require.Equal(t, k.ID, st2.NextJob(t, 10*time.Second).ID)
	st2.Close()

	// Errors.
	apitest.RequireError(t, patch("0000000000000000000000000", map[string]any{"priority": 1}), http.StatusNotFound, "job not found")
	apitest.RequireError(t, patch("nope", map[string]any{"priority": 1}), http.StatusNotFound, "job not found")
	apitest.RequireError(t, patch(k.ID, map[string]any{"queue": nil}), http.StatusUnprocessableEntity, "queue cannot be null")
	apitest.RequireError(t, patch(k.ID, map[string]any{"priority": nil}), http.StatusUnprocessableEntity, "priority cannot be null")
	apitest.RequireErrorPrefix(t, patch(k.ID, map[string]any{"queue": "a,b"}), http.StatusUnprocessableEntity, "queue ")
	apitest.RequireErrorPrefix(t, patch(k.ID, map[string]any{"priority": 70000}), http.StatusBadRequest, "invalid JSON: ")
	apitest.RequireErrorPrefix(t, patch(k.ID, "{"), http.StatusBadRequest, "invalid JSON: ")
	apitest.RequireErrorPrefix(t, patch(k.ID, map[string]any{"backoff": map[string]any{"exponent": 1}}), http.StatusBadRequest, "invalid JSON: ")

	dead := apitest.Enqueue(t, base, apitest.SimpleJob("pd", 1))
	apitest.RequireStatus(t, queryTakeFail(t, base, "pd", dead.ID, map[string]any{"message": "x", "kill": true}), http.StatusOK)
	apitest.RequireError(t, patch(dead.ID, map[string]any{"priority": 1}), http.StatusUnprocessableEntity, "cannot patch job "+dead.ID+" in dead status")
	done := apitest.Enqueue(t, base, map[string]any{"type": "test", "queue": "pe", "payload": 1, "retention": map[string]any{"completed_ms": 600000}})
	st3 := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=pe"})
	require.Equal(t, done.ID, st3.NextJob(t, 10*time.Second).ID)
	apitest.Ack(t, base, done.ID)
	st3.Close()
	apitest.RequireError(t, patch(done.ID, map[string]any{"priority": 1}), http.StatusUnprocessableEntity, "cannot patch job "+done.ID+" in completed status")

	// msgpack body and response.
	r = apitest.DoMsgpack(t, base, http.MethodPatch, "/jobs/"+k.ID, map[string]any{"priority": 77})
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, apitest.Msgpack, r.Format(t))
	require.Equal(t, uint16(77), r.Job(t).Priority)
}

// §6.6: PATCH /jobs by filter and its check order.
func TestQueryPatchBulk(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	jobs := apitest.EnqueueN(t, base, "ba", 4)
	extra := apitest.Enqueue(t, base, apitest.SimpleJob("ba", map[string]any{"n": 10}))
	apitest.RequireStatus(t, queryTakeFail(t, base, "ba", jobs[0].ID, map[string]any{"message": "x", "kill": true}), http.StatusOK)
	_ = extra
	bulk := func(query string, body any) apitest.Response {
		return apitest.DoJSON(t, base, http.MethodPatch, "/jobs?"+query, body)
	}
	patched := func(r apitest.Response) int {
		apitest.RequireStatus(t, r, http.StatusOK)
		var b struct {
			Patched int `json:"patched"`
		}
		r.Decode(t, &b)
		require.Len(t, r.Map(t), 1)
		return b.Patched
	}
	// The dead job (jobs[0]) is skipped silently.
	require.Equal(t, 4, patched(bulk("queue=ba", map[string]any{"priority": 7})))
	require.Equal(t, uint64(4), queryCount(t, base, "priority=7"))
	require.Equal(t, []string{jobs[0].ID}, queryIDs(t, base, "priority=32768"))
	// jq narrows; ready_at in the future makes them scheduled.
	require.Equal(t, 2, patched(bulk("filter="+url.QueryEscape(".n >= 2 and .n < 10"), map[string]any{"ready_at": apitest.NowMS() + 3_600_000})))
	require.Equal(t, []string{jobs[2].ID, jobs[3].ID}, queryIDs(t, base, "status=scheduled"))
	// null ready_at brings them back.
	require.Equal(t, 2, patched(bulk("status=scheduled", map[string]any{"ready_at": nil})))
	require.Equal(t, uint64(0), queryCount(t, base, "status=scheduled"))
	// No filters: every non-terminal job.
	require.Equal(t, 4, patched(bulk("", map[string]any{"queue": "bb"})))
	require.Equal(t, []string{"ba", "bb"}, apitest.Queues(t, base))

	// Check order: query (400), terminal status (422), IDs (400), queue
	// (422), priority (422), jq (400).
	badJQ := "filter=" + url.QueryEscape("((")
	apitest.RequireErrorPrefix(t, bulk("bogus=1&status=dead", map[string]any{"queue": nil}), http.StatusBadRequest, "invalid query parameters: ")
	apitest.RequireError(t, bulk("status=ready,completed&id=nope", map[string]any{"queue": nil}), http.StatusUnprocessableEntity, "cannot patch jobs in completed status")
	apitest.RequireError(t, bulk("status=dead", map[string]any{}), http.StatusUnprocessableEntity, "cannot patch jobs in dead status")
	apitest.RequireError(t, bulk("id=nope&"+badJQ, map[string]any{"queue": nil}), http.StatusBadRequest, `invalid job ID: "nope"`)
	apitest.RequireError(t, bulk(badJQ, map[string]any{"queue": nil, "priority": nil}), http.StatusUnprocessableEntity, "queue cannot be null")
	apitest.RequireError(t, bulk(badJQ, map[string]any{"priority": nil}), http.StatusUnprocessableEntity, "priority cannot be null")
	apitest.RequireErrorPrefix(t, bulk(badJQ, map[string]any{"priority": 1}), http.StatusBadRequest, "invalid filter: ")
	require.Equal(t, uint64(4), queryCount(t, base, "queue=bb&priority=7"), "failed requests change nothing")
}

// §6.6 with budgets (§4.7): patching a parked job's priority unparks it and
// it parks again at its new place, so it dispatches first.
func TestQueryPatchParkedReorders(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	budMustPut(t, s, "pk", budWIF(1))
	bind := []any{map[string]any{"key": "pk", "cost": 1}}
	job := func(prio int) apitest.Job {
		return apitest.Enqueue(t, base, map[string]any{"type": "t", "queue": "pq", "payload": prio, "priority": prio, "budgets": bind})
	}
	a := job(1)
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=pq&prefetch=3"})
	require.Equal(t, a.ID, st.NextJob(t, 10*time.Second).ID)
	b := job(100)
	c := job(200)
	waitHead := func(head string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		var last map[string]any
		for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
			r := apitest.DoJSON(t, base, http.MethodGet, "/budgets/pk/state", nil)
			apitest.RequireStatus(t, r, http.StatusOK)
			last = r.Map(t)
			h, _ := last["head"].(map[string]any)
			if fmt.Sprint(last["parked"]) == "2" && h != nil && h["id"] == head {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.Failf(t, "budget head not reached", "want head %s with 2 parked, last %v", head, last)
	}
	waitHead(b.ID)
	r := apitest.DoJSON(t, base, http.MethodPatch, "/jobs/"+c.ID, map[string]any{"priority": 50})
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, "ready", r.Job(t).Status)
	waitHead(c.ID)

	apitest.Ack(t, base, a.ID)
	require.Equal(t, c.ID, st.NextJob(t, 10*time.Second).ID, "the re-prioritised job goes first")
	apitest.Ack(t, base, c.ID)
	require.Equal(t, b.ID, st.NextJob(t, 10*time.Second).ID)
	apitest.Ack(t, base, b.ID)
	st.Close()
}
