package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/protocol"
)

// TestBudgetLineInDispatchOrder: the parked line comes back in (priority,
// id) order, cut at the limit, with the total; an unknown budget is 404.
func TestBudgetLineInDispatchOrder(t *testing.T) {
	b := obsStart(t, false)
	e, ctx := b.engine, context.Background()
	def := protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	_, _, err := e.CreateBudget(ctx, "line", def, false)
	require.NoError(t, err)
	jobs := obsJobs(4, "q", "line")
	jobs[3].Job.Priority = 10 // served before the others
	views, err := e.Enqueue(ctx, jobs, true)
	require.NoError(t, err)
	_, _ = obsOpen(t, e, "w", 10)
	b.waitFor(t, "1 dispatched and 3 parked", func() bool {
		return b.count(EventDispatched, "") == 1 && b.count(EventParked, "") == 3
	})
	dispatched := b.last(EventDispatched).JobID

	l, err := e.BudgetLine(ctx, "line", 2)
	require.NoError(t, err)
	require.Equal(t, 3, l.Total)
	require.Len(t, l.Jobs, 2)
	var want []string
	for _, id := range []string{views[3].ID, views[0].ID, views[1].ID, views[2].ID} {
		if id != dispatched {
			want = append(want, id)
		}
	}
	require.Equal(t, want[:2], []string{l.Jobs[0].ID, l.Jobs[1].ID})
	wantPrio := uint16(protocol.DefaultPriority)
	if want[0] == views[3].ID {
		wantPrio = 10
	}
	require.Equal(t, ParkedJob{ID: want[0], Queue: "q", Priority: wantPrio, Cost: 1, HoldsBack: true}, l.Jobs[0])

	_, err = e.BudgetLine(ctx, "nope", 10)
	var pe *protocol.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, protocol.CodeNotFound, pe.Code)
}
