package main

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestBudgetsHeadNeedsConsumer: §4.7 Decision — the head of a budget is its
// earliest parked job whose queue has an open take stream; a parked job of
// a queue nobody consumes holds nobody back, and regains its place when a
// stream for its queue opens.
func TestBudgetsHeadNeedsConsumer(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "hc", budWIF(2))
	s1 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("hc-1", 10), Accept: apitest.AcceptNDJSON})
	j1 := budStr(t, budEnqueue(t, s, budJob("hc-1", budBind("hc", 1))), "id")
	if got := s1.NextJobFrame(t, budArrive).Job.ID; got != j1 {
		t.Fatalf("got %s want %s", got, j1)
	}
	s2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("hc-2", 10), Accept: apitest.AcceptNDJSON})
	big := budStr(t, budEnqueue(t, s, budJob("hc-2", budBind("hc", 2))), "id")
	s2.NoJobFor(t, budQuiet, false, "big needs 2, 1 is held")
	small := budStr(t, budEnqueue(t, s, budJob("hc-1", budBind("hc", 1))), "id")
	s1.NoJobFor(t, budQuiet, false, "small must not overtake big, whose queue has a stream")

	// Nobody consumes hc-2 any more: big holds nobody back.
	s2.Close()
	if got := s1.NextJobFrame(t, budArrive).Job.ID; got != small {
		t.Fatalf("after closing big's stream got %s, want %s", got, small)
	}

	// big regains its place when a stream for hc-2 opens again.
	s2 = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("hc-2", 10), Accept: apitest.AcceptNDJSON})
	budAck(t, s, j1)
	s2.NoJobFor(t, budQuiet, false, "big needs 2, small holds 1")
	small2 := budStr(t, budEnqueue(t, s, budJob("hc-1", budBind("hc", 1))), "id")
	s1.NoJobFor(t, budQuiet, false, "small2 must wait behind big again")
	budAck(t, s, small)
	if got := s2.NextJobFrame(t, budArrive).Job.ID; got != big {
		t.Fatalf("got %s, want big %s", got, big)
	}
	s1.NoJobFor(t, budQuiet, false, "big holds both tokens")
	budAck(t, s, big)
	if got := s1.NextJobFrame(t, budArrive).Job.ID; got != small2 {
		t.Fatalf("got %s, want %s", got, small2)
	}
}

// TestBudgetsTimeBasedRedeliveryDebitsAgain: §4.8 Decision 13 — a stream
// disconnect does not refund time_based tokens; redelivery debits again.
func TestBudgetsTimeBasedRedeliveryDebitsAgain(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "rd", budTB(2, 3600_000, 0))
	ids := budEnqueueBulk(t, s,
		budJob("rd", budBind("rd", 0)), budJob("rd", budBind("rd", 0)), budJob("rd", budBind("rd", 0)))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rd", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(st.Frames(t, 2, budArrive)); !budSameSet(got, ids[:2]) {
		t.Fatalf("got %v want %v", got, ids[:2])
	}
	st.NoJobFor(t, budQuiet, false, "2 per hour spent")
	st.Close()
	budWaitStatus(t, s, 10*time.Second, "ready", ids[:2]...)
	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rd", 10), Accept: apitest.AcceptNDJSON})
	st2.NoJobFor(t, 2*budQuiet, false, "the pool is empty: returned jobs must not be redelivered for free")
	budWaitStatus(t, s, time.Second, "ready", ids...)
}

