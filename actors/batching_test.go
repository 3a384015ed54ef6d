package actors

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestSendBufferKeepsOrderPerRecipient buffers messages for two actors and
// checks each receives one message: a lone message as it is, several as one
// batch in the order they were added; flushTo sends one recipient's early
// and the later flush does not send it twice.
func TestSendBufferKeepsOrderPerRecipient(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	got := make(chan any, 16)
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *ReserveRequest, *budgetBatch, *Reevaluate, *QueuesChanged:
			got <- m
		}
	})
	a, b, c := system.Root.Spawn(props), system.Root.Spawn(props), system.Root.Spawn(props)
	defer system.Shutdown()

	var buf sendBuffer[budgetMsg]
	buf.add(a, &ReserveRequest{Job: JobRef{ID: "1"}})
	buf.add(b, &Reevaluate{})
	buf.add(a, &CommitReservation{JobID: "1"})
	buf.add(c, &ReserveRequest{Job: JobRef{ID: "c"}})
	buf.add(a, &ReleaseReservation{JobID: "2"})
	buf.flushTo(system.Root, c, newBudgetBatch)
	buf.flush(system.Root, newBudgetBatch)
	buf.flush(system.Root, newBudgetBatch) // nothing left

	// a sentinel sent to each after the flush arrives after everything
	// flushed to it, so once all three are in, nothing else can follow
	for _, pid := range []*actor.PID{a, b, c} {
		system.Root.Send(pid, &QueuesChanged{})
	}
	var batches, singles, sentinels int
	timeout := time.After(5 * time.Second)
	for sentinels < 3 {
		select {
		case m := <-got:
			switch m := m.(type) {
			case *QueuesChanged:
				sentinels++
			case *budgetBatch:
				batches++
				if len(m.Msgs) != 3 {
					t.Fatalf("batch of %d messages, want 3", len(m.Msgs))
				}
				if _, ok := m.Msgs[0].(*ReserveRequest); !ok {
					t.Errorf("batch[0] is %T", m.Msgs[0])
				}
				if _, ok := m.Msgs[1].(*CommitReservation); !ok {
					t.Errorf("batch[1] is %T", m.Msgs[1])
				}
				if _, ok := m.Msgs[2].(*ReleaseReservation); !ok {
					t.Errorf("batch[2] is %T", m.Msgs[2])
				}
			default:
				singles++
			}
		case <-timeout:
			t.Fatalf("only %d of 3 sentinels arrived", sentinels)
		}
	}
	if batches != 1 || singles != 2 {
		t.Fatalf("received %d batches and %d single messages, want 1 and 2", batches, singles)
	}
}
