package actors

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unique"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// TestColdJobsAgainstAMap runs random puts, freezes, lookups, thaws and
// drops on a jobMap against a Go map of what each job is, through a growth
// to 12,000 jobs and a shrink to none, so that records are added and taken
// in and out of key order. After every step the job is found with the
// same fields whether it is cold or not; at intervals every job is, look
// finds a cold job without thawing it, all() walks each job once, and the
// counts by kind match; with no job left the table lets everything go.
func TestColdJobsAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gen := protocol.NewIDGenerator()
	ids := make([]string, 12_000)
	for i := range ids {
		ids[i] = gen.Next(uint64(1_700_000_000_000 + i/5))
	}
	kinds := []unique.Handle[jobKind]{
		unique.Make(jobKind{typ: "mail", queue: "a"}), unique.Make(jobKind{typ: "sms", queue: "b"}),
	}
	// what each job is: its compact form (the cold record keeps all of it)
	type want struct {
		q   queuedJob
		ref persistence.Ref
	}
	var m jobMap
	model := make(map[string]want)
	newEntry := func(id string) (*entry, want) {
		// ready when minted: a cold record keeps no other ready time
		q := queuedJob{key: idKey(id), kind: kinds[rng.IntN(2)], readyAt: idKey(id).Millis(),
			attempts: rng.Uint32N(3), priority: uint16(rng.IntN(5))}
		if rng.IntN(2) == 0 {
			q.flags |= queuedInGroup
		}
		ref := persistence.UnpackRef(nil, uint8(rng.IntN(4)))
		qc := q
		return &entry{q: &qc, ref: ref, state: stReady, flags: entryCounted}, want{q, ref}
	}
	same := func(step int, id string, en *entry, w want) {
		t.Helper()
		if en == nil || en.jb != nil || *en.q != w.q || en.ref != w.ref || en.state != stReady || en.flags != entryCounted {
			t.Fatalf("step %d: %s is %+v, want %+v", step, id, en, w)
		}
	}
	var s entryScratch
	check := func(step int) {
		t.Helper()
		if m.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, m.len(), len(model))
		}
		for id, w := range model {
			_, cold := m.cold.lookup(idKey(id))
			same(step, id, m.look(idKey(id), &s), w)
			if _, still := m.cold.lookup(idKey(id)); cold != still {
				t.Fatalf("step %d: look changed whether %s is cold", step, id)
			}
		}
		seen := make(map[string]bool)
		for en := range m.all() {
			id := en.id()
			if seen[id] {
				t.Fatalf("step %d: all() gave %s twice", step, id)
			}
			seen[id] = true
			same(step, id, en, model[id])
		}
		if len(seen) != len(model) {
			t.Fatalf("step %d: all() walked %d jobs, want %d", step, len(seen), len(model))
		}
		kinds := make(map[unique.Handle[jobKind]]int)
		m.cold.each(func(c coldJob) bool {
			kinds[m.cold.kindOf(c)]++
			return true
		})
		counted := make(map[unique.Handle[jobKind]]int)
		m.cold.eachKind(func(kind unique.Handle[jobKind], n int) { counted[kind] += n })
		if !maps.Equal(kinds, counted) {
			t.Fatalf("step %d: cold jobs by kind %v, counted %v", step, kinds, counted)
		}
		if len(m.cold.kindNum) != len(counted) || len(m.cold.kindNum)+len(m.cold.free) != len(m.cold.kinds) {
			t.Fatalf("step %d: %d pairs numbered, %d counted, %d free of %d numbers",
				step, len(m.cold.kindNum), len(counted), len(m.cold.free), len(m.cold.kinds))
		}
	}
	drop := func(id string) {
		m.drop(id)
		delete(model, id)
	}
	for step := range 60_000 {
		id := ids[rng.IntN(len(ids))]
		_, had := model[id]
		r := rng.IntN(10)
		if step%30_000 >= 20_000 { // shrink: mostly drops
			r = (r + 6) % 10
		}
		switch {
		case r < 6 && !had:
			en, w := newEntry(id)
			m.put(id, en)
			model[id] = w
			if rng.IntN(4) > 0 && !m.freeze(en) {
				t.Fatalf("step %d: a plain ready job did not freeze", step)
			}
		case r < 6:
			// freeze the job again if it is an entry now
			if en := m.look(idKey(id), &s); en != &s.en {
				m.freeze(en)
			}
		case r < 8:
			drop(id)
		default:
			en := m.get(id) // thaws
			if w, ok := model[id]; ok {
				same(step, id, en, w)
				if _, cold := m.cold.lookup(idKey(id)); cold || m.get(id) != en {
					t.Fatalf("step %d: %s did not thaw into one entry", step, id)
				}
			} else if en != nil {
				t.Fatalf("step %d: %s found after its drop", step, id)
			}
		}
		if step%1009 == 0 {
			check(step)
		}
	}
	check(-1)
	for _, id := range ids {
		drop(id)
	}
	check(-2)
	if m.cold.set.chunks != nil || m.cold.kinds != nil || m.cold.kindNum != nil {
		t.Fatalf("with no cold job the table kept %d chunks and %d pairs", len(m.cold.set.chunks), len(m.cold.kinds))
	}
}

