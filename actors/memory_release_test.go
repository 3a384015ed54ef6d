package actors

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// releasingOutbox records the memory releases and release timers a core
// asks for.
type releasingOutbox struct {
	*recordingOutbox
	releases []uint64 // the moments releaseMemory was called
	flushes  []bool   // and whether with a flush
	armed    uint64   // the release timer (0: none)
	now      uint64
}

func (o *releasingOutbox) releaseMemory(flush bool) {
	o.releases = append(o.releases, o.now)
	o.flushes = append(o.flushes, flush)
}
func (o *releasingOutbox) armRelease(at uint64) { o.armed = at }

// TestMemoryReleasedOnceTheWaveSettles collects a wave of tenants whose
// idle answers come back over a second, after the collector's set is
// empty, and checks that memory is released (with a memtable flush) once,
// the quiet time after the last collection, not while the wave runs, when
// the budgets just stopped are not garbage yet; then once more, without a
// flush, releaseFollowMs later. A wave collected over more than
// releaseGapMs gets a release every releaseEvery budgets on the way.
func TestMemoryReleasedOnceTheWaveSettles(t *testing.T) {
	const ttl = 10_000
	e, rec := testEngine(EngineConfig{BudgetIdleTTL: ttl * time.Millisecond})
	out := &releasingOutbox{recordingOutbox: rec}
	e.out = out
	def := timeBased(10, 1000, 0)

	wave := func(n int, start, stepMs uint64) (last uint64) {
		t.Helper()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = enqueueID(t, e, start, tenantJob(fmt.Sprintf("t%d-%05d", start, i), def))
		}
		for _, id := range ids {
			e.deleteJob(start, id, noReply)
		}
		e.flushIdle(start)
		due := start + ttl
		out.now = due
		e.onCollectTick(due)
		var gens []uint64
		var keys []string
		for _, m := range rec.toBudgets {
			if q, ok := m.(*budgetIdleQuery); ok {
				gens = append(gens, q.gen)
			}
		}
		rec.toBudgets = nil
		for key, be := range e.budgets {
			if be.life.asked != 0 {
				keys = append(keys, key)
			}
		}
		if len(gens) != n || len(keys) != n {
			t.Fatalf("%d idle queries for %d asked budgets, want %d", len(gens), len(keys), n)
		}
		// the answers come back one stepMs apart
		now := due
		for _, key := range keys {
			now += stepMs
			out.now = now
			be := e.budgets[key]
			e.onBudgetIdle(now, &budgetIdleAnswer{Key: key, At: start, gen: be.life.asked, epoch: e.epoch})
		}
		if len(e.budgets) != 0 {
			t.Fatalf("%d budgets left after the wave", len(e.budgets))
		}
		return now
	}

	last := wave(300, 1000, 3) // 300 budgets over 0.9 s
	if len(out.releases) != 0 {
		t.Fatalf("released at %v while the wave ran", out.releases)
	}
	if out.armed == 0 {
		t.Fatal("no release timer armed after 300 collections")
	}
	// the timer was armed early in the wave: it fires, the wave was not
	// quiet then, it is armed again for the quiet moment
	fire := func() {
		at := out.armed
		out.armed, out.now = 0, at
		e.onReleaseTick(at)
	}
	for out.armed != 0 && len(out.releases) == 0 {
		fire()
	}
	settled := last + releaseQuietMs
	if len(out.releases) != 1 || out.releases[0] != settled || !out.flushes[0] {
		t.Fatalf("released at %v (flush %v), want once at %d (the quiet time after the last collection) with a flush", out.releases, out.flushes, settled)
	}
	if out.armed != settled+releaseFollowMs {
		t.Fatalf("release timer at %d after the settled release, want %d", out.armed, settled+releaseFollowMs)
	}
	fire()
	if len(out.releases) != 2 || out.releases[1] != settled+releaseFollowMs || out.flushes[1] {
		t.Fatalf("released at %v (flush %v), want the follow-up at %d without a flush", out.releases, out.flushes, settled+releaseFollowMs)
	}
	if out.armed != 0 {
		t.Fatalf("release timer armed at %d with nothing collected since", out.armed)
	}
	e.onReleaseTick(settled + 3*releaseFollowMs)
	if len(out.releases) != 2 || out.armed != 0 {
		t.Fatalf("released again (%v) or armed (%d) with nothing collected since", out.releases, out.armed)
	}

	// a long wave: 3000 budgets over 30 s
	out.releases, out.flushes = nil, nil
	last = wave(3000, 100_000, 10)
	if len(out.releases) < 2 {
		t.Fatalf("released at %v during a 30 s wave, want one every %d budgets and %d ms", out.releases, releaseEvery, releaseGapMs)
	}
	for i := 1; i < len(out.releases); i++ {
		if out.releases[i]-out.releases[i-1] < releaseGapMs {
			t.Fatalf("releases at %v closer than %d ms", out.releases, releaseGapMs)
		}
	}
	during := len(out.releases)
	for i := range during {
		if out.flushes[i] {
			t.Fatalf("a release during the wave, at %d, asked for a flush", out.releases[i])
		}
	}
	for out.armed != 0 {
		fire()
	}
	if len(out.releases) != during+2 || out.releases[during] != last+releaseQuietMs || out.releases[during+1] != last+releaseQuietMs+releaseFollowMs {
		t.Fatalf("releases %v, want the last two at %d and %d", out.releases, last+releaseQuietMs, last+releaseQuietMs+releaseFollowMs)
	}
}

