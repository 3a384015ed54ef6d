package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// TestSettleCostRules (SPEC §10.1) on the budget core, time in ns: a real
// cost below the reserve credits the pool up to its capacity, one above it
// debits it below zero (a debt), the next job parks and the wake moment is
// exactly when the refill covers the debt and its cost; a refund, a refill
// and a new definition never lift a debt by more than they bring; a
// while_in_flight budget ignores the entry.
func TestSettleCostRules(t *testing.T) {
	const ms = nsPerMs
	start := uint64(1_800_000_000_000) * ms
	b := newBudgetCore("llm", timeBased(10, 1000, 0), start, nil) // 0.01 token/ms, capacity 10
	require.True(t, b.reserve(start, ref("a", 1, 4), true).granted)
	require.InDelta(t, 6, b.level, 1e-9)

	// credit: reserved 4, used 1 -> +3, capped at the capacity
	moved, woken := b.settleCost(start, 4, 1)
	require.True(t, moved)
	require.Empty(t, woken)
	require.InDelta(t, 9, b.level, 1e-9)
	b.settleCost(start, 4, 0)
	require.InDelta(t, 10, b.level, 1e-9, "a credit never lifts the level above the capacity")

	// debit: reserved 4, used 34 -> -30: level -20, a debt
	b.settleCost(start, 4, 34)
	require.InDelta(t, -20, b.tokens(start), 1e-9, "the level goes below zero")
	require.Equal(t, uint64(3), b.settlements)

	// the next job (cost 5) parks; its wake is when -20 + 0.01*t = 5: t = 2500 ms
	out := b.reserve(start+ms, ref("b", 1, 5), true)
	require.False(t, out.granted, "dispatched while the pool is in debt")
	require.Equal(t, start+2500*ms, b.wakeNs)
	require.Empty(t, b.evaluate(start+2500*ms-1), "woken a nanosecond before the debt and its cost are covered")
	require.Equal(t, []string{"b"}, b.evaluate(start+2500*ms))

	// the other paths keep a debt a debt
	d := newBudgetCore("d", timeBased(10, 1000, 0), start, nil)
	d.settleCost(start, 0, 40) // level -30
	d.refund(start, "x", 2)
	require.InDelta(t, -28, d.level, 1e-9, "a refund adds what it gives back, no more")
	d.update(start, timeBased(10, 1000, 5))
	require.InDelta(t, -28, d.level, 1e-9, "a smaller capacity does not clear a debt")
	require.InDelta(t, -27, d.levelAt(start+100*ms), 1e-9, "refill from below zero")

	// while_in_flight: accepted, no effect
	w := newBudgetCore("w", whileInFlight(3), start, nil)
	require.True(t, w.reserve(start, ref("x", 1, 2), true).granted)
	moved, _ = w.settleCost(start, 2, 100)
	require.False(t, moved)
	require.InDelta(t, 1, w.tokens(start), 1e-9)
	require.Zero(t, w.settlements)
}

