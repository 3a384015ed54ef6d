package actors

import (
	"context"
	"sort"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Query and administration (SPEC §6): reads scan the store in job-ID order
// outside the actor; bulk deletes and patches select IDs the same way and
// then change them through the queue actor in bounded batches, each batch
// one atomic write.

// queryBatch is how many job IDs one DeleteJobs or PatchJobs message carries.
const queryBatch = 1000

// DeleteJobs deletes the listed jobs that still exist, are visible and (when
// Filter is set) still match its non-jq filters as the queue sees them.
type DeleteJobs struct {
	IDs    []string
	Filter *protocol.JobFilter
}

// PatchJobs patches the listed jobs. Single: one job from PATCH /jobs/{id}
// (404/422 errors); otherwise missing and terminal jobs are skipped.
type PatchJobs struct {
	IDs    []string
	Filter *protocol.JobFilter
	Patch  *protocol.JobPatch
	Single bool
}

// CountResponse answers DeleteJobs and bulk PatchJobs.
type CountResponse struct{ N int }

func (*DeleteJobs) isQueueMsg() {}
func (*PatchJobs) isQueueMsg()  {}

// scanJobs calls fn for each visible job matching f, in ID order after from
// (exclusive), until fn returns false. With an id filter it reads only
// those records.
func (e *Engine) scanJobs(ctx context.Context, f *protocol.JobFilter, from string, desc bool, fn func(*protocol.Job) bool) error {
	now := e.now()
	visit := func(j *protocol.Job) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if j.Purged(now) || !f.Match(ctx, j, now) {
			return true, nil
		}
		return fn(j), nil
	}
	if len(f.IDs) == 0 {
		return e.store.ScanJobsFrom(from, desc, visit)
	}
	ids := append([]string(nil), f.IDs...) // sorted by the parser
	if desc {
		sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	}
	for _, id := range ids {
		if from != "" && ((!desc && id <= from) || (desc && id >= from)) {
			continue
		}
		j, err := e.store.GetJob(id)
		if err == protocol.ErrJobNotFound {
			continue
		}
		if err != nil {
			return err
		}
		more, err := visit(j)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// ListJobs returns up to limit visible jobs matching f (with payload) after
// the cursor from, and whether more follow.
func (e *Engine) ListJobs(ctx context.Context, f *protocol.JobFilter, from string, desc bool, limit int) ([]*protocol.JobView, bool, error) {
	now := e.now()
	out := []*protocol.JobView{}
	more := false
	err := e.scanJobs(ctx, f, from, desc, func(j *protocol.Job) bool {
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, j.View(now, true))
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return out, more, nil
}

// CountJobs counts visible jobs matching f.
func (e *Engine) CountJobs(ctx context.Context, f *protocol.JobFilter) (uint64, error) {
	var n uint64
	err := e.scanJobs(ctx, f, "", false, func(*protocol.Job) bool { n++; return true })
	return n, err
}

// forEachBatch selects matching IDs in batches of queryBatch and hands each
// batch to do, which returns how many it changed.
func (e *Engine) forEachBatch(ctx context.Context, f *protocol.JobFilter, do func([]string) (int, error)) (int, error) {
	total := 0
	from := ""
	for {
		ids := make([]string, 0, queryBatch)
		err := e.scanJobs(ctx, f, from, false, func(j *protocol.Job) bool {
			ids = append(ids, j.ID)
			return len(ids) < queryBatch
		})
		if err != nil {
			return total, err
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := do(ids)
		total += n
		if err != nil {
			return total, err
		}
		if len(ids) < queryBatch {
			return total, nil
		}
		from = ids[len(ids)-1]
	}
}

// DeleteJobs deletes every visible job matching f and returns how many.
func (e *Engine) DeleteJobs(ctx context.Context, f *protocol.JobFilter) (int, error) {
	return e.forEachBatch(ctx, f, func(ids []string) (int, error) {
		res, err := e.call(ctx, &DeleteJobs{IDs: ids, Filter: f})
		if err != nil {
			return 0, err
		}
		return res.(*CountResponse).N, nil
	})
}

// PatchJob patches one job and returns it without payload.
func (e *Engine) PatchJob(ctx context.Context, id string, p *protocol.JobPatch) (*protocol.JobView, error) {
	res, err := e.call(ctx, &PatchJobs{IDs: []string{id}, Patch: p, Single: true})
	if err != nil {
		return nil, err
	}
	return res.(*JobResponse).Job, nil
}

// PatchJobs patches every unfinished visible job matching f and returns how
// many.
func (e *Engine) PatchJobs(ctx context.Context, f *protocol.JobFilter, p *protocol.JobPatch) (int, error) {
	return e.forEachBatch(ctx, f, func(ids []string) (int, error) {
		res, err := e.call(ctx, &PatchJobs{IDs: ids, Filter: f, Patch: p})
		if err != nil {
			return 0, err
		}
		return res.(*CountResponse).N, nil
	})
}

// JobErrors returns up to limit error records of a visible job after the
// attempt cursor, and whether more follow.
func (e *Engine) JobErrors(ctx context.Context, id string, from uint32, hasFrom, desc bool, limit int) ([]protocol.ErrorRecord, bool, error) {
	if err := e.visibleJob(id); err != nil {
		return nil, false, err
	}
	recs, err := e.store.ListErrorsPage(id, from, hasFrom, desc, limit+1)
	if err != nil {
		return nil, false, err
	}
	more := len(recs) > limit
	if more {
		recs = recs[:limit]
	}
	if recs == nil {
		recs = []protocol.ErrorRecord{}
	}
	return recs, more, nil
}

// JobError returns one error record of a visible job.
func (e *Engine) JobError(ctx context.Context, id string, attempt uint32) (*protocol.ErrorRecord, error) {
	if err := e.visibleJob(id); err != nil {
		return nil, err
	}
	rec, ok, err := e.store.GetError(id, attempt)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeNotFound, Message: "error record not found"}
	}
	return rec, nil
}

func (e *Engine) visibleJob(id string) error {
	if !protocol.ValidID(id) {
		return protocol.ErrJobNotFound
	}
	j, err := e.store.GetJob(id)
	if err != nil {
		return err
	}
	if j.Purged(e.now()) {
		return protocol.ErrJobNotFound
	}
	return nil
}

// ---------------------------------------------------------------- engine side

// deleteJobs deletes a batch of jobs in one atomic write (the logic of
// deleteJob, per job).
func (e *engine) deleteJobs(now uint64, m *DeleteJobs, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	n := 0
	for _, id := range m.IDs {
		if en := e.jobs[id]; en != nil && m.Filter != nil && !m.Filter.MatchMeta(en.job, en.job.VisibleStatus(now)) {
			continue
		}
		if e.removeJob(now, id, batch) {
			n++
		}
	}
	e.persistThenReply(batch, reply, &CountResponse{N: n})
	e.pump(now)
}

// patchJobs applies a patch to a batch of jobs in one atomic write.
func (e *engine) patchJobs(now uint64, m *PatchJobs, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	n := 0
	var view *protocol.JobView
	for _, id := range m.IDs {
		en := e.jobs[id]
		if en == nil {
			if !m.Single {
				continue
			}
			if t, ok := e.terminal[id]; ok && (t.purgeAt == 0 || t.purgeAt > now) {
				st := protocol.StatusCompleted
				if t.dead {
					st = protocol.StatusDead
				}
				reply(protocol.Unprocessable("cannot patch job %s in %s status", id, st))
			} else {
				reply(protocol.ErrJobNotFound)
			}
			return
		}
		if m.Filter != nil && !m.Filter.MatchMeta(en.job, en.job.VisibleStatus(now)) {
			continue
		}
		e.patchEntry(now, en, m.Patch)
		batch.PutJob(en.job)
		n++
		if m.Single {
			view = en.job.View(now, false)
		}
	}
	if m.Single {
		e.persistThenReply(batch, reply, &JobResponse{Job: view})
	} else {
		e.persistThenReply(batch, reply, &CountResponse{N: n})
	}
	e.pump(now)
}

// patchEntry changes an unfinished job's fields and moves it where its new
// ready_at, priority and queue put it (SPEC §6.6): a ready or parked job
// goes back to the ready index at its new (priority, id) place (a parked one
// is unparked from its budget and reserves again); ready + future ready_at
// becomes scheduled; scheduled + past (or null) ready_at becomes ready.
func (e *engine) patchEntry(now uint64, en *entry, p *protocol.JobPatch) {
	j := en.job
	if p.Queue.Present && !p.Queue.Null && p.Queue.Value != j.Queue {
		e.decQueue(j.Queue)
		e.queueCounts[p.Queue.Value]++
	}
	switch en.state {
	case stReady, stParked:
		e.detach(en)
		p.ApplyFields(j)
		if p.ReadyAt.Present && !p.ReadyAt.Null {
			j.ReadyAt = p.ReadyAt.Value
			if j.ReadyAt > now {
				j.Status = protocol.StatusScheduled
				en.state = stScheduled
				en.parkedOn = ""
				en.stream = nil
				en.resv = nil
				e.out.schedule(j.ID, j.ReadyAt)
				return
			}
		}
		j.Status = protocol.StatusReady
		e.makeReady(en)
	case stScheduled:
		p.ApplyFields(j)
		if p.ReadyAt.Present {
			if p.ReadyAt.Null {
				j.ReadyAt = now
			} else {
				j.ReadyAt = p.ReadyAt.Value
			}
			if j.ReadyAt <= now {
				e.out.unschedule(j.ID)
				j.Status = protocol.StatusReady
				e.makeReady(en)
			} else {
				e.out.schedule(j.ID, j.ReadyAt)
			}
		}
	default:
		// In flight or reserving: the status never changes; the fields
		// (and a non-null ready_at) are stored. A reserving job keeps its
		// pending reservation, which ends in dispatch or parking as usual.
		p.ApplyFields(j)
		if p.ReadyAt.Present && !p.ReadyAt.Null {
			j.ReadyAt = p.ReadyAt.Value
		}
		if s := en.stream; s != nil {
			// A dispatched copy waiting to be flushed must not overwrite
			// the patched record.
			for i := range s.outbox {
				if s.outbox[i].ID == j.ID {
					s.outbox[i] = *j
				}
			}
		}
	}
}
