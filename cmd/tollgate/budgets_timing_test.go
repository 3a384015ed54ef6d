package main

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// Tolerances for the end-to-end timing checks. The server binary is built
// with -race and may share 2 cores with other test servers, so lateness gets
// a generous bound; earliness is bounded tightly, since a token bucket may
// never hand out a token before it has dripped in (only rounding to whole
// milliseconds and the 1e-9 compare tolerance of §4.4 are allowed).
const (
	budBurstWithin = 300 * time.Millisecond
	budEarlySlack  = 30 * time.Millisecond
	budLateSlack   = 400 * time.Millisecond
)

// budCheckPace checks arrivals of a time_based budget whose pool is full
// (capacity burst) when the stream opens at t0 and refills one token per
// interval: the first burst jobs arrive within budBurstWithin of t0; job
// burst-1+k (k >= 1) needs k refilled tokens, so it may not arrive before
// t0 + k*interval (the pool could not have been fuller than capacity at the
// first dispatch, which happened after t0), and should arrive by
// first arrival + k*interval + budLateSlack.
func budCheckPace(t *testing.T, fs []apitest.Frame, t0 time.Time, burst int, interval time.Duration) {
	t.Helper()
	first := fs[0].At
	for i, f := range fs {
		rel := f.At.Sub(t0)
		t.Logf("job %d arrived at t0+%v", i, rel.Round(time.Millisecond))
		if i < burst {
			if rel > budBurstWithin {
				t.Errorf("burst job %d arrived %v after the stream opened, want within %v", i, rel, budBurstWithin)
			}
			continue
		}
		k := time.Duration(i - burst + 1)
		earliest := t0.Add(k*interval - budEarlySlack)
		latest := first.Add(k*interval + budLateSlack)
		if f.At.Before(earliest) {
			t.Errorf("job %d arrived at t0+%v, before the earliest possible t0+%v (pool would have exceeded its capacity)", i, rel, earliest.Sub(t0))
		}
		if f.At.After(latest) {
			t.Errorf("job %d arrived at t0+%v, later than the ideal schedule t0+%v + %v", i, rel, first.Add(k*interval).Sub(t0), budLateSlack)
		}
	}
}

// TestBudgetsTimeBasedPacing: §4.4 — end-to-end drip pacing, scaled down to
// 4 tokens per 2000 ms (one every 500 ms). The subtests run in parallel with
// each other only (this parent is not parallel), to keep timing noise low.
func TestBudgetsTimeBasedPacing(t *testing.T) {
	t.Run("BurstThenPace", func(t *testing.T) {
		t.Parallel()
		s := servertest.Start(t)
		budMustPut(t, s, "pace", budTB(4, 2000, 0))
		jobs := make([]map[string]any, 8)
		for i := range jobs {
			jobs[i] = budJob("pace", budBind("pace", 0))
		}
		ids := budEnqueueBulk(t, s, jobs...)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("pace", 20), Accept: apitest.AcceptNDJSON})
		fs := st.Frames(t, 8, 3*time.Second)
		if got := apitest.FrameIDs(fs); !budSameSet(got, ids) {
			t.Fatalf("got %v want %v", got, ids)
		}
		budCheckPace(t, fs, st.Opened, 4, 500*time.Millisecond)
	})

	t.Run("LateWorkerGetsBurstThenPace", func(t *testing.T) {
		t.Parallel()
		s := servertest.Start(t)
		created := time.Now()
		budMustPut(t, s, "late", budTB(4, 2000, 0))
		jobs := make([]map[string]any, 8)
		for i := range jobs {
			jobs[i] = budJob("late", budBind("late", 0))
		}
		ids := budEnqueueBulk(t, s, jobs...)
		// The scenario itself: nobody takes for 2.5 s (longer than the
		// budget's duration). Waiting jobs must not debit tokens.
		time.Sleep(time.Until(created.Add(2500 * time.Millisecond)))
		if j := budGetJob(t, s, ids[0]); j["status"] != "ready" || j["dequeued_at"] != nil {
			t.Fatalf("job dispatched without a worker: %v", j)
		}
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("late", 20), Accept: apitest.AcceptNDJSON})
		fs := st.Frames(t, 8, 3*time.Second)
		if got := apitest.FrameIDs(fs); !budSameSet(got, ids) {
			t.Fatalf("got %v want %v", got, ids)
		}
		budCheckPace(t, fs, st.Opened, 4, 500*time.Millisecond)
	})

	t.Run("Burst1StrictPacing", func(t *testing.T) {
		t.Parallel()
		s := servertest.Start(t)
		budMustPut(t, s, "strict", budTB(4, 2000, 1))
		jobs := make([]map[string]any, 4)
		for i := range jobs {
			jobs[i] = budJob("strict", budBind("strict", 0))
		}
		ids := budEnqueueBulk(t, s, jobs...)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("strict", 20), Accept: apitest.AcceptNDJSON})
		fs := st.Frames(t, 4, 3*time.Second)
		if got := apitest.FrameIDs(fs); !budSameSet(got, ids) {
			t.Fatalf("got %v want %v", got, ids)
		}
		budCheckPace(t, fs, st.Opened, 1, 500*time.Millisecond)
	})
}
