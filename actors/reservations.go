// Reservations: a budgeted job gathering holds from its budgets in key order,
// and the answers, wakes and due timers that move jobs between states.

package actors

import (
	"slices"
	"strings"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

func (e *queueCore) startReservation(en *entry, s *stream) {
	// reserve in key order; binding lists are replaced, never changed in
	// place, so an already sorted one (the usual case) is used as it is
	r := e.reservations.new()
	r.bindings = en.budgets()
	if !slices.IsSortedFunc(r.bindings, compareBindingKeys) {
		if len(r.bindings) <= len(r.sorted) {
			// a few bindings out of order: sort a copy kept in the
			// reservation itself
			sorted := append(r.sorted[:0], r.bindings...)
			slices.SortFunc(sorted, compareBindingKeys)
			r.bindings = sorted
		} else {
			r.bindings = slices.SortedFunc(slices.Values(r.bindings), compareBindingKeys)
		}
	}
	e.setState(en, stReserving)
	en.stream = s
	en.resv = r
	s.reserving++
	e.reservingTotal++
	e.askNext(en)
}

func compareBindingKeys(a, b protocol.Binding) int { return strings.Compare(a.Key, b.Key) }

// askNext asks the next budget in key order; the last one is asked for a
// final reservation, debited at once when granted (ReserveRequest.Commit).
func (e *queueCore) askNext(en *entry) {
	b := en.resv.bindings[en.resv.idx]
	last := en.resv.idx == len(en.resv.bindings)-1
	r := e.msgs.reserves.new()
	*r = ReserveRequest{Job: JobRef{ID: en.id(), Priority: en.priority(), Queue: en.queue(), Cost: b.Cost, Sole: len(en.resv.bindings) == 1},
		Commit: last, entry: e.slots.ref(en)}
	e.out.toBudget(b.Key, r)
}

// persistThenReply commits batch and answers with resp once it is durable
// (or with the refusal, as storageError words it).
func (e *queueCore) persistThenReply(batch *persistence.Batch, reply func(any), resp any) {
	e.out.persist(batch, func(err error) {
		if err != nil {
			reply(storageError(err))
			return
		}
		reply(resp)
	})
}

// nudge tells budgets that a job they may have woken will not reserve on
// them now, so they look at their parked jobs again.
func (e *queueCore) nudge(bindings []protocol.Binding) {
	for _, b := range bindings {
		e.out.toBudget(b.Key, &Reevaluate{})
	}
}

// endReservation gives the stream slot back.
func (e *queueCore) endReservation(en *entry) {
	if en.stream != nil {
		en.stream.reserving--
	}
	e.reservingTotal--
}

// releaseHolds releases the holds a reservation was granted so far.
func (e *queueCore) releaseHolds(en *entry) {
	for _, b := range en.resv.bindings[:en.resv.idx] {
		e.out.toBudget(b.Key, &ReleaseReservation{JobID: en.id()})
	}
}

func (e *queueCore) onReserveResponse(now uint64, m *ReserveResponse) {
	if m.epoch != e.epoch {
		return // from a budget of a former life of the queue actor
	}
	defer e.runDeferred(now, m.JobID)
	en := e.slots.get(m.entry) // nil once the job left
	if en == nil || en.state != stReserving || en.resv.bindings[en.resv.idx].Key != m.Key {
		// The job left (deleted, reset) while asking: give a hold (or a
		// final reservation's debit) back, or take it off the parked list a
		// refusal put it on.
		switch {
		case m.Committed:
			e.out.toBudget(m.Key, &RefundTokens{JobID: m.JobID, Cost: m.Cost, Incarnation: m.Incarnation})
		case m.Granted:
			e.out.toBudget(m.Key, &ReleaseReservation{JobID: m.JobID})
		default:
			e.out.toBudget(m.Key, &UnparkJob{JobID: m.JobID, Priority: m.Priority})
		}
		return
	}
	if !m.Granted {
		e.releaseHolds(en)
		e.nudge(en.resv.bindings[en.resv.idx+1:])
		e.endReservation(en)
		e.setState(en, stParked)
		en.parkOn(m.Key)
		en.parkedPrio = m.Priority // a patch may change the job's meanwhile
		en.stream = nil
		en.resv = nil
		e.compact(en) // it may wait long (queued_compact.go)
		e.pump(now)
		return
	}
	e.notePool(m.Key, m.Pool) // durable pools (budget_pools.go)
	en.resv.idx++
	if en.resv.idx < len(en.resv.bindings) {
		e.askNext(en)
		return
	}
	// all granted: the last budget debited already (a final reservation),
	// the others hold
	s := en.stream
	e.endReservation(en)
	held := en.resv.bindings[:len(en.resv.bindings)-1]
	if !m.Committed {
		held = en.resv.bindings // answered as a plain hold
	}
	if s.closed {
		en.resv.idx = len(held)
		e.releaseHolds(en)
		if m.Committed {
			e.out.toBudget(m.Key, &RefundTokens{JobID: en.id(), Cost: m.Cost, Incarnation: m.Incarnation})
		}
		e.makeReady(en)
		e.pump(now)
		return
	}
	for _, b := range held {
		c := e.msgs.commits.new()
		c.JobID, c.Cost = en.full().ID, b.Cost
		e.out.toBudget(b.Key, c)
	}
	e.dispatch(now, en, s)
	e.pump(now)
}

func (e *queueCore) onJobsWoken(now uint64, m *JobsWoken) {
	if m.epoch != e.epoch {
		return // from a budget of a former life of the queue actor
	}
	stale := false
	for i, id := range m.JobIDs {
		en := e.jobs.get(id)
		debited := i == 0 && m.Debited // prepaid.go
		switch {
		case en != nil && en.state == stParked && en.parkedKey() == m.Key:
			e.makeReady(en)
			if debited {
				e.notePool(m.Key, m.Pool) // durable pools (budget_pools.go)
				e.notePrepaid(en, m)
			}
		case debited:
			e.refundPrepaid(id, prepaidJob{key: m.Key, cost: m.Cost, incarnation: m.Incarnation})
		default:
			stale = true
		}
	}
	if stale {
		// A woken job left meanwhile (deleted): the budget counted its cost
		// when it woke it, so let it look at its parked jobs again.
		e.out.toBudget(m.Key, &Reevaluate{})
	}
	e.pump(now)
}

func (e *queueCore) onJobsDue(now uint64, ids []string) {
	for _, id := range ids {
		en := e.jobs.get(id)
		// A job re-dated by PATCH after the scheduler sent this stays scheduled.
		if en != nil && en.state == stScheduled && en.readyAt() <= now {
			en.setReady()
			e.makeReady(en)
			e.syncSched(en)
		}
	}
	e.pump(now)
}

// leaveInFlight takes a job off its stream and returns its tokens.
func (e *queueCore) leaveInFlight(en *entry) {
	if s := en.stream; s != nil {
		delete(s.inFlight, en.full().ID)
		// A job dispatched while its stream's writer was busy waits in the
		// outbox: it must not be persisted as in flight or delivered now.
		for i := range s.outbox {
			if s.outbox[i] == en {
				s.outbox = slices.Delete(s.outbox, i, i+1)
				break
			}
		}
	}
	en.stream = nil
	e.inFlightTotal--
	e.disarmTimeout(en.full().ID)
	for _, b := range en.full().Budgets {
		r := e.msgs.returns.new()
		*r = ReturnTokens{JobID: en.full().ID, Cost: b.Cost}
		e.out.toBudget(b.Key, r)
	}
}

// detach removes an unfinished job from wherever it waits (not in flight).
func (e *queueCore) detach(en *entry) {
	switch en.state {
	case stReady:
		e.ready.remove(readyItem{key: en.key(), priority: en.priority()}, en.queue())
		e.nudge(en.budgets())
	case stReserving:
		e.releaseHolds(en)
		e.nudge(en.resv.bindings[en.resv.idx+1:])
		e.endReservation(en)
	case stParked:
		e.out.toBudget(en.parkedKey(), &UnparkJob{JobID: en.id(), Priority: en.parkedPrio})
	case stScheduled:
		e.out.unschedule(en.id())
	case stInFlight:
		e.leaveInFlight(en)
	}
}
