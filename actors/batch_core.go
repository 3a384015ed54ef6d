// Batched jobs, the queue core's side (SPEC §8.2): each batch key's pending
// job, folds applied to it, and sealing. The jq programs never run here:
// the facade evaluates them (fold.go) and sends a plan whose assumptions
// about the pending jobs the core checks before it applies anything.

package actors

import (
	"bytes"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// foldPlan is what the facade decided for each job of an enqueue, given
// what it believed about the pending jobs of the request's batch keys.
type foldPlan struct {
	// Expect is, for every batch key the request folds or starts, the id
	// of the pending job the plan assumed ("" for none).
	Expect map[string]string
	// Items holds one action per job of the request.
	Items []foldAction
	// Payloads holds the merged payload of each pending job that existed
	// before the request and takes folds in it.
	Payloads map[string][]byte
}

// foldKind is what one job of a planned enqueue does.
type foldKind uint8

const (
	// the zero value: an ordinary job (unbatched, or batched and scheduled).
	_ foldKind = iota
	// foldStart: a new job that becomes its key's pending job (sealing the
	// one before, if any).
	foldStart
	// foldInto: folds into the pending job Into (a job that existed before
	// the request) or into the job of item IntoIndex of this request.
	foldInto
)

// foldAction is the plan for one job.
type foldAction struct {
	Kind      foldKind
	Into      string
	IntoIndex int // -1 unless the job folds into an earlier item's job
}

// foldStale answers a plan whose assumptions no longer hold (or a batched
// enqueue that came without a plan): the pending jobs of its keys as they
// are now. The facade plans again from them.
type foldStale struct {
	Pending map[string]pendingJob // batch key -> its pending job; absent: none
}

// pendingJob is a copy of what the facade needs of a pending job.
type pendingJob struct {
	ID    string
	Batch protocol.Batch
	// Payload is the job's current payload, nil when it is stored apart
	// (the facade then reads it from the store).
	Payload []byte
}

// planBatchKeys returns the batch keys of the request's jobs that take part
// in folding at now (batched and ready), or nil.
func planBatchKeys(jobs []*protocol.NewJob, now uint64) []string {
	var keys []string
	for _, nj := range jobs {
		if joinsBatch(nj, now) {
			keys = append(keys, nj.Job.Batch.Key)
		}
	}
	return keys
}

// joinsBatch reports whether a job takes part in folding: it is batched
// and ready at now (SPEC §8.2.5: scheduled enqueues opt out).
func joinsBatch(nj *protocol.NewJob, now uint64) bool {
	return nj.Job.Batch != nil && (!nj.ReadyAtSet || nj.Job.ReadyAt <= now)
}

// checkFoldPlan returns nil when the plan may be applied: it came with the
// request if any job joins a batch, and every pending job it assumed is
// still its key's pending job. Otherwise it returns the current state of
// the keys.
func (e *queueCore) checkFoldPlan(m *EnqueueJobs, now uint64) *foldStale {
	if m.Plan == nil {
		keys := planBatchKeys(m.Jobs, now)
		if keys == nil {
			return nil
		}
		return e.pendingState(keys)
	}
	for key, id := range m.Plan.Expect {
		if e.pending[key] != id {
			keys := make([]string, 0, len(m.Plan.Expect))
			for k := range m.Plan.Expect {
				keys = append(keys, k)
			}
			return e.pendingState(keys)
		}
	}
	return nil
}

func (e *queueCore) pendingState(keys []string) *foldStale {
	st := &foldStale{Pending: make(map[string]pendingJob, len(keys))}
	for _, key := range keys {
		id := e.pending[key]
		if id == "" {
			continue
		}
		if en := e.jobs.get(id); en != nil {
			// a copy: the answer holds nothing of the actor's state
			st.Pending[key] = pendingJob{ID: id, Batch: *en.full().Batch, Payload: bytes.Clone(en.full().Payload)}
		}
	}
	return st
}

// isPending reports whether en's job is its batch key's pending job.
func (e *queueCore) isPending(en *entry) bool {
	if en.jb == nil {
		return false // a compact job has no batch
	}
	b := en.jb.Batch
	return b != nil && e.pending[b.Key] == en.jb.ID
}

// startBatch makes a job just created its key's pending job; a previous
// pending job of the key seals (its link is overwritten in the same batch).
// u notes the previous link, for a refusal.
func (e *queueCore) startBatch(j *protocol.Job, batch *persistence.Batch, u *foldUndo) {
	key := j.Batch.Key
	old := e.pending[key]
	u.noteLink(key, old)
	if old != "" {
		if en := e.jobs.get(old); en != nil {
			e.observeSealed(en.full(), "when_false")
			u.noteCounted(en.full(), false)
		}
	}
	e.pending[key] = j.ID
	batch.PutBatchLink(key, j.ID)
}

// seal ends en's batch, if it is pending, and removes its link in batch,
// the transaction of the change that takes the job out of ready. u notes
// the link, for a refusal (restore puts it back).
func (e *queueCore) seal(en *entry, batch *persistence.Batch, reason string, u *undoLog) {
	if !e.isPending(en) {
		return
	}
	u.links = append(u.links, priorLink{key: en.full().Batch.Key, id: en.full().ID})
	delete(e.pending, en.full().Batch.Key)
	batch.DeleteBatchLink(en.full().Batch.Key)
	e.observeSealed(en.full(), reason)
}

// sealOnDispatch ends the batch of a job being dispatched; its link is
// removed with the job's in-flight write (putDispatched).
func (e *queueCore) sealOnDispatch(en *entry) {
	if !e.isPending(en) {
		return
	}
	delete(e.pending, en.full().Batch.Key)
	en.flags |= entryUnlink
	e.observeSealed(en.full(), "dispatched")
}

// applyFolds applies a checked plan's folds after the request's new jobs
// are created (ids by request index): each pending job that existed before
// takes its merged payload once, and each folding job's view is its
// pending job's, folded:true. u notes what it changes, for a refusal.
func (e *queueCore) applyFolds(now uint64, plan *foldPlan, ids []string, views []*protocol.JobView, batch *persistence.Batch, u *foldUndo) {
	for id, payload := range plan.Payloads {
		if en := e.jobs.get(id); en != nil {
			u.notePayload(en)
			e.applyFold(en, payload, batch)
		}
	}
	for i, a := range plan.Items {
		if a.Kind != foldInto {
			continue
		}
		id := a.Into
		if a.IntoIndex >= 0 {
			id = ids[a.IntoIndex]
		}
		j := e.jobs.get(id).full()
		views[i] = j.EnqueueView(now, false, true)
		e.counters(j.Queue).folded++
		u.noteCounted(j, true)
		e.tracer.job(EventFolded, j, 0)
	}
}

// applyFold replaces a pending job's payload with the merged one and writes
// it in batch. Memory keeps the new payload only if it kept the old one
// and the payload cache has room for the new.
func (e *queueCore) applyFold(en *entry, payload []byte, batch *persistence.Batch) {
	j := en.full()
	kept := false
	if j.Payload != nil {
		e.payloadBytes -= payloadCost(j.Payload)
		kept = e.keepPayload(payload)
	}
	batch.PayloadChanged(j, payload, kept, &en.ref)
	j.Payload = nil
	if kept {
		j.Payload = payload
	}
}

// writeUnlink removes, in batch, the link of a job sealed by its dispatch.
func writeUnlink(en *entry, batch *persistence.Batch) {
	if en.flags.has(entryUnlink) {
		batch.DeleteBatchLink(en.full().Batch.Key)
		en.flags &^= entryUnlink
	}
}

func (e *queueCore) observeSealed(j *protocol.Job, reason string) {
	e.counters(j.Queue).sealed++
	if e.tracer.on() {
		e.tracer.emit(Event{Kind: EventBatchSealed, Actor: "queue", JobID: j.ID, Queue: j.Queue, Reason: reason})
	}
}

// loadBatchLinks restores the pending links after the jobs are loaded. A
// link whose job is not a never-dispatched ready job with that batch key is
// stale and removed (SPEC §8.2.7: after a restart only such a job can be
// pending).
func (e *queueCore) loadBatchLinks(links map[string]string, batch *persistence.Batch) {
	for key, id := range links {
		en := e.jobs.get(id)
		if en == nil || en.full().Batch == nil || en.full().Batch.Key != key || en.full().Status != protocol.StatusReady || en.full().DequeuedAt != 0 {
			batch.DeleteBatchLink(key)
			continue
		}
		e.pending[key] = id
	}
}
