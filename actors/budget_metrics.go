package actors

import (
	"slices"
	"strings"
)

// BudgetTotals are the metrics of budgets counted over all of them: how
// many there are and how many are held now, and the holds, drains and
// collections since the server started (SPEC §10.2, §10.3).
type BudgetTotals struct {
	Budgets, Held                              int
	HoldsSet, HoldsReleased, Drains, Collected uint64
	// BoundJobs is the number of (job, budget) bindings of unfinished jobs.
	BoundJobs int
}

// budgetSeries picks the budgets whose state a scrape gathers: every one in
// key order, or with limit > 0 the limit budgets with the most unfinished
// jobs bound (ties by key), in key order. It also counts the totals. One
// pass over the catalog per scrape.
func (e *queueCore) budgetSeries(now uint64, limit int) ([]string, BudgetTotals) {
	t := BudgetTotals{Budgets: len(e.budgets), HoldsSet: e.collect.holdsSet, HoldsReleased: e.collect.holdsReleased,
		Drains: e.collect.drains, Collected: e.collect.collected}
	keys := make([]string, 0, len(e.budgets))
	for k, be := range e.budgets {
		keys = append(keys, k)
		t.BoundJobs += be.boundTotal
		if be.life.hold.Until > now {
			t.Held++
		}
	}
	if limit > 0 && len(keys) > limit {
		slices.SortFunc(keys, func(a, b string) int {
			if na, nb := e.budgets[a].boundTotal, e.budgets[b].boundTotal; na != nb {
				return nb - na
			}
			return strings.Compare(a, b)
		})
		keys = keys[:limit]
	}
	slices.Sort(keys)
	return keys, t
}
