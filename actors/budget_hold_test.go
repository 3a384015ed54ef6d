package actors

import (
	"math"
	"testing"
)

// TestHoldRefusesAndParks checks the rules of a hold at the budget core,
// with an injected clock: nothing is granted while held, jobs park in their
// usual order, the wake moment is the later of the hold's end and the
// moment the tokens allow, and at the hold's end the parked jobs go in
// order.
func TestHoldRefusesAndParks(t *testing.T) {
	b := newBudgetCore("t", timeBased(10, 1000, 0), atMs(0), nil) // 10/s, full
	b.hold(atMs(0), 500, false)
	if b.heldUntil(atMs(0)) != 500 {
		t.Fatalf("held until %d, want 500", b.heldUntil(atMs(0)))
	}
	if b.reserve(atMs(10), ref("b", 1, 1), true).granted {
		t.Fatal("granted while held")
	}
	if b.reserve(atMs(20), ref("a", 1, 1), true).granted {
		t.Fatal("granted while held")
	}
	if b.parkedCount() != 2 {
		t.Fatalf("parked %d, want 2", b.parkedCount())
	}
	// the pool is full: the wake timer is armed for the hold's end
	if b.wakeNs != atMs(500) || b.wakeAt != 500 {
		t.Fatalf("wake at %d ns (%d ms), want the hold's end 500 ms", b.wakeNs, b.wakeAt)
	}
	if woken := b.evaluate(atMs(499)); len(woken) != 0 {
		t.Fatalf("woke %v before the hold's end", woken)
	}
	woken := b.evaluate(atMs(500))
	if len(woken) != 2 || woken[0] != "a" || woken[1] != "b" {
		t.Fatalf("at the hold's end woke %v, want [a b]", woken)
	}
	if b.heldUntil(atMs(500)) != 0 {
		t.Fatal("hold still shown after its end")
	}
}

// TestHoldWithDrainWaitsForTokens checks a drain: the level is 0 at the
// hold, refills while held, and the wake moment is the later of the hold's
// end and the tokens' moment.
func TestHoldWithDrainWaitsForTokens(t *testing.T) {
	b := newBudgetCore("t", timeBased(10, 1000, 0), atMs(0), nil) // 1 token per 100 ms
	b.hold(atMs(0), 50, true)
	if got := b.tokens(atMs(0)); got != 0 {
		t.Fatalf("drained level %v, want 0", got)
	}
	b.reserve(atMs(0), ref("a", 1, 3), true) // needs 3 tokens: 300 ms
	if b.wakeAt != 300 {
		t.Fatalf("wake at %d, want 300 (tokens later than the hold's end 50)", b.wakeAt)
	}
	// a hold past the tokens' moment moves the timer to the hold's end
	b.hold(atMs(10), 800, false)
	if b.wakeAt != 800 || b.wakeNs != atMs(800) {
		t.Fatalf("wake at %d, want the hold's end 800", b.wakeAt)
	}
	if got := b.tokens(atMs(800)); math.Abs(got-8) > 1e-9 {
		t.Fatalf("level %v at 800 ms, want 8: the pool refills while held", got)
	}
	if woken := b.evaluate(atMs(800)); len(woken) != 1 {
		t.Fatalf("woke %v at the hold's end", woken)
	}
	// a drain leaves a debt a debt
	b.level = -5
	b.at = atMs(800)
	b.hold(atMs(800), 0, true)
	if got := b.tokens(atMs(800)); got != -5 {
		t.Fatalf("drain of a debt gave %v, want -5", got)
	}
}

// TestHoldOnWhileInFlight checks that a hold gates a while_in_flight budget
// too (the drain is ignored there), that lifting it wakes the parked jobs at
// once, and the expected time a parked job is shown.
func TestHoldOnWhileInFlight(t *testing.T) {
	b := newBudgetCore("w", whileInFlight(2), atMs(0), nil)
	b.hold(atMs(0), 1000, true)
	if b.tokens(atMs(0)) != 2 {
		t.Fatalf("a drain changed a while_in_flight pool: %v", b.tokens(atMs(0)))
	}
	if b.reserve(atMs(1), ref("a", 1, 1), true).granted {
		t.Fatal("granted while held")
	}
	if b.wakeAt != 1000 {
		t.Fatalf("while_in_flight wake at %d, want the hold's end 1000", b.wakeAt)
	}
	if got := b.holdExpected(atMs(1), 0, true); got != 1000 {
		t.Fatalf("expected %d for a covered job, want 1000", got)
	}
	if got := b.holdExpected(atMs(1), 0, false); got != 0 {
		t.Fatalf("expected %d for a job the tokens do not cover, want 0 (unknown)", got)
	}
	if woken := b.hold(atMs(2), 0, false); len(woken) != 1 || woken[0] != "a" {
		t.Fatalf("release woke %v", woken)
	}
	if b.wakeAt != 0 {
		t.Fatalf("timer %d left after the release", b.wakeAt)
	}
}

// TestFreshAt checks when a budget reports itself fresh: never while it
// parks or has jobs in flight, at the later of the hold's end and the
// moment its pool is full again.
func TestFreshAt(t *testing.T) {
	b := newBudgetCore("t", timeBased(10, 1000, 0), atMs(0), nil)
	if at, ok := b.freshAt(atMs(5)); !ok || at != 0 {
		t.Fatalf("a new budget fresh at %d (%v), want 0", at, ok)
	}
	dispatchOne(t, b, atMs(100), ref("a", 1, 4))
	if _, ok := b.freshAt(atMs(100)); ok {
		t.Fatal("fresh with a job in flight")
	}
	b.finish(atMs(150), 4)
	if at, ok := b.freshAt(atMs(150)); !ok || at != 500 {
		t.Fatalf("fresh at %d (%v), want 500 (4 tokens take 400 ms from 100)", at, ok)
	}
	b.hold(atMs(150), 900, false)
	if at, _ := b.freshAt(atMs(150)); at != 900 {
		t.Fatalf("fresh at %d while held until 900", at)
	}
}
