package actors

import (
	"context"
	"sort"
	"unique"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Query and administration (SPEC §6): the queue actor selects matching job
// IDs in ID order from its in-memory indexes and records (SelectJobs, in
// bounded chunks); reads then fetch only those records from the store (and
// run the jq filter on them). Bulk deletes and patches select IDs the same
// way and change them through the queue actor in bounded batches, each
// batch one atomic write, continuing after the batch's last ID.

// queryBatch is how many job IDs one DeleteJobs or PatchJobs message carries.
var queryBatch = 1000

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

// SelectJobs asks the queue actor for the IDs of visible jobs matching the
// filter's non-jq filters, in ID order after From (exclusive), from its
// in-memory indexes (queue, type, budget key, id; status counts) and
// records (every other filter): up to Limit IDs, examining at most selectScan candidates so one message never
// holds the actor for long. With Count it only counts.
type SelectJobs struct {
	Filter *protocol.JobFilter
	From   string
	Desc   bool
	Limit  int
	Count  bool
}

// SelectResponse answers SelectJobs: the IDs (or their number N), and
// whether the selection is Done; otherwise it continues after Next.
type SelectResponse struct {
	IDs  []string
	N    uint64
	Next string
	Done bool
}

func (*SelectJobs) isQueueMsg() {}

// selectScan is how many candidate jobs one SelectJobs message examines.
var selectScan = 5000

// matchIDs calls fn with batches (at most n each) of the IDs of visible jobs
// matching f's non-jq filters, in ID order after from, until fn returns
// false. Memory stays bounded by n whatever the number of matches.
func (e *Engine) matchIDs(ctx context.Context, f *protocol.JobFilter, from string, desc bool, n int, fn func([]string) (bool, error)) error {
	cursor := from
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := e.call(ctx, &SelectJobs{Filter: f, From: cursor, Desc: desc, Limit: n})
		if err != nil {
			return err
		}
		r := res.(*SelectResponse)
		if len(r.IDs) > 0 {
			more, err := fn(r.IDs)
			if err != nil || !more {
				return err
			}
		}
		if r.Done {
			return nil
		}
		cursor = r.Next
	}
}

// readMatching reads the records of ids and calls fn for each that still
// exists, is visible and matches f (including its jq program), until fn
// returns false.
func (e *Engine) readMatching(ctx context.Context, f *protocol.JobFilter, ids []string, fn func(*protocol.Job) bool) (bool, error) {
	now := e.now()
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		j, err := e.store.GetJob(id)
		if err == protocol.ErrJobNotFound {
			continue
		}
		if err != nil {
			return false, err
		}
		if j.Purged(now) || !f.Match(ctx, j, now) {
			continue
		}
		if !fn(j) {
			return false, nil
		}
	}
	return true, nil
}

// ListJobs returns up to limit visible jobs matching f (with payload) after
// the cursor from, and whether more follow. The queue actor selects the IDs
// from memory; only the records on the page (and, with a jq filter, the
// candidates it runs on) are read from the store.
func (e *Engine) ListJobs(ctx context.Context, f *protocol.JobFilter, from string, desc bool, limit int) ([]*protocol.JobView, bool, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, false, err
	}
	now := e.now()
	out := []*protocol.JobView{}
	more := false
	err := e.matchIDs(ctx, f, from, desc, limit+1, func(ids []string) (bool, error) {
		return e.readMatching(ctx, f, ids, func(j *protocol.Job) bool {
			if len(out) == limit {
				more = true
				return false
			}
			out = append(out, j.View(now, true))
			return true
		})
	})
	if err != nil {
		return nil, false, err
	}
	return out, more, nil
}

// CountJobs counts visible jobs matching f: from the actor's counters and
// records alone unless a jq program must read payloads.
func (e *Engine) CountJobs(ctx context.Context, f *protocol.JobFilter) (uint64, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return 0, err
	}
	var n uint64
	if f.Filter != "" {
		err := e.matchIDs(ctx, f, "", false, queryBatch, func(ids []string) (bool, error) {
			return e.readMatching(ctx, f, ids, func(*protocol.Job) bool { n++; return true })
		})
		return n, err
	}
	cursor := ""
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		res, err := e.call(ctx, &SelectJobs{Filter: f, From: cursor, Count: true})
		if err != nil {
			return 0, err
		}
		r := res.(*SelectResponse)
		n += r.N
		if r.Done {
			return n, nil
		}
		cursor = r.Next
	}
}

