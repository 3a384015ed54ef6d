// Refused commits: what the queue core does when the store refuses a batch
// (disk full, no descriptors, a lost device), so that nothing the store
// refused is listed, counted or delivered (issue 12, defect 11).
//
// The core changes memory when it builds a batch and commits it afterwards
// (the actor never waits for the disk). When a commit is refused, its
// outcome comes back to the queue actor as a commitDone message, in commit
// order, and the change is undone there before the client is answered with
// 503 storage unavailable (SPEC §1.5). Dispatched jobs are handed to their
// stream only from the actor too, after their commit and after any earlier
// refusal was undone, so a job whose enqueue was refused is never delivered.

package actors

import (
	"errors"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// commitDone carries a commit's outcome back into the queue actor; then
// runs there, with the actor's state. Only the queue actor sends it to
// itself.
type commitDone struct {
	err  error
	then func(now uint64, err error)
}

func (*commitDone) isQueueMsg() {}

// storageError is what a client is answered when its write was refused:
// a domain error as it is (shutting down), any other store error as 503
// storage unavailable.
func storageError(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return protocol.StorageUnavailable(err)
}

// persistOrUndo commits batch and answers resp once it is durable. When
// the store refuses it, undo runs in the actor first, then the client is
// answered with the refusal.
func (e *queueCore) persistOrUndo(batch *persistence.Batch, reply func(any), resp any, undo func(now uint64)) {
	out := e.out
	e.out.persist(batch, func(err error) {
		if err == nil {
			reply(resp)
			return
		}
		if errors.Is(err, protocol.ErrShuttingDown) {
			// the store is closing: memory goes with the actor, which
			// may not read its mailbox again
			reply(err)
			return
		}
		out.toSelf(&commitDone{err: err, then: func(now uint64, err error) {
			undo(now)
			reply(storageError(err))
		}})
	})
}

// undoEnqueue forgets the jobs and budgets of an enqueue whose commit was
// refused: wherever they went since (ready, parked, scheduled, even
// dispatched but not yet delivered), they leave, their unique keys are
// released and their budgets unbound. A budget the request created goes
// too, unless a later request bound a job to it.
//
// A job stored alone that was dispatched meanwhile may have had its record
// written by its dispatch's commit, which can be accepted after the
// enqueue's was refused: that record is deleted, so the job does not come
// back at the next start. (A group member's dispatch writes only a mark,
// which loading drops when its group was never stored.)
func (e *queueCore) undoEnqueue(now uint64, stored []*entry, created []string) {
	var stray *persistence.Batch
	for _, old := range stored {
		// by ID: the job may have gone cold since, and thawed into a new
		// entry (coldjobs.go)
		en := e.jobs.get(old.id())
		if en == nil {
			continue
		}
		if en.state == stInFlight {
			if stray == nil {
				stray = persistence.NewBatch(e.cfg.DefaultSync)
			}
			stray.EnqueueRefused(en.full(), en.ref)
		}
		e.forgetJob(now, en)
	}
	if stray != nil {
		e.out.persist(stray, nil)
	}
	for _, key := range created {
		if be := e.budgets[key]; be != nil && be.boundTotal == 0 {
			delete(e.budgets, key)
			e.out.stopBudget(key)
		}
	}
	e.pump(now)
}

// forgetJob removes an unfinished job from memory without writing anything:
// it leaves wherever it waits (in-flight tokens go back), stops counting
// against its budgets and releases its unique key. Requests that waited for
// its reservation run after it.
func (e *queueCore) forgetJob(now uint64, en *entry) {
	id := en.full().ID
	defer e.runDeferred(now, id)
	e.detach(en)
	e.removeEntry(id, en)
	e.setState(en, stGone)
	e.slots.release(en)
	e.unsched(en)
	e.unbind(en.full())
	e.releaseUnique(en.full())
	e.decStored(en.full())
	e.dropPayload(en.full())
}

// undoLog keeps what a finishing request (ack, failure, delete, patch)
// changes, as it was before, so that a refusal can put it back.
type undoLog struct {
	jobs      []priorJob
	terminals []terminalJob
	links     []priorLink // pending links the request removed (batch_core.go)
}

// priorJob is an unfinished job as memory had it before the request: a
// copy of its record (payload included) and where it is stored.
type priorJob struct {
	job protocol.Job
	ref persistence.Ref
}

// noteJob remembers an unfinished job before the request changes it.
func (u *undoLog) noteJob(en *entry) {
	u.jobs = append(u.jobs, priorJob{job: *en.full(), ref: en.ref})
}

// noteTerminal remembers a retained finished job before it is deleted.
func (u *undoLog) noteTerminal(t terminalJob) { u.terminals = append(u.terminals, t) }

// persistOrRestore commits batch and answers resp once it is durable; when
// the store refuses it, the jobs noted in u are put back first (restore).
func (e *queueCore) persistOrRestore(batch *persistence.Batch, reply func(any), resp any, u *undoLog) {
	e.persistOrUndo(batch, reply, resp, func(now uint64) { e.restore(now, u, batch) })
}

// persistOrRestoreRebind is persistOrRestore for a rebinding: when refused,
// the budgets its create_with made go too (after the jobs, which unbinds
// them).
func (e *queueCore) persistOrRestoreRebind(batch *persistence.Batch, reply func(any), resp any, u *undoLog, created []string) {
	e.persistOrUndo(batch, reply, resp, func(now uint64) {
		e.restore(now, u, batch)
		for _, key := range created {
			e.dropRefusedBudget(key)
		}
	})
}

// restore puts back the jobs a refused batch changed, as the store still
// has them. An unfinished job comes back where its stored record puts it:
// scheduled while its ready_at is ahead, else ready, so a job that was in
// flight (a refused ack or failure, a patch or delete of a running job) is
// delivered again, as it would be after a restart (at-least-once); its
// worker was answered 503. A retained finished job comes back as it was.
// The groups' bookkeeping the batch changed is reverted too.
func (e *queueCore) restore(now uint64, u *undoLog, batch *persistence.Batch) {
	batch.Revert()
	for _, p := range u.jobs {
		id := p.job.ID
		if en := e.jobs.get(id); en != nil {
			e.forgetJob(now, en) // what the request made of it (failed, patched)
		}
		if t, ok := e.terminal[id]; ok {
			e.dropTerminal(t) // acked or killed with retention
		}
		j := new(protocol.Job)
		*j = p.job
		en := &entry{jb: j, ref: p.ref}
		e.payloadBytes += payloadCost(j.Payload)
		e.addEntry(id, en)
		e.addStored(j)
		e.bind(j)
		e.claimUniqueIfFree(j)
		if j.Status == protocol.StatusScheduled && j.ReadyAt > now {
			e.setState(en, stScheduled)
			e.out.schedule(id, j.ReadyAt)
		} else {
			j.Status = protocol.StatusReady
			e.makeReady(en)
		}
		e.syncSched(en)
	}
	e.restoreLinks(u.links)
	for _, t := range u.terminals {
		if _, ok := e.terminal[t.id]; ok || e.jobs.get(t.id) != nil {
			continue
		}
		e.addStored(t.meta)
		e.terminal[t.id] = t
		e.countTerminal(t, 1)
		if t.purgeAt != 0 {
			e.purgeOrder.ReplaceOrInsert(t)
		}
		if t.job != nil {
			e.claimUniqueIfFree(t.job)
		}
	}
	e.pump(now)
}

// claimUniqueIfFree makes j the holder of its unique key unless another job
// took the key meanwhile.
func (e *queueCore) claimUniqueIfFree(j *protocol.Job) {
	if j.UniqueKey == "" {
		return
	}
	if _, held := e.unique[j.UniqueKey]; !held {
		e.claimUnique(j)
	}
}

// dropRefusedBudget forgets a budget whose creation was refused, unless a
// job was bound to it meanwhile (that job's commit stored a reference the
// catalog must keep serving).
func (e *queueCore) dropRefusedBudget(key string) {
	if be := e.budgets[key]; be != nil && be.boundTotal == 0 {
		delete(e.budgets, key)
		e.out.stopBudget(key)
	}
}

// restoreBudgetDefinition puts back the definition a refused replace or
// patch changed; the budget actor applies it as it would any update.
func (e *queueCore) restoreBudgetDefinition(old protocol.Budget) {
	be := e.budgets[old.Key]
	if be == nil {
		return
	}
	be.budget = old
	e.out.toBudget(old.Key, &ApplyDefinition{Definition: old.Definition()})
}

// restoreDeletedBudget puts back a budget whose delete was refused. Its
// actor was stopped, so it starts again as at a restart: a full pool (no
// job was bound to it, or the delete would have been refused earlier).
func (e *queueCore) restoreDeletedBudget(old protocol.Budget) {
	if e.budgets[old.Key] != nil {
		return // created again meanwhile
	}
	e.budgets[old.Key] = &budgetEntry{budget: old, bound: make(map[uint32]int)}
	e.out.spawnBudget(old)
}
