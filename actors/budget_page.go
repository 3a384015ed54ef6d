package actors

import (
	"container/heap"
	"context"
	"slices"

	"github.com/tollgate/tollgate/protocol"
)

// BudgetPage asks for up to Limit budgets whose keys follow From (byte
// order; "" from the first), in key order: GET /budgets with paging.
type BudgetPage struct {
	From  string
	Limit int
}

// BudgetPageResponse answers a BudgetPage; More is set when budgets
// follow the page.
type BudgetPageResponse struct {
	Budgets []protocol.Budget
	More    bool
}

func (*BudgetPage) isQueueMsg() {}

// budgetPage picks the page in one pass over the catalog, keeping the
// Limit+1 smallest keys after From in a heap: O(budgets × log limit), with
// no index to keep in step with every creation and deletion.
func (e *queueCore) budgetPage(m *BudgetPage) *BudgetPageResponse {
	want := m.Limit + 1
	h := &keyHeap{}
	for k := range e.budgets {
		if k <= m.From && m.From != "" {
			continue
		}
		if h.Len() < want {
			heap.Push(h, k)
		} else if k < (*h)[0] {
			(*h)[0] = k
			heap.Fix(h, 0)
		}
	}
	keys := []string(*h)
	slices.Sort(keys)
	res := &BudgetPageResponse{}
	if len(keys) > m.Limit {
		keys, res.More = keys[:m.Limit], true
	}
	res.Budgets = make([]protocol.Budget, len(keys))
	for i, k := range keys {
		res.Budgets[i] = e.budgets[k].budget
	}
	return res
}

// keyHeap is a max-heap of keys.
type keyHeap []string

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// BudgetsPage returns up to limit budgets whose keys follow from, in key
// order, and whether more follow.
func (e *Engine) BudgetsPage(ctx context.Context, from string, limit int) ([]protocol.Budget, bool, error) {
	res, err := e.call(ctx, &BudgetPage{From: from, Limit: limit})
	if err != nil {
		return nil, false, err
	}
	r := res.(*BudgetPageResponse)
	return r.Budgets, r.More, nil
}
