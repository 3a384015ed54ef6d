// The budget catalog: definitions, counts of bound unfinished jobs by cost,
// and the budget endpoints' rules.

package actors

import (
	"fmt"
	"sort"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

func budgetNotFound(key string) error {
	return &protocol.Error{Code: protocol.CodeNotFound, Message: fmt.Sprintf("budget '%s' not found", key)}
}

func (e *queueCore) getBudget(key string) (any, error) {
	be := e.budgets[key]
	if be == nil {
		return nil, budgetNotFound(key)
	}
	return &BudgetResponse{Budget: be.budget}, nil
}

func (e *queueCore) listBudgets() *BudgetsResponse {
	keys := make([]string, 0, len(e.budgets))
	for k := range e.budgets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]protocol.Budget, len(keys))
	for i, k := range keys {
		out[i] = e.budgets[k].budget
	}
	return &BudgetsResponse{Budgets: out}
}

func (e *queueCore) createBudget(now uint64, m *CreateBudget, reply func(any)) {
	if be := e.budgets[m.Key]; be != nil {
		if !m.Replace {
			reply(protocol.Errorf(protocol.CodeConflict, "budget '%s' already exists", m.Key))
			return
		}
		e.replaceBudget(now, be, m.Definition, reply)
		return
	}
	if err := e.checkBudgetLimit(m.Key, 0); err != nil {
		reply(err)
		return
	}
	b := protocol.Budget{Key: m.Key, Allocation: m.Definition.Allocation, Strategy: m.Definition.Strategy, CreatedAt: now, UpdatedAt: now}
	e.budgets[m.Key] = &budgetEntry{budget: b, bound: make(map[uint32]int)}
	e.out.spawnBudget(b)
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.PutBudget(&b)
	e.persistOrUndo(batch, reply, &BudgetResponse{Budget: b, Created: true}, func(uint64) {
		e.dropRefusedBudget(m.Key)
	})
}

func (e *queueCore) patchBudget(now uint64, m *PatchBudget, reply func(any)) {
	be := e.budgets[m.Key]
	if be == nil {
		reply(budgetNotFound(m.Key))
		return
	}
	def, err := m.Patch.Apply(be.budget.Definition())
	if err != nil {
		reply(err)
		return
	}
	e.replaceBudget(now, be, def, reply)
}

// replaceBudget applies a new definition after checking that every bound
// unfinished job still fits (allocation first, then burst).
func (e *queueCore) replaceBudget(now uint64, be *budgetEntry, def protocol.Definition, reply func(any)) {
	key := be.budget.Key
	if err := e.cronGuardShrink(key, def); err != nil {
		reply(err)
		return
	}
	if n, c := be.costsAbove(def.Allocation); n > 0 {
		reply(protocol.Unprocessable("budget '%s' cannot allocate %d: %d unfinished %s draw up to %d from it. Raise the allocation, delete them, or wait for them to drain.", key, def.Allocation, n, plural(n, "job", "jobs"), c))
		return
	}
	if def.Strategy.Type == protocol.TimeBased && def.Strategy.Burst > 0 {
		if n, c := be.costsAbove(def.Strategy.Burst); n > 0 {
			reply(protocol.Unprocessable("budget '%s' cannot burst %d: %d unfinished %s draw up to %d from it. Raise the burst, delete them, or wait for them to drain.", key, def.Strategy.Burst, n, plural(n, "job", "jobs"), c))
			return
		}
	}
	old := be.budget
	be.budget.Allocation = def.Allocation
	be.budget.Strategy = def.Strategy
	be.budget.UpdatedAt = now
	b := be.budget
	e.out.toBudget(key, &ApplyDefinition{Definition: def})
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.PutBudget(&b)
	e.writtenByAPI(be, batch)
	e.poolsOnDefinition(be, old.Definition(), def, batch)
	e.persistOrUndo(batch, reply, &BudgetResponse{Budget: b}, func(uint64) {
		e.restoreBudgetDefinition(old)
	})
}

// costsAbove counts bound unfinished jobs costing more than limit and
// returns the largest such cost.
func (be *budgetEntry) costsAbove(limit uint32) (n int, largest uint32) {
	if limit < 1 && be.boundOne > 0 {
		n, largest = be.boundOne, 1
	}
	for cost, count := range be.bound {
		if cost > limit {
			n += count
			if cost > largest {
				largest = cost
			}
		}
	}
	return n, largest
}

func (e *queueCore) deleteBudget(m *DeleteBudget, reply func(any)) {
	be := e.budgets[m.Key]
	if be == nil {
		reply(budgetNotFound(m.Key))
		return
	}
	if err := e.cronGuardDelete(m.Key); err != nil {
		reply(err)
		return
	}
	if be.boundTotal > 0 {
		reply(protocol.Errorf(protocol.CodeConflict, "budget '%s' is referenced by %d unfinished %s. Delete them or wait for them to finish before deleting it.", m.Key, be.boundTotal, plural(be.boundTotal, "job", "jobs")))
		return
	}
	delete(e.budgets, m.Key)
	e.out.stopBudget(m.Key)
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.DeleteBudget(m.Key)
	old := be.budget
	e.persistOrUndo(batch, reply, &Done{}, func(uint64) { e.restoreDeletedBudget(old) })
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