// TestOnlyPlainReadyJobsFreeze checks canFreeze: a job becomes cold only
// when it is compact, ready since its ID was minted, unbound, counted and
// referred to by nothing.
func TestOnlyPlainReadyJobsFreeze(t *testing.T) {
	const now = 1_700_000_000_000
	plain := func() *entry {
		return &entry{q: &queuedJob{key: idKey(protocol.NewIDGenerator().Next(now)), readyAt: now},
			state: stReady, flags: entryCounted}
	}
	if !canFreeze(plain()) {
		t.Fatal("a plain ready job cannot freeze")
	}
	for name, change := range map[string]func(*entry){
		"whole":                   func(en *entry) { en.jb = &protocol.Job{}; en.q = nil },
		"bound":                   func(en *entry) { en.q.budgets, en.q.nBudgets = &protocol.Binding{Key: "k", Cost: 1}, 1 },
		"scheduled":               func(en *entry) { en.q.flags |= queuedScheduled; en.state = stScheduled },
		"made ready after its ID": func(en *entry) { en.q.readyAt = now + 1 },
		"retried":                 func(en *entry) { en.q.attempts, en.q.readyAt = 1, now+5_000 },
		"past a byte of attempts": func(en *entry) { en.q.attempts = 256 }, // the record keeps one byte
		"in flight":               func(en *entry) { en.state = stInFlight },
		"uncounted":               func(en *entry) { en.flags = 0 },
		"in sched":                func(en *entry) { en.flags |= entryInSched },
		"on a stream":             func(en *entry) { en.stream = &stream{} },
		"reserving":               func(en *entry) { en.resv = &reservation{} },
		"parked":                  func(en *entry) { en.parkedOn = unique.Make("k") },
		"slotted":                 func(en *entry) { en.slot = 1 },
	} {
		en := plain()
		change(en)
		if canFreeze(en) {
			t.Errorf("a job %s can freeze", name)
		}
	}
}

