package actors

import (
	"math"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

func timeBased(alloc uint32, durationMs int64, burst uint32) protocol.Definition {
	return protocol.Definition{Allocation: alloc, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: durationMs, Burst: burst}}
}

func whileInFlight(alloc uint32) protocol.Definition {
	return protocol.Definition{Allocation: alloc, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
}

func ref(id string, prio uint16, cost uint32) JobRef {
	return JobRef{ID: id, Priority: prio, Queue: "q", Cost: cost}
}

// dispatchOne reserves and, when granted, commits, through the step
// function, as the queue does for a job's first budget of several.
func dispatchOne(t *testing.T, b *budgetCore, now uint64, j JobRef) bool {
	t.Helper()
	var out stepOutput
	b.step(now, &ReserveRequest{Job: j}, &out)
	granted := out.sends[0].answer.Granted
	if granted {
		b.step(now, &CommitReservation{JobID: j.ID}, &out)
	}
	return granted
}

// TestFinalReservationDebitsAtOnce checks a final reservation (the last of
// a job's budgets): granted, it debits like a commit with no hold, and a
// refund gives the tokens back, time_based ones up to capacity only.
func TestFinalReservationDebitsAtOnce(t *testing.T) {
	wif := newBudgetCore("w", whileInFlight(3), atMs(0), nil)
	for i, id := range []string{"a", "b", "c"} {
		if !wif.reserve(atMs(0), ref(id, 1, 1), true).granted {
			t.Fatalf("final reservation %d refused", i)
		}
	}
	if wif.held != 0 || len(wif.holds) != 0 || wif.inFlight != 3 || wif.dispatches != 3 {
		t.Fatalf("after 3 final reservations: held %d holds %d in flight %d dispatches %d", wif.held, len(wif.holds), wif.inFlight, wif.dispatches)
	}
	if wif.reserve(atMs(0), ref("d", 1, 1), true).granted {
		t.Fatal("granted past the allocation")
	}
	if woken := wif.refund(atMs(0), "c", 1); len(woken) != 1 || woken[0] != "d" || wif.inFlight != 2 || wif.dispatches != 2 {
		t.Fatalf("refund woke %v, in flight %d, dispatches %d", woken, wif.inFlight, wif.dispatches)
	}

	tb := newBudgetCore("t", timeBased(10, 1000, 0), atMs(0), nil) // 10 per second
	if !tb.reserve(atMs(0), ref("a", 1, 4), true).granted || math.Abs(tb.tokens(atMs(0))-6) > 1e-9 {
		t.Fatalf("time_based final reservation: %v tokens left", tb.tokens(atMs(0)))
	}
	tb.refund(atMs(100), "a", 4) // 0.1 s later the level had dripped back up to 7
	if got := tb.tokens(atMs(100)); math.Abs(got-10) > 1e-9 {
		t.Fatalf("after the refund %v tokens, want the capacity 10", got)
	}
}

func TestDripRefillFromEmpty(t *testing.T) {
	// 100 per 5 minutes from empty: 20 after 1 min, 80 after 4, full after 5.
	b := newBudgetCore("k", timeBased(100, 300000, 0), atMs(0), nil)
	b.level = 0
	for _, c := range []struct {
		at   uint64
		want float64
	}{{60000, 20}, {240000, 80}, {300000, 100}, {600000, 100}} {
		if got := b.tokens(atMs(c.at)); math.Abs(got-c.want) > 1e-6 {
			t.Fatalf("tokens at %d ms = %v, want %v", c.at, got, c.want)
		}
	}
}

func TestBurstThenPace(t *testing.T) {
	// 6 per minute, burst unset: 6 at once, then one every 10 s.
	b := newBudgetCore("k", timeBased(6, 60000, 0), atMs(1000), nil)
	for i := 0; i < 6; i++ {
		if !dispatchOne(t, b, atMs(1000), ref(string(rune('a'+i)), 1, 1)) {
			t.Fatalf("burst job %d refused", i)
		}
	}
	if dispatchOne(t, b, atMs(1000), ref("g", 1, 1)) {
		t.Fatal("7th job granted inside the burst")
	}
	if b.wakeAt != 11000 {
		t.Fatalf("wake timer at %d, want 11000 (10 s after the burst)", b.wakeAt)
	}
	if woken := b.evaluate(atMs(10999)); len(woken) != 0 {
		t.Fatalf("woken before the timer moment: %v", woken)
	}
	if woken := b.evaluate(atMs(11000)); !reflect.DeepEqual(woken, []string{"g"}) {
		t.Fatalf("woken at 11000 = %v, want [g]", woken)
	}
}

func TestBurstOneIsStrictPacing(t *testing.T) {
	b := newBudgetCore("k", timeBased(10, 1000, 1), atMs(0), nil)
	if !dispatchOne(t, b, atMs(0), ref("a", 1, 1)) {
		t.Fatal("first job refused")
	}
	if dispatchOne(t, b, atMs(50), ref("b", 1, 1)) {
		t.Fatal("second job granted before 100 ms")
	}
	if b.wakeAt != 100 {
		t.Fatalf("wake at %d, want 100", b.wakeAt)
	}
	// An idle budget never holds more than the burst.
	if got := b.tokens(atMs(100000)); math.Abs(got-1) > 1e-9 {
		t.Fatalf("idle pool holds %v, want 1 (the burst)", got)
	}
}

func TestBurstAboveAllocation(t *testing.T) {
	// 10/s with burst 20: after 2 s idle, 20 can go at once.
	b := newBudgetCore("k", timeBased(10, 1000, 20), atMs(0), nil)
	b.level = 0
	if got := b.tokens(atMs(1000)); math.Abs(got-10) > 1e-9 {
		t.Fatalf("after 1 s: %v, want 10", got)
	}
	if got := b.tokens(atMs(5000)); math.Abs(got-20) > 1e-9 {
		t.Fatalf("after 5 s: %v, want capacity 20", got)
	}
	n := 0
	for i := 0; i < 25; i++ {
		if dispatchOne(t, b, atMs(5000), ref(string(rune('A'+i)), 1, 1)) {
			n++
		}
	}
	if n != 20 {
		t.Fatalf("dispatched %d at once, want 20", n)
	}
}

func TestWakeTimerMomentForExpensiveHead(t *testing.T) {
	// 4 per 2 s (one token per 500 ms); the head costs 3 with 0.5 free.
	b := newBudgetCore("k", timeBased(4, 2000, 0), atMs(0), nil)
	b.level = 0.5
	if dispatchOne(t, b, atMs(0), ref("big", 1, 3)) {
		t.Fatal("cost 3 granted with 0.5 tokens")
	}
	if b.wakeAt != 1250 {
		t.Fatalf("wake at %d, want 1250 (2.5 tokens at 2 per second)", b.wakeAt)
	}
}

func TestStrictHeadOrder(t *testing.T) {
	b := newBudgetCore("k", whileInFlight(10), atMs(0), nil)
	for i := 0; i < 5; i++ {
		if !dispatchOne(t, b, atMs(0), ref(string(rune('a'+i)), 5, 1)) {
			t.Fatal("cheap job refused")
		}
	}
	// 5 free: a cost-10 job parks and becomes the head.
	if dispatchOne(t, b, atMs(0), ref("big", 5, 10)) {
		t.Fatal("cost 10 granted with 5 free")
	}
	// A later cost-1 job would fit but must not overtake the head.
	if dispatchOne(t, b, atMs(0), ref("late", 5, 1)) {
		t.Fatal("later job overtook the parked head")
	}
	// A higher-priority job orders before the head and is served.
	if !dispatchOne(t, b, atMs(0), ref("urgent", 1, 1)) {
		t.Fatal("higher-priority job refused")
	}
	// Tokens return: nothing wakes until the head's 10 are free.
	for _, id := range []string{"a", "b", "c", "d"} {
		if w := b.finish(atMs(0), 1); len(w) != 0 {
			t.Fatalf("woken with too few tokens after %s: %v", id, w)
		}
	}
	b.finish(atMs(0), 1)                                                   // e done: 9 free (urgent still holds 1)
	if w := b.finish(atMs(0), 1); !reflect.DeepEqual(w, []string{"big"}) { // urgent done: 10 free
		t.Fatalf("woken = %v, want [big] alone (late needs tokens big takes)", w)
	}
}

func TestParkedOfUnconsumedQueueHoldsNobodyBack(t *testing.T) {
	consumed := map[string]bool{"q": true}
	b := newBudgetCore("k", whileInFlight(2), atMs(0), func(q string) bool { return consumed[q] })
	other := JobRef{ID: "a", Priority: 1, Queue: "idle", Cost: 2}
	dispatchOne(t, b, atMs(0), ref("x", 9, 1)) // 1 free
	if dispatchOne(t, b, atMs(0), other) {
		t.Fatal("cost 2 granted with 1 free")
	}
	if !dispatchOne(t, b, atMs(0), ref("y", 9, 1)) {
		t.Fatal("job held back by a parked job nobody consumes")
	}
}

func TestReleaseWakesWhatTokensPayFor(t *testing.T) {
	b := newBudgetCore("k", whileInFlight(5), atMs(0), nil)
	for i := 0; i < 5; i++ {
		dispatchOne(t, b, atMs(0), ref(string(rune('a'+i)), 1, 1))
	}
	for i := 0; i < 4; i++ {
		if dispatchOne(t, b, atMs(0), ref(string(rune('p'+i)), 2, 1)) {
			t.Fatal("granted on a full budget")
		}
	}
	if w := b.finish(atMs(0), 1); !reflect.DeepEqual(w, []string{"p"}) {
		t.Fatalf("one token woke %v, want [p]", w)
	}
	if !dispatchOne(t, b, atMs(0), ref("p", 2, 1)) { // the woken job reserves at once
		t.Fatal("woken job refused")
	}
	if w := b.finish(atMs(0), 1); !reflect.DeepEqual(w, []string{"q"}) {
		t.Fatalf("woke %v, want [q]", w)
	}
}

func TestReservationHoldAndRelease(t *testing.T) {
	b := newBudgetCore("k", whileInFlight(1), atMs(0), nil)
	if !b.reserve(atMs(0), ref("a", 1, 1), false).granted {
		t.Fatal("reserve refused")
	}
	if b.reserve(atMs(0), ref("b", 1, 1), false).granted {
		t.Fatal("held token granted twice")
	}
	if w := b.release(atMs(0), "a"); !reflect.DeepEqual(w, []string{"b"}) {
		t.Fatalf("release woke %v, want [b]", w)
	}
	if b.inFlight != 0 || b.held != 0 {
		t.Fatalf("pool not clean: inFlight=%d held=%d", b.inFlight, b.held)
	}
}

func TestUpdateWhileParked(t *testing.T) {
	t.Run("raise while_in_flight allocation wakes parked jobs", func(t *testing.T) {
		b := newBudgetCore("k", whileInFlight(1), atMs(0), nil)
		dispatchOne(t, b, atMs(0), ref("a", 1, 1))
		dispatchOne(t, b, atMs(0), ref("b", 1, 1))
		dispatchOne(t, b, atMs(0), ref("c", 1, 1))
		if w := b.update(atMs(0), whileInFlight(3)); !reflect.DeepEqual(w, []string{"b", "c"}) {
			t.Fatalf("woken %v, want [b c]", w)
		}
	})
	t.Run("time_based same type settles at the old rate and clamps", func(t *testing.T) {
		b := newBudgetCore("k", timeBased(10, 1000, 0), atMs(0), nil)
		b.level = 0
		b.update(atMs(500), timeBased(4, 1000, 0)) // 5 tokens at the old rate, clamped to 4
		if got := b.tokens(atMs(500)); math.Abs(got-4) > 1e-9 {
			t.Fatalf("level after update = %v, want 4", got)
		}
	})
	t.Run("raising capacity grants nothing at once", func(t *testing.T) {
		b := newBudgetCore("k", timeBased(2, 1000, 0), atMs(0), nil)
		b.update(atMs(0), timeBased(2, 1000, 100))
		if got := b.tokens(atMs(0)); math.Abs(got-2) > 1e-9 {
			t.Fatalf("level = %v, want 2", got)
		}
	})
	t.Run("switch to time_based starts full", func(t *testing.T) {
		b := newBudgetCore("k", whileInFlight(1), atMs(0), nil)
		dispatchOne(t, b, atMs(0), ref("a", 1, 1))
		dispatchOne(t, b, atMs(0), ref("b", 1, 1))
		if w := b.update(atMs(0), timeBased(5, 1000, 0)); !reflect.DeepEqual(w, []string{"b"}) {
			t.Fatalf("woken %v, want [b]", w)
		}
	})
	t.Run("switch to while_in_flight counts what is in flight", func(t *testing.T) {
		b := newBudgetCore("k", timeBased(5, 1000, 0), atMs(0), nil)
		dispatchOne(t, b, atMs(0), ref("a", 1, 2))
		b.update(atMs(0), whileInFlight(3))
		if got := b.tokens(atMs(0)); got != 1 {
			t.Fatalf("free = %v, want 1 (3 minus 2 in flight)", got)
		}
	})
	t.Run("timer re-armed for a slower rate", func(t *testing.T) {
		b := newBudgetCore("k", timeBased(1, 1000, 0), atMs(0), nil)
		dispatchOne(t, b, atMs(0), ref("a", 1, 1))
		dispatchOne(t, b, atMs(0), ref("b", 1, 1))
		if b.wakeAt != 1000 {
			t.Fatalf("wake at %d, want 1000", b.wakeAt)
		}
		b.update(atMs(0), timeBased(1, 4000, 0))
		if b.wakeAt != 4000 {
			t.Fatalf("wake at %d after slowing down, want 4000", b.wakeAt)
		}
	})
}

func TestUnparkMovesHead(t *testing.T) {
	b := newBudgetCore("k", timeBased(1, 1000, 0), atMs(0), nil)
	dispatchOne(t, b, atMs(0), ref("a", 1, 1))
	dispatchOne(t, b, atMs(0), ref("b", 1, 1))
	if b.wakeAt == 0 {
		t.Fatal("no timer for a parked head")
	}
	b.unpark(atMs(0), "b", 1)
	if b.wakeAt != 0 || b.parkedCount() != 0 {
		t.Fatalf("timer %d / parked %d after unparking the only job", b.wakeAt, b.parkedCount())
	}
}

// atMs is the budget core's time (Unix ns) at t Unix milliseconds.
func atMs(t uint64) uint64 { return t * nsPerMs }

// budgetSnapshot is everything a budget's reads could change.
type budgetSnapshot struct {
	level                   float64
	at, held, inFlight      uint64
	wakeNs, wakeAt, armedNs uint64
	armedAt, timerGen       uint64
	dispatches, refusals    uint64
	holds                   int
	parked                  []JobRef
}

func snapshotBudget(b *budgetCore) budgetSnapshot {
	s := budgetSnapshot{level: b.level, at: b.at, held: b.held, inFlight: b.inFlight, wakeNs: b.wakeNs, wakeAt: b.wakeAt,
		armedNs: b.armedNs, armedAt: b.armedAt, timerGen: b.timerGen, dispatches: b.dispatches, refusals: b.refusals, holds: len(b.holds)}
	b.parked.Ascend(func(r JobRef) bool { s.parked = append(s.parked, r); return true })
	return s
}

// TestBudgetReadsChangeNothing: asking a budget for its state, where a
// parked job stands and its parked line, again and again as time passes,
// leaves the pool as it was (no settle on read), and every read at the
// same moment answers the same.
func TestBudgetReadsChangeNothing(t *testing.T) {
	b := newBudgetCore("k", timeBased(10, 1000, 3), atMs(0), nil)
	var out stepOutput
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		b.step(atMs(uint64(i)), &ReserveRequest{Job: ref(id, 1, 1), Commit: true}, &out)
	}
	before := snapshotBudget(b)
	if len(before.parked) != 2 || before.armedNs == 0 {
		t.Fatalf("setup: parked %v, timer %d; want d and e parked and a timer armed", before.parked, before.armedNs)
	}
	queries := []budgetMsg{&BudgetStateRequest{}, &budgetStateQuery{Key: "k"}, &parkedJobQuery{JobID: "e", Priority: 1}, &budgetLineQuery{Key: "k", Limit: 10}}
	first := make([]any, len(queries))
	for i, q := range queries {
		b.step(atMs(50), q, &out)
		first[i] = out.reply
	}
	for now := uint64(50); now < 5000; now += 7 {
		for _, q := range queries {
			b.step(atMs(now), q, &out)
			if out.reply == nil || len(out.sends) != 0 || out.stop || out.armNs != 0 {
				t.Fatalf("query %T at %d ms: reply %v, sends %d, timer stop %v arm %d", q, now, out.reply, len(out.sends), out.stop, out.armNs)
			}
		}
		if got := snapshotBudget(b); !reflect.DeepEqual(got, before) {
			t.Fatalf("reads at %d ms changed the budget:\n got %+v\nwant %+v", now, got, before)
		}
	}
	for i, q := range queries {
		b.step(atMs(50), q, &out)
		if !reflect.DeepEqual(out.reply, first[i]) {
			t.Fatalf("%T at 50 ms answered %+v, then %+v", q, first[i], out.reply)
		}
	}
	w := first[2].(*JobWaitingResponse).Waiting
	if w == nil || w.Position != 2 || w.AffordableAt != 200 {
		t.Fatalf("waiting of e = %+v, want position 2, affordable at 200 ms (0.02 tokens left at 2 ms, 2 needed for d and e, at 10/s)", w)
	}
}

// TestBudgetLineLimitBelowOne: the line read with a limit below one is
// empty (it panicked on a negative capacity inside the budget actor; the
// HTTP layer checks the limit, the core must not depend on it).
func TestBudgetLineLimitBelowOne(t *testing.T) {
	b := newBudgetCore("b", whileInFlight(1), 0, nil)
	b.reserve(0, JobRef{ID: "a", Queue: "q", Cost: 1}, true)
	b.reserve(0, JobRef{ID: "b", Queue: "q", Cost: 1}, true)
	for _, limit := range []int{-5, 0} {
		l := b.line(limit)
		if l.Total != 1 || len(l.Jobs) != 0 {
			t.Fatalf("line(%d) = %d of %d, want none of 1", limit, len(l.Jobs), l.Total)
		}
	}
	if l := b.line(1); len(l.Jobs) != 1 || l.Jobs[0].ID != "b" {
		t.Fatalf("line(1) = %+v, want job b", l.Jobs)
	}
}
