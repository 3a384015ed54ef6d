package actors

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// putBatched installs an entry firing every second whose template appends
// its items to its key's pending job; the fold fails once the pending job
// holds failAt items.
func (h *cronHarness) putBatched(now time.Time, failAt int) {
	h.t.Helper()
	fold := `if ($existing.items | length) >= ` + strconv.Itoa(failAt) + ` then error("full") else {items: ($existing.items + $new.items)} end`
	r := &protocol.CronEntryRequest{Name: strp("e"), Expression: strp("* * * * * *"),
		Job: &protocol.EnqueueRequest{Type: strp("t"), Queue: strp("q"), Payload: protocol.Payload(`{"items":[1]}`),
			Batch: &protocol.BatchRequest{Key: strp("k"), When: strp("true"), Fold: strp(fold)}}}
	d, err := validateCronEntry(now, "e", r)
	require.NoError(h.t, err)
	var res any
	h.e.putCronGroup(ms(now), &PutCronGroup{Group: "g", Entries: []CronEntryDef{d}}, func(v any) { res = v })
	require.IsType(h.t, &protocol.CronGroupView{}, res, "%v", res)
}

// planFolds plays the goroutines the queue actor starts for batched
// firings: each is planned by a fold coordinator and sent back to the core
// (at now), a failure as cronFoldFailed.
func (h *cronHarness) planFolds(now time.Time) {
	h.t.Helper()
	calls := h.out.cronFolds
	h.out.cronFolds = nil
	folds := newFolder()
	for _, c := range calls {
		send := func(_ context.Context, m *EnqueueJobs) (any, error) {
			m.Cron = &c.slot
			var res any
			h.e.fireCronPlanned(ms(now), m, func(v any) { res = v })
			if err, ok := res.(error); ok {
				return nil, err
			}
			return res, nil
		}
		if err := planCronFold(context.Background(), folds, send, nil, c.job); err != nil {
			h.e.onCronFoldFailed(ms(now), &cronFoldFailed{Slot: c.slot, Err: err})
		}
	}
}

// TestCronFiringFolds: firings of a batched template fold into one pending
// job, each written with its entry's times; the queue core itself runs no
// jq (the firing is handed to the outbox); a fold that fails skips the tick
// (SPEC §8.1.7).
func TestCronFiringFolds(t *testing.T) {
	h := newCronHarness(t)
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 300e6, time.UTC)
	h.putBatched(t0, 3)
	for i := 1; i <= 3; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		h.e.onCronDue(ms(at), h.out.crons().due(ms(at), 1<<30))
		require.Len(t, h.out.cronFolds, 1, "tick %d hands its firing off the actor", i)
		require.Equal(t, h.entry("g", "e").NextEnqueueAt, ms(at.Truncate(time.Second)), "due until its firing is applied")
		h.planFolds(at)
		en := h.entry("g", "e")
		require.Equal(t, ms(at), en.LastEnqueueAt, "tick %d counts", i)
		require.Equal(t, ms(at.Truncate(time.Second).Add(time.Second)), en.NextEnqueueAt)
	}
	require.Equal(t, 1, h.e.jobs.len(), "the firings folded into one job")
	var j *protocol.Job
	for en := range h.e.jobs.all() {
		j = en.full()
	}
	require.JSONEq(t, `{"items":[1,1,1]}`, string(j.Payload))
	require.Equal(t, j.ID, h.e.pending["k"])

	// the fourth fold fails: the tick is skipped
	at := t0.Add(4 * time.Second)
	h.e.onCronDue(ms(at), h.out.crons().due(ms(at), 1<<30))
	h.planFolds(at)
	en := h.entry("g", "e")
	require.Equal(t, ms(t0.Add(3*time.Second)), en.LastEnqueueAt, "last_enqueue_at kept")
	require.Equal(t, ms(at.Truncate(time.Second).Add(time.Second)), en.NextEnqueueAt, "next_enqueue_at advanced")
	require.Equal(t, 1, h.e.jobs.len())
	require.JSONEq(t, `{"items":[1,1,1]}`, string(j.Payload))
	require.EqualValues(t, 1, h.e.cron.stats.Skipped.Load())
}
