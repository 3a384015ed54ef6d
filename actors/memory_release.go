// Handing memory back to the operating system after budgets are collected
// (SPEC §10.3: a collected budget's memory is really released).
//
// Go frees the heap of collected budgets at its next GC, but its scavenger
// returns freed pages to the OS only while the process retains more than
// about its heap goal, and that goal is twice the live heap (badger's
// memtable arena included). After tens of thousands of tenants are
// collected, their pages would stay resident for good. So the queue actor
// runs debug.FreeOSMemory (a full GC, then every free page returned) off
// the actor, once a wave of collections has settled: releaseQuietMs after
// the last collection of the wave, when the stopped actors and the deletes
// being committed have become garbage too. A wave that lasts longer gets a
// release every releaseGapMs once releaseEvery budgets were collected.
//
// The settled release also asks the store to flush its memtable (between
// two returns: handBackMemory) if nothing was committed for half of
// releaseQuietMs
// (persistence.Store.FlushMemtableIfIdle): the memtable's arena, resident
// up to the ~80 MiB written into it, and its write-ahead log's pages hold
// the writes of the budgets and jobs all deleted since. A busy store keeps
// its memtable (a flush blocks commits). The flush builds its table in
// buffers badger pools and drops a few seconds later, so releaseFollowMs
// after a settled release comes one more release, without a flush, for
// them and for whatever else became garbage just after the first.
//
// Jobs come and go in bursts too: a million enqueued in a minute, a
// backlog drained. What they leave is garbage the heap goal lets stay
// resident (the request buffers, the store's batches, the entries of
// finished jobs), so a server holding a backlog idles well above its live
// heap. Once releaseJobs jobs (or a quarter of those held, if more) were
// added or finished since the last release, the queue actor releases
// memory (without a flush: a backlog's memtable is its live data) after a
// look, releaseQuietMs after the one before, finds next to none moved
// since (so 2 to 4 s after the burst), and at most once per releaseGapMs:
// a full collection is not free with a large heap.

package actors

import (
	"log/slog"
	"runtime/debug"
	"time"
)

// Release rules, in budgets collected, jobs moved and Unix ms.
const (
	// releaseMin is the fewest collections a release is worth: one runs a
	// full GC.
	releaseMin = 128
	// releaseQuietMs is how long no budget must have been collected for
	// the wave to count as settled.
	releaseQuietMs = 2_000
	// releaseFollowMs is the time from a settled release to the one
	// after it (badger drops a pooled buffer after two seconds unused).
	releaseFollowMs = 6_000
	// releaseEvery and releaseGapMs bound the memory kept during a long
	// wave: a release once releaseEvery were collected and releaseGapMs
	// passed since the last one.
	releaseEvery = 1024
	releaseGapMs = 10_000
	// releaseJobs is the fewest jobs added or finished that make a burst
	// worth a release (releaseQuietMs and releaseGapMs apply to bursts
	// too: the time between two looks, and between two releases).
	releaseJobs = 65_536
	// releaseTrickle is the most jobs that may move between two looks
	// for a burst to count as quiet.
	releaseTrickle = releaseJobs / 64
)

// memoryReleaser is implemented by an outbox that can hand freed memory
// back to the operating system: the queue actor's.
type memoryReleaser interface {
	// releaseMemory returns freed heap to the OS, off the actor; with
	// flush, it first flushes the store's memtable if the store is idle.
	releaseMemory(flush bool)
	// armRelease arms the one release timer for at (Unix ms), replacing
	// the one armed before; it fires a releaseTick.
	armRelease(at uint64)
}

// releaseTick is the release timer's message.
type releaseTick struct{}

func (*releaseTick) isQueueMsg() {}

// releaseKind is what the release rules ask for.
type releaseKind uint8

