package main

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// jqRSSHeadroom is how far the server's resident set may grow over the
// whole hostile catalogue. Unbounded, [range(2e7)] alone took it from 164
// to 1,057 MiB and "a" * 2147483646 allocates 2 GiB in one call; bounded,
// each program is stopped at 100 ms or at its first value over 8 MiB (a
// run may make 128 MiB of guarded values in all). Measured with the race
// build: 53 to 185 MiB on a saturated machine, 52 to 307 MiB on a quieter
// one (programs run further in their 100 ms; garbage waits for the GC).
const jqRSSHeadroom = 512 << 20

// TestFaultJQFilterBounds (issue 12, defect 9): hostile jq filters over
// GET /jobs, GET /jobs/count and DELETE /jobs are each stopped on every
// job they run on: the answer is "no match" with Tollgate-Filter-Errors
// counting the stopped jobs, the server's RSS stays under a ceiling, and
// an ordinary filter still answers.
func TestFaultJQFilterBounds(t *testing.T) {
	s := servertest.Start(t)
	const jobs = 3
	for i := range jobs {
		budEnqueue(t, s, map[string]any{"type": "t", "queue": "jq", "payload": map[string]any{"n": i, "s": "abc"}})
	}
	// The ordinary path first (and it warms the server up before the
	// baseline is read).
	require.Equal(t, int64(2), filterCount(t, s, `.n >= 1`, 0))
	baseline := faultRSS(t, s.PID())
	t.Logf("RSS before the hostile programs: %d MiB", baseline>>20)

	for _, tt := range []struct{ name, src string }{
		{"range", `[range(2e7)] | length > 0`},
		{"string repetition", `"a" * 2147483646 | length > 0`},
		{"string doubling", `.s | until(length > 1e9; . + .) | length > 0`},
		{"array by index", `.x[500000000] = 1 | length > 0`},
		{"join", `[range(1000)] | join("x" * 4000000) | length > 0`},
		{"deep recursion", `def f: [f]; f`},
		{"large array", `[limit(1e8; repeat(.))] | length > 0`},
		{"large object", `reduce range(1e8) as $i ({}; .["k\($i)"] = $i) | length > 0`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			require.Equal(t, int64(0), filterCount(t, s, tt.src, jobs))
			r := apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs?filter="+url.QueryEscape(tt.src), nil)
			require.Equal(t, http.StatusOK, r.Status, "%s", r)
			require.Equal(t, strconv.Itoa(jobs), r.Header.Get("Tollgate-Filter-Errors"))
			require.Empty(t, apitest.Object(t, r, http.StatusOK)["jobs"])
			rss := faultRSS(t, s.PID())
			t.Logf("%s: stopped on %d jobs twice in %v; RSS %d MiB", tt.src, jobs, time.Since(start).Round(time.Millisecond), rss>>20)
			require.Less(t, rss, baseline+jqRSSHeadroom, "RSS grew from %d to %d MiB", baseline>>20, rss>>20)
		})
	}
	r := apitest.DoJSON(t, s.URL, http.MethodDelete, "/jobs?filter="+url.QueryEscape(`"a" * 2147483646`), nil)
	require.Equal(t, int64(0), budInt(t, apitest.Object(t, r, http.StatusOK), "deleted"))
	require.Equal(t, strconv.Itoa(jobs), r.Header.Get("Tollgate-Filter-Errors"))
	require.Equal(t, int64(2), filterCount(t, s, `.n >= 1`, 0))
}

// filterCount answers GET /jobs/count?filter=src and checks the
// Tollgate-Filter-Errors header (absent when wantErrors is 0).
func filterCount(t *testing.T, s *servertest.Server, src string, wantErrors int) int64 {
	t.Helper()
	r := apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/count?filter="+url.QueryEscape(src), nil)
	n := budInt(t, apitest.Object(t, r, http.StatusOK), "count")
	want := ""
	if wantErrors > 0 {
		want = strconv.Itoa(wantErrors)
	}
	require.Equal(t, want, r.Header.Get("Tollgate-Filter-Errors"), "filter %s", src)
	return n
}
