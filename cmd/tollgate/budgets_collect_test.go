package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestBudgetIdleCollection: SPEC §10.3 against the real binary with a 1 s
// TTL — a create_with budget is gone (404) once idle and full for the TTL,
// not before; a budget made by PUT is never collected; create_with makes
// the collected budget again with the same definition; the mark survives a
// restart; /metrics counts the collections.
func TestBudgetIdleCollection(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	s := servertest.Start(t, "--budget-idle-ttl", "1s")
	def := budTB(100, 1000, 0)
	tenant := func(key string) map[string]any {
		return budJob("work", map[string]any{"key": key, "cost": 1, "create_with": def})
	}
	budMustPut(t, s, "perm", budWIF(5))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("work", 10), Accept: apitest.AcceptNDJSON})
	a := budStr(t, budEnqueue(t, s, tenant("tenant-a")), "id")
	p := budStr(t, budEnqueue(t, s, budJob("work", budBind("perm", 1))), "id")
	first := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/tenant-a", nil), http.StatusOK)
	st.Frames(t, 2, 5*time.Second)
	budAck(t, s, a)
	budAck(t, s, p)
	acked := time.Now()
	gone := budWaitGone(t, s, "tenant-a", 20*time.Second)
	if idle := gone.Sub(acked); idle < ttl-50*time.Millisecond {
		t.Fatalf("collected %v after its last job, before the TTL %v", idle, ttl)
	}
	apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/perm", nil), http.StatusOK)

	// create_with makes it again, from the same definition
	again := budStr(t, budEnqueue(t, s, tenant("tenant-a")), "id")
	b := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/tenant-a", nil), http.StatusOK)
	if budCanon(t, b["strategy"]) != budCanon(t, first["strategy"]) || budInt(t, b, "allocation") != 100 {
		t.Fatalf("made again as %v, want the definition of %v", b, first)
	}
	if budInt(t, b, "created_at") <= budInt(t, first, "created_at") {
		t.Fatalf("made again with created_at %d, not after the first's %d", budInt(t, b, "created_at"), budInt(t, first, "created_at"))
	}
	st.Frames(t, 1, 5*time.Second)
	st.Close()
	// the on-the-fly mark is durable: collected after a restart too
	s.Restart()
	budWaitStatus(t, s, 5*time.Second, "ready", again)
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/jobs/"+again, nil))
	budWaitGone(t, s, "tenant-a", 20*time.Second)
	apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/perm", nil), http.StatusOK)
	if m := budMetrics(t, s); !strings.Contains(m, "tollgate_budgets_collected_total 1") || !strings.Contains(m, "tollgate_budgets 1") {
		t.Fatalf("/metrics after one collection since the restart, one budget left:\n%s", budGrep(m, "tollgate_budgets"))
	}
}

// budWaitGone polls GET /budgets/{key} until it answers 404 and returns
// when it did.
func budWaitGone(t *testing.T, s *servertest.Server, key string, d time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := apitest.DoJSON(t, s.URL, "GET", budPath(key), nil)
		if r.Status == http.StatusNotFound {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget %s still there after %v: %v", key, d, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func budGrep(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
