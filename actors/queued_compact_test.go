package actors

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/tollgate/tollgate/protocol"
)

// look reads en's job without keeping it whole (tests' checks must not
// change what memory keeps).
func (en *entry) look() *protocol.Job {
	var j protocol.Job
	return en.peek(&j)
}

// plainTestJob is a plain job with every field a compact form keeps set.
func plainTestJob() protocol.Job {
	return protocol.Job{ID: testID(7), Type: "t", Queue: "q", Priority: 3, InGroup: true,
		Attempts: 2, Status: protocol.StatusScheduled, ReadyAt: 12345}
}

// TestCompactFormRebuildsThePlainJob checks that a plain job comes back
// from its compact form exactly, and that every other field of
// protocol.Job makes a job not plain: a field added to protocol.Job later
// fails here until plainJob (or the compact form) accounts for it.
func TestCompactFormRebuildsThePlainJob(t *testing.T) {
	bound := [][]protocol.Binding{nil, {{Key: "b", Cost: 3}}, {{Key: "a", Cost: 1}, {Key: "b", Cost: 7}, {Key: "c", Cost: 2}}}
	for _, st := range []protocol.Status{protocol.StatusReady, protocol.StatusScheduled} {
		for _, in := range []bool{false, true} {
			for _, budgets := range bound {
				j := plainTestJob()
				j.Status, j.InGroup, j.Budgets = st, in, budgets
				if !plainJob(&j) {
					t.Fatalf("%+v is not plain", j)
				}
				var back protocol.Job
				compactOf(&j, &nameInterner{}).fill(&back)
				if !reflect.DeepEqual(back, j) {
					t.Fatalf("rebuilt %+v, want %+v", back, j)
				}
			}
		}
	}
	kept := map[string]bool{"ID": true, "Type": true, "Queue": true, "Priority": true, "InGroup": true,
		"Attempts": true, "Status": true, "ReadyAt": true, "Budgets": true}
	j := plainTestJob()
	j.Budgets = []protocol.Binding{}
	if plainJob(&j) {
		t.Error("a job with an empty, non-nil binding list counts as plain: its compact form would make it nil")
	}
	typ := reflect.TypeFor[protocol.Job]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if kept[f.Name] {
			continue
		}
		j := plainTestJob()
		v := reflect.ValueOf(&j).Elem().Field(i)
		switch v.Kind() {
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(f.Type, 0, 0)) // empty, not nil: not plain either
		case reflect.String:
			v.SetString("x")
		case reflect.Uint64, reflect.Uint32:
			v.SetUint(1)
		default:
			t.Fatalf("field %s (%s): teach this test its non-zero value", f.Name, f.Type)
		}
		if plainJob(&j) {
			t.Errorf("a job with %s set counts as plain: its compact form would lose it", f.Name)
		}
	}
	for _, st := range []protocol.Status{protocol.StatusInFlight, protocol.StatusCompleted, protocol.StatusDead} {
		j := plainTestJob()
		j.Status = st
		if plainJob(&j) {
			t.Errorf("a job %s counts as plain", st)
		}
	}
}

// TestEntryAccessorsReadBothForms checks the entry's accessors against the
// full job, in both forms, and that full() keeps the job it rebuilt.
func TestEntryAccessorsReadBothForms(t *testing.T) {
	e := newQueueCore(EngineConfig{}, nil, nil, nil, nil)
	j := plainTestJob()
	en := &entry{jb: &j, state: stScheduled}
	check := func(form string) {
		t.Helper()
		if en.id() != j.ID || en.queue() != j.Queue || en.priority() != j.Priority || en.status() != j.Status ||
			en.readyAt() != j.ReadyAt || en.budgets() != nil {
			t.Fatalf("%s: accessors read %s %s %d %s %d %v, want %+v", form, en.id(), en.queue(), en.priority(), en.status(), en.readyAt(), en.budgets(), j)
		}
		for _, now := range []uint64{j.ReadyAt - 1, j.ReadyAt, j.ReadyAt + 1} {
			if got, want := en.visibleStatus(now), j.VisibleStatus(now); got != want {
				t.Fatalf("%s: visible status at %d is %s, want %s", form, now, got, want)
			}
		}
	}
	check("full")
	e.compact(en)
	if en.jb != nil || en.q == nil {
		t.Fatal("a plain scheduled job did not compact")
	}
	check("compact")
	if got := en.look(); !reflect.DeepEqual(*got, j) || en.jb != nil {
		t.Fatalf("peek gave %+v (and kept it: %v)", *got, en.jb != nil)
	}
	en.setReady()
	j.Status = protocol.StatusReady
	check("compact, came due")
	full := en.full()
	if !reflect.DeepEqual(*full, j) || en.jb != full || en.q != nil || en.full() != full {
		t.Fatalf("full() = %+v; the entry keeps it: %v", *full, en.jb == full)
	}

	// only waiting (ready, scheduled, parked), plain jobs compact
	for _, st := range []jobState{stReserving, stInFlight, stGone} {
		c := j
		en := &entry{jb: &c, state: st}
		if e.compact(en); en.jb != &c {
			t.Errorf("an entry in state %d compacted", st)
		}
	}

	// a bound job, parked: compact, its bindings read (and rebuilt) as
	// the very list it was enqueued with, shared, not copied
	shared := []protocol.Binding{{Key: "a", Cost: 2}, {Key: "b", Cost: 1}}
	c := j
	c.Status, c.Budgets = protocol.StatusReady, shared
	en = &entry{jb: &c, state: stParked}
	if e.compact(en); en.jb != nil {
		t.Fatal("a parked, bound job did not compact")
	}
	if got := en.budgets(); len(got) != 2 || &got[0] != &shared[0] {
		t.Fatalf("a compact job's bindings are %v at %p, want the list at %p", got, &got[0], &shared[0])
	}
	if got := en.full(); !reflect.DeepEqual(*got, c) || &got.Budgets[0] != &shared[0] {
		t.Fatalf("rebuilt %+v, want %+v", *got, c)
	}
	// a bound job that is ready is about to reserve: compacting it would
	// only rebuild it at once; one scheduled waits for its time
	c = j
	c.Status, c.Budgets = protocol.StatusReady, shared
	en = &entry{jb: &c, state: stReady}
	if e.compact(en); en.jb != &c {
		t.Error("a ready, bound job compacted")
	}
	c = j
	c.Budgets = shared
	en = &entry{jb: &c, state: stScheduled}
	if e.compact(en); en.jb != nil {
		t.Error("a scheduled, bound job did not compact")
	}
}

