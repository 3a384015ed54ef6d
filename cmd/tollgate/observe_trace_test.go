package main

import (
	"math"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

func obsWIF(allocation int) map[string]any {
	return map[string]any{"allocation": allocation, "strategy": map[string]any{"type": "while_in_flight"}}
}

func obsTB(allocation, durationMs int) map[string]any {
	return map[string]any{"allocation": allocation, "strategy": map[string]any{"type": "time_based", "duration_ms": durationMs}}
}

func obsStep(kind, job string, n int) [3]any { return [3]any{kind, job, n} }

// TestObserveTraceWhileInFlight replays the seed's while_in_flight scenario
// (allocation 5, slow jobs) on /debug/trace: five reservations granted with
// the tokens going 5→4 … 1→0, three refused and parked in line 1, 2, 3;
// each ack returns a token and wakes the head (reason release), which
// reserves, commits and dispatches to the worker.
func TestObserveTraceWhileInFlight(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	tr := obsOpenTrace(t, s, "budget=wif5")
	obsBudget(t, s, "wif5", obsWIF(5))
	ids := obsEnqueue(t, s, "slow", "wif5", 8)
	take := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("slow", 10), Accept: apitest.AcceptNDJSON, WorkerID: "worker-a"})

	tr.until("5 dispatched, 3 parked", func() bool {
		return tr.count("dispatched", "") == 5 && tr.count("commit", "") == 5 && tr.count("parked", "") == 3
	})
	if n := tr.count("budget_created", ""); n != 1 {
		t.Fatalf("%d budget_created events\n%s", n, tr.dump())
	}
	for i, id := range ids {
		if e := tr.get("ready", id, 0); e.Queue != "slow" || len(e.Budgets) != 1 || e.Budgets[0] != "wif5" {
			t.Fatalf("ready event %v", e)
		}
		req := tr.get("reserve_requested", id, 0)
		if req.Budget != "wif5" || req.Cost != 1 || req.Actor != "budget/wif5" {
			t.Fatalf("reserve_requested %v", req)
		}
		if i < 5 {
			g := tr.get("reserve_granted", id, 0)
			if *g.TokensBefore != float64(5-i) || *g.Tokens != float64(4-i) {
				t.Fatalf("job %d granted with tokens %v→%v, want %d→%d\n%s", i, *g.TokensBefore, *g.Tokens, 5-i, 4-i, tr.dump())
			}
			if d := tr.get("dispatched", id, 0); d.WorkerID != "worker-a" || d.Stream == 0 {
				t.Fatalf("dispatched %v: want worker-a and a stream", d)
			}
			tr.inOrder(obsStep("ready", id, 0), obsStep("reserve_requested", id, 0), obsStep("reserve_granted", id, 0), obsStep("dispatched", id, 0))
			tr.inOrder(obsStep("reserve_granted", id, 0), obsStep("commit", id, 0))
			continue
		}
		r := tr.get("reserve_refused", id, 0)
		if *r.TokensBefore != 0 || *r.Tokens != 0 {
			t.Fatalf("refused with tokens %v→%v", *r.TokensBefore, *r.Tokens)
		}
		if p := tr.get("parked", id, 0); p.Position != i-4 || p.Budget != "wif5" {
			t.Fatalf("job %d parked %v, want position %d", i, p, i-4)
		}
		tr.inOrder(obsStep("reserve_requested", id, 0), obsStep("reserve_refused", id, 0), obsStep("parked", id, 0))
	}
	if n := tr.count("timer_armed", ""); n != 0 {
		t.Fatalf("while_in_flight armed %d timers", n)
	}

	// The slow jobs finish one at a time; each ack wakes the next in line.
	var delivered []string
	for len(delivered) < 5 {
		delivered = append(delivered, take.NextJob(t, obsWait).ID)
	}
	for k := 0; k < 3; k++ {
		done, head := delivered[k], ids[5+k]
		obsAck(t, s, done)
		tr.until("the head woken and dispatched", func() bool { return tr.count("dispatched", head) == 1 })
		if w := tr.get("woken", head, 0); w.Reason != "release" || w.Queue != "slow" {
			t.Fatalf("woken %v: want reason release", w)
		}
		if r := tr.get("returned", done, 0); *r.Tokens != 1 {
			t.Fatalf("returned %v: want 1 token back", r)
		}
		tr.inOrder(obsStep("acked", done, 0), obsStep("returned", done, 0), obsStep("woken", head, 0),
			obsStep("ready", head, 1), obsStep("reserve_requested", head, 1), obsStep("reserve_granted", head, 0), obsStep("dispatched", head, 0))
		delivered = append(delivered, take.NextJob(t, obsWait).ID)
	}
	for _, id := range delivered[3:] {
		obsAck(t, s, id)
	}
	tr.until("8 acks and 8 returns", func() bool { return tr.count("acked", "") == 8 && tr.count("returned", "") == 8 })
	if last := tr.seen[tr.index("returned", "", 7)]; *last.Tokens != 5 {
		t.Fatalf("after the last return the pool holds %v, want 5", *last.Tokens)
	}
}

