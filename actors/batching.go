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

// sendBuffer collects messages per recipient until flush.
type sendBuffer[M any] struct {
	msgs  map[*actor.PID][]M
	order []*actor.PID
}

func (b *sendBuffer[M]) add(pid *actor.PID, m M) {
	if b.msgs == nil {
		b.msgs = make(map[*actor.PID][]M)
	}
	if _, ok := b.msgs[pid]; !ok {
		b.order = append(b.order, pid)
	}
	b.msgs[pid] = append(b.msgs[pid], m)
}

// flushTo sends pid's buffered messages now: one alone as it is, several
// wrapped by batch.
func (b *sendBuffer[M]) flushTo(ctx actor.SenderContext, pid *actor.PID, batch func([]M) any) {
	msgs, ok := b.msgs[pid]
	if !ok {
		return
	}
	delete(b.msgs, pid)
	if len(msgs) == 1 {
		ctx.Send(pid, msgs[0])
	} else {
		ctx.Send(pid, batch(msgs))
	}
}

// flush sends everything buffered, recipients in first-use order.
func (b *sendBuffer[M]) flush(ctx actor.SenderContext, batch func([]M) any) {
	for _, pid := range b.order {
		b.flushTo(ctx, pid, batch)
	}
	b.order = b.order[:0]
}

// slab hands out new values a chunk at a time: the messages the queue
// actor sends budget actors are many, small and short-lived (a few per
// budgeted job), so they are allocated 256 at a time instead of one by one.
// A chunk is freed once none of its messages is referenced any more. It is
// used only by its owner's goroutine. (Budget actors allocate their answers
// one by one: there may be thousands of them, and each would keep the rest
// of a chunk.)
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
