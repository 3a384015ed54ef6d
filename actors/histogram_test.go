package actors

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// TestHistogramBuckets: each observation lands in the first bucket whose
// bound it does not exceed; beyond the last bound it is +Inf.
func TestHistogramBuckets(t *testing.T) {
	var h Histogram
	for _, ms := range []uint64{0, 1, 2, 1000, 1001, 3_600_000, 3_600_001} {
		h.observeMs(ms)
	}
	want := map[int]uint64{0: 2, 1: 1, 8: 1, 9: 1, len(LatencyBuckets) - 1: 1, len(LatencyBuckets): 1}
	for i, c := range h.Counts {
		require.Equal(t, want[i], c, "bucket %d (le %v)", i, append(LatencyBuckets[:], 0)[i])
	}
	require.EqualValues(t, 7, h.Count)
	require.InDelta(t, 7202.005, h.SumSeconds, 1e-6)
}

// TestQueueLatencyObserved: dispatch observes the wait from the later of
// ready_at and the enqueue (the ID's time); ack and failure observe the
// time since dispatch.
func TestQueueLatencyObserved(t *testing.T) {
	_, e, en, s, _ := obsHooksActor()
	gen := protocol.NewIDGenerator()
	en.full().ID = gen.Next(10_000) // enqueued at 10 s
	en.full().ReadyAt = 5_000       // a past ready_at does not count
	e.observeDispatched(10_300, en, s)
	en.full().DequeuedAt = 10_300
	e.observeAcked(12_300, en)
	e.observeFailed(10_400, en.full())
	c := e.obs.queues[en.full().Queue]
	require.EqualValues(t, 1, c.wait.Count)
	require.InDelta(t, 0.3, c.wait.SumSeconds, 1e-9)
	require.EqualValues(t, 2, c.run.Count)
	require.InDelta(t, 2.1, c.run.SumSeconds, 1e-9)
}