// TestModelCompactsWaitingJobs checks that the model test reaches compact
// entries (a seed whose payload cache holds a few payloads only), so that
// its checks cover them.
func TestModelCompactsWaitingJobs(t *testing.T) {
	ops := 1500
	if testing.Short() {
		ops = 300
	}
	res := runModel(t, 2, ops, nil)
	if res.viol != nil {
		t.Fatalf("seed 2: %v", res.viol)
	}
	if res.stats.compact == 0 {
		t.Fatal("no entry was compact at any quiescent check")
	}
	if res.stats.compactParked == 0 {
		t.Fatal("no parked entry was compact at any quiescent check")
	}
	t.Logf("%d compact entries (%d parked) seen at %d checks", res.stats.compact, res.stats.compactParked, res.stats.quiescentChecks)
}

// TestEntrySizes pins the sizes the memory of a queued job depends on: an
// entry of 64 bytes and a compact job of 48 are whole allocation classes
// (a byte more costs 16 per queued job), a cold record of 32 an element of
// a chunk that fills its class (a byte more costs 8 per cold job, and the
// chunk its class).
func TestEntrySizes(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 64 {
		t.Errorf("entry is %d bytes, want at most 64", n)
	}
	if n := unsafe.Sizeof(queuedJob{}); n > 48 {
		t.Errorf("queuedJob is %d bytes, want at most 48", n)
	}
	if n := unsafe.Sizeof(coldJob{}); n > 32 {
		t.Errorf("coldJob is %d bytes, want at most 32", n)
	}
	// a full chunk of cold records, which hold a pointer and so get an
	// 8-byte allocation header, fits the 4096-byte class (orderedChunk)
	if n := orderedChunk*unsafe.Sizeof(coldJob{}) + 8; n > 4096 {
		t.Errorf("a full chunk of cold records takes %d bytes, past the 4096-byte class", n)
	}
}

// TestPayloadCacheCountsTheWholeJob enqueues 100 jobs with 1-byte payloads
// into a cache with room for 10 kept payloads: a kept payload costs its
// job's whole form (cachedJobBytes), so 10 jobs keep theirs and stay
// whole, and the other 90 wait compact. Counting the payload bytes alone,
// all 100 would stay whole.
func TestPayloadCacheCountsTheWholeJob(t *testing.T) {
	one := []byte("1")
	e, _ := testEngine(EngineConfig{PayloadCacheBytes: 10 * payloadCost(one), CompactFrom: 1})
	jobs := make([]*protocol.NewJob, 100)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Payload: one}}
	}
	e.enqueue(1000, &EnqueueJobs{Jobs: jobs, Bulk: true}, noReply)
	whole, compact := 0, 0
	for en := range e.jobs.all() {
		if en.jb != nil {
			whole++
			if en.jb.Payload == nil {
				t.Errorf("job %s is whole without its payload", en.jb.ID)
			}
		} else {
			compact++
		}
	}
	if whole != 10 || compact != 90 || e.payloadBytes != 10*payloadCost(one) {
		t.Fatalf("%d whole jobs, %d compact, cache counts %d bytes; want 10, 90, %d", whole, compact, e.payloadBytes, 10*payloadCost(one))
	}
}

// TestShortQueuesStayWhole checks EngineConfig.CompactFrom: below it, the
// jobs of an enqueue stay whole; from it on, they compact.
func TestShortQueuesStayWhole(t *testing.T) {
	e, _ := testEngine(EngineConfig{CompactFrom: 150})
	enqueue := func(n int) {
		jobs := make([]*protocol.NewJob, n)
		for i := range jobs {
			jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q"}}
		}
		e.enqueue(1000, &EnqueueJobs{Jobs: jobs, Bulk: true}, noReply)
	}
	compact := func() int {
		n := 0
		for en := range e.jobs.all() {
			if en.jb == nil {
				n++
			}
		}
		return n
	}
	enqueue(100)
	if n := compact(); n != 0 {
		t.Fatalf("%d of 100 jobs compact below CompactFrom", n)
	}
	enqueue(100)
	if n := compact(); n != 100 {
		t.Fatalf("%d of 200 jobs compact, want the 100 enqueued from CompactFrom on", n)
	}
}