const (
	releaseNone    releaseKind = iota
	releaseWave                // during a long wave: FreeOSMemory
	releaseSettled             // a wave settled: flush if idle, FreeOSMemory
	releaseFollow              // after a settled release: FreeOSMemory
	releaseBurst               // a burst of jobs went quiet: FreeOSMemory
)

// memoryRelease decides when to release memory after collections and
// bursts of jobs; its methods take the time and return what to do.
type memoryRelease struct {
	pending     uint64 // budgets collected since the last release
	lastCollect uint64 // the last collection
	lastRelease uint64 // the last release
	follow      uint64 // when the follow-up release is due (0: none)
	armed       uint64 // the moment the release timer is armed for (0: none)
	// moved counts the jobs added to the job table or removed from it
	// (queueCore.addEntry, removeEntry); movedAtRelease is its value at
	// the last release, movedSeen at the last look.
	moved, movedAtRelease, movedSeen uint64
}

// burst reports whether enough jobs moved since the last release, with
// live jobs held: releaseJobs, or a quarter of those held when that is
// more (a full collection of a large heap is worth a move of its size).
func (r *memoryRelease) burst(live int) bool {
	return r.moved-r.movedAtRelease >= max(releaseJobs, uint64(live)/4)
}

// quiet reports whether next to no job moved since the last look: fewer
// than releaseTrickle, so that a trickle after a burst does not keep it
// from being released.
func (r *memoryRelease) quiet() bool { return r.moved-r.movedSeen < releaseTrickle }

// burstGapOver reports whether a burst may be released at now: none was
// yet, or releaseGapMs passed since the last release.
func (r *memoryRelease) burstGapOver(now uint64) bool {
	return r.lastRelease == 0 || now >= addMs(r.lastRelease, releaseGapMs)
}

// burstDue is the earliest a burst's release may come, at now: after a
// quiet period, and once burstGapOver.
func (r *memoryRelease) burstDue(now uint64) uint64 {
	due := addMs(now, releaseQuietMs)
	if r.lastRelease != 0 {
		due = max(due, addMs(r.lastRelease, releaseGapMs))
	}
	return due
}

// churned looks at the jobs moved at now (the end of each message), with
// live jobs held; it reports a moment to arm the release timer for (0:
// none).
func (r *memoryRelease) churned(now uint64, live int) uint64 {
	if r.armed != 0 || !r.burst(live) {
		return 0
	}
	r.movedSeen = r.moved
	r.armed = r.burstDue(now)
	return r.armed
}

// collected notes a collection at now. It reports the release to make at
// once, and a moment to arm the release timer for (0: none).
func (r *memoryRelease) collected(now uint64) (releaseKind, uint64) {
	r.pending++
	r.lastCollect = now
	if r.pending >= releaseEvery && now >= addMs(r.lastRelease, releaseGapMs) {
		return releaseWave, 0
	}
	if r.pending >= releaseMin && r.armed == 0 {
		r.armed = addMs(now, releaseQuietMs)
		return releaseNone, r.armed
	}
	return releaseNone, 0
}

// tick handles the release timer firing at now, with live jobs held: the
// settled release once the wave is quiet (or the timer armed again for
// when it will be), the follow-up release when due (which covers a burst
// as well), or a burst's release once quiet.
func (r *memoryRelease) tick(now uint64, live int) (releaseKind, uint64) {
	r.armed = 0
	if r.pending >= releaseMin {
		if quiet := addMs(r.lastCollect, releaseQuietMs); now < quiet {
			r.armed = quiet
			return releaseNone, quiet
		}
		r.follow = addMs(now, releaseFollowMs)
		r.armed = r.follow
		return releaseSettled, r.armed
	}
	if r.follow != 0 && now >= r.follow {
		r.follow = 0
		return releaseFollow, 0
	}
	if r.burst(live) {
		// the last look was releaseQuietMs ago (or more)
		if !r.quiet() || !r.burstGapOver(now) {
			r.movedSeen = r.moved
			r.armed = r.burstDue(now)
			return releaseNone, r.armed
		}
		// no follow-up can be pending: it comes before the gap ends
		return releaseBurst, 0
	}
	if r.follow != 0 {
		r.armed = r.follow
		return releaseNone, r.armed
	}
	return releaseNone, 0
}