// TestColdRecordKeepsTheJob: a job frozen with the largest values its
// packed record keeps (attempts, priority, flags, the ref's bits) comes
// back the same, and pairs numbered for records are numbered anew once
// their records are gone.
func TestColdRecordKeepsTheJob(t *testing.T) {
	const now = 1_700_000_000_000
	ids := protocol.NewIDGenerator()
	var tbl coldTable
	var keys []protocol.IDKey
	for i := range 4 {
		k := idKey(ids.Next(now))
		keys = append(keys, k)
		q := &queuedJob{key: k, kind: unique.Make(jobKind{typ: fmt.Sprint("t", i%2), queue: "q"}), readyAt: now,
			attempts: 255, priority: 65535, flags: queuedInGroup}
		en := &entry{q: q, ref: persistence.UnpackRef(nil, 3), state: stReady, flags: entryCounted}
		if !canFreeze(en) {
			t.Fatalf("job %d cannot freeze", i)
		}
		tbl.add(en)
		var s entryScratch
		c, ok := tbl.lookup(k)
		if !ok {
			t.Fatalf("job %d not found", i)
		}
		c.fill(tbl.kindOf(c), &s.en, &s.q)
		if s.q != *q || s.en.ref != en.ref || s.en.state != en.state || s.en.flags != en.flags {
			t.Fatalf("job %d came back as %+v (ref %+v), want %+v (ref %+v)", i, s.q, s.en.ref, *q, en.ref)
		}
	}
	if len(tbl.kinds) != 2 {
		t.Fatalf("2 pairs numbered %d times", len(tbl.kinds))
	}
	tbl.take(keys[0])
	tbl.take(keys[2]) // the last record of type t0
	var s entryScratch
	s.q = queuedJob{key: idKey(ids.Next(now)), kind: unique.Make(jobKind{typ: "t2", queue: "q"}), readyAt: now}
	s.en = entry{q: &s.q, state: stReady, flags: entryCounted}
	tbl.add(&s.en)
	if len(tbl.kinds) != 2 {
		t.Fatalf("a third pair after the first went took a new number: %d numbers", len(tbl.kinds))
	}
	for _, k := range []protocol.IDKey{keys[1], keys[3], s.q.key} {
		_, kind, ok := tbl.take(k)
		if !ok {
			t.Fatalf("%v not found", k)
		}
		if want := map[bool]string{true: "t2", false: "t1"}[k == s.q.key]; kind.Value().typ != want {
			t.Fatalf("%v is of type %q, want %q", k, kind.Value().typ, want)
		}
	}
}

// TestCheckingAJobDoesNotThawIt: a patch or rebinding that passes a cold job
// over (its filter does not match, or there is nothing to change) reads it
// without thawing it, so it stays cold; one that changes it thaws it.
func TestCheckingAJobDoesNotThawIt(t *testing.T) {
	e, _ := testEngine(EngineConfig{CompactFrom: 1, PayloadCacheBytes: -1})
	jobs := make([]*protocol.NewJob, 100)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Payload: []byte(`{}`)}}
	}
	var ids []string
	e.enqueue(1000, &EnqueueJobs{Jobs: jobs, Bulk: true}, func(r any) {
		for _, v := range r.(*EnqueueJobsResponse).Jobs {
			ids = append(ids, v.ID)
		}
	})
	wantCold := func(step string, n int) {
		t.Helper()
		if e.jobs.cold.len() != n {
			t.Fatalf("%s: %d of 100 jobs cold, want %d", step, e.jobs.cold.len(), n)
		}
	}
	wantCold("enqueued", 100)
	patch, err := protocol.DecodeJobPatch(protocol.JSON, []byte(`{"queue":"other"}`))
	if err != nil {
		t.Fatal(err)
	}
	e.patchJobs(1001, &PatchJobs{IDs: ids, Filter: &protocol.JobFilter{Queues: []string{"other"}}, Patch: patch}, noReply)
	wantCold("a patch whose filter matches none", 100)
	e.rebindJobs(1002, &RebindJobs{IDs: ids, Op: RebindClear}, noReply)
	wantCold("unbinding unbound jobs", 100)
	e.rebindJob(1003, &RebindJob{ID: ids[0], Op: RebindRemove, Binding: protocol.NewBinding{Key: "k"}}, noReply)
	wantCold("removing a binding a job does not have", 100)
	e.patchJobs(1004, &PatchJobs{IDs: ids[:10], Patch: patch}, noReply)
	wantCold("a patch of 10", 90)
}