// TestSettlementDebtActor (SPEC §10.1) with the actors on an injected
// clock: a job reserved 5 and really used 30 leaves a capacity-10 pool at
// -20; the state shows it, the trace has the settled event, and the next
// job bound to the budget is dispatched exactly when the refill (10 per
// second) has repaid the debt and covered its cost of 5: 2.5 s later, not a
// millisecond before.
func TestSettlementDebtActor(t *testing.T) {
	b := obsStart(t, true)
	ctx := context.Background()
	_, _, err := b.engine.CreateBudget(ctx, "llm", timeBased(10, 1000, 0), false)
	require.NoError(t, err)
	job := func() *protocol.NewJob {
		return &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`{}`),
			Budgets: []protocol.Binding{{Key: "llm", Cost: 5}}}}
	}
	views, err := b.engine.Enqueue(ctx, []*protocol.NewJob{job()}, false)
	require.NoError(t, err)
	first := views[0].ID
	_, delivered := obsOpen(t, b.engine, "w", 1)
	recv := func() protocol.Job { t.Helper(); return obsRecv(t, delivered, 10*time.Second) }
	require.Equal(t, first, recv().ID)
	t0 := b.clock.nowMs()

	// a key the job is not bound to: 422, nothing acked
	_, err = b.engine.AckSettling(ctx, []string{first}, map[string][]protocol.Settlement{first: {{Key: "other", Cost: 1}}})
	require.EqualError(t, err, "budget 'other' is not bound to job "+first)
	v, err := b.engine.GetJob(ctx, first)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusInFlight, v.Status, "a rejected ack changed the job")

	notFound, err := b.engine.AckSettling(ctx, []string{first}, map[string][]protocol.Settlement{first: {{Key: "llm", Cost: 30}}})
	require.NoError(t, err)
	require.Empty(t, notFound)
	st, err := b.engine.BudgetState(ctx, "llm")
	require.NoError(t, err)
	require.InDelta(t, -20, st.Tokens, 1e-9, "the state shows the debt")
	require.Equal(t, uint64(1), st.Settlements)
	b.waitFor(t, "settled", func() bool { return b.count(EventSettled, first) == 1 })
	ev, _ := b.find(EventSettled, first)
	require.Equal(t, "llm", ev.Budget)
	require.Equal(t, uint32(5), *ev.Reserved)
	require.Equal(t, uint32(30), *ev.RealCost)
	require.InDelta(t, -20, *ev.Tokens, 1e-9)

	views, err = b.engine.Enqueue(ctx, []*protocol.NewJob{job()}, false)
	require.NoError(t, err)
	second := views[0].ID
	b.waitFor(t, "the second job parked", func() bool { return b.count(EventParked, second) == 1 })
	st, err = b.engine.BudgetState(ctx, "llm")
	require.NoError(t, err)
	require.Equal(t, t0+2500, st.WakeAt, "the wake timer is armed for the moment the debt and the cost are covered")

	b.clock.set(t0 + 2499)
	b.timers.fireDue()
	v, err = b.engine.GetJob(ctx, second)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusReady, v.Status, "dispatched before the debt was repaid")

	b.clock.set(t0 + 2500)
	b.timers.fireDue()
	j := recv()
	require.Equal(t, second, j.ID)
	require.Equal(t, t0+2500, j.DequeuedAt)
	require.Equal(t, []protocol.Binding{{Key: "llm", Cost: 5}}, j.Budgets, "settlement never changes the stored bindings")
}

// TestSettleOnFailureAndNotInFlight: a failure report settles like an ack;
// settle entries of ids not in flight are ignored (their id goes to
// not_found) even when they name a budget the job never had.
func TestSettleOnFailureAndNotInFlight(t *testing.T) {
	b := obsStart(t, true)
	ctx := context.Background()
	_, _, err := b.engine.CreateBudget(ctx, "llm", timeBased(100, 1000, 0), false)
	require.NoError(t, err)
	views, err := b.engine.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority,
		Payload: []byte(`{}`), Budgets: []protocol.Binding{{Key: "llm", Cost: 10}}}}}, false)
	require.NoError(t, err)
	id := views[0].ID
	_, delivered := obsOpen(t, b.engine, "w", 1)
	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	msg, kill := "boom", true
	_, err = b.engine.FailSettling(ctx, id, &protocol.FailureRequest{Message: &msg, Kill: &kill}, []protocol.Settlement{{Key: "llm", Cost: 70}})
	require.NoError(t, err)
	st, err := b.engine.BudgetState(ctx, "llm")
	require.NoError(t, err)
	require.InDelta(t, 100-10-60, st.Tokens, 1e-9)

	notFound, err := b.engine.AckSettling(ctx, []string{id, "nope"}, map[string][]protocol.Settlement{id: {{Key: "zzz", Cost: 1}}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{id, "nope"}, notFound)
	st, err = b.engine.BudgetState(ctx, "llm")
	require.NoError(t, err)
	require.InDelta(t, 30, st.Tokens, 1e-9)
	require.Equal(t, uint64(1), st.Settlements)
}
