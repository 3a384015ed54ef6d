package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// timeoutRig is a queue core with one open stream and jobs put in flight by
// hand (the rules of timeouts.go, with the time as an argument).
type timeoutRig struct {
	e   *queueCore
	s   *stream
	sub *Subscription
}

func newTimeoutRig(t *testing.T, cfg EngineConfig) *timeoutRig {
	t.Helper()
	cfg.Random = func() float64 { return 0 }
	e, _ := testEngine(cfg)
	s := &stream{id: 1, prefetch: 10, workerID: "w", inFlight: map[string]*entry{}, deliver: func([]protocol.Job) {}}
	e.streams[1] = s
	e.order = append(e.order, s)
	sub := e.tracer.Subscribe(64)
	t.Cleanup(sub.Close)
	return &timeoutRig{e: e, s: s, sub: sub}
}

// dispatch puts the job in flight on the rig's stream at now.
func (r *timeoutRig) dispatch(now uint64, j *protocol.Job) *entry {
	en := r.e.jobs.get(j.ID)
	if en == nil {
		en = &entry{jb: j}
		r.e.jobs.put(j.ID, en)
	}
	r.e.dispatch(now, en, r.s)
	return en
}

// timedOut returns the reasons of the timed_out events traced so far.
func (r *timeoutRig) timedOut() map[string]string {
	got := map[string]string{}
	for {
		select {
		case ev := <-r.sub.C:
			if ev.Kind == EventTimedOut {
				got[ev.JobID] = ev.Reason
			}
		default:
			return got
		}
	}
}

func (r *timeoutRig) next(t *testing.T) uint64 {
	t.Helper()
	at, ok := r.e.nextTimeout()
	require.True(t, ok, "no deadline armed")
	return at
}

// TestJobTimeoutRules (SPEC §10.5): the deadline is the dispatch plus the
// job's timeout_ms, else the server default; at the deadline (not a
// millisecond before) the job is failed as a worker's failure would fail
// it (attempts + 1, backoff, its slot freed, the stream still open), with
// "timed out after <n> ms"; a patch of timeout_ms while in flight applies
// from the next dispatch; leaving flight another way disarms the deadline.
func TestJobTimeoutRules(t *testing.T) {
	r := newTimeoutRig(t, EngineConfig{DefaultJobTimeout: 2 * time.Second})
	e := r.e
	own := uint32(100)
	backoff := &protocol.Backoff{Exponent: 0, BaseMs: 0, JitterMs: 0} // retry 1000 ms later
	a := r.dispatch(1000, &protocol.Job{ID: testID(1), Queue: "q", TimeoutMs: &own, Backoff: backoff})
	b := r.dispatch(1000, &protocol.Job{ID: testID(2), Queue: "q"})
	require.Equal(t, uint64(1100), r.next(t), "the job's own timeout_ms")

	// a patch while in flight does not move the armed deadline
	patched := uint32(50)
	a.full().TimeoutMs = &patched

	e.expireTimeouts(1099)
	require.Equal(t, stInFlight, a.state, "failed a millisecond early")
	require.Empty(t, r.timedOut())

	e.expireTimeouts(1100)
	require.Equal(t, stScheduled, a.state)
	require.Equal(t, uint32(1), a.full().Attempts)
	require.Equal(t, uint64(1100), a.full().FailedAt)
	require.Equal(t, uint64(1100+1000), a.full().ReadyAt, "backoff as for any failure")
	require.NotContains(t, r.s.inFlight, a.full().ID, "the stream's slot is freed")
	require.Contains(t, e.streams, r.s.id, "the stream stays open")
	require.Equal(t, 1, e.inFlightTotal)
	require.Equal(t, map[string]string{a.full().ID: "timed out after 100 ms"}, r.timedOut())
	require.Equal(t, uint64(3000), r.next(t), "the server default for a job without timeout_ms")

	// a late answer finds the job not in flight
	var last any
	e.fail(1200, &FailJob{ID: a.full().ID, Req: &protocol.FailureRequest{Message: new(string)}}, func(m any) { last = m })
	require.ErrorIs(t, last.(error), protocol.ErrNotInFlight)

	// the retry's dispatch arms the patched timeout
	a.state = stReady
	r.dispatch(2100, a.full())
	require.Equal(t, uint64(2150), r.next(t))
	e.expireTimeouts(2150)
	require.Equal(t, uint32(2), a.full().Attempts)
	require.Equal(t, map[string]string{a.full().ID: "timed out after 50 ms"}, r.timedOut())

	// an ack before the deadline disarms it
	e.ack(2500, []string{b.full().ID}, func(any) {})
	_, armed := e.nextTimeout()
	require.False(t, armed, "an acked job keeps a deadline")
	e.expireTimeouts(10_000)
	require.Empty(t, r.timedOut())
}

