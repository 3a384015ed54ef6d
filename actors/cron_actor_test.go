package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// TestCronActorWithFakeClock drives the real actors with a fake clock and
// fake timers: the cron actor arms one timer for the earliest slot (or 60 s
// ahead when that is later), an entry does not fire a millisecond before
// its slot and fires at it with ready_at = the firing time, and a backward
// clock jump fires nothing.
func TestCronActorWithFakeClock(t *testing.T) {
	b := obsStart(t, true)
	ctx := context.Background()
	b.clock.set(b.clock.nowMs()/1000*1000 + 300) // 300 ms into a second
	start := b.clock.nowMs()
	slot := start - 300 + 1000
	_, deliveries := obsOpen(t, b.engine, "w", 10)
	entry := func(name, expr string) *protocol.CronEntryRequest {
		return &protocol.CronEntryRequest{Name: &name, Expression: &expr,
			Job: &protocol.EnqueueRequest{Type: strp("t"), Queue: strp("q"), Payload: protocol.Payload("1")}}
	}
	g, err := b.engine.PutCronGroup(ctx, "g", &protocol.CronGroupRequest{Entries: []*protocol.CronEntryRequest{entry("yearly", "0 0 1 1 *")}})
	require.NoError(t, err)
	require.Greater(t, g.Entries[0].NextEnqueueAt, start+60_000)
	armedFor := func(due uint64) bool {
		b.timers.mu.Lock()
		defer b.timers.mu.Unlock()
		for _, tm := range b.timers.armed {
			if _, ok := tm.msg.(*cronTick); ok && !tm.cancelled && tm.due == due {
				return true
			}
		}
		return false
	}
	waitArmed := func(due uint64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !armedFor(due) {
			require.True(t, time.Now().Before(deadline), "no cron timer armed for +%d ms", int64(due)-int64(start))
			time.Sleep(time.Millisecond) // polling the fake timers, bounded
		}
	}
	// a far slot: the clock is re-read within 60 s
	waitArmed(start + cronRecheck)
	_, err = b.engine.PutCronEntry(ctx, "g", "sec", entry("sec", "* * * * * *"), true)
	require.NoError(t, err)
	waitArmed(slot)
	expectNothing := func() {
		t.Helper()
		select {
		case j := <-deliveries:
			t.Fatalf("job %s (ready_at %d) delivered before its slot %d", j.ID, j.ReadyAt, slot)
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.clock.set(slot - 1)
	b.timers.fireDue()
	expectNothing()
	b.clock.set(slot + 7)
	b.timers.fireDue()
	select {
	case j := <-deliveries:
		require.Equal(t, slot+7, j.ReadyAt, "ready_at is the firing time")
	case <-time.After(5 * time.Second):
		t.Fatal("the entry did not fire at its slot")
	}
	waitArmed(slot + 1000)
	// the clock goes back 10 s: nothing fires until it reaches the slot again
	b.clock.set(slot - 10_000)
	b.timers.fireDue()
	expectNothing()
	e, err := b.engine.CronEntry(ctx, "g", "sec")
	require.NoError(t, err)
	require.Equal(t, slot+1000, e.NextEnqueueAt, "a backward jump changes no stored time")
	require.Equal(t, slot+7, e.LastEnqueueAt)
}
