package actors

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// refusalBatchedJob is a ready job batched under key k: it joins the pending job
// unless its payload says seal, and the fold appends its items.
func refusalBatchedJob(item int, seal bool) *protocol.NewJob {
	payload := `{"items":[` + strconv.Itoa(item) + `]}`
	if seal {
		payload = `{"items":[` + strconv.Itoa(item) + `],"seal":true}`
	}
	return &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(payload),
		Batch: &protocol.Batch{Key: "k", When: `($new.seal // false) | not`, Fold: `{items: ($existing.items + $new.items)}`}}}
}

// enqueueBatched enqueues one batched job and returns its view.
func enqueueBatched(t *testing.T, e *Engine, item int, seal bool) *protocol.JobView {
	t.Helper()
	views, err := e.Enqueue(context.Background(), []*protocol.NewJob{refusalBatchedJob(item, seal)}, false)
	require.NoError(t, err)
	return views[0]
}

func storedPayload(t *testing.T, e *Engine, id string) string {
	t.Helper()
	v, err := e.GetJob(context.Background(), id)
	require.NoError(t, err)
	return string(*v.Payload)
}

// TestRefusedFoldLeavesPendingJob: an enqueue that folded into the pending
// job, or that started a new batch (sealing it), and whose commit the store
// refused leaves memory as it was: the pending job keeps its payload and
// stays its key's pending job, so the next enqueue folds into it as if the
// refused one never happened.
func TestRefusedFoldLeavesPendingJob(t *testing.T) {
	e, store := startFailing(t, EngineConfig{})
	ctx := context.Background()
	a := enqueueBatched(t, e, 1, false)
	require.Equal(t, a.ID, enqueueBatched(t, e, 2, false).ID, "folds")
	require.JSONEq(t, `{"items":[1,2]}`, storedPayload(t, e, a.ID))

	store.FailNext(1, errNoSpace)
	_, err := e.Enqueue(ctx, []*protocol.NewJob{refusalBatchedJob(3, false)}, false)
	wantStorageUnavailable(t, "refused fold", err)
	require.JSONEq(t, `{"items":[1,2]}`, storedPayload(t, e, a.ID), "the refused fold left the payload")

	store.FailNext(1, errNoSpace)
	_, err = e.Enqueue(ctx, []*protocol.NewJob{refusalBatchedJob(4, true)}, false)
	wantStorageUnavailable(t, "refused start", err)

	v := enqueueBatched(t, e, 5, false)
	require.Equal(t, a.ID, v.ID, "still the pending job")
	require.JSONEq(t, `{"items":[1,2,5]}`, storedPayload(t, e, a.ID))
}

// TestRefusedSealLeavesPendingJob: a delete or a patch to a future ready_at
// of the pending job seals its batch; when the store refuses it, the job
// comes back as its key's pending job and the next enqueue folds into it.
func TestRefusedSealLeavesPendingJob(t *testing.T) {
	e, store := startFailing(t, EngineConfig{})
	ctx := context.Background()
	a := enqueueBatched(t, e, 1, false)

	store.FailNext(1, errNoSpace)
	wantStorageUnavailable(t, "refused delete", e.DeleteJob(ctx, a.ID))
	require.Equal(t, a.ID, enqueueBatched(t, e, 2, false).ID, "folds into the job whose delete was refused")

	patch, err := protocol.DecodeJobPatch(protocol.JSON, []byte(`{"ready_at":`+strconv.FormatUint(uint64(time.Now().Add(time.Hour).UnixMilli()), 10)+`}`))
	require.NoError(t, err)
	store.FailNext(1, errNoSpace)
	_, err = e.PatchJob(ctx, a.ID, patch)
	wantStorageUnavailable(t, "refused patch", err)
	require.Equal(t, a.ID, enqueueBatched(t, e, 3, false).ID, "folds into the job whose patch was refused")
	require.JSONEq(t, `{"items":[1,2,3]}`, storedPayload(t, e, a.ID))
}
