package actors

import "github.com/asynkron/protoactor-go/actor"

// Messages between the queue actor and a budget actor are batched per
// Receive: everything one actor sends another while handling one message
// (or one batch) leaves as a single mailbox message when the handling ends.
// Each pair's messages keep their order, so this is one of the schedules the
// actors already had to handle; it saves a mailbox round per job and budget
// when many jobs reserve, commit and release at once.

// budgetBatch carries several budgetMsgs, handled in order.
type budgetBatch struct{ Msgs []budgetMsg }

func (*budgetBatch) isBudgetMsg() {}

// queueBatch carries several budget answers (ReserveResponse, JobsWoken),
// handled in order.
type queueBatch struct{ Msgs []queueMsg }

func (*queueBatch) isQueueMsg() {}

// outLink is a sender's link to one recipient: its PID and what the sender
// sent it during the current Receive, which leaves as one mailbox message
// when the Receive ends (flush).
type outLink[M any] struct {
	pid     *actor.PID
	pending []M
	size    int // how many messages the last batch held: the next buffer's capacity
}

// add buffers m and reports whether it is the first message pending (the
// sender then notes the link, to flush it when its Receive ends).
func (l *outLink[M]) add(m M) (first bool) {
	first = len(l.pending) == 0
	if l.pending == nil {
		l.pending = make([]M, 0, max(l.size, 1))
	}
	l.pending = append(l.pending, m)
	return first
}

// flush sends what is pending: one message alone as it is, several wrapped
// by batch (which then owns the buffer).
func (l *outLink[M]) flush(ctx actor.SenderContext, batch func([]M) any) {
	switch len(l.pending) {
	case 0:
	case 1:
		ctx.Send(l.pid, l.pending[0])
		clear(l.pending)
		l.pending = l.pending[:0]
	default:
		l.size = len(l.pending)
		ctx.Send(l.pid, batch(l.pending))
		l.pending = nil
	}
}

// flushLinks flushes every link in dirty and empties it.
func flushLinks[M any](ctx actor.SenderContext, dirty *[]*outLink[M], batch func([]M) any) {
	for _, l := range *dirty {
		l.flush(ctx, batch)
	}
	clear(*dirty)
	*dirty = (*dirty)[:0]
}

// slab hands out new values a chunk at a time: the messages the queue
// actor sends budget actors are many, small and short-lived (a few per
// budgeted job), so they are allocated 256 at a time instead of one by one.
// A chunk is freed once none of its messages is referenced any more. It is
// used only by its owner's goroutine. (Budget actors do not use slabs:
// there may be thousands of them, and each would keep the rest of a chunk.
// A budget actor allocates the answers of one batch together instead,
// sized by the reservations in it: budgetActor.answers.)
type slab[T any] struct{ free []T }

func (s *slab[T]) new() *T {
	if len(s.free) == 0 {
		s.free = make([]T, 256)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

func newBudgetBatch(msgs []budgetMsg) any { return &budgetBatch{Msgs: msgs} }
func newQueueBatch(msgs []queueMsg) any   { return &queueBatch{Msgs: msgs} }
