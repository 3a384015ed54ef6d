package actors

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

func tenantJob(key string, def protocol.Definition) *protocol.NewJob {
	return &protocol.NewJob{
		Job:      protocol.Job{Type: "t", Queue: "q", Budgets: []protocol.Binding{{Key: key, Cost: 1}}},
		Bindings: []protocol.NewBinding{{Key: key, Cost: 1, CreateWith: &def}},
	}
}

// lastIdleQuery returns the generation of the last idle query the core
// sent, and clears the record.
func lastIdleQuery(out *recordingOutbox) (gen uint64, n int) {
	for _, m := range out.toBudgets {
		if q, ok := m.(*budgetIdleQuery); ok {
			gen = q.gen
			n++
		}
	}
	out.toBudgets = nil
	return gen, n
}

func enqueueID(t *testing.T, e *queueCore, now uint64, nj *protocol.NewJob) string {
	t.Helper()
	res, ok := enqueueAnswer(t, e, now, &EnqueueJobs{Jobs: []*protocol.NewJob{nj}}).(*EnqueueJobsResponse)
	if !ok {
		t.Fatal("enqueue refused")
	}
	return res.Jobs[0].ID
}

// TestCollectRules checks SPEC §10.3 at the queue core with an injected
// clock: a create_with budget is asked about only once its last bound job
// left and the TTL passed, is collected when its pool has been full for the
// TTL, is placed again for when it will have been, and is never collected
// while bound, held, or after PUT or PATCH wrote it.
func TestCollectRules(t *testing.T) {
	const ttl = 10_000
	e, out := testEngine(EngineConfig{BudgetIdleTTL: ttl * time.Millisecond})
	def := timeBased(10, 1000, 0)
	id := enqueueID(t, e, 1000, tenantJob("t", def))
	if !e.budgets["t"].life.onTheFly {
		t.Fatal("a create_with budget is not marked on the fly")
	}
	e.flushIdle(1000)
	e.onCollectTick(1000 + ttl)
	if _, n := lastIdleQuery(out); n != 0 {
		t.Fatal("a bound budget was asked about")
	}
	e.deleteJob(2000, id, noReply)
	e.flushIdle(2000)
	e.onCollectTick(2000 + ttl - 1)
	if _, n := lastIdleQuery(out); n != 0 {
		t.Fatal("asked before the TTL passed")
	}
	e.onCollectTick(2000 + ttl)
	gen, n := lastIdleQuery(out)
	if n != 1 {
		t.Fatalf("%d idle queries at the TTL, want 1", n)
	}
	// the pool was full only at 5000: placed again for 5000 + TTL
	e.onBudgetIdle(2000+ttl, &budgetIdleAnswer{Key: "t", At: 5000, gen: gen, epoch: e.epoch})
	if e.budgets["t"] == nil || e.budgets["t"].life.idleDue != 5000+ttl {
		t.Fatalf("not placed again at %d", 5000+ttl)
	}
	e.onCollectTick(5000 + ttl)
	gen, _ = lastIdleQuery(out)
	// a stale answer (an older generation) changes nothing
	e.onBudgetIdle(5000+ttl, &budgetIdleAnswer{Key: "t", At: 0, gen: gen - 1, epoch: e.epoch})
	if e.budgets["t"] == nil {
		t.Fatal("collected on a stale answer")
	}
	sub := e.tracer.SubscribeFiltered(16, TraceFilter{Budgets: []string{"t"}})
	defer sub.Close()
	e.onBudgetIdle(5000+ttl, &budgetIdleAnswer{Key: "t", At: 5000, gen: gen, epoch: e.epoch})
	if e.budgets["t"] != nil || e.collect.collected != 1 {
		t.Fatal("a budget fresh for the TTL was not collected")
	}
	select {
	case ev := <-sub.C:
		if ev.Kind != EventBudgetCollected || ev.Budget != "t" {
			t.Fatalf("traced %+v, want budget_collected of t", ev)
		}
	default:
		t.Fatal("the collection was not traced")
	}
	// create_with makes it again, from the request's definition
	id = enqueueID(t, e, 20_000, tenantJob("t", whileInFlight(3)))
	if b := e.budgets["t"]; b == nil || b.budget.Allocation != 3 || b.budget.CreatedAt != 20_000 {
		t.Fatalf("create_with after collection made %+v", e.budgets["t"])
	}

	// a hold puts the due moment after its end
	e.putHold(20_000, &PutHold{Key: "t", Req: protocol.HoldRequest{Until: ptr(uint64(40_000))}}, noReply)
	e.deleteJob(21_000, id, noReply)
	e.flushIdle(21_000)
	if due := e.budgets["t"].life.idleDue; due != 40_000+ttl {
		t.Fatalf("held budget due at %d, want the hold's end + TTL %d", due, 40_000+ttl)
	}
	// a job bound before the tick: not asked
	id = enqueueID(t, e, 30_000, tenantJob("t", def))
	e.onCollectTick(40_000 + ttl)
	if _, n := lastIdleQuery(out); n != 0 {
		t.Fatal("asked about a bound budget")
	}
	// PATCH (or PUT) of an on-the-fly budget makes it permanent
	e.patchBudget(60_000, &PatchBudget{Key: "t", Patch: &protocol.BudgetPatch{}}, noReply)
	e.deleteJob(61_000, id, noReply)
	e.flushIdle(61_000)
	e.onCollectTick(61_000 + 10*ttl)
	if _, n := lastIdleQuery(out); n != 0 || e.budgets["t"] == nil {
		t.Fatal("a budget written by PATCH is considered for collection")
	}
	// a budget made by PUT is never on the fly
	e.createBudget(70_000, &CreateBudget{Key: "p", Definition: def, Replace: true}, noReply)
	if e.budgets["p"].life.onTheFly {
		t.Fatal("a budget made by PUT is marked on the fly")
	}
}

// TestCollectOffByDefault checks that without a TTL nothing is placed.
func TestCollectOffByDefault(t *testing.T) {
	e, out := testEngine(EngineConfig{})
	id := enqueueID(t, e, 1000, tenantJob("t", timeBased(10, 1000, 0)))
	e.deleteJob(2000, id, noReply)
	e.flushIdle(2000)
	e.onCollectTick(1 << 50)
	if _, n := lastIdleQuery(out); n != 0 || e.budgets["t"] == nil {
		t.Fatal("collection ran without --budget-idle-ttl")
	}
}

func ptr[T any](v T) *T { return &v }

// TestBudgetSeriesBound checks the /metrics bound: the budgets with the most
// unfinished jobs bound, in key order, and totals over every budget.
func TestBudgetSeriesBound(t *testing.T) {
	e, _ := testEngine(EngineConfig{})
	def := whileInFlight(10)
	for i, key := range []string{"a", "b", "c", "d"} {
		for range i % 3 { // a:0 b:1 c:2 d:0
			enqueueID(t, e, 1000, tenantJob(key, def))
		}
		if e.budgets[key] == nil {
			e.createBudget(1000, &CreateBudget{Key: key, Definition: def}, noReply)
		}
	}
	keys, tot := e.budgetSeries(1000, 2)
	if len(keys) != 2 || keys[0] != "b" || keys[1] != "c" {
		t.Fatalf("bounded series %v, want [b c]", keys)
	}
	if tot.Budgets != 4 || tot.BoundJobs != 3 {
		t.Fatalf("totals %+v, want 4 budgets and 3 bound jobs", tot)
	}
	if keys, _ := e.budgetSeries(1000, 0); len(keys) != 4 || keys[0] != "a" {
		t.Fatalf("unbounded series %v", keys)
	}
}
