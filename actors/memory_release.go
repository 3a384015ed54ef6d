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

package actors

// Release rules, in budgets collected and Unix ms.
const (
	// releaseMin is the fewest collections a release is worth: one runs a
	// full GC.
	releaseMin = 128
	// releaseQuietMs is how long no budget must have been collected for
	// the wave to count as settled.
	releaseQuietMs = 2_000
	// releaseEvery and releaseGapMs bound the memory kept during a long
	// wave: a release once releaseEvery were collected and releaseGapMs
	// passed since the last one.
	releaseEvery = 1024
	releaseGapMs = 10_000
)

// memoryReleaser is implemented by an outbox that can hand freed memory
// back to the operating system: the queue actor's.
type memoryReleaser interface {
	// releaseMemory returns freed heap to the OS, off the actor.
	releaseMemory()
	// armRelease arms the one release timer for at (Unix ms), replacing
	// the one armed before; it fires a releaseTick.
	armRelease(at uint64)
}

// releaseTick is the release timer's message.
type releaseTick struct{}

func (*releaseTick) isQueueMsg() {}

// memoryRelease decides when to release memory after collections; its
// methods take the time and return what to do.
type memoryRelease struct {
	pending     uint64 // budgets collected since the last release
	lastCollect uint64 // the last collection
	lastRelease uint64 // the last release
	armed       uint64 // the moment the release timer is armed for (0: none)
}

// collected notes a collection at now. It reports whether to release at
// once, and otherwise a moment to arm the release timer for (0: none).
func (r *memoryRelease) collected(now uint64) (release bool, arm uint64) {
	r.pending++
	r.lastCollect = now
	if r.pending >= releaseEvery && now >= addMs(r.lastRelease, releaseGapMs) {
		return true, 0
	}
	if r.pending >= releaseMin && r.armed == 0 {
		r.armed = addMs(now, releaseQuietMs)
		return false, r.armed
	}
	return false, 0
}

// tick handles the release timer firing at now: release once the wave is
// quiet, or arm again for when it will be.
func (r *memoryRelease) tick(now uint64) (release bool, arm uint64) {
	r.armed = 0
	if r.pending < releaseMin {
		return false, 0 // released since the timer was armed
	}
	if quiet := addMs(r.lastCollect, releaseQuietMs); now < quiet {
		r.armed = quiet
		return false, quiet
	}
	return true, 0
}

// released records a release at now.
func (r *memoryRelease) released(now uint64) {
	r.pending, r.lastRelease = 0, now
}

// maybeReleaseMemory applies the release rules after a collection.
func (e *queueCore) maybeReleaseMemory(now uint64) {
	release, arm := e.collect.release.collected(now)
	e.applyRelease(now, release, arm)
}

// onReleaseTick applies the release rules when the release timer fires.
func (e *queueCore) onReleaseTick(now uint64) {
	release, arm := e.collect.release.tick(now)
	e.applyRelease(now, release, arm)
}

// applyRelease releases memory and arms the release timer as told, when
// the outbox can.
func (e *queueCore) applyRelease(now uint64, release bool, arm uint64) {
	r, ok := e.out.(memoryReleaser)
	if !ok {
		return
	}
	if release {
		r.releaseMemory()
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
