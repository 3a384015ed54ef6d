// Job timeouts (SPEC §10.5): a job in flight longer than its timeout_ms (or
// the server's default) is failed by the server as its worker's failure
// report would fail it, with the message "timed out after <n> ms".
//
// The queue core keeps the deadline of every in-flight job that has one in
// a set ordered by (deadline, id), and the queue actor keeps one timer armed
// for the earliest: arming and disarming cost O(log n) and nothing is ever
// scanned, so the cost does not grow with the number of jobs in flight.
// The deadline is fixed when the job is dispatched, so a patch of
// timeout_ms applies from its next dispatch.

package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/protocol"
)

// jobTimeouts is the deadlines of the in-flight jobs that have one.
type jobTimeouts struct {
	order *orderedSet[schedItem] // (deadline, id)
	byID  map[string]armedTimeout
}

// armedTimeout is one in-flight job's deadline (Unix ms) and the timeout it
// was armed with (ms), which the failure message names.
type armedTimeout struct {
	at uint64
	ms uint64
}

// timeoutOf is the timeout in force for j: its own, else the server's
// default (0: none).
func (e *queueCore) timeoutOf(j *protocol.Job) uint64 {
	if j.TimeoutMs != nil {
		return uint64(*j.TimeoutMs)
	}
	return uint64(e.cfg.DefaultJobTimeout / time.Millisecond)
}

// armTimeout sets the deadline of a job just dispatched at now.
func (e *queueCore) armTimeout(now uint64, en *entry) {
	ms := e.timeoutOf(en.full())
	if ms == 0 {
		return
	}
	t := &e.timeouts
	if t.order == nil {
		t.order = newOrderedSet(schedLess)
		t.byID = make(map[string]armedTimeout)
	}
	id := en.full().ID
	if old, ok := t.byID[id]; ok {
		t.order.Delete(schedItem{readyAt: old.at, id: id})
	}
	at := addMs(now, ms)
	t.byID[id] = armedTimeout{at: at, ms: ms}
	t.order.ReplaceOrInsert(schedItem{readyAt: at, id: id})
}

// disarmTimeout forgets the deadline of a job that left flight.
func (e *queueCore) disarmTimeout(id string) {
	t := &e.timeouts
	if len(t.byID) == 0 {
		return
	}
	if old, ok := t.byID[id]; ok {
		delete(t.byID, id)
		t.order.Delete(schedItem{readyAt: old.at, id: id})
	}
}

// clearTimeouts forgets every deadline (reset).
func (e *queueCore) clearTimeouts() { e.timeouts = jobTimeouts{} }

// nextTimeout is the earliest deadline (Unix ms), if any.
func (e *queueCore) nextTimeout() (uint64, bool) {
	if e.timeouts.order == nil {
		return 0, false
	}
	it, ok := e.timeouts.order.Min()
	return it.readyAt, ok
}

// timedOutMessage is the failure message of a job that timed out.
func timedOutMessage(ms uint64) string { return fmt.Sprintf("timed out after %d ms", ms) }

// expireTimeouts fails every in-flight job whose deadline is at or before
// now, exactly as a failure report without retry_at or kill would: attempts
// + 1, the error recorded, backoff or dead, tokens returned, the stream's
// slot freed (the stream itself stays open). Streams are pumped once.
func (e *queueCore) expireTimeouts(now uint64) {
	t := &e.timeouts
	if t.order == nil {
		return
	}
	batched := !e.inBatch
	if batched {
		e.beginBatch()
	}
	for {
		it, ok := t.order.Min()
		if !ok || it.readyAt > now {
			break
		}
		armed := t.byID[it.id]
		e.disarmTimeout(it.id)
		en := e.jobs.get(it.id)
		if en == nil || en.state != stInFlight {
			continue // (leaving flight disarms; defensive)
		}
		msg := timedOutMessage(armed.ms)
		e.observeTimedOut(en, msg)
		e.fail(now, &FailJob{ID: it.id, Req: &protocol.FailureRequest{Message: &msg}}, func(any) {})
	}
	if batched {
		e.endBatch(now)
	}
}

// observeTimedOut counts and traces a job the server fails for its timeout
// (the failure itself is traced and counted as any failure).
func (e *queueCore) observeTimedOut(en *entry, msg string) {
	e.counters(en.full().Queue).timedOut++
	if e.tracer.on() {
		ev := Event{Kind: EventTimedOut, Actor: "queue", JobID: en.full().ID, Queue: en.full().Queue, Budgets: bindingKeys(en.full().Budgets), Reason: msg}
		if en.stream != nil {
			ev.Stream, ev.WorkerID = en.stream.id, en.stream.workerID
		}
		e.tracer.emit(ev)
	}
}

// ---------------------------------------------------------------- queue actor

// timeoutTimer is the queue actor's one timer for the earliest deadline.
type timeoutTimer struct {
	gen    uint64
	at     uint64 // the deadline armed for (Unix ms); 0: none
	cancel func()
}

// timeoutTick is the queue actor's own timer message; gen tells a stale one.
type timeoutTick struct{ gen uint64 }

func (*timeoutTick) isQueueMsg() {}

// onTimeoutTick fails the jobs whose deadline has come.
func (a *queueActor) onTimeoutTick(m *timeoutTick, now uint64) {
	if m.gen != a.timeout.gen {
		return
	}
	a.timeout.at, a.timeout.cancel = 0, nil
	a.eng.expireTimeouts(now)
}

// syncTimeoutTimer arms the timer for the engine's earliest deadline when
// that moment changed (after every Receive).
func (a *queueActor) syncTimeoutTimer(ctx actor.Context) {
	if a.eng == nil {
		return
	}
	at, ok := a.eng.nextTimeout()
	t := &a.timeout
	if ok && at == t.at && t.cancel != nil {
		return
	}
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
	t.gen++
	t.at = 0
	if !ok {
		return
	}
	t.at = at
	t.cancel = a.timers.SendOnce(delayUntil(at, a.clock.Now()), ctx.Self(), &timeoutTick{gen: t.gen})
}
