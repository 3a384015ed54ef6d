// Dispatch: feeding ready jobs to streams with room and committing what was
// handed out.

package actors

import (
	"unique"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

func (e *queueCore) makeReady(en *entry) {
	e.setState(en, stReady)
	en.parkedOn = noBudget
	en.stream = nil
	en.resv = nil
	e.ready.add(readyItemOf(en), en.queue())
	e.traceEntry(EventReady, en, 0)
}

func (e *queueCore) globalFull() bool {
	return e.cfg.GlobalInFlightLimit > 0 && e.inFlightTotal+e.reservingTotal >= e.cfg.GlobalInFlightLimit
}

// room is how many more jobs the stream may be given now.
func (s *stream) room() int {
	if s.closed || s.writerBusy {
		return 0
	}
	if s.prefetch == 0 {
		if len(s.outbox) == 0 && s.reserving == 0 {
			return 1
		}
		return 0
	}
	return s.prefetch - len(s.inFlight) - s.reserving
}

// pump hands ready jobs to streams with room, one job per stream per round
// so streams share fairly, until no stream can take or no job qualifies.
func (e *queueCore) pump(now uint64) {
	if e.inBatch {
		e.pumpWanted = true
		return
	}
	// while loading with nothing known to come first, no job is chosen;
	// what reservations finished meanwhile still goes out below
	choose := !e.loading || e.frontier.complete
	if choose && len(e.order) > 0 && e.ready.len() > 0 {
		n := len(e.order)
		start := e.rr % n
		e.rr++
		for progress := true; progress && !e.globalFull(); {
			progress = false
			for k := 0; k < n && !e.globalFull(); k++ {
				s := e.order[(start+k)%n]
				if s.room() <= 0 {
					continue
				}
				var it readyItem
				var ok bool
				if e.loading {
					it, ok = e.ready.bestWhere(s.queues, e.servableWhileLoading)
				} else {
					it, ok = e.ready.best(s.queues)
				}
				if !ok {
					continue
				}
				en := e.jobs.at(it.key)
				e.ready.remove(it, en.queue())
				if len(en.budgets()) == 0 {
					e.dispatch(now, en, s)
				} else if !e.dispatchPrepaid(now, en, s) {
					e.startReservation(en, s)
				}
				progress = true
			}
		}
	}
	if len(e.prepaid) > 0 {
		e.refundUnusedPrepaid()
	}
	e.flush()
}

// beginBatch defers pumping until endBatch (see inBatch).
func (e *queueCore) beginBatch() { e.inBatch = true }

// endBatch pumps once if anything handled since beginBatch asked to.
func (e *queueCore) endBatch(now uint64) {
	e.inBatch = false
	if e.pumpWanted {
		e.pumpWanted = false
		e.pump(now)
	}
}

// dispatch marks a job in flight on s; flush persists and delivers it.
func (e *queueCore) dispatch(now uint64, en *entry, s *stream) {
	j := en.full() // whole from now on (queued_compact.go)
	if j.Batch != nil {
		e.sealOnDispatch(en)
	}
	e.setState(en, stInFlight)
	en.stream = s
	en.resv = nil
	en.parkedOn = noBudget
	j.Status = protocol.StatusInFlight
	j.DequeuedAt = now
	e.releaseUniqueOnDispatch(j)
	s.inFlight[j.ID] = en
	e.inFlightTotal++
	e.armTimeout(now, en)
	if len(s.outbox) == 0 {
		e.flushPending = append(e.flushPending, s)
		if s.outbox == nil && s.prefetch > 0 {
			// The batch usually fills the stream's free room (this job
			// and those still reserving included): size it once instead
			// of growing it job by job, but no bigger, since a window that
			// is mostly in flight frees only a few slots at a time.
			s.outbox = make([]*entry, 0, min(s.room()+s.reserving+1, 256))
		}
	}
	s.outbox = append(s.outbox, en)
	e.observeDispatched(now, en, s)
}

// internNames makes a job's queue, type and budget keys share one copy of
// each distinct name: they repeat across millions of jobs.
func (e *queueCore) internNames(j *protocol.Job) {
	j.Queue = e.names.intern(j.Queue)
	j.Type = e.names.intern(j.Type)
	for i := range j.Budgets {
		j.Budgets[i].Key = e.names.intern(j.Budgets[i].Key)
	}
}

// nameInterner remembers the last few interned names: the jobs of a bulk
// mostly share their queue, type and budget keys, and comparing with a
// recent name is cheaper than interning it again.
type nameInterner struct {
	names recentHandles[string]
	kinds recentHandles[jobKind] // (type, queue) pairs of compact jobs
}

func (c *nameInterner) intern(s string) string { return c.handle(s).Value() }

// handle is s's handle: 8 bytes that stand for s.
func (c *nameInterner) handle(s string) unique.Handle[string] { return c.names.make(s) }

// kind is the handle of the pair (typ, queue) (compact jobs keep their type
// and queue so, queued_compact.go).
func (c *nameInterner) kind(typ, queue string) unique.Handle[jobKind] {
	return c.kinds.make(jobKind{typ, queue})
}

// recentHandles are the last few handles made, looked through before
// making one.
type recentHandles[T comparable] struct {
	recent [8]unique.Handle[T]
	next   int
}

// make returns v's handle.
func (r *recentHandles[T]) make(v T) unique.Handle[T] {
	for _, h := range r.recent {
		if h != (unique.Handle[T]{}) && h.Value() == v {
			return h
		}
	}
	h := unique.Make(v)
	r.recent[r.next] = h
	r.next = (r.next + 1) % len(r.recent)
	return h
}

// loadPayload applies the payload cache's rule to a job loaded at
// startup whose payload came with it: beyond the cache, memory lets go of
// it (and the store keeps it where later writes do not need it).
func (e *queueCore) loadPayload(en *entry, batch *persistence.Batch) {
	j := en.full()
	if j.Payload == nil || e.keepPayload(j.Payload) {
		return
	}
	batch.PayloadReleased(j, &en.ref)
	j.Payload = nil
}

// dropPayload forgets the payload memory holds of a job that finished or
// was deleted, once its last record write was added to a batch.
func (e *queueCore) dropPayload(j *protocol.Job) {
	e.payloadBytes -= payloadCost(j.Payload)
	j.Payload = nil
}

// flush persists the in-flight state of every job dispatched since the last
// flush in one batch, then delivers each stream its jobs.
func (e *queueCore) flush() {
	if len(e.flushPending) == 0 {
		return
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	deliveries := make([]delivery, 0, len(e.flushPending))
	var pools []*poolMark // durable pools put in batch (budget_pools.go)
	for _, s := range e.flushPending {
		if len(s.outbox) == 0 || s.writerBusy {
			continue
		}
		// the writer gets copies as the jobs are now (a patch since the
		// dispatch included)
		jobs := make([]protocol.Job, len(s.outbox))
		for i, en := range s.outbox {
			e.putDispatched(en, batch)
			if e.cfg.DurablePools {
				pools = e.putPools(en, batch, pools)
			}
			jobs[i] = *en.full()
		}
		s.writerBusy = true
		deliveries = append(deliveries, delivery{s, jobs})
		clear(s.outbox) // no stale entry kept alive by the reused array
		s.outbox = s.outbox[:0]
	}
	e.flushPending = e.flushPending[:0]
	donePools(pools)
	out := e.out
	e.out.persist(batch, func(err error) {
		// back in the actor, after any earlier refusal was undone
		out.toSelf(&commitDone{err: err, then: func(now uint64, err error) {
			e.dispatchCommitted(now, deliveries, err)
		}})
	})
}

// delivery is a batch of jobs dispatched to a stream, waiting for its
// commit.
type delivery struct {
	s    *stream
	jobs []protocol.Job
}

// dispatchCommitted hands each stream the jobs its flush committed that are
// still in flight on it (a job whose enqueue the store refused has left
// since). When the store refused the flush, nothing is delivered: the jobs
// return to ready, as the store still has them, and each stream is ended
// (its worker reconnects), so that a store that stays down is not asked
// again and again for the same streams.
func (e *queueCore) dispatchCommitted(now uint64, deliveries []delivery, err error) {
	if err != nil {
		e.log.Error("persisting dispatched jobs failed; their streams end and the jobs return to ready", "err", err)
		for _, d := range deliveries {
			for i := range d.jobs {
				if en := d.s.inFlight[d.jobs[i].ID]; en != nil {
					e.leaveInFlight(en)
					en.full().Status = protocol.StatusReady
					e.reclaimUnique(en.full())
					e.makeReady(en)
				}
			}
			if !d.s.closed {
				e.closeStream(now, d.s.id, func(any) {})
				d.s.deliver(nil)
			}
		}
		e.pump(now)
		return
	}
	for _, d := range deliveries {
		jobs := d.jobs[:0]
		for _, j := range d.jobs {
			if d.s.inFlight[j.ID] != nil {
				jobs = append(jobs, j)
			}
		}
		switch {
		case d.s.closed:
		case len(jobs) > 0:
			d.s.deliver(jobs)
		default:
			// nothing left to write: the stream can take more at once
			e.streamWritten(now, d.s.id)
		}
	}
}
