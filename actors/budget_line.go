package actors

// What the dashboard asks of the budgets: the live pool of every budget
// without a walk over the jobs (BudgetStates), and the parked line of one
// budget, the jobs parked on it in the order it serves them ((priority, id),
// SPEC §4.7). For the line the facade asks the queue actor, which forwards
// to the budget actor; that walks at most Limit entries of its parked set,
// so the answer costs O(Limit) whatever the line's length.

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// BudgetLine is the head of a budget's parked line.
type BudgetLine struct {
	// Total is the number of jobs parked on the budget.
	Total int
	// Jobs are the first parked jobs in dispatch order, at most the limit
	// asked for.
	Jobs []ParkedJob
}

// ParkedJob is one job of a parked line.
type ParkedJob struct {
	ID       string
	Queue    string
	Priority uint16
	Cost     uint32
	// HoldsBack is false when the job's queue has no open take stream: such
	// a job keeps its place but does not stop the jobs behind it.
	HoldsBack bool
}

// budgetLineQuery asks the queue actor to forward a line request to the
// budget actor of Key.
type budgetLineQuery struct {
	Key   string
	Limit int
}

func (*budgetLineQuery) isQueueMsg()  {}
func (*budgetLineQuery) isBudgetMsg() {}

// BudgetLine returns the first limit jobs parked on the budget key, in the
// order the budget will serve them.
func (e *Engine) BudgetLine(ctx context.Context, key string, limit int) (*BudgetLine, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &budgetLineQuery{Key: key, Limit: limit})
	if err != nil {
		return nil, err
	}
	l, ok := res.(*BudgetLine)
	if !ok {
		return nil, errors.New("actors: unexpected budget line answer")
	}
	return l, nil
}

// BudgetStates returns the live pool of every budget, by key, without the
// walk over every job that Metrics makes for its queue counts.
func (e *Engine) BudgetStates(ctx context.Context) ([]BudgetState, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	bs, err := e.Budgets(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(bs))
	for i, b := range bs {
		keys[i] = b.Key
	}
	return e.budgetStates(ctx, keys)
}

// budgetStates asks every budget of keys for its state (all at once, then
// waits for each answer). A budget deleted in between is left out.
func (e *Engine) budgetStates(ctx context.Context, keys []string) ([]BudgetState, error) {
	timeout := e.timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	futures := make([]*actor.Future, len(keys))
	for i, key := range keys {
		futures[i] = e.system.Root.RequestFuture(e.queue, &budgetStateQuery{Key: key}, timeout)
	}
	var states []BudgetState
	for _, f := range futures {
		r, err := f.Result()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if s, ok := r.(*BudgetState); ok {
			states = append(states, *s)
		}
	}
	return states, nil
}
