// Maps made afresh once sparse. A Go map never gives back the table it grew
// to: after 100,000 tenants' jobs and budgets came and went, the queue's
// maps keyed by job ID and budget key kept tables sized for 100,000 entries
// (tens of MiB in all) with nothing in them. (The jobs by ID are in a table
// that shrinks itself: jobmap.go.) The queue actor checks its big
// maps at the end of each Receive, when nothing iterates them, and copies a
// map into a new one sized for what it holds once it holds at most a
// quarter of the most it held.

package actors

import "maps"

// shrinkMinPeak is the smallest peak worth a rebuild: below it a map's
// table is a few KiB.
const shrinkMinPeak = 1024

// mapPeak is the largest size a map was seen at since it was last made.
type mapPeak struct{ peak int }

// shrinkMap returns m, or a copy of m sized for its entries when it holds
// at most a quarter of its peak (and the peak is at least shrinkMinPeak).
// Copies cost O(len(m)) and come after at least three times as many
// deletes, so a map's upkeep stays O(1) per operation. m must not be
// iterated by a caller while shrinkMap runs.
func shrinkMap[M ~map[K]V, K comparable, V any](m M, p *mapPeak) M {
	if !p.sparse(len(m)) {
		return m
	}
	return remade(m)
}

// sparse notes a size n and reports whether it is at most a quarter of
// the peak (at least shrinkMinPeak); if so the peak starts again from n.
func (p *mapPeak) sparse(n int) bool {
	if n > p.peak {
		p.peak = n
	}
	if p.peak < shrinkMinPeak || n > p.peak/4 {
		return false
	}
	p.peak = n
	return true
}

// remade returns a copy of m sized for its entries.
func remade[M ~map[K]V, K comparable, V any](m M) M {
	fresh := make(M, len(m))
	maps.Copy(fresh, m)
	return fresh
}

// emptied returns s emptied for reuse: its elements are cleared, so that
// its array keeps nothing alive past its length, and an array grown past
// shrinkMinPeak for a burst is let go.
func emptied[S ~[]E, E any](s S) S {
	if cap(s) > shrinkMinPeak {
		return nil
	}
	clear(s)
	return s[:0]
}

// corePeaks are the peaks of the queue core's maps that grow with jobs or
// budgets.
type corePeaks struct {
	terminal, budgets, byKey, unique, pending mapPeak
	// inFlight is the peak of the jobs in flight on all streams: once it
	// is sparse, every stream's map is made afresh (costing at most a
	// quarter of the peak, as one map would).
	inFlight mapPeak
}

// shrinkMaps makes the queue core's sparse maps afresh.
func (e *queueCore) shrinkMaps() {
	p := &e.peaks
	e.terminal = shrinkMap(e.terminal, &p.terminal)
	e.budgets = shrinkMap(e.budgets, &p.budgets)
	e.byKey = shrinkMap(e.byKey, &p.byKey)
	e.unique = shrinkMap(e.unique, &p.unique)
	e.pending = shrinkMap(e.pending, &p.pending)
	if p.inFlight.sparse(e.inFlightTotal) {
		for _, s := range e.streams {
			s.inFlight = remade(s.inFlight)
		}
	}
}

// actorPeaks are the peaks of the queue actor's maps keyed by budget.
type actorPeaks struct {
	budgets, incarnations mapPeak
}

// shrinkMaps makes the queue actor's and its core's sparse maps afresh; it
// runs at the end of each Receive.
func (a *queueActor) shrinkMaps() {
	a.budgets = shrinkMap(a.budgets, &a.peaks.budgets)
	a.incarnations = shrinkMap(a.incarnations, &a.peaks.incarnations)
	if a.eng != nil {
		a.eng.shrinkMaps()
	}
}
