package actors

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

func sameMap[M any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestShrinkMap checks the rule: a map is made afresh, with the same
// entries, once it holds at most a quarter of its peak, and only when the
// peak was at least shrinkMinPeak.
func TestShrinkMap(t *testing.T) {
	var p mapPeak
	m := map[int]string{}
	for i := range 4000 {
		m[i] = fmt.Sprint(i)
		if got := shrinkMap(m, &p); !sameMap(got, m) {
			t.Fatalf("made afresh while growing, at %d", i+1)
		}
	}
	for i := range 2999 {
		delete(m, i)
	}
	if got := shrinkMap(m, &p); !sameMap(got, m) {
		t.Fatalf("made afresh at %d of a peak of 4000", len(m))
	}
	delete(m, 2999)
	got := shrinkMap(m, &p)
	if sameMap(got, m) {
		t.Fatal("not made afresh at a quarter of its peak")
	}
	if len(got) != 1000 || got[3000] != "3000" || got[3999] != "3999" {
		t.Fatalf("the fresh map holds %d entries, want the 1000 left", len(got))
	}
	if p.peak != 1000 {
		t.Fatalf("peak %d after the rebuild, want 1000", p.peak)
	}
	// its peak is now 1000, below the minimum: emptied, it is kept
	m = got
	clear(m)
	if got := shrinkMap(m, &p); !sameMap(got, m) {
		t.Fatal("a map of a peak below shrinkMinPeak was made afresh")
	}
}

// TestShrinkMapSmallPeak checks that a map whose peak stayed below
// shrinkMinPeak is kept however empty it gets.
func TestShrinkMapSmallPeak(t *testing.T) {
	var p mapPeak
	m := map[int]int{}
	for i := range shrinkMinPeak - 1 {
		m[i] = i
	}
	shrinkMap(m, &p)
	clear(m)
	if got := shrinkMap(m, &p); !sameMap(got, m) {
		t.Fatalf("a map of peak %d was made afresh", shrinkMinPeak-1)
	}
}

// TestCollectedTenantsLeaveNoMapTables makes 20,000 tenants at the queue
// core (a create_with budget and a job each), finishes their jobs and
// collects their budgets, then checks the live heap left behind: with the
// core's sparse maps made afresh it is a few bytes per tenant (8 measured);
// Go's maps alone would keep their tables (jobs, budgets, the per-budget
// index), about 170 bytes per tenant, and the collector's list of budgets
// just unbound their keys, 36 more.
func TestCollectedTenantsLeaveNoMapTables(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 tenants")
	}
	const tenants, ttl = 20_000, 10_000
	e, out := testEngine(EngineConfig{BudgetIdleTTL: ttl * time.Millisecond})
	def := timeBased(1, 1000, 0)
	before := heapInUse()

	ids := make([]string, 0, tenants)
	for start := 0; start < tenants; start += 1000 {
		batch := make([]*protocol.NewJob, 0, 1000)
		for i := start; i < start+1000; i++ {
			batch = append(batch, tenantJob(fmt.Sprintf("tenant-%06d", i), def))
		}
		res, ok := enqueueAnswer(t, e, 1000, &EnqueueJobs{Jobs: batch}).(*EnqueueJobsResponse)
		if !ok {
			t.Fatal("enqueue refused")
		}
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
		e.shrinkMaps()
	}
	for i, id := range ids {
		e.deleteJob(2000, id, noReply)
		if i%1000 == 999 {
			e.shrinkMaps()
		}
	}
	ids = nil
	e.flushIdle(2000)
	e.onCollectTick(2000 + ttl)
	asked := make([]budgetIdleAnswer, 0, tenants)
	for key, be := range e.budgets {
		if be.life.asked != 0 {
			asked = append(asked, budgetIdleAnswer{Key: key, At: 2000, gen: be.life.asked, epoch: e.epoch})
		}
	}
	out.toBudgets = nil
	if len(asked) != tenants {
		t.Fatalf("%d budgets asked about, want %d", len(asked), tenants)
	}
	for i := range asked {
		e.onBudgetIdle(2000+ttl, &asked[i])
		if i%1000 == 999 {
			e.shrinkMaps()
		}
	}
	asked = nil
	if len(e.budgets) != 0 || e.jobs.len() != 0 {
		t.Fatalf("%d budgets and %d jobs left", len(e.budgets), e.jobs.len())
	}
	e.shrinkMaps()
	after := heapInUse()
	per := (float64(after) - float64(before)) / tenants
	t.Logf("live heap left: %.0f B per tenant collected", per)
	if per > 24 {
		t.Fatalf("%.0f B of live heap left per tenant collected, want at most 24", per)
	}
	runtime.KeepAlive(e)
}

// TestStreamMapsMadeAfresh checks that once the jobs in flight fall to a
// quarter of their peak, each stream's map of its jobs in flight is made
// afresh with the same jobs, and that the jobs still finish through it.
func TestStreamMapsMadeAfresh(t *testing.T) {
	e, _ := testEngine(EngineConfig{})
	var ids []string
	e.openStream(0, &OpenStream{Prefetch: 5000, Deliver: func(js []protocol.Job) {
		for _, j := range js {
			ids = append(ids, j.ID)
		}
	}}, noReply)
	var s *stream
	for _, only := range e.streams {
		s = only
	}
	batch := make([]*protocol.NewJob, 2000)
	for i := range batch {
		batch[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q"}}
	}
	enqueueAnswer(t, e, 1000, &EnqueueJobs{Jobs: batch})
	for n := -1; n != len(ids); {
		n = len(ids)
		e.streamWritten(1000, s.id) // the stream wrote what it was handed
	}
	e.shrinkMaps()
	if len(ids) != 2000 || len(s.inFlight) != 2000 {
		t.Fatalf("%d delivered, %d in flight on the stream, want 2000", len(ids), len(s.inFlight))
	}
	before := s.inFlight
	e.ack(2000, ids[:1499], noReply)
	e.shrinkMaps()
	if !sameMap(before, s.inFlight) {
		t.Fatal("made afresh with 501 of 2000 in flight")
	}
	e.ack(2000, ids[1499:1500], noReply)
	e.shrinkMaps()
	if sameMap(before, s.inFlight) {
		t.Fatal("not made afresh with 500 of 2000 in flight")
	}
	if len(s.inFlight) != 500 || s.inFlight[ids[1999]] == nil {
		t.Fatalf("%d in flight after the rebuild, want the 500 left", len(s.inFlight))
	}
	e.ack(3000, ids[1500:], noReply)
	if len(s.inFlight) != 0 || e.inFlightTotal != 0 || e.jobs.len() != 0 {
		t.Fatalf("%d in flight on the stream, %d in all, %d jobs after acking every job", len(s.inFlight), e.inFlightTotal, e.jobs.len())
	}
}

// TestEmptied checks that an emptied slice keeps nothing alive: a small
// one is cleared and kept, a large one let go.
func TestEmptied(t *testing.T) {
	small := []*int{new(int), new(int)}
	got := emptied(small)
	if len(got) != 0 || cap(got) != 2 || small[0] != nil || small[1] != nil {
		t.Fatalf("small slice emptied to len %d cap %d, elements %v", len(got), cap(got), small)
	}
	if got := emptied(make([]string, 3, shrinkMinPeak+1)); got != nil {
		t.Fatalf("a slice of capacity %d kept (cap %d)", shrinkMinPeak+1, cap(got))
	}
}
