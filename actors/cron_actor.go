package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// cronDueBatch is how many due entries one CronDue message carries.
const cronDueBatch = 500

// cronActor owns the cron schedule (cron_schedule.go).
//
// Owns: every scheduled cron entry by (next_enqueue_at, group, entry) and
// one timer, armed for the earliest slot or cronRecheck ahead, whichever
// comes first; no timer while nothing is scheduled. No scanning.
// Accepts: ScheduleCron and ClearCrons (from the queue actor) and its own
// cronTick. Sends: CronDue to the queue actor, which fires the entries
// (cron_groups.go) and schedules each again at its new next_enqueue_at.
// Supervisor: the queue actor. Writes no keys: the queue actor stores the
// entries.
type cronActor struct {
	sched  *cronSchedule
	queue  *actor.PID
	clock  Clock
	timers Timers
	log    *slog.Logger

	gen     uint64
	armedAt uint64
	cancel  func()
}

func newCronActor(queue *actor.PID, clock Clock, timers Timers, log *slog.Logger) *cronActor {
	return &cronActor{sched: newCronSchedule(), queue: queue, clock: clock, timers: timers, log: log}
}

// ScheduleCron sets entries' next slots in the cron schedule (slot 0:
// remove), in order.
type ScheduleCron struct{ Slots []CronSlot }

// ClearCrons empties the cron schedule.
type ClearCrons struct{}

// CronDue is sent by the cron actor: these entries reached their slot.
type CronDue struct{ Slots []CronSlot }

type cronTick struct{ gen uint64 }

func (*CronDue) isQueueMsg() {}

func (a *cronActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped, *actor.Restarting:
	case *actor.Stopping:
		a.disarm()
	case *ScheduleCron:
		for _, s := range m.Slots {
			a.sched.put(s.Group, s.Entry, s.Slot)
		}
		a.rearm(ctx)
	case *ClearCrons:
		a.sched.clear()
		a.rearm(ctx)
	case *cronTick:
		if m.gen != a.gen {
			return
		}
		a.cancel = nil
		a.armedAt = 0
		a.fire(ctx)
	default:
		a.log.Warn("cron: unknown message", "type", fmt.Sprintf("%T", m))
	}
}

// fire sends every due entry to the queue actor, in order and in batches.
func (a *cronActor) fire(ctx actor.Context) {
	now := millis(a.clock.Now())
	for {
		due := a.sched.due(now, cronDueBatch)
		if len(due) == 0 {
			break
		}
		ctx.Send(a.queue, &CronDue{Slots: due})
	}
	a.rearm(ctx)
}

func (a *cronActor) rearm(ctx actor.Context) {
	now := millis(a.clock.Now())
	at, ok := a.sched.wakeAt(now)
	if !ok {
		a.disarm()
		return
	}
	if a.cancel != nil && a.armedAt <= at {
		return // the armed timer comes first; it looks again then
	}
	a.disarm()
	var delay time.Duration
	if at > now {
		delay = time.Duration(at-now) * time.Millisecond
	}
	a.gen++
	a.armedAt = at
	a.cancel = a.timers.SendOnce(delay, ctx.Self(), &cronTick{gen: a.gen})
}

func (a *cronActor) disarm() {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
	a.gen++
	a.armedAt = 0
}
