package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// TestSchedulerPromotesAtReadyAtWithFakeClock drives the real actors with a
// fake clock and fake timers: a scheduled job is not dispatched a
// millisecond before its ready_at and is dispatched when the timer armed for
// exactly ready_at fires; an earlier job scheduled later re-arms the timer.
func TestSchedulerPromotesAtReadyAtWithFakeClock(t *testing.T) {
	b := obsStart(t, true)
	ctx := context.Background()
	start := b.clock.nowMs()
	job := func(readyAt uint64) *protocol.NewJob {
		return &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`1`), ReadyAt: readyAt}, ReadyAtSet: true}
	}
	late, err := b.engine.Enqueue(ctx, []*protocol.NewJob{job(start + 5000)}, false)
	require.NoError(t, err)
	require.Equal(t, protocol.StatusScheduled, late[0].Status)
	early, err := b.engine.Enqueue(ctx, []*protocol.NewJob{job(start + 2000)}, false)
	require.NoError(t, err)
	_, deliveries := obsOpen(t, b.engine, "w", 10)

	expectNothing := func() {
		t.Helper()
		select {
		case j := <-deliveries:
			t.Fatalf("job %s delivered before its ready_at (clock %d)", j.ID, b.clock.nowMs()-start)
		case <-time.After(50 * time.Millisecond):
		}
	}
	armedFor := func(due uint64) bool {
		b.timers.mu.Lock()
		defer b.timers.mu.Unlock()
		for _, tm := range b.timers.armed {
			if !tm.cancelled && tm.due == due {
				return true
			}
		}
		return false
	}
	fireAt := func(offset uint64) {
		b.clock.set(start + offset)
		b.timers.fireDue()
	}
	waitArmed := func(due uint64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !armedFor(due) {
			if time.Now().After(deadline) {
				t.Fatalf("no timer armed for %d", due-start)
			}
			time.Sleep(time.Millisecond) // polling the fake timers, bounded
		}
	}
	// The scheduler arms its timer for exactly the earliest ready_at.
	waitArmed(start + 2000)
	expectJob := func(id string) {
		t.Helper()
		select {
		case j := <-deliveries:
			require.Equal(t, id, j.ID)
		case <-time.After(5 * time.Second):
			t.Fatalf("job %s not delivered at its ready_at", id)
		}
	}
	fireAt(1999)
	expectNothing()
	fireAt(2000)
	expectJob(early[0].ID)
	waitArmed(start + 5000)
	fireAt(4999)
	expectNothing()
	fireAt(5000)
	expectJob(late[0].ID)
}