// TestBudgetsPoolUpdates: §4.4/§4.9 Decisions on updates — lowering a
// while_in_flight allocation below what is held stops dispatch until enough
// jobs finish; raising a time_based allocation does not grant tokens
// instantly; switching the type reinitialises the pool (to time_based:
// full; to while_in_flight: held = in-flight costs).
func TestBudgetsPoolUpdates(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	t.Log("while_in_flight lowered below held")
	budMustPut(t, s, "lo", budWIF(4))
	lo := make([]map[string]any, 6)
	for i := range lo {
		lo[i] = budJob("lo", budBind("lo", 0))
	}
	lids := budEnqueueBulk(t, s, lo...)
	sl := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("lo", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(sl.Frames(t, 4, budArrive)); !budSameSet(got, lids[:4]) {
		t.Fatalf("got %v want %v", got, lids[:4])
	}
	budMustPut(t, s, "lo", budWIF(2))
	budAck(t, s, lids[0])
	sl.NoJobFor(t, budQuiet, false, "held 3 > allocation 2")
	budAck(t, s, lids[1])
	sl.NoJobFor(t, budQuiet, false, "held 2 = allocation 2")
	budAck(t, s, lids[2])
	if got := sl.NextJobFrame(t, budArrive).Job.ID; got != lids[4] {
		t.Fatalf("got %s want %s", got, lids[4])
	}
	sl.NoJobFor(t, budQuiet, false, "held 2 = allocation 2 again")

	t.Log("time_based raise does not grant tokens at once")
	budMustPut(t, s, "cl", budTB(1, 3600_000, 0))
	cids := budEnqueueBulk(t, s, budJob("cl", budBind("cl", 0)), budJob("cl", budBind("cl", 0)))
	sc := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("cl", 10), Accept: apitest.AcceptNDJSON})
	if got := sc.NextJobFrame(t, budArrive).Job.ID; got != cids[0] {
		t.Fatalf("got %s want %s", got, cids[0])
	}
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/cl", `{"allocation":2}`), 200)
	sc.NoJobFor(t, budQuiet, false, "capacity 2 but the level settled near 0 (§4.9)")

	t.Log("type switches")
	budMustPut(t, s, "sw", budWIF(2))
	sw := make([]map[string]any, 6)
	for i := range sw {
		sw[i] = budJob("sw", budBind("sw", 0))
	}
	sids := budEnqueueBulk(t, s, sw...)
	ss := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("sw", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(ss.Frames(t, 2, budArrive)); !budSameSet(got, sids[:2]) {
		t.Fatalf("got %v want %v", got, sids[:2])
	}
	ss.NoJobFor(t, budQuiet, false, "wif 2 held")
	budMustPut(t, s, "sw", budTB(2, 3600_000, 0))
	if got := apitest.FrameIDs(ss.Frames(t, 2, budArrive)); !budSameSet(got, sids[2:4]) {
		t.Fatalf("after switch to time_based got %v want %v (fresh full pool)", got, sids[2:4])
	}
	ss.NoJobFor(t, budQuiet, false, "time_based pool of 2 spent")
	budMustPut(t, s, "sw", budWIF(5))
	if got := ss.NextJobFrame(t, budArrive).Job.ID; got != sids[4] {
		t.Fatalf("after switch to while_in_flight 5 got %s want %s (4 in flight)", got, sids[4])
	}
	ss.NoJobFor(t, budQuiet, false, "5 in flight = allocation")
	budAck(t, s, sids[0])
	if got := ss.NextJobFrame(t, budArrive).Job.ID; got != sids[5] {
		t.Fatalf("got %s want %s", got, sids[5])
	}
}

// TestBudgetsTwoStreamsLastToken: §4.7 — two streams can never both spend
// the last token.
func TestBudgetsTwoStreamsLastToken(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "lt", budWIF(1))
	jobs := make([]map[string]any, 4)
	for i := range jobs {
		jobs[i] = budJob("lt", budBind("lt", 0))
	}
	ids := budEnqueueBulk(t, s, jobs...)
	a := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("lt", 10), Accept: apitest.AcceptNDJSON})
	b := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("", 10), Accept: apitest.AcceptNDJSON}) // all queues
	for round := 0; round < len(ids); round++ {
		var got []apitest.Frame
		deadline := time.NewTimer(budArrive)
		quiet := (<-chan time.Time)(nil)
		keep := func(f apitest.Frame) {
			switch {
			case f.Job != nil:
				got = append(got, f)
			case !f.Heartbeat:
				t.Fatalf("round %d: a take stream ended: %v", round, f.Err)
			}
		}
	collect:
		for {
			select {
			case f := <-a.C():
				keep(f)
			case f := <-b.C():
				keep(f)
			case <-deadline.C:
				break collect
			case <-quiet:
				break collect
			}
			if len(got) == 1 && quiet == nil {
				quiet = time.After(budQuiet)
			}
		}
		deadline.Stop()
		if len(got) != 1 {
			t.Fatalf("round %d: %d jobs delivered across two streams, want exactly 1: %v", round, len(got), apitest.FrameIDs(got))
		}
		if got[0].Job.ID != ids[round] {
			t.Fatalf("round %d: got %s want %s", round, got[0].Job.ID, ids[round])
		}
		budAck(t, s, got[0].Job.ID)
	}
}
