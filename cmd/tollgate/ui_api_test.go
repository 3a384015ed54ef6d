package main

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestUIReadEndpoints: GET /stats and GET /budgets/{key}/parked, the two
// read endpoints the dashboard added, in JSON and msgpack, with their
// errors; and /ui serving its files.
func TestUIReadEndpoints(t *testing.T) {
	s := servertest.Start(t)
	base := s.URL
	uiAPI(t, base, http.MethodPut, "/budgets/one-slot", map[string]any{"allocation": 1, "strategy": map[string]any{"type": "while_in_flight"}}, nil, http.StatusOK)
	prios := []int{500, 100, 500, 100}
	var jobs []apitest.Job
	for i, p := range prios {
		jobs = append(jobs, apitest.Enqueue(t, base, map[string]any{"type": "t", "queue": "line", "priority": p, "payload": map[string]any{"i": i},
			"budgets": []map[string]any{{"key": "one-slot", "cost": 1}}}))
	}
	apitest.EnqueueN(t, base, "plain", 2)
	w := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=line&prefetch=10", WorkerID: "w"})
	defer w.Close()
	first := w.NextJob(t, uiWait)
	// the first job dispatched is the first in (priority, id) order
	require.Equal(t, jobs[1].ID, first.ID)
	want := []string{jobs[3].ID, jobs[0].ID, jobs[2].ID}

	type parkedLine struct {
		Key   string `json:"key" msgpack:"key"`
		Total int    `json:"total" msgpack:"total"`
		Jobs  []struct {
			ID        string `json:"id" msgpack:"id"`
			Queue     string `json:"queue" msgpack:"queue"`
			Priority  int    `json:"priority" msgpack:"priority"`
			Cost      int    `json:"cost" msgpack:"cost"`
			HoldsBack bool   `json:"holds_back" msgpack:"holds_back"`
		} `json:"jobs" msgpack:"jobs"`
	}
	deadline := time.Now().Add(uiWait)
	for _, f := range apitest.Formats {
		var l parkedLine
		for {
			r := apitest.Call(t, base, f, http.MethodGet, "/budgets/one-slot/parked", nil)
			apitest.RequireStatus(t, r, http.StatusOK)
			r.Decode(t, &l)
			if l.Total == 3 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling the API, with a deadline
		}
		require.Equal(t, 3, l.Total, f)
		var ids []string
		for _, j := range l.Jobs {
			ids = append(ids, j.ID)
			require.Equal(t, "line", j.Queue)
			require.Equal(t, 1, j.Cost)
			require.True(t, j.HoldsBack, "a worker takes from the queue")
		}
		require.Equal(t, want, ids, "%s: (priority, id) order", f)
		require.Equal(t, 100, l.Jobs[0].Priority)

		r := apitest.Call(t, base, f, http.MethodGet, "/budgets/one-slot/parked?limit=2", nil)
		apitest.RequireStatus(t, r, http.StatusOK)
		r.Decode(t, &l)
		require.Equal(t, 3, l.Total)
		require.Len(t, l.Jobs, 2)
		require.Equal(t, want[0], l.Jobs[0].ID)
	}
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/budgets/nope/parked", nil), http.StatusNotFound, "budget 'nope' not found")
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/budgets/one-slot/parked?limit=0", nil), http.StatusBadRequest,
		`invalid query parameters: limit: expected an integer from 1 to 2000, got "0"`)
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/budgets/one-slot/parked?from=x", nil), http.StatusBadRequest,
		"invalid query parameters: unknown field `from`, expected `limit`")

	type stats struct {
		At     uint64 `json:"at" msgpack:"at"`
		Queues []struct {
			Queue      string `json:"queue" msgpack:"queue"`
			Ready      int    `json:"ready" msgpack:"ready"`
			Parked     int    `json:"parked" msgpack:"parked"`
			InFlight   int    `json:"in_flight" msgpack:"in_flight"`
			Enqueued   int    `json:"enqueued" msgpack:"enqueued"`
			Dispatched int    `json:"dispatched" msgpack:"dispatched"`
		} `json:"queues" msgpack:"queues"`
		Budgets []struct {
			Key      string  `json:"key" msgpack:"key"`
			Tokens   float64 `json:"tokens" msgpack:"tokens"`
			InFlight int     `json:"in_flight" msgpack:"in_flight"`
			Parked   int     `json:"parked" msgpack:"parked"`
			Capacity int     `json:"capacity" msgpack:"capacity"`
			Head     *struct {
				ID string `json:"id" msgpack:"id"`
			} `json:"head" msgpack:"head"`
		} `json:"budgets" msgpack:"budgets"`
		Streams int `json:"streams" msgpack:"streams"`
	}
	for _, f := range apitest.Formats {
		var st stats
		r := apitest.Call(t, base, f, http.MethodGet, "/stats", nil)
		apitest.RequireStatus(t, r, http.StatusOK)
		r.Decode(t, &st)
		require.InDelta(t, float64(time.Now().UnixMilli()), float64(st.At), 60e3)
		require.Equal(t, 1, st.Streams)
		require.Len(t, st.Queues, 2)
		require.True(t, sort.SliceIsSorted(st.Queues, func(i, j int) bool { return st.Queues[i].Queue < st.Queues[j].Queue }))
		line, plain := st.Queues[0], st.Queues[1]
		require.Equal(t, "line", line.Queue)
		require.Equal(t, [5]int{3, 3, 1, 4, 1}, [5]int{line.Ready, line.Parked, line.InFlight, line.Enqueued, line.Dispatched}, "%s: %+v", f, line)
		require.Equal(t, [5]int{2, 0, 0, 2, 0}, [5]int{plain.Ready, plain.Parked, plain.InFlight, plain.Enqueued, plain.Dispatched}, "%s: %+v", f, plain)
		require.Len(t, st.Budgets, 1)
		b := st.Budgets[0]
		require.Equal(t, "one-slot", b.Key)
		require.Equal(t, 0.0, b.Tokens)
		require.Equal(t, [3]int{1, 3, 1}, [3]int{b.InFlight, b.Parked, b.Capacity})
		require.Equal(t, want[0], b.Head.ID)
	}

	// include picks the sections; a section asked for is there even empty
	m := apitest.DoJSON(t, base, http.MethodGet, "/stats?include=budgets", nil).Map(t)
	require.ElementsMatch(t, []string{"at", "budgets"}, uiKeys(m))
	m = apitest.DoJSON(t, base, http.MethodGet, "/stats?include=queues", nil).Map(t)
	require.ElementsMatch(t, []string{"at", "queues", "streams"}, uiKeys(m))
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/stats?include=jobs", nil), http.StatusBadRequest,
		`invalid query parameters: include: expected `+"`queues` or `budgets`"+`, got "jobs"`)
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/stats?queue=a", nil), http.StatusBadRequest,
		"invalid query parameters: unknown field `queue`, expected `include`")
	empty := servertest.Start(t)
	m = apitest.DoJSON(t, empty.URL, http.MethodGet, "/stats", nil).Map(t)
	require.Equal(t, []any{}, m["queues"])
	require.Equal(t, []any{}, m["budgets"])
	require.Equal(t, json.Number("0"), m["streams"])

	// the dashboard's files
	r := apitest.Request(t, nil, base, http.MethodGet, "/ui", nil, nil)
	require.Equal(t, http.StatusOK, r.Status, "the redirect to /ui/ is followed")
	require.Contains(t, string(r.Body), "<title>tollgate</title>")
	r = apitest.Request(t, nil, base, http.MethodGet, "/ui/app.js", nil, nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript"), r.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", r.Header.Get("Cache-Control"))
	apitest.RequireError(t, apitest.DoJSON(t, base, http.MethodGet, "/ui/missing.js", nil), http.StatusNotFound, "not found")
}

func uiKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
