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
	s1 := budOpenStream(t, s, "hc-1", 10)
	j1 := budStr(t, budEnqueue(t, s, budJob("hc-1", budBind("hc", 1))), "id")
	if got := s1.next(budArrive).id(); got != j1 {
		t.Fatalf("got %s want %s", got, j1)
	}
	s2 := budOpenStream(t, s, "hc-2", 10)
	big := budStr(t, budEnqueue(t, s, budJob("hc-2", budBind("hc", 2))), "id")
	s2.none(budQuiet, "big needs 2, 1 is held")
	small := budStr(t, budEnqueue(t, s, budJob("hc-1", budBind("hc", 1))), "id")
	s1.none(budQuiet, "small must not overtake big, whose queue has a stream")

	// Nobody consumes hc-2 any more: big holds nobody back.
	s2.close()
	if got := s1.next(budArrive).id(); got != small {
		t.Fatalf("after closing big's stream got %s, want %s", got, small)
	}

	// big regains its place when a stream for hc-2 opens again.
	s2 = budOpenStream(t, s, "hc-2", 10)
	budAck(t, s, j1)
	s2.none(budQuiet, "big needs 2, small holds 1")
	small2 := budStr(t, budEnqueue(t, s, budJob("hc-1", budBind("hc", 1))), "id")
	s1.none(budQuiet, "small2 must wait behind big again")
	budAck(t, s, small)
	if got := s2.next(budArrive).id(); got != big {
		t.Fatalf("got %s, want big %s", got, big)
	}
	s1.none(budQuiet, "big holds both tokens")
	budAck(t, s, big)
	if got := s1.next(budArrive).id(); got != small2 {
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
	st := budOpenStream(t, s, "rd", 10)
	if got := budIDs(st.take(2, budArrive)); !budSameSet(got, ids[:2]) {
		t.Fatalf("got %v want %v", got, ids[:2])
	}
	st.none(budQuiet, "2 per hour spent")
	st.close()
	budWaitStatus(t, s, 10*time.Second, "ready", ids[:2]...)
	st2 := budOpenStream(t, s, "rd", 10)
	st2.none(2*budQuiet, "the pool is empty: returned jobs must not be redelivered for free")
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
	sl := budOpenStream(t, s, "lo", 10)
	if got := budIDs(sl.take(4, budArrive)); !budSameSet(got, lids[:4]) {
		t.Fatalf("got %v want %v", got, lids[:4])
	}
	budMustPut(t, s, "lo", budWIF(2))
	budAck(t, s, lids[0])
	sl.none(budQuiet, "held 3 > allocation 2")
	budAck(t, s, lids[1])
	sl.none(budQuiet, "held 2 = allocation 2")
	budAck(t, s, lids[2])
	if got := sl.next(budArrive).id(); got != lids[4] {
		t.Fatalf("got %s want %s", got, lids[4])
	}
	sl.none(budQuiet, "held 2 = allocation 2 again")

	t.Log("time_based raise does not grant tokens at once")
	budMustPut(t, s, "cl", budTB(1, 3600_000, 0))
	cids := budEnqueueBulk(t, s, budJob("cl", budBind("cl", 0)), budJob("cl", budBind("cl", 0)))
	sc := budOpenStream(t, s, "cl", 10)
	if got := sc.next(budArrive).id(); got != cids[0] {
		t.Fatalf("got %s want %s", got, cids[0])
	}
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/cl", `{"allocation":2}`), 200)
	sc.none(budQuiet, "capacity 2 but the level settled near 0 (§4.9)")

	t.Log("type switches")
	budMustPut(t, s, "sw", budWIF(2))
	sw := make([]map[string]any, 6)
	for i := range sw {
		sw[i] = budJob("sw", budBind("sw", 0))
	}
	sids := budEnqueueBulk(t, s, sw...)
	ss := budOpenStream(t, s, "sw", 10)
	if got := budIDs(ss.take(2, budArrive)); !budSameSet(got, sids[:2]) {
		t.Fatalf("got %v want %v", got, sids[:2])
	}
	ss.none(budQuiet, "wif 2 held")
	budMustPut(t, s, "sw", budTB(2, 3600_000, 0))
	if got := budIDs(ss.take(2, budArrive)); !budSameSet(got, sids[2:4]) {
		t.Fatalf("after switch to time_based got %v want %v (fresh full pool)", got, sids[2:4])
	}
	ss.none(budQuiet, "time_based pool of 2 spent")
	budMustPut(t, s, "sw", budWIF(5))
	if got := ss.next(budArrive).id(); got != sids[4] {
		t.Fatalf("after switch to while_in_flight 5 got %s want %s (4 in flight)", got, sids[4])
	}
	ss.none(budQuiet, "5 in flight = allocation")
	budAck(t, s, sids[0])
	if got := ss.next(budArrive).id(); got != sids[5] {
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
	a := budOpenStream(t, s, "lt", 10)
	b := budOpenStream(t, s, "", 10) // all queues
	for round := 0; round < len(ids); round++ {
		var got []budFrame
		deadline := time.NewTimer(budArrive)
		quiet := (<-chan time.Time)(nil)
	collect:
		for {
			select {
			case f := <-a.frames:
				got = append(got, f)
			case f := <-b.frames:
				got = append(got, f)
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
			t.Fatalf("round %d: %d jobs delivered across two streams, want exactly 1: %v", round, len(got), budIDs(got))
		}
		if got[0].id() != ids[round] {
			t.Fatalf("round %d: got %s want %s", round, got[0].id(), ids[round])
		}
		budAck(t, s, got[0].id())
	}
}
