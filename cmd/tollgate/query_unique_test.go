package main

// Integration tests of unique jobs (SPEC §6.9) against the real binary: each
// holder scope (queued, active, exists) through the whole job life cycle,
// including after a crash restart and after a take-stream disconnect.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

var uqScopes = []string{"queued", "active", "exists"}

// uqEnqBody is an enqueue body with a unique key.
func uqEnqBody(queue, key, while string) map[string]any {
	return map[string]any{"type": "uq", "queue": queue, "payload": map[string]any{"k": key}, "unique_key": key, "unique_while": while}
}

// uqTotal is GET /jobs/count without filters.
func uqTotal(t testing.TB, base string) uint64 {
	t.Helper()
	return queryCount(t, base, "")
}

// uqRequireDupView checks a duplicate enqueue result: the holder, without
// payload, duplicate:true.
func uqRequireDupView(t testing.TB, j apitest.Job, holder, holderStatus string) {
	t.Helper()
	require.Equal(t, holder, j.ID, "duplicate must return the holder")
	require.NotNil(t, j.Duplicate)
	require.True(t, *j.Duplicate, "duplicate:true expected")
	require.False(t, j.Has("payload"), "duplicate view must not carry the payload")
	if holderStatus != "" {
		require.Equal(t, holderStatus, j.Status, "holder status in duplicate view")
	}
}

// uqProbe enqueues key with scope while on queue; when holder is not "" it
// must be a 200 duplicate of holder that writes nothing, else a 201 new job
// (returned).
func uqProbe(t testing.TB, base, queue, key, while, holder, holderStatus string) apitest.Job {
	t.Helper()
	before := uqTotal(t, base)
	r := apitest.DoJSON(t, base, http.MethodPost, "/jobs", uqEnqBody(queue, key, while))
	j := r.Job(t)
	if holder != "" {
		apitest.RequireStatus(t, r, http.StatusOK)
		uqRequireDupView(t, j, holder, holderStatus)
		require.Equal(t, before, uqTotal(t, base), "a duplicate must write nothing")
		return j
	}
	apitest.RequireStatus(t, r, http.StatusCreated)
	require.NotNil(t, j.Duplicate)
	require.False(t, *j.Duplicate)
	require.Equal(t, before+1, uqTotal(t, base))
	return j
}

// uqHeld is whether a holder of scope keeps its key in state.
func uqHeld(scope, state string) bool {
	switch state {
	case "scheduled", "ready":
		return true
	case "in_flight":
		return scope != "queued"
	case "completed", "dead":
		return scope == "exists"
	}
	return false
}

// uqDupOf(while, state) is the §6.9 table read from the new job's side:
// a holder in state makes a new enqueue with unique_while while a duplicate
// exactly when a holder of scope while keeps its key in that state.
var uqDupOf = uqHeld

var uqStates = []string{"scheduled", "ready", "in_flight", "completed", "dead", "deleted"}

// uqSetup creates, for every state, one holder per (holder scope, new scope)
// pair, each with its own key "<prefix>-<state>-<holder scope>-<new scope>",
// and drives it into that state. It returns key -> holder id and the open
// stream holding the in-flight holders.
func uqSetup(t *testing.T, base, prefix string) (map[string]string, *apitest.Stream) {
	t.Helper()
	holders := make(map[string]string)
	var inflight *apitest.Stream
	for _, state := range uqStates {
		queue := prefix + "-" + state
		var bodies []map[string]any
		var keys []string
		for _, hs := range uqScopes {
			for _, ns := range uqScopes {
				key := fmt.Sprintf("%s-%s-%s-%s", prefix, state, hs, ns)
				b := uqEnqBody(queue, key, hs)
				if state == "scheduled" {
					b["ready_at"] = apitest.NowMS() + 3_600_000
				}
				bodies = append(bodies, b)
				keys = append(keys, key)
			}
		}
		jobs := apitest.Bulk(t, base, bodies)
		byID := make(map[string]bool)
		for i, j := range jobs {
			require.False(t, *j.Duplicate)
			holders[keys[i]] = j.ID
			byID[j.ID] = true
		}
		switch state {
		case "in_flight", "completed", "dead":
			s := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "prefetch=0&queue=" + queue})
			taken := s.Jobs(t, len(jobs), 10*time.Second)
			for _, j := range taken {
				require.True(t, byID[j.ID])
				switch state {
				case "completed":
					apitest.Ack(t, base, j.ID)
				case "dead":
					apitest.RequireStatus(t, apitest.Fail(t, base, j.ID, map[string]any{"message": "boom", "kill": true}), http.StatusOK)
				}
			}
			if state == "in_flight" {
				inflight = s
			} else {
				s.Close()
			}
		case "deleted":
			for _, j := range jobs {
				apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/jobs/"+j.ID, nil, nil))
			}
		}
		if state != "deleted" {
			for _, j := range jobs {
				apitest.WaitStatus(t, base, j.ID, state)
			}
		}
	}
	return holders, inflight
}

