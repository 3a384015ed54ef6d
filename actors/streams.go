// Streams: take streams opening, writing and closing.

package actors

import (
	"sort"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

func (e *queueCore) openStream(now uint64, m *OpenStream, reply func(any)) {
	e.nextStream++
	s := &stream{id: e.nextStream, prefetch: m.Prefetch, workerID: m.WorkerID, inFlight: make(map[string]*entry), deliver: m.Deliver}
	if len(m.Queues) > 0 {
		s.queues = make(map[string]bool, len(m.Queues))
		for _, q := range m.Queues {
			s.queues[q] = true
		}
	}
	e.streams[s.id] = s
	e.order = append(e.order, s)
	e.publishConsumed()
	reply(&OpenStreamResponse{StreamID: s.id})
	e.pump(now)
}

func (e *queueCore) streamWritten(now uint64, id uint64) {
	if s := e.streams[id]; s != nil {
		s.writerBusy = false
		if len(s.outbox) > 0 {
			e.flushPending = append(e.flushPending, s)
		}
		e.pump(now)
	}
}

func (e *queueCore) closeStream(now uint64, id uint64, reply func(any)) {
	s := e.streams[id]
	if s == nil {
		reply(&CloseStreamResponse{})
		return
	}
	s.closed = true
	delete(e.streams, id)
	for i, o := range e.order {
		if o == s {
			e.order = append(e.order[:i], e.order[i+1:]...)
			break
		}
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	ids := make([]string, 0, len(s.inFlight))
	for id := range s.inFlight {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		en := s.inFlight[id]
		e.leaveInFlight(en)
		en.full().Status = protocol.StatusReady
		e.putRecord(en, batch)
		writeUnlink(en, batch)
		e.reclaimUnique(en.full())
		e.makeReady(en)
		e.tracer.job(EventRequeued, en.full(), s.id)
	}
	s.outbox = nil
	e.publishConsumed()
	requeued := len(ids)
	e.out.persist(batch, func(error) { reply(&CloseStreamResponse{Requeued: requeued}) })
	e.pump(now)
}

// publishConsumed recomputes the set of consumed queues and tells budgets
// when it changed.
func (e *queueCore) publishConsumed() {
	all := false
	queues := make(map[string]bool)
	for _, s := range e.order {
		if s.queues == nil {
			all = true
		}
		for q := range s.queues {
			queues[q] = true
		}
	}
	if e.consumed.set(all, queues) {
		e.out.queuesChanged()
	}
}
