package actors

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// century is far enough ahead that a timer armed for it is idle for
// this process's life; a wrapped sum lands in the past instead.
const century = 100 * 365 * 24 * time.Hour

func TestTimeSumsSaturate(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"addMs small", addMs(10, 5), uint64(15)},
		{"addMs at the top", addMs(math.MaxUint64-5, 5), uint64(math.MaxUint64)},
		{"addMs over the top", addMs(math.MaxUint64-5, 6), uint64(neverMs)},
		{"addMs both maximal", addMs(math.MaxUint64, math.MaxUint64), uint64(neverMs)},
		{"ceilMs rounds up", ceilMs(2.1), uint64(3)},
		{"ceilMs negative", ceilMs(-1), uint64(0)},
		{"ceilMs beyond uint64", ceilMs(1e30), uint64(neverMs)},
		{"ceilMs NaN", ceilMs(math.NaN()), uint64(neverMs)},
		{"ceilMs +Inf", ceilMs(math.Inf(1)), uint64(neverMs)},
		{"delay in the past", delayUntil(1_799_999_999_000, now), time.Duration(0)},
		{"delay ahead", delayUntil(1_800_000_001_500, now), 1500 * time.Millisecond},
		{"delay sub-millisecond now", delayUntil(1_800_000_000_001, now.Add(300*time.Microsecond)), 700 * time.Microsecond},
		{"delay at int64 ms", delayUntil(math.MaxInt64, now), time.Duration(math.MaxInt64)},
		{"delay at uint64 max", delayUntil(math.MaxUint64, now), time.Duration(math.MaxInt64)},
		{"ns delay in the past", delayUntilNs(1_799_999_999_000_000_000, now), time.Duration(0)},
		{"ns delay ahead, sub-ms", delayUntilNs(1_800_000_000_142_857_143, now), 142_857_143 * time.Nanosecond},
		{"ns delay at uint64 max", delayUntilNs(math.MaxUint64, now), time.Duration(math.MaxInt64)},
		{"delay just below the Duration range", delayUntil(maxDelayMs-1, time.UnixMilli(0)), time.Duration(maxDelayMs-1) * time.Millisecond},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.got, tt.name)
	}
}

// TestWakeMomentAtMaximumDuration: a time_based budget of the longest
// duration the SPEC accepts, emptied, sets its wake moment about 2^63 ms
// ahead (beyond what an int64 of milliseconds holds), never behind now.
func TestWakeMomentAtMaximumDuration(t *testing.T) {
	const now = 1_800_000_000_000
	for _, tt := range []struct {
		name string
		def  protocol.Definition
		want uint64
	}{
		{"allocation 1", timeBased(1, math.MaxInt64, 0), now + math.MaxInt64},
		{"burst 1e6 over allocation 1", timeBased(1, math.MaxInt64, protocol.MaxAllocation), now + math.MaxInt64},
		{"allocation 1e6", timeBased(protocol.MaxAllocation, math.MaxInt64, 0), now + uint64(math.Ceil(float64(math.MaxInt64)/protocol.MaxAllocation))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBudgetCore("k", tt.def, atMs(now), nil)
			b.level = 0 // every token spent (white box: spending a million is slow)
			require.False(t, b.reserve(atMs(now), ref("parked", 2, 1), true).granted)
			// The float rate rounds 2^63-1 to 2^63: one millisecond either way.
			require.GreaterOrEqual(t, b.wakeAt, tt.want-1)
			require.LessOrEqual(t, b.wakeAt, addMs(tt.want, 1))
			require.Greater(t, b.wakeAt, uint64(now), "wake moment must lie ahead")
		})
	}
}

// armedTimers returns the delays of the timers armed (and not cancelled)
// whose message is of type T.
func armedTimers[T any](b *obsBundle) []time.Duration {
	b.timers.mu.Lock()
	defer b.timers.mu.Unlock()
	var out []time.Duration
	for _, tm := range b.timers.armed {
		if _, ok := tm.msg.(T); ok && !tm.cancelled {
			out = append(out, tm.delay)
		}
	}
	return out
}

// waitArmed waits (bounded) for a timer of type T and returns its delay.
func waitArmed[T any](t *testing.T, b *obsBundle) time.Duration {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d := armedTimers[T](b); len(d) > 0 {
			require.Len(t, d, 1, "one timer armed")
			return d[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %T timer armed", *new(T))
		}
		time.Sleep(time.Millisecond) // polling the fake timers, bounded
	}
}

