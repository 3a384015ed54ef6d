package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// Clock tells the time. Actors never call time.Now directly, so tests can
// drive them with a fake clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Timers sends a message to an actor after a delay. The returned function
// cancels the send if it has not happened yet.
type Timers interface {
	SendOnce(delay time.Duration, pid *actor.PID, msg any) (cancel func())
}

// ActorTimers is the production Timers, backed by protoactor's scheduler.
type ActorTimers struct{ s *scheduler.TimerScheduler }

// NewActorTimers returns Timers that send through the given root context.
func NewActorTimers(root *actor.RootContext) *ActorTimers {
	return &ActorTimers{s: scheduler.NewTimerScheduler(root)}
}

// SendOnce schedules msg for pid after delay.
func (t *ActorTimers) SendOnce(delay time.Duration, pid *actor.PID, msg any) func() {
	if delay < 0 {
		delay = 0
	}
	return t.s.SendOnce(delay, pid, msg)
}

// millis returns t as Unix milliseconds.
func millis(t time.Time) uint64 { return uint64(t.UnixMilli()) }

// nanos returns t as Unix nanoseconds (0 before 1970).
func nanos(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }
