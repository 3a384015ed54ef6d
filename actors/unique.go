package actors

import "github.com/tollgate/tollgate/protocol"

// Unique jobs (SPEC §6.9). e.unique maps a unique key to the job that holds
// it. A holder keeps the key by its own scope: "queued" until dispatched,
// "active" until it finishes, "exists" until it is deleted or purged. Every
// scope releases it on deletion; a key is released only by its holder.

// holderStatus is the status of the job holding key, or "" when none.
func (e *queueCore) holderStatus(key string) (string, protocol.Status) {
	id, ok := e.unique[key]
	if !ok {
		return "", ""
	}
	if en := e.jobs.get(id); en != nil {
		switch en.state {
		case stInFlight:
			return id, protocol.StatusInFlight
		case stScheduled:
			return id, protocol.StatusScheduled
		default:
			return id, protocol.StatusReady
		}
	}
	if t, ok := e.terminal[id]; ok && t.job != nil {
		return id, t.job.Status
	}
	return "", ""
}

// duplicateOf reports whether a holder in status st makes a new enqueue
// with scope `while` a duplicate.
func duplicateOf(while string, st protocol.Status) bool {
	switch st {
	case protocol.StatusScheduled, protocol.StatusReady:
		return true
	case protocol.StatusInFlight:
		return while == protocol.UniqueActive || while == protocol.UniqueExists
	case protocol.StatusCompleted, protocol.StatusDead:
		return while == protocol.UniqueExists
	}
	return false
}

// holderView is the enqueue response of a duplicate: the holder, without
// payload, duplicate:true.
func (e *queueCore) holderView(now uint64, id string) *protocol.JobView {
	if en := e.jobs.get(id); en != nil {
		return en.full().EnqueueView(now, true, false)
	}
	return e.terminal[id].job.EnqueueView(now, true, false)
}

// claimUnique makes j the holder of its key.
func (e *queueCore) claimUnique(j *protocol.Job) {
	if j.UniqueKey != "" {
		e.unique[j.UniqueKey] = j.ID
	}
}

// reclaimUnique makes a queued-scope job the holder again if the key is free
// (after failure rescheduling, disconnect requeue or crash recovery).
func (e *queueCore) reclaimUnique(j *protocol.Job) {
	if j.UniqueKey == "" || j.UniqueWhile != protocol.UniqueQueued {
		return
	}
	if _, held := e.unique[j.UniqueKey]; !held {
		e.unique[j.UniqueKey] = j.ID
	}
}

// releaseUnique frees j's key if j holds it.
func (e *queueCore) releaseUnique(j *protocol.Job) {
	if j.UniqueKey != "" && e.unique[j.UniqueKey] == j.ID {
		delete(e.unique, j.UniqueKey)
	}
}

// releaseUniqueOn applies the scope rules to an event: dispatch releases a
// queued-scope key; finishing releases queued and active ones.
func (e *queueCore) releaseUniqueOnDispatch(j *protocol.Job) {
	if j.UniqueWhile == protocol.UniqueQueued {
		e.releaseUnique(j)
	}
}

func (e *queueCore) releaseUniqueOnFinish(j *protocol.Job) {
	if j.UniqueWhile == protocol.UniqueQueued || j.UniqueWhile == protocol.UniqueActive {
		e.releaseUnique(j)
	}
}

// noteLoadedKey records, while loading, the latest stored job carrying each
// unique key.
func (e *queueCore) noteLoadedKey(j *protocol.Job) {
	if j.UniqueKey == "" {
		return
	}
	if e.loadLatest == nil {
		e.loadLatest = make(map[string]string)
	}
	if j.ID > e.loadLatest[j.UniqueKey] {
		e.loadLatest[j.UniqueKey] = j.ID
	}
}

// dropSupersededHolders runs at the end of loading. An active- or
// exists-scope job never re-claims its key, so once a later job with the same
// key was created (and took the key over) it is no longer the holder, even if
// that later job has released the key since: the key stays free, as it was
// before the restart.
func (e *queueCore) dropSupersededHolders() {
	for key, id := range e.unique {
		latest := e.loadLatest[key]
		if latest == "" || latest == id {
			continue
		}
		var while string
		if en := e.jobs.get(id); en != nil {
			while = en.full().UniqueWhile
		} else if t, ok := e.terminal[id]; ok && t.job != nil {
			while = t.job.UniqueWhile
		}
		if while == protocol.UniqueActive || while == protocol.UniqueExists {
			delete(e.unique, key)
		}
	}
	e.loadLatest = nil
}
