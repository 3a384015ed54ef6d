// Serving while loading: which ready jobs may be dispatched before every
// stored job is back in memory (SPEC §3.9: a queue's stream gets its jobs
// in (priority, id) order from its first).

package actors

import (
	"maps"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// loadFrontier is how far the background load has come. The scan reads
// the stored jobs in ID order from a snapshot taken before the server
// served, and the store knows the lowest stored priority of each queue and
// of the jobs bound to each budget (their floors, from
// persistence.JobScan.Priorities). So a job in memory precedes every job of
// its queue not yet loaded when its priority is below the queue's floor,
// or equal to it with an ID the scan has passed: every job still unread
// has a greater ID and a priority no lower than the floor. The same holds
// of the jobs bound to a budget, whose parked list orders them.
type loadFrontier struct {
	// complete: floors cover every queue and budget (one without a floor
	// had no unfinished stored job); when not, nothing is known before the
	// end. pairs are the stored pairs the floors come from, scan the scan
	// whose snapshot they were (nil in tests of the rule).
	floors       map[string]uint16 // by queue
	budgetFloors map[string]uint16 // by budget key
	complete     bool
	pairs        map[persistence.PriorityPair]struct{}
	scan         persistence.JobScan
	// through is the ID key of the last job loaded (passed: there is one)
	through protocol.IDKey
	passed  bool
}

// newLoadFrontier starts a frontier with the stored pairs of the scan's
// snapshot.
func newLoadFrontier(pairs map[persistence.PriorityPair]struct{}, complete bool) loadFrontier {
	f := loadFrontier{floors: make(map[string]uint16), budgetFloors: make(map[string]uint16), complete: complete, pairs: pairs}
	for p := range pairs {
		floors := f.floors
		if p.Budget {
			floors = f.budgetFloors
		}
		if low, ok := floors[p.Name]; !ok || p.Priority < low {
			floors[p.Name] = p.Priority
		}
	}
	return f
}

// prune is the batch that tells the store, at the end of the load, the
// pairs in use (persistence.Batch.PrioritiesInUse); nil without a scan
// (tests of the rule), or when the stored ones were complete and are
// exactly those (pairs stored during the load
// and no longer used then stay until the next load: they can only make a
// queue wait for more of the load). The prune is not the load's own
// write: if the store refuses it, the pairs stored are still a safe
// superset, and the load stands.
func (f *loadFrontier) prune(inUse map[persistence.PriorityPair]struct{}) *persistence.Batch {
	if f.scan == nil || f.complete && maps.Equal(f.pairs, inUse) {
		return nil
	}
	b := persistence.NewBatch(false)
	b.PrioritiesInUse(inUse, f.scan)
	return b
}

// loaded moves the frontier past the job with ID key k. The scan hands
// jobs over in ID order; if one ever came out of order (job groups whose ID
// ranges overlap, after the clock went back), nothing more is known until
// the end, and it reports so.
func (f *loadFrontier) loaded(k protocol.IDKey) (outOfOrder bool) {
	switch {
	case !f.passed || f.through.Less(k):
		f.through, f.passed = k, true
	case k.Less(f.through) && f.complete:
		f.complete = false
		return true
	}
	return false
}

// first reports whether the ready job it of queue comes before every job
// of the queue not loaded yet.
func (f *loadFrontier) first(queue string, it readyItem) bool {
	return f.precedes(f.floors, queue, it)
}

// firstOfBudget reports whether the ready job it, bound to the budget key,
// comes before every job bound to it not loaded yet.
func (f *loadFrontier) firstOfBudget(key string, it readyItem) bool {
	return f.precedes(f.budgetFloors, key, it)
}

// precedes reports whether it comes before every job not loaded yet of
// those whose lowest priorities are floors[name].
func (f *loadFrontier) precedes(floors map[string]uint16, name string, it readyItem) bool {
	if !f.complete {
		return false
	}
	floor, ok := floors[name]
	switch {
	case !ok || it.priority < floor:
		return true
	case it.priority > floor:
		return false
	default:
		return f.passed && !f.through.Less(it.key)
	}
}

// servableWhileLoading reports whether the ready job it, first of its
// queue, may be dispatched (or reserve its budgets) while the jobs load: it
// must come before every job of its queue not loaded yet, and before every
// one bound to any of its budgets, so that it never takes a budget's tokens
// or parked place ahead of an earlier job the load has not reached (a
// loaded one held back by its own queue is no different from any job
// whose queue is not being taken); and it must have no unique key or
// batch, whose indexes are complete only once the load is.
func (e *queueCore) servableWhileLoading(it readyItem, queue string) bool {
	if !e.frontier.first(queue, it) {
		return false
	}
	var cold entryScratch // read without thawing (coldjobs.go)
	en := e.jobs.look(it.key, &cold)
	for _, b := range en.budgets() {
		if !e.frontier.firstOfBudget(b.Key, it) {
			return false
		}
	}
	return en.jb == nil || (en.jb.UniqueKey == "" && en.jb.Batch == nil) // compact jobs have neither
}
