package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestOutLinksKeepOrderPerRecipient buffers messages for three actors and
// checks each receives one message: a lone message as it is, several as one
// batch in the order they were added; a link flushed early is not sent
// twice by the later flush, and a second flush sends nothing.
func TestOutLinksKeepOrderPerRecipient(t *testing.T) {
	system := quietActorSystem()
	got := make(chan any, 16)
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *ReserveRequest, *budgetBatch, *Reevaluate, *QueuesChanged, *CommitReservation, *ReleaseReservation:
			got <- m
		}
	})
	a, b, c := system.Root.Spawn(props), system.Root.Spawn(props), system.Root.Spawn(props)
	defer system.Shutdown()

	la, lb, lc := &outLink[budgetMsg]{pid: a}, &outLink[budgetMsg]{pid: b}, &outLink[budgetMsg]{pid: c}
	var dirty []*outLink[budgetMsg]
	add := func(l *outLink[budgetMsg], m budgetMsg) {
		if l.add(m) {
			dirty = append(dirty, l)
		}
	}
	add(la, &ReserveRequest{Job: JobRef{ID: "1"}})
	add(lb, &Reevaluate{})
	add(la, &CommitReservation{JobID: "1"})
	add(lc, &ReserveRequest{Job: JobRef{ID: "c"}})
	add(la, &ReleaseReservation{JobID: "2"})
	lc.flush(system.Root, newBudgetBatch)
	flushLinks(system.Root, &dirty, newBudgetBatch)
	if len(dirty) != 0 {
		t.Fatalf("%d links left dirty after flush", len(dirty))
	}
	flushLinks(system.Root, &dirty, newBudgetBatch) // nothing left
	la.flush(system.Root, newBudgetBatch)           // nor here
	if la.size != 3 || cap(lb.pending) != 1 || len(lb.pending) != 0 {
		t.Fatalf("after flush: a's batch size %d (want 3), b's buffer len %d cap %d (want 0, 1: kept for reuse)", la.size, len(lb.pending), cap(lb.pending))
	}

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