// TestFewCollectionsReleaseNothing checks that a handful of collections
// does not run a full GC.
func TestFewCollectionsReleaseNothing(t *testing.T) {
	var r memoryRelease
	for i := range uint64(releaseMin - 1) {
		if kind, arm := r.collected(1000 + i); kind != releaseNone || arm != 0 {
			t.Fatalf("collection %d: release %v, arm %d", i+1, kind, arm)
		}
	}
	if kind, arm := r.tick(1<<40, 0); kind != releaseNone || arm != 0 {
		t.Fatalf("tick: release %v, arm %d", kind, arm)
	}
}

// TestBurstOfJobsReleasedOnceQuiet checks the release after a burst of
// jobs: none for fewer than releaseJobs; after a burst, one release once
// next to no job moved for a whole quiet period (the timer armed again
// while they still move), without a flush; a second burst right after
// waits for releaseGapMs since the first release.
func TestBurstOfJobsReleasedOnceQuiet(t *testing.T) {
	var r memoryRelease
	r.moved = releaseJobs - 1
	if arm := r.churned(1000, 0); arm != 0 {
		t.Fatalf("%d jobs moved: armed for %d", r.moved, arm)
	}
	r.moved++
	arm := r.churned(1000, 0)
	if arm != 1000+releaseQuietMs {
		t.Fatalf("a burst armed the timer for %d, want %d", arm, 1000+releaseQuietMs)
	}
	if again := r.churned(1500, 0); again != 0 {
		t.Fatalf("armed twice: %d", again)
	}
	r.moved += releaseJobs / 64 // still moving when the timer fires
	kind, next := r.tick(arm, 0)
	if kind != releaseNone || next != arm+releaseQuietMs {
		t.Fatalf("tick while jobs move: release %v, armed for %d; want none, %d", kind, next, arm+releaseQuietMs)
	}
	kind, next = r.tick(next, 0)
	if kind != releaseBurst || next != 0 {
		t.Fatalf("tick once quiet: release %v, armed for %d; want a burst release and no timer", kind, next)
	}
	released := arm + releaseQuietMs
	r.released(released)
	if arm := r.churned(released+1, 0); arm != 0 {
		t.Fatalf("no burst since the release: armed for %d", arm)
	}
	r.moved += releaseJobs
	if arm := r.churned(released+100, 0); arm != released+releaseGapMs {
		t.Fatalf("a second burst armed for %d, want %d (releaseGapMs after the first)", arm, released+releaseGapMs)
	}
	if kind, _ := r.tick(released+releaseGapMs, 0); kind != releaseBurst {
		t.Fatalf("the second burst, quiet: release %v", kind)
	}
}

