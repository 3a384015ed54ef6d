// Finishing: acks, failures and backoff, deletes, the reaper and reset.

package actors

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

func (e *queueCore) ack(now uint64, ids []string, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	u := &undoLog{}
	var notFound []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		en := e.jobs.get(id)
		if en == nil || en.state != stInFlight {
			notFound = append(notFound, id)
			continue
		}
		u.noteJob(en)
		e.observeAcked(now, en)
		e.leaveInFlight(en)
		retention := uint64(e.cfg.CompletedRetention / time.Millisecond)
		if r := en.full().Retention; r != nil && r.CompletedMs != nil {
			retention = *r.CompletedMs
		}
		en.full().Status = protocol.StatusCompleted
		e.finish(now, en, retention, batch, true)
	}
	e.persistOrRestore(batch, reply, &AckJobsResponse{NotFound: notFound}, u)
	e.pump(now)
}

// finish ends an unfinished job as completed or dead: it is deleted at once
// when retention is 0, else kept until now+retention.
func (e *queueCore) finish(now uint64, en *entry, retention uint64, batch *persistence.Batch, completed bool) {
	j := en.full()
	e.removeEntry(j.ID, en)
	e.setState(en, stGone)
	e.slots.release(en)
	defer e.dropPayload(j)
	e.unsched(en)
	e.unbind(j)
	e.releaseUniqueOnFinish(j)
	if retention == 0 {
		e.releaseUnique(j)
		e.decStored(j)
		deleteRecord(j, en.ref, batch)
		return
	}
	if completed {
		j.CompletedAt = now
	}
	j.PurgeAt = addMs(now, retention)
	e.putRecord(en, batch)
	e.addTerminal(j, en.ref)
}

// addTerminal keeps what memory needs of a retained finished job; ref is
// where the store keeps it.
func (e *queueCore) addTerminal(j *protocol.Job, ref persistence.Ref) {
	t := terminalJob{id: j.ID, queue: j.Queue, purgeAt: j.PurgeAt, attempts: j.Attempts, dead: j.Status == protocol.StatusDead, ref: ref}
	c := *j
	c.Payload = nil
	t.meta = &c
	if j.UniqueKey != "" && j.UniqueWhile == protocol.UniqueExists {
		t.job = &c
	}
	if old, ok := e.terminal[j.ID]; ok {
		e.countTerminal(old, -1)
	}
	e.terminal[j.ID] = t
	e.countTerminal(t, 1)
	if t.purgeAt != 0 {
		e.purgeOrder.ReplaceOrInsert(t)
	}
}

