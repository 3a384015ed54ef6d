// Cron firings of batched templates (SPEC §8.1.7): such a firing folds into
// its key's pending job like any POST /jobs, so it is planned by the fold
// coordinator (fold.go) on a goroutine, never inside the queue actor. The
// planned enqueue comes back to the queue actor carrying its slot, and the
// entry's new times are written in the enqueue's transaction.

package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// cronFoldTimeout bounds the planning and the enqueue of one batched firing.
const cronFoldTimeout = time.Minute

// cronFoldFailed tells the queue actor that a batched firing could not be
// enqueued (its fold failed, or the enqueue was refused): the tick is
// skipped, unless the entry changed meanwhile.
type cronFoldFailed struct {
	Slot CronSlot
	Err  error
}

func (*cronFoldFailed) isQueueMsg() {}

// errCronEntryChanged answers a planned firing whose entry was deleted or
// rescheduled while it was planned: the write landed before the tick, which
// does nothing.
var errCronEntryChanged = errors.New("actors: cron entry changed while its firing was planned")

// foldCron is the queue actor's outbox side: it plans the firing on a
// goroutine (the fold coordinator serialises it with every other enqueue
// of its batch key) and sends the planned enqueue back to the actor.
func (a *queueActor) foldCron(s CronSlot, job *protocol.NewJob) {
	root, self, store, folds := a.root, a.self, a.store, a.folds
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cronFoldTimeout)
		defer cancel()
		send := func(ctx context.Context, m *EnqueueJobs) (any, error) {
			m.Cron = &s
			timeout := cronFoldTimeout
			if dl, ok := ctx.Deadline(); ok {
				timeout = max(time.Until(dl), time.Millisecond)
			}
			res, err := root.RequestFuture(self, m, timeout).Result()
			if err != nil {
				return nil, fmt.Errorf("actors: cron firing: %w", err)
			}
			if rerr, ok := res.(error); ok {
				return nil, rerr
			}
			return res, nil
		}
		err := planCronFold(ctx, folds, send, store, job)
		if err != nil && !errors.Is(err, errCronEntryChanged) {
			root.Send(self, &cronFoldFailed{Slot: s, Err: err})
		}
	}()
}

// planCronFold checks, plans and sends one batched firing.
func planCronFold(ctx context.Context, folds *folder, send func(context.Context, *EnqueueJobs) (any, error), store persistence.JobStore, job *protocol.NewJob) error {
	jobs := []*protocol.NewJob{job}
	values, err := folds.checkBatches(ctx, jobs, false)
	if err != nil {
		return err
	}
	// a template has no ready_at: the firing always takes part (any now)
	_, err = folds.plan(ctx, send, store, jobs, values, false, 0)
	return err
}

// firing returns the group and entry of a batched firing still due at its
// slot, or nils when a write changed the entry meanwhile.
func (e *queueCore) firing(s CronSlot) (*cronGroupState, *cronEntryState) {
	e.cron.init()
	g := e.cron.groups[s.Group]
	if g == nil {
		return nil, nil
	}
	es := g.entries[s.Entry]
	if es == nil || es.rec.NextEnqueueAt != s.Slot {
		return nil, nil
	}
	return g, es
}

// fireCronPlanned applies a batched firing's planned enqueue with the
// entry's new times in the same transaction. A stale plan is answered as
// any enqueue's (the goroutine plans again); the entry stays due meanwhile.
func (e *queueCore) fireCronPlanned(now uint64, m *EnqueueJobs, reply func(any)) {
	s := *m.Cron
	g, es := e.firing(s)
	if es == nil {
		reply(errCronEntryChanged)
		return
	}
	stats, tracer, queue := e.cron.stats, e.tracer, es.rec.Job.Queue
	e.enqueueWith(now, m, func(b *persistence.Batch) {
		es.rec.LastEnqueueAt = now
		e.advanceCron(now, g, es)
		b.PutCronTimes(s.Group, s.Entry, es.rec.NextEnqueueAt, now)
	}, func(res any) {
		if r, ok := res.(*EnqueueJobsResponse); ok {
			stats.Fired.Add(1)
			stats.late(now - s.Slot)
			if tracer.on() {
				tracer.cron(EventCronFired, s, r.Jobs[0].ID, queue, duplicateReason(r.Jobs[0]))
			}
		}
		reply(res)
	})
}

// onCronFoldFailed skips the tick of a batched firing that could not be
// enqueued (SPEC §8.1.7): next_enqueue_at advances, last_enqueue_at stays.
// A firing whose entry was written meanwhile (or whose enqueue was written
// and then refused by the store) is only logged.
func (e *queueCore) onCronFoldFailed(now uint64, m *cronFoldFailed) {
	s := m.Slot
	g, es := e.firing(s)
	if es == nil {
		e.log.Error("cron firing not stored", "group", s.Group, "entry", s.Entry, "err", m.Err)
		return
	}
	e.skipCronTick(now, g, es, s, m.Err)
}