// TestSchedulerIdlesAtMaximumReadyAt: a job scheduled at the largest
// ready_at (or retry_at) arms the scheduler's timer for the far future,
// not for now (a wrapped delay re-arms at once, forever).
func TestSchedulerIdlesAtMaximumReadyAt(t *testing.T) {
	ctx := context.Background()
	t.Run("ready_at", func(t *testing.T) {
		b := obsStart(t, true)
		_, err := b.engine.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`1`), ReadyAt: math.MaxUint64}, ReadyAtSet: true}}, false)
		require.NoError(t, err)
		require.Greater(t, waitArmed[*schedulerTick](t, b), century)
		require.Zero(t, b.timers.fireDue(), "nothing is due")
	})
	t.Run("retry_at", func(t *testing.T) {
		b := obsStart(t, true)
		_, err := b.engine.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`1`)}}}, false)
		require.NoError(t, err)
		_, deliveries := obsOpen(t, b.engine, "w", 1)
		j := nextJob(t, deliveries)
		msg, retryAt := "boom", uint64(math.MaxUint64)
		v, err := b.engine.Fail(ctx, j.ID, &protocol.FailureRequest{Message: &msg, RetryAt: &retryAt})
		require.NoError(t, err)
		require.Equal(t, retryAt, v.ReadyAt)
		require.Greater(t, waitArmed[*schedulerTick](t, b), century)
		require.Zero(t, b.timers.fireDue(), "nothing is due")
	})
}

// TestBackoffAtMaximumSaturates: the largest backoff a job may ask for
// schedules the retry ahead of now, never wrapped behind it.
func TestBackoffAtMaximumSaturates(t *testing.T) {
	ctx := context.Background()
	b := obsStart(t, true)
	maxBackoff := &protocol.Backoff{Exponent: math.MaxFloat64, BaseMs: math.MaxUint32, JitterMs: math.MaxUint32}
	_, err := b.engine.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`1`), Backoff: maxBackoff}}}, false)
	require.NoError(t, err)
	_, deliveries := obsOpen(t, b.engine, "w", 1)
	j := nextJob(t, deliveries)
	msg := "boom"
	// attempts 1: 1^exponent is 1; the second failure has attempts 2, and
	// 2^MaxFloat64 is +Inf.
	v, err := b.engine.Fail(ctx, j.ID, &protocol.FailureRequest{Message: &msg})
	require.NoError(t, err)
	require.Greater(t, v.ReadyAt, b.clock.nowMs())
	waitArmed[*schedulerTick](t, b) // the retry's timer, armed by a message of its own
	b.clock.set(v.ReadyAt)
	b.timers.fireDue()
	j = nextJob(t, deliveries)
	v, err = b.engine.Fail(ctx, j.ID, &protocol.FailureRequest{Message: &msg})
	require.NoError(t, err)
	require.Greater(t, v.ReadyAt, b.clock.nowMs()+uint64(century/time.Millisecond))
}

// TestRetentionAtMaximumKeepsTheJob: a retention of the largest uint64
// keeps a finished job for good; a wrapped purge_at lands just before now
// and the reaper would delete it at once.
func TestRetentionAtMaximumKeepsTheJob(t *testing.T) {
	ctx := context.Background()
	b := obsStart(t, true)
	keep := uint64(math.MaxUint64)
	_, err := b.engine.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`1`),
		Retention: &protocol.Retention{CompletedMs: &keep, DeadMs: &keep}}}}, false)
	require.NoError(t, err)
	_, deliveries := obsOpen(t, b.engine, "w", 1)
	j := nextJob(t, deliveries)
	_, err = b.engine.Ack(ctx, []string{j.ID})
	require.NoError(t, err)
	v, err := b.engine.GetJob(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusCompleted, v.Status)
	require.Equal(t, uint64(neverMs), v.PurgeAt)
}

// TestBudgetTimerIdlesAtMaximumDuration drives the budget actor: a
// time_based budget of duration_ms 2^63-1 with a parked job arms its wake
// timer for the far future (a moment beyond int64 ms became a negative
// time, a zero delay, and a timer that fired and re-armed forever), and the
// parked jobs' affordable_at saturates instead of wrapping.
func TestBudgetTimerIdlesAtMaximumDuration(t *testing.T) {
	ctx := context.Background()
	b := obsStart(t, true)
	_, _, err := b.engine.CreateBudget(ctx, "slow", timeBased(1, math.MaxInt64, 0), false)
	require.NoError(t, err)
	views, err := b.engine.Enqueue(ctx, obsJobs(4, "q", "slow"), true)
	require.NoError(t, err)
	_, deliveries := obsOpen(t, b.engine, "w", 10)
	nextJob(t, deliveries)
	require.Greater(t, waitArmed[*budgetWake](t, b), century)
	require.Zero(t, b.timers.fireDue(), "nothing is due")

	st, err := b.engine.BudgetState(ctx, "slow")
	require.NoError(t, err)
	require.Equal(t, 3, st.Parked)
	require.Equal(t, b.clock.nowMs()+uint64(float64(math.MaxInt64)), st.WakeAt) // the float rate rounds 2^63-1 up
	// The third parked job waits for three tokens: 3 × (2^63-1) ms ahead.
	v, err := b.engine.GetJob(ctx, views[3].ID)
	require.NoError(t, err)
	require.NotNil(t, v.Waiting)
	require.Equal(t, 3, v.Waiting.Position)
	require.Equal(t, uint64(neverMs), v.Waiting.AffordableAt)
}

// nextJob waits (bounded) for the next delivered job.
func nextJob(t *testing.T, deliveries chan protocol.Job) protocol.Job {
	t.Helper()
	select {
	case j := <-deliveries:
		return j
	case <-time.After(10 * time.Second):
		t.Fatal("no job delivered within 10s")
	}
	return protocol.Job{}
}
