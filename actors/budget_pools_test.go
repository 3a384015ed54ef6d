package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

const poolT0 = uint64(1_800_000_000_000_000_000) // Unix ns

// TestRestoredLevelRules (SPEC §10.4): the level a pool starts with after a
// restart is the stored level settled to that moment, at the slower of the
// stored and the current refill, up to the smaller capacity, less the
// tokens held for reservations when it was stored; a debt stays a debt and
// a clock that went back settles nothing.
func TestRestoredLevelRules(t *testing.T) {
	stored := func(level float64, pending uint64) persistence.PoolLevel {
		// 10 per 10 s, burst 10: one token a second
		return persistence.PoolLevel{Level: level, AtNs: poolT0, Pending: pending, Allocation: 10, DurationMs: 10_000, Capacity: 10}
	}
	sec := uint64(1e9)
	for _, tc := range []struct {
		name string
		p    persistence.PoolLevel
		def  protocol.Definition
		now  uint64
		want float64
	}{
		{"settled at the stored rate", stored(2, 0), timeBased(10, 10_000, 0), poolT0 + 3*sec, 5},
		{"sub-millisecond settle", stored(2, 0), timeBased(10, 10_000, 0), poolT0 + 1500, 2 + 1.5e-6},
		{"up to capacity", stored(2, 0), timeBased(10, 10_000, 0), poolT0 + 100*sec, 10},
		{"held tokens taken off", stored(2, 2), timeBased(10, 10_000, 0), poolT0 + 3*sec, 3},
		{"held tokens taken off a full pool", stored(9, 3), timeBased(10, 10_000, 0), poolT0 + 100*sec, 7},
		{"a debt stays a debt", stored(-3, 0), timeBased(10, 10_000, 0), poolT0 + sec, -2},
		{"clock went back", stored(2, 1), timeBased(10, 10_000, 0), poolT0 - 5*sec, 1},
		{"now is the stored instant", stored(2, 0), timeBased(10, 10_000, 0), poolT0, 2},
		{"faster definition: the stored rate", stored(2, 0), timeBased(20, 10_000, 0), poolT0 + 3*sec, 5},
		{"slower definition: its rate", stored(2, 0), timeBased(5, 10_000, 0), poolT0 + 3*sec, 3.5},
		{"smaller capacity now", stored(2, 0), timeBased(10, 10_000, 4), poolT0 + 100*sec, 4},
		{"stored above the new capacity", stored(9, 0), timeBased(10, 10_000, 4), poolT0, 4},
		{"held tokens beyond a lowered capacity: empty, no debt", stored(9, 8), timeBased(10, 10_000, 4), poolT0 + sec, 0},
		{"held tokens on a debt", stored(-1, 2), timeBased(10, 10_000, 0), poolT0 + sec, -2},
		{"larger capacity now: the stored one", stored(2, 0), timeBased(10, 10_000, 50), poolT0 + 100*sec, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restoredLevel(tc.p, tc.def, tc.now); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("restored level %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBudgetCoreRestore: a restored time_based pool starts at the restored
// level settled to now; a while_in_flight budget ignores a stored level.
func TestBudgetCoreRestore(t *testing.T) {
	p := persistence.PoolLevel{Level: 1, AtNs: poolT0, Allocation: 10, DurationMs: 10_000, Capacity: 10}
	b := newBudgetCore("k", timeBased(10, 10_000, 0), poolT0+2e9, nil)
	b.restoreLevel(poolT0+2e9, p)
	if got := b.tokens(poolT0 + 2e9); math.Abs(got-3) > 1e-9 {
		t.Fatalf("restored tokens %v, want 3", got)
	}
	if got := b.tokens(poolT0 + 4e9); math.Abs(got-5) > 1e-9 {
		t.Fatalf("tokens 2 s after the restore %v, want 5 (the pool refills from there)", got)
	}
	w := newBudgetCore("w", whileInFlight(4), poolT0, nil)
	w.restoreLevel(poolT0, p)
	if got := w.tokens(poolT0); got != 4 {
		t.Fatalf("while_in_flight tokens %v after a restore, want 4", got)
	}
}

// TestPoolNoteNeverAboveTruth drives a time_based budgetCore through random
// holds, final reservations, commits, releases and refunds on an injected
// clock, noting the pool after every grant as the budget actor does. At a
// random crash the latest note, restored at a later instant T, must never
// exceed the real level at T whatever happens to the reservations still
// held: each is debited at a random moment before T, or dropped.
func TestPoolNoteNeverAboveTruth(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		burst := uint32(rng.IntN(3)) * 4 // 0 (= allocation), 4 or 8
		def := timeBased(uint32(1+rng.IntN(10)), int64(100+rng.IntN(2000)), burst)
		now := poolT0 + uint64(rng.IntN(1e6))
		b := newBudgetCore("k", def, now, nil)
		var latest persistence.PoolLevel
		noted := false
		holds := map[string]bool{}
		var committed []JobRef // debits a refund may undo
		steps := 5 + rng.IntN(60)
		for i := range steps {
			now += uint64(rng.IntN(300)) * uint64(1e6) / uint64(1+rng.IntN(7))
			job := JobRef{ID: fmt.Sprintf("j%03d", i), Queue: "q", Cost: uint32(1 + rng.IntN(int(min(def.Ceiling(), 3))))}
			switch op := rng.IntN(10); {
			case op < 4: // a hold, or a final reservation
				final := rng.IntN(2) == 0
				out := b.reserve(now, job, final)
				if out.granted {
					latest, noted = mustPoolLevel(t, b), true
					if final {
						committed = append(committed, job)
					} else {
						holds[job.ID] = true
					}
				} else {
					b.unpark(now, job.ID, job.Priority)
				}
			case op < 7: // a hold commits
				for id := range holds {
					b.commit(now, id)
					delete(holds, id)
					committed = append(committed, JobRef{ID: id, Cost: 0})
					break
				}
			case op < 9: // a hold is released
				for id := range holds {
					b.release(now, id)
					delete(holds, id)
					break
				}
			default: // a final debit whose job did not dispatch
				if n := len(committed); n > 0 && committed[n-1].Cost > 0 {
					b.refund(now, committed[n-1].ID, committed[n-1].Cost)
					committed = committed[:n-1]
				}
			}
		}
		if !noted {
			continue
		}
		// the crash: what was held may yet be debited before T, or not
		T := now + uint64(rng.IntN(5000))*uint64(1e6)
		for id := range holds {
			if rng.IntN(3) > 0 {
				b.commit(now+uint64(rng.Int64N(int64(T-now)+1)), id)
			} else {
				b.release(now, id)
			}
		}
		truth := b.levelAt(T)
		if got := restoredLevel(latest, def, T); got > truth+tokenEpsilon {
			t.Fatalf("seed %d (%s): restored %v at T, above the real level %v (latest note %+v)", seed, modelDefString(def), got, truth, latest)
		}
		if latest.Level >= -tokenEpsilon && restoredLevel(latest, def, T) < -tokenEpsilon {
			t.Fatalf("seed %d: restored a debt %v from a note without one %+v", seed, restoredLevel(latest, def, T), latest)
		}
	}
}

func mustPoolLevel(t *testing.T, b *budgetCore) persistence.PoolLevel {
	t.Helper()
	p, ok := b.poolLevel()
	if !ok {
		t.Fatal("no pool level for a time_based budget")
	}
	return p
}

// poolEngine starts an engine on store with an injected clock.
func poolEngine(t *testing.T, store persistence.JobStore, clock Clock, durable bool) *Engine {
	t.Helper()
	return poolEngineTraced(t, store, clock, durable, nil)
}

func poolEngineTraced(t *testing.T, store persistence.JobStore, clock Clock, durable bool, tracer *Tracer) *Engine {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := Start(Config{Store: store, Logger: log, Clock: clock, Tracer: tracer, Engine: EngineConfig{DurablePools: durable}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// poolTokens reads a budget's tokens.
func poolTokens(t *testing.T, e *Engine, key string) float64 {
	t.Helper()
	st, err := e.BudgetState(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return st.Tokens
}

// poolDispatch enqueues jobs and takes them all on one stream that
// reserves for one job at a time, leaving them in flight; it returns their
// ids.
func poolDispatch(t *testing.T, e *Engine, jobs ...*protocol.NewJob) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Enqueue(ctx, jobs, true); err != nil {
		t.Fatal(err)
	}
	batches := make(chan []protocol.Job, 64)
	stream, err := e.OpenStream(ctx, &OpenStream{Prefetch: 0, Deliver: func(j []protocol.Job) { batches <- j }})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	deadline := time.After(10 * time.Second)
	for len(ids) < len(jobs) {
		select {
		case b := <-batches:
			for _, j := range b {
				ids = append(ids, j.ID)
			}
			e.StreamWritten(stream)
		case <-deadline:
			t.Fatalf("delivered %d of %d jobs", len(ids), len(jobs))
		}
	}
	return ids
}

// TestDurablePoolsAcrossRestart (SPEC §10.4) runs the real actors on one
// store with an injected clock: jobs dispatched on two time_based budgets
// (one of them bound together with a while_in_flight one), the engine
// stopped with the jobs in flight, the clock moved on, and the engine
// started again. With durable pools each time_based budget starts where its
// pool was, refilled for the time that passed; with memory pools it starts
// full. A job refused by its second budget leaves the first as it was.
// (The stream reserves for one job at a time, and each budget's last grant
// is a final reservation, so no reservation is pending in the stored
// levels and they are exact; pending ones are taken off, see
// TestRestoredLevelRules.)
func TestDurablePoolsAcrossRestart(t *testing.T) {
	store, clock := poolStore(t)
	ctx := context.Background()
	e := poolEngine(t, store, clock, true)
	for key, def := range map[string]protocol.Definition{
		"a":     timeBased(10, 10_000, 0), // one token a second
		"b":     timeBased(4, 60_000, 0),  // one every 15 s
		"c":     timeBased(1, 3_600_000, 1),
		"0conc": whileInFlight(50), // sorts first: a is the final reservation
	} {
		if _, _, err := e.CreateBudget(ctx, key, def, false); err != nil {
			t.Fatal(err)
		}
	}
	jobs := []*protocol.NewJob{
		refusedJob("q", "", protocol.NewBinding{Key: "a", Cost: 3}, protocol.NewBinding{Key: "b", Cost: 2}),
		refusedJob("q", "", protocol.NewBinding{Key: "a", Cost: 1}, protocol.NewBinding{Key: "c", Cost: 1}),
	}
	for range 6 {
		jobs = append(jobs, refusedJob("q", "", protocol.NewBinding{Key: "0conc", Cost: 1}, protocol.NewBinding{Key: "a", Cost: 1}))
	}
	poolDispatch(t, e, jobs...)
	// a job that reserves on a, then is refused by c (empty): a keeps its
	// tokens, and its stored level stays
	if _, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "", protocol.NewBinding{Key: "a", Cost: 1}, protocol.NewBinding{Key: "c", Cost: 1})}, false); err != nil {
		t.Fatal(err)
	}
	if got := poolTokens(t, e, "a"); math.Abs(got-0) > 1e-9 {
		t.Fatalf("a has %v tokens before the restart, want 0 (10 - 3 - 1 - 6)", got)
	}
	e.Stop()

	clock.set(clock.nowMs() + 2000)
	tracer := NewTracer()
	sub := tracer.Subscribe(1024)
	defer sub.Close()
	e = poolEngineTraced(t, store, clock, true, tracer)
	want := map[string]float64{"a": 2, "b": 2 + 4*2.0/60, "c": 2.0 / 3600, "0conc": 50}
	for key, w := range want {
		if got := poolTokens(t, e, key); math.Abs(got-w) > 1e-9 {
			t.Errorf("durable: %s has %v tokens after the restart, want %v", key, got, w)
		}
	}
	e.Stop()
	restored := map[string]bool{}
	for len(sub.C) > 0 {
		if ev := <-sub.C; ev.Kind == EventPoolRestored {
			restored[ev.Budget] = true
		}
	}
	if len(restored) != 3 || !restored["a"] || !restored["b"] || !restored["c"] {
		t.Errorf("pool_restored traced for %v, want a, b and c", restored)
	}

	e = poolEngine(t, store, clock, false)
	for key, w := range map[string]float64{"a": 10, "b": 4, "c": 1, "0conc": 50} {
		if got := poolTokens(t, e, key); got != w {
			t.Errorf("memory: %s has %v tokens after the restart, want %v (full)", key, got, w)
		}
	}
	e.Stop()
}

// TestDurablePoolsDefinitionChanges: a stored level refills after a restart
// at the slowest rate its budget had since it was stored; a change of
// strategy type drops it (the new time_based pool is full); a deleted
// budget takes its level with it.
func TestDurablePoolsDefinitionChanges(t *testing.T) {
	store, clock := poolStore(t)
	ctx := context.Background()
	e := poolEngine(t, store, clock, true)
	for _, key := range []string{"slowed", "retyped", "gone"} {
		if _, _, err := e.CreateBudget(ctx, key, timeBased(10, 10_000, 0), false); err != nil {
			t.Fatal(err)
		}
	}
	var jobs []*protocol.NewJob
	for _, key := range []string{"slowed", "retyped", "gone"} {
		jobs = append(jobs, refusedJob("q", "", protocol.NewBinding{Key: key, Cost: 8}))
	}
	if _, err := e.Ack(ctx, poolDispatch(t, e, jobs...)); err != nil {
		t.Fatal(err)
	}
	// slowed: 1 per 10 s for a while, then back to 10 per 10 s
	for _, def := range []protocol.Definition{timeBased(1, 10_000, 10), timeBased(10, 10_000, 0)} {
		if _, _, err := e.CreateBudget(ctx, "slowed", def, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, def := range []protocol.Definition{whileInFlight(3), timeBased(10, 10_000, 0)} {
		if _, _, err := e.CreateBudget(ctx, "retyped", def, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteBudget(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.CreateBudget(ctx, "gone", timeBased(10, 10_000, 0), false); err != nil {
		t.Fatal(err)
	}
	e.Stop()

	clock.set(clock.nowMs() + 4000)
	e = poolEngine(t, store, clock, true)
	defer e.Stop()
	for key, w := range map[string]float64{"slowed": 2 + 0.4, "retyped": 10, "gone": 10} {
		if got := poolTokens(t, e, key); math.Abs(got-w) > 1e-9 {
			t.Errorf("%s has %v tokens after the restart, want %v", key, got, w)
		}
	}
}

// poolLevel is the time_based pool as last settled, with the tokens held
// by reservations (false for other strategies).
func (b *budgetCore) poolLevel() (persistence.PoolLevel, bool) {
	if b.def.Strategy.Type != protocol.TimeBased {
		return persistence.PoolLevel{}, false
	}
	p := refillOf(b.def)
	p.Level, p.AtNs, p.Pending = b.level, b.at, b.held
	return p, true
}

// poolStore is an in-memory store, closed when the test ends, and a clock
// for engines started on it.
func poolStore(t *testing.T) (*persistence.Store, *obsClock) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store, newObsClock(1_800_000_000_000)
}