// forEachBatch selects matching IDs in batches of queryBatch and hands each
// batch to do, which returns how many it changed. Each batch is selected
// after the last ID of the previous one, so memory stays flat.
func (e *Engine) forEachBatch(ctx context.Context, f *protocol.JobFilter, do func([]string) (int, error)) (int, error) {
	total := 0
	err := e.matchIDs(ctx, f, "", false, queryBatch, func(ids []string) (bool, error) {
		if f.Filter != "" {
			kept := ids[:0:0]
			if _, err := e.readMatching(ctx, f, ids, func(j *protocol.Job) bool {
				kept = append(kept, j.ID)
				return true
			}); err != nil {
				return false, err
			}
			ids = kept
			if len(ids) == 0 {
				return true, nil
			}
		}
		n, err := do(ids)
		total += n
		return err == nil, err
	})
	return total, err
}

// DeleteJobs deletes every visible job matching f and returns how many.
func (e *Engine) DeleteJobs(ctx context.Context, f *protocol.JobFilter) (int, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return 0, err
	}
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
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &PatchJobs{IDs: []string{id}, Patch: p, Single: true})
	if err != nil {
		return nil, err
	}
	return res.(*JobResponse).Job, nil
}

// PatchJobs patches every unfinished visible job matching f and returns how
// many.
func (e *Engine) PatchJobs(ctx context.Context, f *protocol.JobFilter, p *protocol.JobPatch) (int, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return 0, err
	}
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
	if err := e.whenLoaded(ctx); err != nil {
		return nil, false, err
	}
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
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
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
func (e *queueCore) deleteJobs(now uint64, m *DeleteJobs, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	u := &undoLog{}
	n := 0
	var scratch protocol.Job // what a compact job is read into (queued_compact.go)
	var cold entryScratch    // what a cold job is read into (coldjobs.go)
	for _, id := range m.IDs {
		if en := e.jobs.lookID(id, &cold); en != nil && m.Filter != nil && !m.Filter.MatchMeta(en.peek(&scratch), en.visibleStatus(now)) {
			continue
		}
		if e.removeJob(now, id, batch, u) {
			n++
		}
	}
	e.persistOrRestore(batch, reply, &CountResponse{N: n}, u)
	e.pump(now)
}

// patchJobs applies a patch to a batch of jobs in one atomic write.
func (e *queueCore) patchJobs(now uint64, m *PatchJobs, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	u := &undoLog{}
	n := 0
	var view *protocol.JobView
	var scratch protocol.Job // what a compact job is read into (queued_compact.go)
	var cold entryScratch    // a cold job thaws only if it changes (coldjobs.go)
	for _, id := range m.IDs {
		en := e.jobs.lookID(id, &cold)
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
		if m.Filter != nil && !m.Filter.MatchMeta(en.peek(&scratch), en.visibleStatus(now)) {
			continue
		}
		en = e.jobs.get(id)
		u.noteJob(en)
		e.patchEntry(now, en, m.Patch)
		if en.state == stScheduled {
			e.seal(en, batch, "scheduled", u)
		}
		e.putRecord(en, batch)
		n++
		if m.Single {
			view = en.full().View(now, false)
		}
	}
	if m.Single {
		e.persistOrRestore(batch, reply, &JobResponse{Job: view}, u)
	} else {
		e.persistOrRestore(batch, reply, &CountResponse{N: n}, u)
	}
	e.pump(now)
}