// uqCheck probes every key of a uqSetup with its new scope; stateAfter maps
// the setup state to the state the holder is in now.
func uqCheck(t *testing.T, base, prefix string, holders map[string]string, stateAfter func(string) string, heldAfter func(scope, state string) bool) {
	t.Helper()
	for _, state := range uqStates {
		now := stateAfter(state)
		for _, hs := range uqScopes {
			for _, ns := range uqScopes {
				key := fmt.Sprintf("%s-%s-%s-%s", prefix, state, hs, ns)
				holder := holders[key]
				dup := heldAfter(hs, state) && uqDupOf(ns, now)
				t.Logf("%s: holder scope %s in %s, new scope %s: duplicate=%v", prefix, hs, now, ns, dup)
				want := ""
				if dup {
					want = holder
				}
				if now == "deleted" {
					now = ""
				}
				j := uqProbe(t, base, prefix+"-probe", key, ns, want, now)
				if !dup {
					// The new job is the key's holder now, whatever the old one does.
					uqProbe(t, base, prefix+"-probe", key, "exists", j.ID, "ready")
				}
			}
		}
	}
}

// §6.9 table and holder bookkeeping: each holder scope in every status
// (scheduled, ready, in flight, completed, dead, deleted) against a new
// enqueue of each scope; then the same after a crash and restart, where the
// in-flight holders come back ready and hold their keys again.
func TestQueryUniqueScopesLifeCycle(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, "--default-completed-job-retention", "1h")
	base := s.URL

	holders, inflight := uqSetup(t, base, "a")
	uqCheck(t, base, "a", holders, func(st string) string { return st }, uqHeld)
	inflight.Close()

	holders, _ = uqSetup(t, base, "b")
	s.Kill()
	s.Restart()
	base = s.URL
	after := func(st string) string {
		if st == "in_flight" {
			return "ready"
		}
		return st
	}
	// Recovered in-flight jobs of every scope hold their keys again (queued
	// ones re-claim the free key); everything else kept its holder.
	uqCheck(t, base, "b", holders, after, func(scope, state string) bool {
		return uqHeld(scope, after(state))
	})
}

