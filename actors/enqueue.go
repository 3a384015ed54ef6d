// Enqueue: checks, unique keys, budget bindings and the commit of new jobs.

package actors

import (
	"fmt"
	"maps"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

func (e *queueCore) enqueue(now uint64, m *EnqueueJobs, reply func(any)) {
	e.enqueueWith(now, m, nil, reply)
}

// enqueueWith is enqueue with more writes in the same transaction: with is
// called with the batch before it is committed, unless the enqueue is
// refused first (then nothing is written and reply has the error). A cron
// firing adds its entry's new times this way (cron_groups.go).
func (e *queueCore) enqueueWith(now uint64, m *EnqueueJobs, with func(*persistence.Batch), reply func(any)) {
	if st := e.checkFoldPlan(m, now); st != nil {
		reply(st)
		return
	}
	var acts []foldAction // the fold plan's actions, if any (batch_core.go)
	if m.Plan != nil {
		acts = m.Plan.Items
	}
	folds := func(i int) bool { return acts != nil && acts[i].Kind == foldInto }
	created := make(map[string]*protocol.Budget)
	var createdOrder []string
	for i, nj := range m.Jobs {
		check := e.resolveBindings
		if folds(i) {
			check = e.checkFoldBindings
		}
		if err := check(now, nj, created, &createdOrder); err != nil {
			if m.Bulk {
				err = protocol.Prefixed(fmt.Sprintf("jobs[%d]: ", i), err)
			}
			reply(err)
			return
		}
	}
	// Unique keys, in request order: a later job may duplicate an earlier
	// one of the same request. Budgets are created only for the jobs that
	// are really written.
	views := make([]*protocol.JobView, len(m.Jobs))
	holderIndex := make(map[int]int) // duplicate index -> holder index in this request
	pendingHolder := make(map[string]int)
	dups := 0
	for i, nj := range m.Jobs {
		key := nj.Job.UniqueKey
		if key == "" {
			continue
		}
		if k, ok := pendingHolder[key]; ok && duplicateOf(nj.Job.UniqueWhile, protocol.StatusReady) {
			holderIndex[i] = k
			views[i] = &protocol.JobView{}
			dups++
			continue
		}
		if id, st := e.holderStatus(key); id != "" && duplicateOf(nj.Job.UniqueWhile, st) {
			views[i] = e.holderView(now, id)
			dups++
			continue
		}
		pendingHolder[key] = i
	}
	if dups > 0 {
		created = make(map[string]*protocol.Budget)
		createdOrder = createdOrder[:0]
		for i, nj := range m.Jobs {
			if views[i] != nil || folds(i) {
				continue
			}
			if err := e.resolveBindings(now, nj, created, &createdOrder); err != nil {
				if m.Bulk {
					err = protocol.Prefixed(fmt.Sprintf("jobs[%d]: ", i), err)
				}
				reply(err)
				return
			}
		}
	}
	batch := persistence.NewBatch(e.cfg.EnqueueSync)
	e.createBudgets(created, createdOrder, batch)
	var undoFolds *foldUndo // what the request changes of pending jobs (fold_undo.go)
	if acts != nil {
		undoFolds = &foldUndo{}
	}
	ids := make([]string, len(m.Jobs))
	viewArray := make([]protocol.JobView, len(m.Jobs)) // one allocation for the new jobs' views
	stored := make([]*entry, 0, len(m.Jobs))
	for i, nj := range m.Jobs {
		if views[i] != nil || folds(i) {
			continue
		}
		job := nj.Job
		e.internNames(&job)
		job.ID = e.ids.Next(now)
		if !nj.ReadyAtSet {
			job.ReadyAt = now
		}
		job.Attempts = 0
		en := &entry{jb: &job}
		if job.ReadyAt > now {
			job.Status = protocol.StatusScheduled
		} else {
			job.Status = protocol.StatusReady
		}
		e.addEntry(job.ID, en)
		e.addStored(&job)
		e.observeEnqueued(&job)
		e.bind(&job)
		e.claimUnique(&job)
		if acts != nil && acts[i].Kind == foldStart {
			e.startBatch(&job, batch, undoFolds)
		}
		ids[i] = job.ID
		stored = append(stored, en)
		job.FillEnqueueView(&viewArray[i], now, false, false)
		views[i] = &viewArray[i]
		if job.Status == protocol.StatusScheduled {
			e.setState(en, stScheduled)
			e.out.schedule(job.ID, job.ReadyAt)
		} else {
			e.makeReady(en)
		}
		e.syncSched(en)
	}
	for i, k := range holderIndex {
		views[i] = e.jobs.get(ids[k]).full().EnqueueView(now, true, false)
	}
	if acts != nil {
		e.applyFolds(now, m.Plan, ids, views, batch, undoFolds)
	}
	e.storeNewJobs(stored, batch)
	if with != nil {
		with(batch)
	}
	e.persistOrUndo(batch, reply, &EnqueueJobsResponse{Jobs: views}, func(now uint64) {
		e.undoFolds(undoFolds, stored)
		e.undoEnqueue(now, stored, createdOrder)
	})
	e.pump(now)
	// the jobs still waiting keep their compact form (queued_compact.go)
	for _, en := range stored {
		e.compact(en)
	}
}

// checkFoldBindings checks the bindings of a job that folds: like
// resolveBindings, but nothing it would create is kept (SPEC §8.2.7).
func (e *queueCore) checkFoldBindings(now uint64, nj *protocol.NewJob, created map[string]*protocol.Budget, _ *[]string) error {
	if len(nj.Bindings) == 0 {
		return nil
	}
	var order []string
	return e.resolveBindings(now, nj, maps.Clone(created), &order)
}

// resolveBindings checks that every budget a job binds to exists (or is
// created by its create_with, counted against the limit) and that the cost
// fits the authoritative definition.
func (e *queueCore) resolveBindings(now uint64, nj *protocol.NewJob, created map[string]*protocol.Budget, order *[]string) error {
	for _, b := range nj.Bindings {
		var def protocol.Definition
		if be := e.budgets[b.Key]; be != nil {
			def = be.budget.Definition()
		} else if c := created[b.Key]; c != nil {
			def = c.Definition()
		} else if b.CreateWith != nil {
			if err := e.checkBudgetLimit(b.Key, len(created)); err != nil {
				return err
			}
			def = *b.CreateWith
			created[b.Key] = &protocol.Budget{Key: b.Key, Allocation: def.Allocation, Strategy: def.Strategy, CreatedAt: now, UpdatedAt: now}
			*order = append(*order, b.Key)
		} else {
			return protocol.Unprocessable("budget '%s' does not exist. Create it first or pass create_with.", b.Key)
		}
		if err := def.CheckCost(b.Key, b.Cost); err != nil {
			return err
		}
	}
	return nil
}

// createBudgets adds the budgets a request's create_with resolved to the
// catalog, spawns their actors (pools full) and writes them in batch.
func (e *queueCore) createBudgets(created map[string]*protocol.Budget, order []string, batch *persistence.Batch) {
	for _, key := range order {
		b := *created[key]
		be := &budgetEntry{budget: b, bound: make(map[uint32]int)}
		e.budgets[key] = be
		e.out.spawnBudget(b)
		batch.PutBudget(&b)
		e.madeOnTheFly(be, batch)
	}
}

func (e *queueCore) checkBudgetLimit(key string, pending int) error {
	if e.cfg.MaxBudgets > 0 && len(e.budgets)+pending >= e.cfg.MaxBudgets {
		return protocol.Unprocessable("budget '%s' cannot be created: the limit of %d budgets has been reached", key, e.cfg.MaxBudgets)
	}
	return nil
}

// bind counts an unfinished job against its budgets.
func (e *queueCore) bind(j *protocol.Job) {
	for _, b := range j.Budgets {
		if be := e.budgets[b.Key]; be != nil {
			if b.Cost == 1 {
				be.boundOne++
			} else {
				be.bound[b.Cost]++
			}
			be.boundTotal++
		}
	}
}

// unbind stops counting a job that finished or was deleted.
func (e *queueCore) unbind(j *protocol.Job) {
	for _, b := range j.Budgets {
		if be := e.budgets[b.Key]; be != nil {
			if b.Cost == 1 {
				be.boundOne--
			} else if be.bound[b.Cost]--; be.bound[b.Cost] <= 0 {
				delete(be.bound, b.Cost)
			}
			if be.boundTotal--; be.boundTotal == 0 {
				e.unbound(be)
			}
		}
	}
}
