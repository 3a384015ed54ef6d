package actors

import (
	"math/rand/v2"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// TestJobMapAgainstAGoMap runs random puts, replacements and drops on a
// jobMap and a Go map side by side, with entries in both forms (a whole
// job's ID string, a compact job's key), and checks after every step that
// each job is found by its ID and its key, that a dropped or unknown ID is
// not, that all() walks each job once, and that the table stays between
// an eighth and three quarters full once it grew.
func TestJobMapAgainstAGoMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := protocol.NewIDGenerator()
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = gen.Next(uint64(1_700_000_000_000 + i/7))
	}
	var m jobMap
	model := make(map[string]*entry)
	newEntry := func(id string) *entry {
		if rng.IntN(2) == 0 {
			return &entry{jb: &protocol.Job{ID: id}}
		}
		return &entry{q: &queuedJob{key: idKey(id)}}
	}
	check := func(step int) {
		t.Helper()
		if m.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, m.len(), len(model))
		}
		seen := 0
		for en := range m.all() {
			seen++
			if model[en.id()] != en {
				t.Fatalf("step %d: all() gave %s, which the model does not hold so", step, en.id())
			}
		}
		if seen != len(model) {
			t.Fatalf("step %d: all() walked %d jobs, want %d", step, seen, len(model))
		}
		if len(m.slots) > jobMapMinSlots && (m.n*8 < len(m.slots) || m.n*4 > len(m.slots)*3) {
			t.Fatalf("step %d: %d jobs in %d slots", step, m.n, len(m.slots))
		}
	}
	for step := range 20_000 {
		id := ids[rng.IntN(len(ids))]
		// phases: grow towards every ID, then shrink towards none
		grow := step%8000 < 5000
		switch {
		case rng.IntN(3) > 0 == grow:
			en := newEntry(id)
			m.put(id, en)
			model[id] = en
		default:
			m.drop(id)
			delete(model, id)
		}
		if m.get(id) != model[id] || m.at(idKey(id)) != model[id] {
			t.Fatalf("step %d: %s found as %p, want %p", step, id, m.get(id), model[id])
		}
		if step%97 == 0 {
			check(step)
			for _, id := range ids {
				if m.get(id) != model[id] {
					t.Fatalf("step %d: %s found as %p, want %p", step, id, m.get(id), model[id])
				}
			}
		}
	}
	for _, bad := range []string{"", "not an id", ids[0] + "x"} {
		if m.get(bad) != nil {
			t.Fatalf("%q found", bad)
		}
		m.drop(bad) // nothing to drop
	}
	check(-1)
	m.clear()
	if m.len() != 0 || m.get(ids[0]) != nil || m.slots != nil {
		t.Fatal("clear left jobs")
	}
}

// BenchmarkJobMap measures a lookup by ID and a drop and put again in a
// table of a million compact jobs, and a lookup in a Go map by the ID's key
// (what the table replaced) for comparison; it reports the mean number of
// slots a lookup probes past the job's home slot.
func BenchmarkJobMap(b *testing.B) {
	gen := protocol.NewIDGenerator()
	const n = 1_000_000
	ids := make([]string, n)
	var m jobMap
	goMap := make(map[protocol.IDKey]*entry)
	for i := range ids {
		ids[i] = gen.Next(uint64(1_700_000_000_000 + i/100))
		en := &entry{q: &queuedJob{key: idKey(ids[i])}}
		m.put(ids[i], en)
		goMap[en.q.key] = en
	}
	probes := 0
	for _, md := range m.meta {
		probes += md.dist()
	}
	b.Run("get", func(b *testing.B) {
		for i := range b.N {
			if m.get(ids[i%n]) == nil {
				b.Fatal("not found")
			}
		}
		b.ReportMetric(float64(probes)/n, "extra-probes")
	})
	b.Run("drop-put", func(b *testing.B) {
		for i := range b.N {
			id := ids[i%n]
			en := m.get(id)
			m.drop(id)
			m.put(id, en)
		}
	})
	// a short queue's jobs are whole: a probe reads the key from the ID
	// string; put, at and drop as the engine does for each job it handles
	var small jobMap
	whole := make([]*entry, 512)
	for i := range whole {
		whole[i] = &entry{jb: &protocol.Job{ID: ids[i]}}
		small.put(ids[i], whole[i])
	}
	b.Run("whole-put-at-drop", func(b *testing.B) {
		for i := range b.N {
			en := whole[i%len(whole)]
			small.drop(en.jb.ID)
			small.put(en.jb.ID, en)
			if small.at(idKey(en.jb.ID)) != en {
				b.Fatal("not found")
			}
		}
	})
	b.Run("go-map-get", func(b *testing.B) {
		for i := range b.N {
			k, _ := protocol.ParseIDKey(ids[i%n])
			if goMap[k] == nil {
				b.Fatal("not found")
			}
		}
	})
}

// TestJobMapGrowsOnLongProbes puts 300 jobs whose keys share their home
// slot in a table of 512 slots: the 257th would be further from home than
// a slot records, so the table grows, and every job is still found.
func TestJobMapGrowsOnLongProbes(t *testing.T) {
	gen := protocol.NewIDGenerator()
	probe := jobMap{slots: make([]*entry, 512)}
	var ids []string
	for n := 0; len(ids) < 300; n++ {
		if n > 10_000_000 {
			t.Fatal("too few keys share a home")
		}
		id := gen.Next(uint64(1_700_000_000_000 + n/1000))
		if home, _ := probe.hash(idKey(id)); home == 0 {
			ids = append(ids, id)
		}
	}
	var m jobMap
	m.resize(512)
	for i, id := range ids {
		m.put(id, &entry{q: &queuedJob{key: idKey(id)}})
		if i == 255 && len(m.slots) != 512 {
			t.Fatalf("grew to %d slots before a probe was too long", len(m.slots))
		}
	}
	if len(m.slots) <= 512 || m.len() != len(ids) {
		t.Fatalf("%d jobs in %d slots, want %d in more than 512", m.len(), len(m.slots), len(ids))
	}
	for _, id := range ids {
		if en := m.get(id); en == nil || en.q.key != idKey(id) {
			t.Fatalf("%s not found after the growth", id)
		}
	}
}

// TestJobMapRefusesChangesWhileWalking: a put or drop during all() would
// shift entries under the walk, so it panics.
func TestJobMapRefusesChangesWhileWalking(t *testing.T) {
	gen := protocol.NewIDGenerator()
	var m jobMap
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = gen.Next(1_700_000_000_000)
		m.put(ids[i], &entry{q: &queuedJob{key: idKey(ids[i])}})
	}
	for name, change := range map[string]func(){
		"drop":  func() { m.drop(ids[0]) },
		"put":   func() { m.put(ids[1], &entry{q: &queuedJob{key: idKey(ids[1])}}) },
		"clear": func() { m.clear() },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s during a walk did not panic", name)
				}
			}()
			for range m.all() {
				change()
			}
		}()
	}
	if m.walking != 0 || m.len() != len(ids) {
		t.Fatalf("after the walks: %d walking, %d jobs", m.walking, m.len())
	}
	m.drop(ids[0]) // allowed again
	if m.len() != len(ids)-1 {
		t.Fatal("drop after the walks did nothing")
	}
}
