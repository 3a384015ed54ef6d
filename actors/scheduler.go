package actors

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/btree"
)

// promotionBatch is how many due jobs one JobsDue message carries.
const promotionBatch = 200

type scheduledItem struct {
	readyAt uint64
	id      string
}

func scheduledLess(a, b scheduledItem) bool {
	if a.readyAt != b.readyAt {
		return a.readyAt < b.readyAt
	}
	return a.id < b.id
}

// schedulerActor owns the scheduled set.
//
// Owns: scheduled jobs ordered by (ready_at, id) and one timer armed for
// the earliest ready_at (none when the set is empty): no polling.
// Accepts: ScheduleJob, UnscheduleJob, ClearSchedule (from the queue actor)
// and its own schedulerTick. Sends: JobsDue to the queue actor, in batches
// of promotionBatch. Writes no keys: promotion changes nothing on disk
// (a scheduled job past its ready_at reads as ready).
type schedulerActor struct {
	set    *btree.BTreeG[scheduledItem]
	byID   map[string]uint64
	queue  *actor.PID
	clock  Clock
	timers Timers
	log    *slog.Logger

	gen     uint64
	armedAt uint64
	cancel  func()
}

func newSchedulerActor(queue *actor.PID, clock Clock, timers Timers, log *slog.Logger) *schedulerActor {
	return &schedulerActor{set: btree.NewG(32, scheduledLess), byID: make(map[string]uint64), queue: queue, clock: clock, timers: timers, log: log}
}

func (a *schedulerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped, *actor.Restarting:
	case *actor.Stopping:
		a.disarm()
	case *ScheduleJob:
		if old, ok := a.byID[m.ID]; ok {
			a.set.Delete(scheduledItem{old, m.ID})
		}
		a.byID[m.ID] = m.ReadyAt
		a.set.ReplaceOrInsert(scheduledItem{m.ReadyAt, m.ID})
		a.rearm(ctx)
	case *UnscheduleJob:
		if old, ok := a.byID[m.ID]; ok {
			a.set.Delete(scheduledItem{old, m.ID})
			delete(a.byID, m.ID)
			a.rearm(ctx)
		}
	case *ClearSchedule:
		a.set.Clear(false)
		a.byID = make(map[string]uint64)
		a.rearm(ctx)
	case *schedulerTick:
		if m.gen != a.gen {
			return
		}
		a.armedAt = 0
		a.cancel = nil
		a.promote(ctx)
	default:
		a.log.Warn("scheduler: unknown message", "type", fmt.Sprintf("%T", m))
	}
}

// promote sends every due job to the queue, in batches.
func (a *schedulerActor) promote(ctx actor.Context) {
	now := millis(a.clock.Now())
	for {
		var due []string
		for len(due) < promotionBatch {
			it, ok := a.set.Min()
			if !ok || it.readyAt > now {
				break
			}
			a.set.DeleteMin()
			delete(a.byID, it.id)
			due = append(due, it.id)
		}
		if len(due) == 0 {
			break
		}
		ctx.Send(a.queue, &JobsDue{IDs: due})
	}
	a.rearm(ctx)
}

func (a *schedulerActor) rearm(ctx actor.Context) {
	it, ok := a.set.Min()
	if !ok {
		a.disarm()
		return
	}
	if it.readyAt == a.armedAt && a.cancel != nil {
		return
	}
	a.disarm()
	a.gen++
	a.armedAt = it.readyAt
	a.cancel = a.timers.SendOnce(delayUntil(it.readyAt, a.clock.Now()), ctx.Self(), &schedulerTick{gen: a.gen})
}

func (a *schedulerActor) disarm() {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
	a.gen++
	a.armedAt = 0
}
