package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// TestModelBudgetFailures runs the model with budget actors failing now and
// then (a budget fails on about 0.3 % of its messages: the step runs, its
// output is lost, the budget reports and is gone; the queue makes it anew
// from its view). Every invariant of the model holds throughout: no job is
// lost or stranded (the liveness drain dispatches every job at the end), a
// budget's in-flight count and holds match the jobs exactly at every
// quiescent point, nothing parked is left behind, and no time_based budget
// dispatches more than its window allows across a failure.
func TestModelBudgetFailures(t *testing.T) {
	nOps := 3000
	if testing.Short() {
		nOps = 400
	}
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			res := runModelSetup(t, seed, nOps, nil, true, func(s *sim) {
				s.budgetFaults = rand.New(rand.NewPCG(seed, 0xfa17))
			})
			if res.viol != nil {
				t.Fatalf("seed %d with budget failures: %v", seed, res.viol)
			}
			if res.stats.budgetFailures == 0 {
				t.Fatalf("seed %d: no budget failed; the test tests nothing", seed)
			}
			t.Logf("seed %d: %d budget failures, %d dispatches", seed, res.stats.budgetFailures, res.stats.dispatches)
		})
	}
}

// panickyTimers is the test's timers, except that the first wake timer a
// budget arms after failNext is set panics instead: a budget actor failing
// half way through applying a step (the core has parked a job and answered;
// the answer is not sent yet).
type panickyTimers struct {
	*obsTimers
	failNext atomic.Bool
}

func (p *panickyTimers) SendOnce(delay time.Duration, pid *actor.PID, msg any) func() {
	if _, ok := msg.(*budgetWake); ok && p.failNext.CompareAndSwap(true, false) {
		panic("injected failure")
	}
	return p.obsTimers.SendOnce(delay, pid, msg)
}

// TestBudgetActorPanicRecovers: a time_based budget (2 per second, burst 2)
// fails while parking the third of six jobs bound to it and to a
// while_in_flight budget of 3. The budget is made anew: every job still
// dispatches, at the pace the pool allows (the new budget goes on from the
// old one's level, so no burst is granted twice), and once all are acked
// both pools hold nothing and count nothing in flight.
func TestBudgetActorPanicRecovers(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	require.NoError(t, err)
	clock := newObsClock(1_800_000_000_000)
	timers := &panickyTimers{obsTimers: &obsTimers{clock: clock}}
	tr := NewTracer()
	sub := tr.Subscribe(1 << 12)
	e, err := Start(Config{Store: store, Logger: log, Tracer: tr, Clock: clock, Timers: timers})
	require.NoError(t, err)
	timers.root = e.system.Root
	t.Cleanup(func() { sub.Close(); e.Stop(); _ = store.Close() })
	ctx := context.Background()

	_, _, err = e.CreateBudget(ctx, "tb", timeBased(2, 1000, 2), false)
	require.NoError(t, err)
	_, _, err = e.CreateBudget(ctx, "w", whileInFlight(3), false)
	require.NoError(t, err)
	jobs := make([]*protocol.NewJob, 6)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`{}`),
			Budgets: []protocol.Binding{{Key: "w", Cost: 1}, {Key: "tb", Cost: 1}}}}
	}
	timers.failNext.Store(true)
	t0 := clock.nowMs()
	_, err = e.Enqueue(ctx, jobs, true)
	require.NoError(t, err)
	_, delivered := obsOpen(t, e, "w1", 10)

	var got []protocol.Job
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(jobs) {
		require.True(t, time.Now().Before(deadline), "only %d of %d jobs dispatched", len(got), len(jobs))
		select {
		case j := <-delivered:
			got = append(got, j)
			_, err := e.Ack(ctx, []string{j.ID})
			require.NoError(t, err)
		case <-time.After(20 * time.Millisecond):
			// nothing moves: let the pool refill a little
			clock.set(clock.nowMs() + 50)
			timers.fireDue()
		}
	}
	require.False(t, timers.failNext.Load(), "the injected failure never happened")
	created := 0
	var events []Event
	for len(sub.C) > 0 {
		ev := <-sub.C
		events = append(events, ev)
		if ev.Kind == EventBudgetCreated && ev.Budget == "tb" {
			created++
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, ev := range events {
				t.Logf("%s %s %s %s job=%s", ev.Time.Format("05.000"), ev.Actor, ev.Kind, ev.Reason, ev.JobID)
			}
		}
	})
	require.Equal(t, 2, created, "budget tb was not made anew after its failure")
	for i, j := range got {
		// 2 at once (the burst), then one every 500 ms
		earliest := t0
		if i >= 2 {
			earliest += uint64(i-1) * 500
		}
		require.GreaterOrEqual(t, j.DequeuedAt, earliest, "job %d dispatched %d ms after the start: the pool granted tokens twice", i, j.DequeuedAt-t0)
	}
	states, err := e.BudgetStates(ctx)
	require.NoError(t, err)
	require.Len(t, states, 2)
	for _, s := range states {
		require.Zero(t, s.InFlight, "budget %s counts tokens in flight with every job acked", s.Key)
		require.Zero(t, s.Held, "budget %s holds tokens with nothing reserving", s.Key)
		require.Zero(t, s.Parked, "budget %s has parked jobs left", s.Key)
	}
	require.Equal(t, 3.0, states[1].Tokens, "while_in_flight budget w is not whole again")
}
