package main

// Helpers of the query and administration tests (SPEC §6).

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
)

type queryPages struct {
	Self string  `json:"self"`
	Next *string `json:"next"`
	Prev *string `json:"prev"`
}

type queryJobsPage struct {
	Jobs  []apitest.Job `json:"jobs"`
	Pages queryPages    `json:"pages"`
}

// queryList GETs a /jobs link and requires 200.
func queryList(t testing.TB, base, link string) queryJobsPage {
	t.Helper()
	r := apitest.DoJSON(t, base, http.MethodGet, link, nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	var p queryJobsPage
	r.Decode(t, &p)
	raw := r.Map(t)
	pages, ok := raw["pages"].(map[string]any)
	require.True(t, ok, "%s", r)
	for _, k := range []string{"self", "next", "prev"} {
		_, present := pages[k]
		require.True(t, present, "pages.%s must be present (null when absent): %s", k, r)
	}
	return p
}

// queryIDs lists the IDs of every job a /jobs query returns (one page).
func queryIDs(t testing.TB, base, query string) []string {
	t.Helper()
	p := queryList(t, base, "/jobs?limit=2000&"+query)
	require.Nil(t, p.Pages.Next)
	return apitest.IDs(p.Jobs)
}

// queryCount is GET /jobs/count.
func queryCount(t testing.TB, base, query string) uint64 {
	t.Helper()
	r := apitest.DoJSON(t, base, http.MethodGet, "/jobs/count?"+query, nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	var body struct {
		Count uint64 `json:"count"`
	}
	r.Decode(t, &body)
	require.Len(t, r.Map(t), 1, "%s", r)
	return body.Count
}

// queryTakeFail takes the next job of queue (which must be id) on a fresh
// stream and fails it with body; it returns the failure response.
func queryTakeFail(t testing.TB, base, queue, id string, body map[string]any) apitest.Response {
	t.Helper()
	s := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=" + queue})
	j := s.NextJob(t, 10*time.Second)
	require.Equal(t, id, j.ID)
	r := apitest.Fail(t, base, id, body)
	s.Close()
	return r
}
