package actors

// The parked line of one budget, as the dashboard shows it: the jobs parked
// on the budget in the order it serves them ((priority, id), SPEC §4.7).
// The facade asks the queue actor, which forwards to the budget actor; the
// budget actor walks at most Limit entries of its parked set, so the answer
// costs O(Limit) whatever the line's length.

import (
	"context"
	"errors"
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

// line answers a budgetLineQuery with the first limit parked jobs.
func (a *budgetActor) line(limit int) *BudgetLine {
	l := &BudgetLine{Total: a.core.parkedCount(), Jobs: make([]ParkedJob, 0, min(limit, a.core.parkedCount()))}
	a.core.parked.Ascend(func(r JobRef) bool {
		if len(l.Jobs) >= limit {
			return false
		}
		l.Jobs = append(l.Jobs, ParkedJob{ID: r.ID, Queue: r.Queue, Priority: r.Priority, Cost: r.Cost, HoldsBack: a.core.consumed(r.Queue)})
		return true
	})
	return l
}

// BudgetLine returns the first limit jobs parked on the budget key, in the
// order the budget will serve them.
func (e *Engine) BudgetLine(ctx context.Context, key string, limit int) (*BudgetLine, error) {
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