// queued scope: the key is released at dispatch and re-claimed (if free) on
// failure rescheduling; a key held by another job is not stolen; a key is
// released only by its holder.
func TestQueryUniqueQueuedFailure(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL
	retry := map[string]any{"message": "boom", "retry_at": apitest.NowMS() + 3_600_000}

	// Re-claim of a free key on failure.
	a := apitest.Enqueue(t, base, uqEnqBody("uf1", "f1", "queued"))
	uqProbe(t, base, "uf-p", "f1", "queued", a.ID, "ready")
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=uf1"})
	require.Equal(t, a.ID, st.NextJob(t, 10*time.Second).ID)
	apitest.RequireStatus(t, apitest.Fail(t, base, a.ID, retry), http.StatusOK)
	st.Close()
	apitest.WaitStatus(t, base, a.ID, "scheduled")
	uqProbe(t, base, "uf-p", "f1", "queued", a.ID, "scheduled")
	uqProbe(t, base, "uf-p", "f1", "exists", a.ID, "scheduled")

	// Released at dispatch: an in-flight queued holder does not hold the key,
	// so even an exists-scope enqueue is new; the failing job does not steal
	// the key back.
	a2 := apitest.Enqueue(t, base, uqEnqBody("uf2", "f2", "queued"))
	st = apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=uf2"})
	require.Equal(t, a2.ID, st.NextJob(t, 10*time.Second).ID)
	b := uqProbe(t, base, "uf-p", "f2", "exists", "", "")
	apitest.RequireStatus(t, apitest.Fail(t, base, a2.ID, retry), http.StatusOK)
	st.Close()
	apitest.WaitStatus(t, base, a2.ID, "scheduled")
	uqProbe(t, base, "uf-p", "f2", "queued", b.ID, "ready")

	// Only the holder releases: deleting the non-holder a2 keeps b's key.
	apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/jobs/"+a2.ID, nil, nil))
	uqProbe(t, base, "uf-p", "f2", "queued", b.ID, "ready")
	// Deleting the holder frees it.
	apitest.RequireNoContent(t, apitest.Request(t, nil, base, http.MethodDelete, "/jobs/"+b.ID, nil, nil))
	uqProbe(t, base, "uf-p", "f2", "queued", "", "")

	// Failure that kills: queued scope stays released (dead holds nothing).
	a3 := apitest.Enqueue(t, base, uqEnqBody("uf3", "f3", "queued"))
	st = apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=uf3"})
	require.Equal(t, a3.ID, st.NextJob(t, 10*time.Second).ID)
	apitest.RequireStatus(t, apitest.Fail(t, base, a3.ID, map[string]any{"message": "x", "kill": true}), http.StatusOK)
	st.Close()
	uqProbe(t, base, "uf-p", "f3", "exists", "", "")

	// Active scope is not released at dispatch nor re-claimed by somebody
	// else's failure: an active in-flight job failing keeps its key.
	a4 := apitest.Enqueue(t, base, uqEnqBody("uf4", "f4", "active"))
	st = apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=uf4"})
	require.Equal(t, a4.ID, st.NextJob(t, 10*time.Second).ID)
	uqProbe(t, base, "uf-p", "f4", "active", a4.ID, "in_flight")
	apitest.RequireStatus(t, apitest.Fail(t, base, a4.ID, retry), http.StatusOK)
	st.Close()
	uqProbe(t, base, "uf-p", "f4", "queued", a4.ID, "scheduled")
}

// Decision (§6.9): a queued-scope job that returns to ready on a take-stream
// disconnect re-claims its key if free, and does not steal it otherwise.
func TestQueryUniqueQueuedDisconnect(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL

	a := apitest.Enqueue(t, base, uqEnqBody("ud1", "d1", "queued"))
	st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=ud1"})
	require.Equal(t, a.ID, st.NextJob(t, 10*time.Second).ID)
	st.Close()
	apitest.WaitStatus(t, base, a.ID, "ready")
	uqProbe(t, base, "ud-p", "d1", "queued", a.ID, "ready")

	a2 := apitest.Enqueue(t, base, uqEnqBody("ud2", "d2", "queued"))
	st = apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=ud2"})
	require.Equal(t, a2.ID, st.NextJob(t, 10*time.Second).ID)
	b := uqProbe(t, base, "ud-p", "d2", "queued", "", "")
	st.Close()
	apitest.WaitStatus(t, base, a2.ID, "ready")
	uqProbe(t, base, "ud-p", "d2", "exists", b.ID, "ready")
	// a2 completing does not release b's key.
	st = apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=ud2"})
	require.Equal(t, a2.ID, st.NextJob(t, 10*time.Second).ID)
	apitest.Ack(t, base, a2.ID)
	st.Close()
	uqProbe(t, base, "ud-p", "d2", "queued", b.ID, "ready")
}

// Crash recovery (and a graceful restart): an in-flight queued-scope job
// comes back ready and re-claims its key if free, else the other holder
// keeps it.
func TestQueryUniqueQueuedRestart(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{true, false} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			t.Parallel()
			s := servertest.Start(t)
			base := s.URL
			a := apitest.Enqueue(t, base, uqEnqBody("ur1", "r1", "queued"))
			a2 := apitest.Enqueue(t, base, uqEnqBody("ur2", "r2", "queued"))
			st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "prefetch=0&queue=ur1,ur2"})
			got := apitest.Sorted(apitest.IDs(st.Jobs(t, 2, 10*time.Second)))
			require.Equal(t, apitest.Sorted([]string{a.ID, a2.ID}), got)
			b := uqProbe(t, base, "ur-p", "r2", "queued", "", "")
			if crash {
				s.Kill()
			} else {
				st.Close()
				s.Stop()
			}
			s.Restart()
			base = s.URL
			apitest.WaitStatus(t, base, a.ID, "ready")
			apitest.WaitStatus(t, base, a2.ID, "ready")
			uqProbe(t, base, "ur-p", "r1", "queued", a.ID, "ready")
			uqProbe(t, base, "ur-p", "r2", "queued", b.ID, "ready")
			require.EqualValues(t, 3, uqTotal(t, base))
		})
	}
}

