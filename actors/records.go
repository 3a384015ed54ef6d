package actors

import (
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// How the engine writes a job's record. A job enqueued in a bulk of at
// least EngineConfig.GroupMinJobs is a member of a stored group
// (persistence/group.go): its dispatch is a mark, its end a removal, and
// any other change writes its own record, which overrides the group's copy
// (entry.override). A job enqueued alone has its own record from the start.
// Every write of a job's record goes through these helpers, so no path
// writes a member as if it were alone or the other way round.

// storeNewJobs writes the records of jobs a request enqueued (in ID order):
// as groups when there are enough of them, else one by one (storeNewJob).
// Payloads beyond the cache are not kept in memory: a member's stays in
// its group, a lone job's is stored apart. A batched job is always stored
// alone, since a fold rewrites its payload (batch_core.go).
func (e *queueCore) storeNewJobs(entries []*entry, batch *persistence.Batch) {
	if len(entries) == 0 {
		return
	}
	for _, en := range entries {
		if en.job.Batch != nil {
			entries = e.storeBatchedAlone(entries, batch)
			break
		}
	}
	if len(entries) < e.cfg.GroupMinJobs {
		for _, en := range entries {
			e.storeNewJob(en.job, batch)
		}
		return
	}
	jobs := make([]*protocol.Job, len(entries))
	for i, en := range entries {
		jobs[i] = en.job
	}
	groups := batch.PutGroups(jobs)
	for i, en := range entries {
		if groups[i] == nil {
			// the batch failed to encode (it will not commit): keep the
			// job as a lone one in memory
			e.storeNewJob(en.job, batch)
			continue
		}
		e.joinGroup(en, groups[i], false)
	}
}

// storeBatchedAlone stores the batched jobs of entries alone and returns
// the others.
func (e *queueCore) storeBatchedAlone(entries []*entry, batch *persistence.Batch) []*entry {
	rest := make([]*entry, 0, len(entries))
	for _, en := range entries {
		if en.job.Batch != nil {
			e.storeNewJob(en.job, batch)
			continue
		}
		rest = append(rest, en)
	}
	return rest
}

// joinGroup records that en's job is a member of g and applies the payload
// cache's rule: the payload stays in memory only while there is room.
func (e *queueCore) joinGroup(en *entry, g *persistence.Group, override bool) {
	en.grp, en.override = g, override
	j := en.job
	j.InGroup = true
	if j.Payload == nil {
		return
	}
	if e.payloadBytes+len(j.Payload) <= e.cfg.PayloadCacheBytes {
		e.payloadBytes += len(j.Payload)
		return
	}
	j.Payload = nil
}

// putRecord writes the job's current record: a member's own record
// (overriding its group's copy, the payload staying there) or a lone job's.
func (e *queueCore) putRecord(en *entry, batch *persistence.Batch) {
	if en.grp != nil {
		batch.PutMember(en.job)
		en.override = true
		return
	}
	batch.PutJob(en.job)
}

// putDispatched writes that the job was dispatched: a mark in its group
// while the group's copy is its record, else its record.
func (e *queueCore) putDispatched(en *entry, batch *persistence.Batch) {
	writeUnlink(en, batch)
	if en.grp != nil && !en.override {
		batch.MarkInFlight(en.grp, en.job.ID, en.job.DequeuedAt)
		return
	}
	e.putRecord(en, batch)
}

// deleteRecord removes a job's stored state: its group membership (and its
// own record when it has one) or its lone record, and its error records.
func deleteRecord(j *protocol.Job, g *persistence.Group, override bool, batch *persistence.Batch) {
	if g != nil {
		batch.DeleteMember(g, j.ID, j.Attempts, override)
		return
	}
	batch.DeleteJob(j.ID, j.Attempts, j.Payload == nil)
}

// deleteTerminal removes a retained finished job's stored state.
func deleteTerminal(t terminalJob, batch *persistence.Batch) {
	if t.grp != nil {
		batch.DeleteMember(t.grp, t.id, t.attempts, true)
		return
	}
	batch.DeleteJob(t.id, t.attempts, t.apart)
}