// TestJobTimeoutNoneByDefault: without a default and without timeout_ms a
// job in flight has no deadline at all.
func TestJobTimeoutNoneByDefault(t *testing.T) {
	r := newTimeoutRig(t, EngineConfig{})
	r.dispatch(1000, &protocol.Job{ID: testID(1), Queue: "q"})
	_, armed := r.e.nextTimeout()
	require.False(t, armed)
}

// TestJobTimeoutActor (SPEC §10.5) with the queue actor's own timer on an
// injected clock: a hung worker's job fails at its deadline, the late ack
// is answered as for a job not in flight, and the same open stream gets the
// retry once the backoff has passed.
func TestJobTimeoutActor(t *testing.T) {
	b := obsStart(t, true)
	ctx := context.Background()
	timeout := uint32(500)
	views, err := b.engine.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority,
		Payload: []byte(`{}`), TimeoutMs: &timeout, Backoff: &protocol.Backoff{}}}}, false)
	require.NoError(t, err)
	id := views[0].ID
	_, delivered := obsOpen(t, b.engine, "w", 1)
	recv := func() protocol.Job { t.Helper(); return obsRecv(t, delivered, 10*time.Second) }
	first := recv()
	require.Equal(t, id, first.ID)
	start := first.DequeuedAt

	b.clock.set(start + 499)
	b.timers.fireDue()
	v, err := b.engine.GetJob(ctx, id)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusInFlight, v.Status, "failed before its deadline")

	b.clock.set(start + 500)
	b.timers.fireDue()
	b.waitFor(t, "timed_out and failed", func() bool { return b.count(EventTimedOut, id) == 1 && b.count(EventFailed, id) == 1 })
	// the server's own failure has no client to answer once it is
	// durable: wait for its error record to be readable
	var errs []protocol.ErrorRecord
	require.Eventually(t, func() bool {
		errs, _, err = b.engine.JobErrors(ctx, id, 0, false, false, 10)
		return err == nil && len(errs) == 1
	}, 10*time.Second, 5*time.Millisecond, "no error record: %v %v", errs, err)
	require.Equal(t, "timed out after 500 ms", errs[0].Message)
	require.Equal(t, start, errs[0].DequeuedAt)
	require.Equal(t, start+500, errs[0].FailedAt)

	notFound, err := b.engine.Ack(ctx, []string{id})
	require.NoError(t, err)
	require.Equal(t, []string{id}, notFound, "a late success is answered as for a job not in flight")

	b.clock.set(start + 500 + 1000) // the backoff: 1^0 s
	// the scheduler arms its timer when its message arrives: fire what is
	// due until the retry comes
	var retry protocol.Job
	assert.Eventually(t, func() bool {
		b.timers.fireDue()
		select {
		case retry = <-delivered:
			return true
		default:
			return false
		}
	}, 10*time.Second, 5*time.Millisecond, "no retry delivered")
	if retry.ID == "" {
		b.waitFor(t, "the retry dispatched", func() bool { return b.count(EventDispatched, id) == 2 })
	}
	require.Equal(t, id, retry.ID)
	require.Equal(t, uint32(1), retry.Attempts)
}