// Duplicates inside one bulk, of an existing holder, and a bulk of only
// duplicates (200); duplicates write nothing, not even a queue, and nothing
// of them shows up after a restart.
func TestQueryUniqueBulk(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	base := s.URL

	r := apitest.DoJSON(t, base, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": []map[string]any{
		uqEnqBody("ub", "k1", "queued"),
		uqEnqBody("ub-dup1", "k1", "active"),
		uqEnqBody("ub", "k2", "exists"),
		uqEnqBody("ub-dup2", "k1", "exists"),
		apitest.SimpleJob("ub", 1),
	}})
	apitest.RequireStatus(t, r, http.StatusCreated)
	jobs := apitest.BulkJobs(t, r)
	require.Len(t, jobs, 5)
	require.False(t, *jobs[0].Duplicate)
	uqRequireDupView(t, jobs[1], jobs[0].ID, "ready")
	require.False(t, *jobs[2].Duplicate)
	uqRequireDupView(t, jobs[3], jobs[0].ID, "ready")
	require.False(t, *jobs[4].Duplicate)
	require.EqualValues(t, 3, uqTotal(t, base))

	// Only duplicates: 200.
	r = apitest.DoJSON(t, base, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": []map[string]any{
		uqEnqBody("ub-dup3", "k2", "queued"),
		uqEnqBody("ub-dup3", "k1", "queued"),
	}})
	apitest.RequireStatus(t, r, http.StatusOK)
	d := apitest.BulkJobs(t, r)
	uqRequireDupView(t, d[0], jobs[2].ID, "ready")
	uqRequireDupView(t, d[1], jobs[0].ID, "ready")

	// A new key then its duplicate, plus a duplicate of an existing holder.
	r = apitest.DoJSON(t, base, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": []map[string]any{
		uqEnqBody("ub-dup4", "k1", "exists"),
		uqEnqBody("ub", "k3", "active"),
		uqEnqBody("ub-dup4", "k3", "queued"),
	}})
	apitest.RequireStatus(t, r, http.StatusCreated)
	d = apitest.BulkJobs(t, r)
	uqRequireDupView(t, d[0], jobs[0].ID, "ready")
	require.False(t, *d[1].Duplicate)
	uqRequireDupView(t, d[2], d[1].ID, "ready")
	require.EqualValues(t, 4, uqTotal(t, base))

	for _, q := range apitest.Queues(t, base) {
		require.NotContains(t, q, "dup", "a duplicate created queue %q", q)
	}
	s.Restart()
	base = s.URL
	require.EqualValues(t, 4, uqTotal(t, base))
	require.Empty(t, queryIDs(t, base, "queue=ub-dup1,ub-dup2,ub-dup3,ub-dup4"))
	uqProbe(t, base, "ub-p", "k1", "queued", jobs[0].ID, "ready")
	uqProbe(t, base, "ub-p", "k3", "queued", d[1].ID, "ready")
}

// A completed exists-scope holder that lost its key to a later job (a queued
// enqueue is not a duplicate of a completed job) never gets it back: not when
// the later holder releases it, and not after a restart either.
func TestQueryUniqueExistsTakeoverRestart(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, "--default-completed-job-retention", "1h")
	base := s.URL
	run := func(key string) (a, b apitest.Job) {
		a = apitest.Enqueue(t, base, uqEnqBody("ux-"+key, key, "exists"))
		st := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=ux-" + key})
		require.Equal(t, a.ID, st.NextJob(t, 10*time.Second).ID)
		apitest.Ack(t, base, a.ID)
		st.Close()
		uqProbe(t, base, "ux-p", key, "exists", a.ID, "completed")
		b = apitest.Enqueue(t, base, uqEnqBody("ux-"+key, key, "queued"))
		uqProbe(t, base, "ux-p", key, "exists", b.ID, "ready")
		st = apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=ux-" + key})
		require.Equal(t, b.ID, st.NextJob(t, 10*time.Second).ID)
		apitest.Ack(t, base, b.ID)
		st.Close()
		return a, b
	}
	run("x1")
	run("x2")
	uqProbe(t, base, "ux-p", "x1", "exists", "", "")
	s.Kill()
	s.Restart()
	base = s.URL
	uqProbe(t, base, "ux-p", "x2", "exists", "", "")
}
