// Settlement on a budget (SPEC §10.1): a job acked with its real cost moves
// a time_based pool by the difference between what its dispatch debited
// and what it really used. This is the only way a level goes below zero (a
// debt): every other change (refill, refund, a new definition) caps at the
// capacity and never lowers the level, and a dispatch debits only tokens
// that are there.

package actors

import (
	"math"

	"github.com/tollgate/tollgate/protocol"
)

// SettleCost tells a budget the real cost of a job that was acked (or
// failed) with a settle entry for it, once that ack is durable. Reserved is
// what the job's dispatch debited (its binding's cost).
type SettleCost struct {
	JobID    string
	Reserved uint32
	Cost     uint32
	// Owed is the debit beyond Reserved the queue actor stored with the
	// ack (durable pools, budget_pools.go owePools); the budget answers
	// with a note once it applied it.
	Owed float64
}

func (*SettleCost) isBudgetMsg() {}

// settleCost applies a settlement at now (Unix ns): a time_based level
// moves by reserved − cost, credited up to the capacity at most, debited
// without a floor (a debt delays the next dispatch until the refill has
// covered it and that job's cost; the wake timer is armed for that moment
// by evaluate). On a budget that is not time_based (any more) it has no
// effect. It reports whether the pool moved and the jobs a credit woke.
func (b *budgetCore) settleCost(now uint64, reserved, cost uint32) (bool, []string) {
	if b.def.Strategy.Type != protocol.TimeBased {
		return false, nil
	}
	b.settle(now)
	b.level = math.Min(float64(b.def.Capacity()), b.level+float64(reserved)-float64(cost))
	b.shadowCredit(float64(reserved) - float64(cost))
	b.settlements++
	return true, b.evaluate(now)
}

// onSettle applies a SettleCost and traces it.
func (b *budgetCore) onSettle(now uint64, m *SettleCost, out *stepOutput) {
	settled, woken := b.settleCost(now, m.Reserved, m.Cost)
	if settled && out.trace {
		r := b.recall(m.JobID)
		reserved, real := m.Reserved, m.Cost
		b.event(out, Event{Kind: EventSettled, JobID: m.JobID, Queue: r.Queue, Cost: m.Reserved,
			Reserved: &reserved, RealCost: &real, Tokens: tokensPtr(b.tokens(now))})
	}
	if m.Owed > 0 {
		out.sends = append(out.sends, budgetSend{other: &poolSettled{Key: b.key, Note: b.poolNote(), Owed: m.Owed, epoch: b.epoch}})
	}
	b.wake(now, out, woken, "settle")
}