func (e *queueCore) fail(now uint64, m *FailJob, reply func(any)) {
	en := e.jobs.get(m.ID)
	if en == nil || en.state != stInFlight {
		reply(protocol.ErrNotInFlight)
		return
	}
	j := en.full()
	u := &undoLog{}
	u.noteJob(en)
	e.observeFailed(now, j)
	e.leaveInFlight(en)
	j.Attempts++
	j.FailedAt = now
	rec := &protocol.ErrorRecord{Attempt: j.Attempts, Message: *m.Req.Message, DequeuedAt: j.DequeuedAt, FailedAt: now}
	if m.Req.ErrorType != nil {
		rec.ErrorType = *m.Req.ErrorType
	}
	if m.Req.Backtrace != nil {
		rec.Backtrace = *m.Req.Backtrace
	}
	retryLimit := e.cfg.DefaultRetryLimit
	if j.RetryLimit != nil {
		retryLimit = *j.RetryLimit
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	var view *protocol.JobView
	switch {
	case m.Req.Kill != nil && *m.Req.Kill, m.Req.RetryAt == nil && j.Attempts > retryLimit:
		j.Status = protocol.StatusDead
		retention := uint64(e.cfg.DeadRetention / time.Millisecond)
		if r := j.Retention; r != nil && r.DeadMs != nil {
			retention = *r.DeadMs
		}
		if retention > 0 {
			batch.PutError(j.ID, rec)
		}
		e.finish(now, en, retention, batch, false)
		view = j.View(now, false)
	default:
		if m.Req.RetryAt != nil {
			j.ReadyAt = *m.Req.RetryAt
		} else {
			j.ReadyAt = addMs(now, e.backoff(j))
		}
		j.Status = protocol.StatusScheduled
		batch.PutError(j.ID, rec)
		e.putRecord(en, batch)
		view = j.View(now, false)
		view.Status = protocol.StatusScheduled
		e.setState(en, stScheduled)
		e.syncSched(en)
		e.reclaimUnique(j)
		e.out.schedule(j.ID, j.ReadyAt)
	}
	e.persistOrRestore(batch, reply, &JobResponse{Job: view}, u)
	e.pump(now)
}

// backoff is delay_ms = floor(attempts^exponent*1000 + base_ms + U*jitter_ms*attempts).
func (e *queueCore) backoff(j *protocol.Job) uint64 {
	b := e.cfg.DefaultBackoff
	if j.Backoff != nil {
		b = *j.Backoff
	}
	a := float64(j.Attempts)
	d := math.Pow(a, b.Exponent)*1000 + float64(b.BaseMs) + e.cfg.Random()*float64(b.JitterMs)*a
	return ceilMs(math.Floor(d)) // +Inf (a huge exponent) saturates
}

// ---------------------------------------------------------------- deletes

func (e *queueCore) deleteJob(now uint64, id string, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	u := &undoLog{}
	if !e.removeJob(now, id, batch, u) {
		reply(protocol.ErrJobNotFound)
		return
	}
	e.persistOrRestore(batch, reply, &Done{}, u)
	e.pump(now)
}

// removeJob deletes a job in any status into batch: it leaves wherever it
// waits (in-flight tokens go back), stops counting against its budgets and
// releases its unique key. It reports false for an unknown or purged job.
// Requests that waited for the job's reservation run after it. u notes
// what it was, for a refusal.
func (e *queueCore) removeJob(now uint64, id string, batch *persistence.Batch, u *undoLog) bool {
	defer e.runDeferred(now, id)
	if en := e.jobs.get(id); en != nil {
		u.noteJob(en)
		e.seal(en, batch, "deleted", u)
		deleteRecord(en.full(), en.ref, batch)
		e.forgetJob(now, en)
		return true
	}
	if t, ok := e.terminal[id]; ok && (t.purgeAt == 0 || t.purgeAt > now) {
		u.noteTerminal(t)
		e.dropTerminal(t)
		deleteTerminal(t, batch)
		return true
	}
	return false
}

func (e *queueCore) dropTerminal(t terminalJob) {
	if t.job != nil {
		e.releaseUnique(t.job)
	}
	if _, ok := e.terminal[t.id]; ok {
		e.countTerminal(t, -1)
	}
	delete(e.terminal, t.id)
	e.purgeOrder.Delete(t)
	e.decStored(t.meta)
}

// reap deletes retained finished jobs past purge_at, up to 1000 per call.
func (e *queueCore) reap(now uint64) {
	batch := persistence.NewBatch(false)
	n := 0
	for n < 1000 {
		t, ok := e.purgeOrder.Min()
		if !ok || t.purgeAt > now {
			break
		}
		e.dropTerminal(t)
		deleteTerminal(t, batch)
		n++
	}
	e.out.persist(batch, nil)
}

func (e *queueCore) reset(now uint64, reply func(any)) {
	defer func() {
		for id := range e.deferred {
			e.runDeferred(now, id)
		}
	}()
	// cron groups first, so that no firing enqueues after (SPEC §6.8);
	// their deletes commit before the rest
	_, cronBatches := e.deleteCronGroups()
	var cronErr error
	e.persistAll(cronBatches, func(err error) { cronErr = err })
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	var scratch protocol.Job // compact jobs are read into it, not rebuilt
	for en := range e.jobs.all() {
		deleteRecord(en.peek(&scratch), en.ref, batch)
		en.flags &^= entryCounted // the counts go below
		en.state = stGone
		e.slots.release(en)
	}
	for _, t := range e.terminal {
		deleteTerminal(t, batch)
	}
	for key := range e.pending {
		batch.DeleteBatchLink(key)
	}
	clear(e.pending)
	for key := range e.budgets {
		batch.DeleteBudget(key)
		e.out.stopBudget(key)
	}
	e.jobs.clear()
	e.payloadBytes = 0
	e.ready = newReadyIndex()
	e.terminal = make(map[string]terminalJob)
	e.purgeOrder.Clear(false)
	e.sched.Clear(false)
	e.completedTotal, e.deadTotal = 0, 0
	e.queueCounts = make(map[string]int)
	e.queueStates = make(map[string]*queueStates)
	e.lastStates = lastQueueStates{}
	e.byQueue = make(map[string]map[string]*orderedSet[protocol.IDKey])
	e.byKey = make(map[string]*orderedSet[protocol.IDKey])
	e.budgets = make(map[string]*budgetEntry)
	e.unique = make(map[string]string)
	for _, s := range e.streams {
		s.inFlight = make(map[string]*entry)
		s.reserving = 0
		s.outbox = nil
	}
	e.inFlightTotal = 0
	e.reservingTotal = 0
	e.clearTimeouts()
	e.out.clearSchedule()
	e.out.persist(batch, func(err error) {
		if err == nil {
			err = cronErr // committed before this batch (one committer, in order)
		}
		if err != nil {
			reply(err)
			return
		}
		reply(&Done{})
	})
}