// TestObserveTraceTimeBased replays the seed's "6 per minute" scaled down
// to 6 per 3000 ms (one token per 500 ms): six granted at once, two refused
// and parked; the wake timer is armed for the head's moment (500 ms after
// the pool started draining), fires, commits the head at once and wakes it
// with reason refill, and it dispatches; the same again 500 ms later for
// the last job.
func TestObserveTraceTimeBased(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	tr := obsOpenTrace(t, s, "budget=tb6")
	obsBudget(t, s, "tb6", obsTB(6, 3000))
	ids := obsEnqueue(t, s, "paced", "tb6", 8)
	take := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("paced", 10), Accept: apitest.AcceptNDJSON, WorkerID: "worker-b"})

	tr.until("all 8 dispatched", func() bool { return tr.count("dispatched", "") == 8 && tr.count("commit", "") >= 8 })
	for i, id := range ids[:6] {
		if tr.count("reserve_granted", id) != 1 || tr.count("reserve_refused", id) != 0 {
			t.Fatalf("job %d: want one grant and no refusal\n%s", i, tr.dump())
		}
	}
	commit0 := tr.get("commit", ids[0], 0)
	for k, id := range ids[6:] {
		tr.inOrder(obsStep("reserve_refused", id, 0), obsStep("parked", id, 0))
		if p := tr.get("parked", id, 0); p.Position != k+1 {
			t.Fatalf("job %d parked at %d, want %d", 6+k, p.Position, k+1)
		}
		// The fire that woke the job, and the arming of that timer. (A timer
		// armed before the reservations were committed can fire a few ms
		// early, wake nobody and re-arm itself: that is allowed.)
		woken := tr.index("woken", id, 0)
		if woken < 0 {
			t.Fatalf("job %d never woken\n%s", 6+k, tr.dump())
		}
		fi := lastBefore(tr.seen, "timer_fired", woken)
		ai := lastBefore(tr.seen, "timer_armed", fi)
		if fi == woken || ai == fi {
			t.Fatalf("job %d woken (event %d) without a timer armed and fired before it\n%s", 6+k, woken, tr.dump())
		}
		fired, armed := tr.seen[fi], tr.seen[ai]
		// The pool left capacity at the first commit; one token drips in
		// every 500 ms after it, so job 6+k is affordable 500·(k+1) ms later.
		want := float64(commit0.Time + int64(500*(k+1)))
		if math.Abs(float64(armed.DueAt)-want) > 100 {
			t.Fatalf("timer for job %d armed for %d, want %v ± 100 ms (first commit at %d)\n%s", 6+k, armed.DueAt, want, commit0.Time, tr.dump())
		}
		if armed.JobID != id || fired.JobID != id || fired.DueAt != armed.DueAt {
			t.Fatalf("timer armed %v / fired %v: want both for job %s", armed, fired, id)
		}
		if fired.Time < armed.DueAt-5 {
			t.Fatalf("timer fired at %d, before its due time %d", fired.Time, armed.DueAt)
		}
		if w := tr.get("woken", id, 0); w.Reason != "refill" {
			t.Fatalf("woken %v: want reason refill", w)
		}
		// Bound to tb6 alone, it is debited by the wake itself and
		// dispatched with no second reservation (actors/prepaid.go).
		tr.inOrder(obsStep("parked", id, 0), obsStep("timer_fired", id, 0), obsStep("commit", id, 0), obsStep("woken", id, 0),
			obsStep("ready", id, 1), obsStep("dispatched", id, 0))
		// (unless no stream could take it then and the debit was given back)
		if n := tr.count("reserve_requested", id); n != 1 && tr.count("release", id) == 0 {
			t.Fatalf("job %d asked tb6 %d times, want once (the refused reservation)\n%s", 6+k, n, tr.dump())
		}
		if d := tr.get("dispatched", id, 0); d.WorkerID != "worker-b" {
			t.Fatalf("dispatched %v: want worker-b", d)
		}
	}
	for range ids {
		obsAck(t, s, take.NextJob(t, obsWait).ID)
	}
	tr.until("8 acks", func() bool { return tr.count("acked", "") == 8 })
}

// lastBefore is the index of the last event of kind before index end (end
// itself when there is none).
func lastBefore(evs []obsEvent, kind string, end int) int {
	for i := end - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return i
		}
	}
	return end
}