// patchEntry changes an unfinished job's fields and moves it where its new
// ready_at, priority and queue put it (SPEC §6.6): a ready or parked job
// goes back to the ready index at its new (priority, id) place (a parked one
// is unparked from its budget and reserves again); ready + future ready_at
// becomes scheduled; scheduled + past (or null) ready_at becomes ready.
func (e *queueCore) patchEntry(now uint64, en *entry, p *protocol.JobPatch) {
	j := en.full()
	e.unsched(en) // its ready_at may change (statusindex.go)
	defer e.syncSched(en)
	// counted again in its queue, maybe another, in its new state
	// (queue_states.go)
	e.countEntry(en, -1)
	defer e.countEntry(en, 1)
	if p.Queue.Present && !p.Queue.Null && p.Queue.Value != j.Queue {
		e.moveQueue(j.ID, j.Type, j.Queue, p.Queue.Value)
	}
	switch en.state {
	case stReady, stParked:
		e.detach(en)
		p.ApplyFields(j)
		if p.ReadyAt.Present && !p.ReadyAt.Null {
			j.ReadyAt = p.ReadyAt.Value
			if j.ReadyAt > now {
				j.Status = protocol.StatusScheduled
				e.setState(en, stScheduled)
				en.parkedOn = noBudget
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
		// (a dispatched job waiting in its stream's outbox is copied when
		// it is flushed, so it goes out patched)
	}
}

// selectJobs answers SelectJobs from the indexes and in-memory records.
func (e *queueCore) selectJobs(now uint64, m *SelectJobs) *SelectResponse {
	f := m.Filter
	res := &SelectResponse{}
	purged := func(t terminalJob) bool { return t.purgeAt != 0 && t.purgeAt <= now }
	var scratch protocol.Job // what a compact job is read into (queued_compact.go)
	var cold entryScratch    // what a cold job is read into (coldjobs.go)
	// match takes the ID and its key (when the ID is one): the walk of an
	// index has both, and neither is made twice per job
	match := func(id string, k protocol.IDKey, isKey bool) bool {
		if en := e.jobs.look(k, &cold); isKey && en != nil {
			return f.MatchMeta(en.peekID(&scratch, id), en.visibleStatus(now))
		}
		if t, ok := e.terminal[id]; ok && t.meta != nil && !purged(t) {
			return f.MatchMeta(t.meta, t.meta.Status)
		}
		return false
	}
	onlyQueues := len(f.IDs) == 0 && len(f.Types) == 0 && len(f.Statuses) == 0 && len(f.BudgetKeys) == 0 &&
		!f.Priority.Set && !f.ReadyAt.Set && !f.Attempts.Set && f.Filter == ""
	onlyTypes := len(f.Types) > 0 && len(f.IDs) == 0 && len(f.Statuses) == 0 && len(f.Queues) == 0 &&
		len(f.BudgetKeys) == 0 && !f.Priority.Set && !f.ReadyAt.Set && !f.Attempts.Set && f.Filter == ""
	if m.Count && m.From == "" && onlyTypes {
		// Stored jobs per type, less retained finished jobs already past
		// purge_at (the reaper has not run yet).
		for _, s := range e.kindSets(nil, f.Types) {
			res.N += uint64(s.Len())
		}
		e.jobs.cold.eachKind(func(kind unique.Handle[jobKind], n int) { // cold jobs are in no ID index
			if inSortedList(f.Types, kind.Value().typ) {
				res.N += uint64(n)
			}
		})
		e.purgeOrder.Ascend(func(t terminalJob) bool {
			if t.purgeAt > now {
				return false
			}
			if inSortedList(f.Types, t.meta.Type) {
				res.N--
			}
			return true
		})
		res.Done = true
		return res
	}
	onlyStatuses := len(f.Statuses) > 0 && len(f.IDs) == 0 && len(f.Types) == 0 && len(f.Queues) == 0 &&
		len(f.BudgetKeys) == 0 && !f.Priority.Set && !f.ReadyAt.Set && !f.Attempts.Set && f.Filter == ""
	if m.Count && m.From == "" && onlyStatuses {
		res.N = e.statusCount(now, f.Statuses)
		res.Done = true
		return res
	}
	if m.Count && m.From == "" && onlyQueues {
		// Counters: stored jobs per queue, less retained finished jobs
		// already past purge_at (the reaper has not run yet).
		if len(f.Queues) == 0 {
			for _, n := range e.queueCounts {
				res.N += uint64(n)
			}
		}
		for _, q := range f.Queues {
			res.N += uint64(e.queueCounts[q])
		}
		for _, t := range e.terminal {
			if purged(t) && (len(f.Queues) == 0 || inSortedList(f.Queues, t.queue)) {
				res.N--
			}
		}
		res.Done = true
		return res
	}
	examined := 0
	visit := func(id string, k protocol.IDKey, isKey bool) bool {
		if m.From != "" && ((!m.Desc && id <= m.From) || (m.Desc && id >= m.From)) {
			return true
		}
		if examined == selectScan {
			return false
		}
		examined++
		res.Next = id
		if !match(id, k, isKey) {
			return true
		}
		if m.Count {
			res.N++
			return true
		}
		res.IDs = append(res.IDs, id)
		return len(res.IDs) < m.Limit
	}
	if len(f.IDs) > 0 {
		// Few: the parser sorted them; no scan budget needed.
		examined = -len(f.IDs) - 1
		n := len(f.IDs)
		for i := 0; i < n; i++ {
			id := f.IDs[i]
			if m.Desc {
				id = f.IDs[n-1-i]
			}
			k, isKey := protocol.ParseIDKey(id)
			if !visit(id, k, isKey) {
				return res
			}
		}
		res.Done = true
		return res
	}
	// The cursor is of an ID's form (the HTTP layer checks); one above
	// every ID's value (no job has it) sorts after them all.
	pivot, pivotOK := protocol.ParseIDKey(m.From)
	switch {
	case m.Desc && (m.From == "" || !pivotOK):
		pivot = protocol.MaxIDKey
	case !m.Desc && m.From != "" && !pivotOK:
		res.Done = true
		return res
	}
	// the runs holding the candidates: a job is in the ID index of its
	// queue and type only, or, cold, in none but its queue's ready index,
	// so those of several merge without a job twice (idwalk.go); not so
	// the budget keys' (a cold job is bound to none)
	var sets []*orderedSet[protocol.IDKey]
	var runs []idCursor
	if len(f.Queues) == 0 && len(f.Types) == 0 && len(f.BudgetKeys) == 1 {
		if s := e.byKey[f.BudgetKeys[0]]; s != nil {
			sets = append(sets, s)
		}
	} else {
		sets = e.kindSets(f.Queues, f.Types)
		runs = e.coldRuns(f.Queues, f.Types, pivot, m.Desc)
	}
	stopped := false
	walkIDs(sets, runs, pivot, m.Desc, func(k protocol.IDKey) bool {
		if !visit(k.String(), k, true) {
			stopped = true
			return false
		}
		return true
	})
	res.Done = !stopped
	return res
}

// coldRuns are the runs of the cold jobs of the given queues (none: every
// queue) and types (none: every type) for a walk from pivot (coldjobs.go:
// they are in no ID index).
func (e *queueCore) coldRuns(queues, types []string, pivot protocol.IDKey, desc bool) []idCursor {
	if e.jobs.cold.len() == 0 {
		return nil
	}
	keepFor := func() func(protocol.IDKey) bool { // one per run, whose keys come in order
		f := &coldFinger{t: &e.jobs.cold, desc: desc}
		return func(k protocol.IDKey) bool {
			c, ok := f.find(k)
			return ok && (len(types) == 0 || inSortedList(types, f.t.kindOf(c).Value().typ))
		}
	}
	var runs []idCursor
	if len(queues) == 0 {
		for _, s := range e.ready.byQueue {
			runs = append(runs, coldRuns(s, pivot, desc, keepFor)...)
		}
		return runs
	}
	for _, q := range queues {
		if s := e.ready.byQueue[q]; s != nil {
			runs = append(runs, coldRuns(s, pivot, desc, keepFor)...)
		}
	}
	return runs
}

func inSortedList(list []string, s string) bool {
	i := sort.SearchStrings(list, s)
	return i < len(list) && list[i] == s
}