// TestListingsSeeColdJobs: cold jobs are in no ID index, so a listing
// merges its ID indexes with the runs of cold jobs of the ready index. With
// cold, whole, scheduled and deleted jobs of two queues, two types and three
// priorities, every listing (no filter, a queue, a type, both, a status),
// in both directions and by pages of 7, gives the jobs a walk of every job
// gives, in ID order; the counts by type and queue agree.
func TestListingsSeeColdJobs(t *testing.T) {
	e, _ := testEngine(EngineConfig{CompactFrom: 1, PayloadCacheBytes: -1})
	var ids []string
	for i := range 6 {
		jobs := make([]*protocol.NewJob, 10)
		for k := range jobs {
			j := protocol.Job{Type: []string{"x", "y"}[(i+k)%2], Queue: []string{"a", "b"}[k%2],
				Priority: uint16(k % 3), Payload: []byte(`{}`)}
			if k == 9 {
				j.ReadyAt = 1_000_000 // scheduled: never cold
			}
			jobs[k] = &protocol.NewJob{Job: j}
		}
		e.enqueue(uint64(1000+i), &EnqueueJobs{Jobs: jobs, Bulk: true}, func(r any) {
			for _, v := range r.(*EnqueueJobsResponse).Jobs {
				ids = append(ids, v.ID)
			}
		})
	}
	patch, err := protocol.DecodeJobPatch(protocol.JSON, []byte(`{"priority":2}`))
	if err != nil {
		t.Fatal(err)
	}
	e.patchJobs(2000, &PatchJobs{IDs: ids[3:9], Patch: patch}, noReply) // thawed: whole again
	e.deleteJobs(2001, &DeleteJobs{IDs: ids[20:25]}, noReply)
	if n := e.jobs.cold.len(); n == 0 || n == e.jobs.len() {
		t.Fatalf("%d of %d jobs cold: want some of each", n, e.jobs.len())
	}
	for _, f := range []*protocol.JobFilter{
		{}, {Queues: []string{"a"}}, {Types: []string{"y"}}, {Queues: []string{"b"}, Types: []string{"x"}},
		{Queues: []string{"a", "b"}, Types: []string{"x", "y"}}, {Statuses: []protocol.Status{protocol.StatusScheduled}},
	} {
		var want []string
		for en := range e.jobs.all() {
			if f.MatchMeta(en.look(), en.visibleStatus(3000)) {
				want = append(want, en.id())
			}
		}
		slices.Sort(want)
		for _, desc := range []bool{false, true} {
			var got []string
			from := ""
			for {
				res := e.selectJobs(3000, &SelectJobs{Filter: f, From: from, Desc: desc, Limit: 7})
				got = append(got, res.IDs...)
				if res.Done {
					break
				}
				from = res.Next
			}
			w := slices.Clone(want)
			if desc {
				slices.Reverse(w)
			}
			if !slices.Equal(got, w) {
				t.Fatalf("filter %+v, desc %v: listed %d jobs %v, want %d %v", f, desc, len(got), got, len(w), w)
			}
		}
		if len(f.Statuses) > 0 {
			continue
		}
		res := e.selectJobs(3000, &SelectJobs{Filter: f, Count: true})
		if res.N != uint64(len(want)) {
			t.Fatalf("filter %+v: counted %d, want %d", f, res.N, len(want))
		}
	}
}

// TestColdFingerFindsAsLookupDoes: a finger asked for keys in order (both
// directions, present and absent ones, close together and far apart)
// answers as the table's lookup does.
func TestColdFingerFindsAsLookupDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	kind := unique.Make(jobKind{typ: "t", queue: "q"})
	var tbl coldTable
	var s entryScratch
	var keys []protocol.IDKey
	for i := range 6000 {
		k := protocol.IDKey{Hi: uint64(i / 3), Lo: uint64(i % 3)}
		keys = append(keys, k)
		if rng.IntN(3) > 0 {
			s.q = queuedJob{key: k, kind: kind, readyAt: k.Millis(), attempts: uint32(i % 200)}
			s.en = entry{q: &s.q, state: stReady, flags: entryCounted}
			tbl.add(&s.en)
		}
	}
	for round := range 40 {
		desc := round%2 == 1
		var asked []protocol.IDKey
		for _, k := range keys {
			if rng.IntN(1+round) == 0 { // from every key to a sparse few
				asked = append(asked, k)
			}
		}
		if desc {
			slices.Reverse(asked)
		}
		f := &coldFinger{t: &tbl, desc: desc}
		for _, k := range asked {
			got, gotOK := f.find(k)
			want, wantOK := tbl.lookup(k)
			if got != want || gotOK != wantOK {
				t.Fatalf("round %d (desc %v): find %v = %v, %v; lookup gives %v, %v", round, desc, k, got, gotOK, want, wantOK)
			}
		}
	}
}
