package actors

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// pacedRun drives a saturated time_based budget the way its actor does,
// with an injected clock in ns: the first job takes the full pool, every
// later one parks, and each wake is handled late by late(): the woken job
// reserves at that moment and the next one parks behind it. It returns the
// moments (Unix ns) of the n dispatches and the total lateness.
func pacedRun(t *testing.T, b *budgetCore, start uint64, n int, late func() uint64) (dispatched []uint64, lateness uint64) {
	t.Helper()
	job := func(i int) JobRef { return JobRef{ID: fmt.Sprintf("j%06d", i), Queue: "q", Cost: 1} }
	now := start
	if !b.reserve(now, job(0), true).granted {
		t.Fatal("first job refused by a full pool")
	}
	dispatched = append(dispatched, now)
	for i := 1; i < n; i++ {
		if b.reserve(now, job(i), true).granted {
			t.Fatalf("job %d granted at once by a saturated pool", i)
		}
		if b.wakeNs <= now {
			t.Fatalf("job %d parked with no wake moment ahead (wake %d, now %d)", i, b.wakeNs, now)
		}
		if early := b.evaluate(b.wakeNs - 1); len(early) != 0 {
			t.Fatalf("job %d woken 1 ns before its wake moment", i)
		}
		d := late()
		lateness += d
		now = b.wakeNs + d
		woken := b.evaluate(now)
		if len(woken) != 1 || woken[0] != job(i).ID {
			t.Fatalf("wake for job %d woke %v", i, woken)
		}
		if !b.reserve(now, job(i), true).granted {
			t.Fatalf("woken job %d refused at %d", i, now)
		}
		dispatched = append(dispatched, now)
	}
	return dispatched, lateness
}

// TestExactPacingAtBurstOne (SPEC §4.4, precision): a saturated time_based
// budget at burst 1 dispatches its jobs at exactly the ideal pace, for
// rates whose interval is whole milliseconds and for one whose interval is
// not (7 per 1000 ms: 142.857... ms); a wake handled late loses exactly its
// lateness, nothing to rounding; and no window of dispatches ever exceeds
// burst + allocation*w/duration.
func TestExactPacingAtBurstOne(t *testing.T) {
	const start = uint64(1_800_000_000_123_456_789) // an instant with a sub-ms part
	for _, tc := range []struct {
		allocation uint32
		durationMs int64
		n          int
	}{
		{20, 1000, 400},
		{100, 1000, 1000},
		{7, 1000, 300},
	} {
		interval := float64(tc.durationMs) * float64(time.Millisecond) / float64(tc.allocation) // ns
		rate := float64(tc.allocation) / (float64(tc.durationMs) * float64(time.Millisecond))   // tokens per ns
		for _, lateMax := range []uint64{0, 2 * nsPerMs} {
			name := fmt.Sprintf("%d per %d ms, handled up to %v late", tc.allocation, tc.durationMs, time.Duration(lateMax))
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(tc.allocation), lateMax))
				late := func() uint64 {
					if lateMax == 0 {
						return 0
					}
					return rng.Uint64N(lateMax + 1)
				}
				b := newBudgetCore("k", timeBased(tc.allocation, tc.durationMs, 1), start, nil)
				at, lateness := pacedRun(t, b, start, tc.n, late)

				// Long run: the last dispatch is the ideal pace plus the
				// lateness, within 1 ns per dispatch (the wake moment is a
				// whole ns).
				ideal := float64(tc.n-1)*interval + float64(lateness)
				got := float64(at[len(at)-1] - start)
				if got < ideal-1 || got > ideal+float64(tc.n) {
					t.Fatalf("%d dispatches took %.0f ns, want %.0f (ideal pace %.0f ns + lateness %d ns): off by %.0f ns",
						tc.n, got, ideal, float64(tc.n-1)*interval, lateness, got-ideal)
				}
				if lateMax == 0 {
					achieved := float64(tc.n-1) / got * float64(time.Second)
					want := float64(tc.allocation) / (float64(tc.durationMs) / 1000)
					if rel := (achieved - want) / want; rel < -1e-6 || rel > 1e-6 {
						t.Fatalf("achieved %.6f/s, configured %.6f/s (relative error %.2e)", achieved, want, rel)
					}
				}

				// No window [at_j, at_k] holds more than 1 + rate*w.
				for j := range at {
					for k := j + 1; k < len(at); k++ {
						w := float64(at[k] - at[j])
						if count := float64(k - j + 1); count > 1+rate*w+tokenEpsilon {
							t.Fatalf("dispatches %d..%d: %v in %.0f ns, bound %.9f", j, k, count, w, 1+rate*w)
						}
					}
				}
			})
		}
	}
}