// TestEnqueuedBurstReleasesMemory: a bulk enqueue of releaseJobs jobs into
// the engine arms the release timer, which then releases memory without a
// flush once nothing moved.
func TestEnqueuedBurstReleasesMemory(t *testing.T) {
	e, rec := testEngine(EngineConfig{})
	out := &releasingOutbox{recordingOutbox: rec}
	e.out = out
	jobs := make([]*protocol.NewJob, releaseJobs)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Payload: []byte(`{}`)}}
	}
	e.enqueue(1000, &EnqueueJobs{Jobs: jobs, Bulk: true}, noReply)
	e.noteChurn(1000)
	if out.armed != 1000+releaseQuietMs {
		t.Fatalf("release timer armed for %d after the burst, want %d", out.armed, 1000+releaseQuietMs)
	}
	out.now = out.armed
	e.onReleaseTick(out.armed)
	if len(out.releases) != 1 || out.flushes[0] {
		t.Fatalf("releases %v (flushes %v), want one without a flush", out.releases, out.flushes)
	}
}

// TestBurstReleaseRules checks the rest of the burst rules: a trickle of
// jobs after a burst still lets it be released; with many jobs held, a
// burst must move a quarter of them; and a follow-up release that fell due
// while a burst kept moving comes once, covering the burst, rather than
// twice back to back.
func TestBurstReleaseRules(t *testing.T) {
	t.Run("trickle", func(t *testing.T) {
		var r memoryRelease
		r.moved = releaseJobs
		at := r.churned(1000, 0)
		r.moved += 3 // three jobs in the quiet period
		if kind, _ := r.tick(at, 0); kind != releaseBurst {
			t.Fatalf("a trickle after the burst: release %v, want the burst's", kind)
		}
	})
	t.Run("large", func(t *testing.T) {
		var r memoryRelease
		const live = 1_000_000
		r.moved = live/4 - 1
		if arm := r.churned(1000, live); arm != 0 {
			t.Fatalf("%d moved of %d held: armed for %d", r.moved, live, arm)
		}
		r.moved++
		if arm := r.churned(1000, live); arm == 0 {
			t.Fatalf("a quarter of %d moved: not armed", live)
		}
	})
	t.Run("overdue follow-up", func(t *testing.T) {
		var r memoryRelease
		r.released(1000)
		r.follow = 1000 + releaseFollowMs
		r.moved = releaseJobs
		at := r.churned(1000, 0)
		var kinds []releaseKind
		for now := at; now != 0 && len(kinds) < 10; {
			if now < r.follow {
				r.moved += releaseJobs // moving until the follow-up is due
			}
			kind, next := r.tick(now, 0)
			if kind != releaseNone {
				kinds = append(kinds, kind)
				r.released(now)
			}
			now = next
		}
		if len(kinds) != 1 || kinds[0] != releaseFollow {
			t.Fatalf("releases %v, want the follow-up alone", kinds)
		}
	})
}

// orderFlusher records, beside the returns of handBackMemory, when the
// memtable flush was asked for.
type orderFlusher struct {
	steps []string
	idle  bool // whether the flush runs
}

func (f *orderFlusher) FlushMemtableIfIdle(time.Duration) (bool, error) {
	f.steps = append(f.steps, "flush")
	return f.idle, nil
}

// TestMemoryReturnedBeforeTheMemtableFlush checks the order of a settled
// release: memory goes back to the OS before the flush allocates the new
// memtable's arena (so the arena lands on returned pages, which Go does
// not zero and so does not make resident), and again after a flush that
// ran, for the old memtable; a release without a flush, or with a busy
// store, returns memory once.
func TestMemoryReturnedBeforeTheMemtableFlush(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		flush bool
		idle  bool
		want  string
	}{
		{"settled, idle store", true, true, "free flush free"},
		{"settled, busy store", true, false, "free flush"},
		{"no flush asked", false, true, "free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &orderFlusher{idle: tc.idle}
			handBackMemory(f, tc.flush, func() { f.steps = append(f.steps, "free") }, log)
			if got := strings.Join(f.steps, " "); got != tc.want {
				t.Fatalf("steps %q, want %q", got, tc.want)
			}
		})
	}
}
