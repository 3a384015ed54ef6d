// Loading: rebuilding the queue core from the store at start-up, one
// stored job at a time (background_load.go feeds them).

package actors

import (
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// loadBudget adds a stored budget at startup.
func (e *queueCore) loadBudget(b protocol.Budget) {
	e.budgets[b.Key] = &budgetEntry{budget: b, bound: make(map[uint32]int)}
	e.out.spawnBudget(b)
}

// loadJob adds a stored job at startup; in-flight jobs return to ready and
// are rewritten in batch. It returns whether the job was recovered from
// in flight.
func (e *queueCore) loadJob(now uint64, j *protocol.Job, ref persistence.Ref, batch *persistence.Batch) (recovered bool) {
	if k, ok := protocol.ParseIDKey(j.ID); !ok || !mintedInEra(k) {
		// tollgate mints every ID from the clock; this one is damage (or
		// dated past the year 6429), and the indexes could not order it
		// (the ready index keeps a hint in the top bit: readyKey)
		e.log.Error("stored job with a malformed ID left out", "job_id", j.ID)
		return false
	}
	e.internNames(j)
	e.noteLoadedKey(j)
	if j.Status.Terminal() {
		if j.Purged(now) {
			deleteRecord(j, ref, batch)
			return false
		}
		e.addStored(j)
		e.addTerminal(j, ref)
		if j.UniqueKey != "" && j.UniqueWhile == protocol.UniqueExists {
			e.claimUnique(j)
		}
		return false
	}
	e.addStored(j)
	en := &entry{jb: j, ref: ref}
	e.loadPayload(en, batch)
	e.addEntry(j.ID, en)
	e.bind(j)
	if j.Status == protocol.StatusInFlight {
		j.Status = protocol.StatusReady
		e.putRecord(en, batch)
		recovered = true
		if j.UniqueWhile == protocol.UniqueQueued {
			e.recoveredUnique = append(e.recoveredUnique, j)
		} else {
			e.claimUnique(j)
		}
	} else {
		e.claimUnique(j)
	}
	if j.ReadyAt > now && j.Status == protocol.StatusScheduled {
		e.setState(en, stScheduled)
		e.out.schedule(j.ID, j.ReadyAt)
	} else {
		j.Status = protocol.StatusReady
		e.makeReady(en)
	}
	e.syncSched(en)
	e.compact(en)
	return recovered
}

// finishLoad re-claims the keys of queued-scope jobs recovered from in
// flight, where no other job holds them (SPEC §3.9).
func (e *queueCore) finishLoad() {
	e.dropSupersededHolders()
	for _, j := range e.recoveredUnique {
		e.reclaimUnique(j)
	}
	e.recoveredUnique = nil
}
