package main

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// Idle check: over idleWindow the server may use at most idleCPUBound of
// CPU time. Measured (race build, shared 2-core machine): an idle server
// used 40 ms over 3 s (heartbeats, the reaper, the GC tuner); the same
// server spinning on a timer that re-armed at once used 600 ms, a fifth of
// a core, the rest going to the other processes on the machine. The bound
// sits at six times idle.
const (
	idleWindow   = 3 * time.Second
	idleCPUBound = 250 * time.Millisecond
)

// TestFaultTimeFieldsAtMaximumIdle (issue 12, defect 4): every time field
// at the largest value the SPEC accepts (ready_at, retry_at, a retention,
// a time_based budget's duration_ms with a parked job), and the server
// idles, before and after a restart (the values are stored).
func TestFaultTimeFieldsAtMaximumIdle(t *testing.T) {
	// A fast reaper: a wrapped purge_at would reap the retained job at once.
	s := servertest.Start(t, "--reaper-check-interval", "100ms")
	const maxU64 = uint64(math.MaxUint64)

	// ready_at at the maximum.
	scheduled := budEnqueue(t, s, map[string]any{"type": "t", "queue": "later", "payload": map[string]any{}, "ready_at": maxU64})
	require.Equal(t, "scheduled", scheduled["status"])

	// retry_at at the maximum, and retention at the maximum.
	retried := budEnqueue(t, s, map[string]any{"type": "t", "queue": "retry", "payload": map[string]any{},
		"retention": map[string]any{"completed_ms": maxU64, "dead_ms": maxU64}})
	kept := budEnqueue(t, s, map[string]any{"type": "t", "queue": "retry", "payload": map[string]any{},
		"retention": map[string]any{"completed_ms": maxU64, "dead_ms": maxU64}})
	w := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("retry", 2), Accept: apitest.AcceptNDJSON})
	got := apitest.FrameIDs(w.Frames(t, 2, 10*time.Second))
	require.ElementsMatch(t, []string{retried["id"].(string), kept["id"].(string)}, got)
	r := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/"+retried["id"].(string)+"/failure", map[string]any{"message": "later", "retry_at": maxU64})
	require.Equal(t, "scheduled", apitest.Object(t, r, http.StatusOK)["status"])
	budAck(t, s, kept["id"].(string))
	w.Close()

	// A time_based budget of the longest duration, one job in flight and
	// one parked behind it.
	budMustPut(t, s, "forever", budTB(1, math.MaxInt64, 0))
	budEnqueueBulk(t, s, budJob("slow", budBind("forever", 1)), budJob("slow", budBind("forever", 1)))
	slow := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("slow", 10), Accept: apitest.AcceptNDJSON})
	slow.Frames(t, 1, 10*time.Second)
	waitParked(t, s, "forever", 1)

	cpu := faultCPUOver(t, s.PID(), idleWindow)
	t.Logf("CPU time over %v with every time field at its maximum: %v", idleWindow, cpu)
	require.Less(t, cpu, idleCPUBound, "the server spins")

	// The retained job is still there (a wrapped purge_at reaps it).
	require.Equal(t, "completed", budGetJob(t, s, kept["id"].(string))["status"])

	slow.Close()
	s.Restart()
	slow = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("slow", 10), Accept: apitest.AcceptNDJSON})
	slow.Frames(t, 1, 10*time.Second)
	waitParked(t, s, "forever", 1)
	cpu = faultCPUOver(t, s.PID(), idleWindow)
	t.Logf("CPU time over %v after a restart: %v", idleWindow, cpu)
	require.Less(t, cpu, idleCPUBound, "the server spins after a restart")
	require.Equal(t, "scheduled", budGetJob(t, s, scheduled["id"].(string))["status"])
	require.Equal(t, "scheduled", budGetJob(t, s, retried["id"].(string))["status"])
	require.Equal(t, "completed", budGetJob(t, s, kept["id"].(string))["status"])
}

// waitParked polls the budget's state until n jobs are parked on it.
func waitParked(t *testing.T, s *servertest.Server, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := apitest.Object(t, apitest.DoJSON(t, s.URL, http.MethodGet, budPath(key)+"/state", nil), http.StatusOK)
		if budInt(t, st, "parked") == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget %s: %d parked, want %d", key, budInt(t, st, "parked"), n)
		}
		time.Sleep(20 * time.Millisecond) // polling the API, bounded
	}
}