// loaded notes that the release after the load covers the jobs it added:
// they are no burst.
func (r *memoryRelease) loaded() { r.movedAtRelease = r.moved }

// released records a release at now.
func (r *memoryRelease) released(now uint64) {
	r.pending, r.lastRelease, r.movedAtRelease = 0, now, r.moved
}

// maybeReleaseMemory applies the release rules after a collection.
func (e *queueCore) maybeReleaseMemory(now uint64) {
	kind, arm := e.collect.release.collected(now)
	e.applyRelease(now, kind, arm)
}

// noteChurn applies the release rules to the jobs moved, at the end of
// each message.
func (e *queueCore) noteChurn(now uint64) {
	if arm := e.collect.release.churned(now, e.jobs.len()); arm != 0 {
		e.applyRelease(now, releaseNone, arm)
	}
}

// onReleaseTick applies the release rules when the release timer fires.
func (e *queueCore) onReleaseTick(now uint64) {
	kind, arm := e.collect.release.tick(now, e.jobs.len())
	e.applyRelease(now, kind, arm)
}

// applyRelease releases memory and arms the release timer as told, when
// the outbox can.
func (e *queueCore) applyRelease(now uint64, kind releaseKind, arm uint64) {
	r, ok := e.out.(memoryReleaser)
	if !ok {
		return
	}
	if kind != releaseNone {
		r.releaseMemory(kind == releaseSettled)
		e.collect.release.released(now)
	}
	if arm != 0 {
		r.armRelease(arm)
	}
}

// armRelease arms the queue actor's one release timer for at (Unix ms).
func (a *queueActor) armRelease(at uint64) {
	if a.releaseCancel != nil {
		a.releaseCancel()
	}
	a.releaseCancel = a.timers.SendOnce(delayUntilNs(at*nsPerMs, a.clock.Now()), a.self, &releaseTick{})
}

// memtableFlusher is implemented by a store that can let go of its
// memtable when idle (persistence.Store).
type memtableFlusher interface {
	FlushMemtableIfIdle(idle time.Duration) (bool, error)
}

// releaseMemory hands freed heap back to the OS in a goroutine
// (handBackMemory), with flush around a flush of an idle store's memtable:
// the flush waits for the store, and FreeOSMemory runs a full collection.
func (a *queueActor) releaseMemory(flush bool) {
	store, log := a.store, a.log
	go handBackMemory(store, flush, debug.FreeOSMemory, log)
}

// handBackMemory returns freed heap to the OS with freeOS (a full
// collection, then every free page returned). With flush, and a store
// that can flush its memtable, that return comes first; then the
// memtable is flushed if the store is idle, and memory is returned once
// more for the old memtable.
//
// The return before the flush is what keeps the new memtable's arena (an
// 80 MiB allocation) out of the resident set: Go zeroes a large
// allocation by writing to it, which makes its pages resident, unless
// every page it lands on was returned to the OS (on Linux, where the
// kernel hands those back zeroed: the runtime's default
// GODEBUG=madvdontneed=1). After a wave of collections the heap has tens
// of MiB freed and not yet returned, and the arena would land on them.
func handBackMemory(store any, flush bool, freeOS func(), log *slog.Logger) {
	freeOS()
	f, ok := store.(memtableFlusher)
	if !ok || !flush {
		return
	}
	// the wave's last deletes were committed just after its last
	// collection, releaseQuietMs ago: half of that tells an idle store
	// from one still written to
	ran, err := f.FlushMemtableIfIdle(releaseQuietMs / 2 * time.Millisecond)
	if err != nil {
		log.Warn("release memory: flush memtable", "err", err)
	}
	if ran {
		freeOS()
	}
}
