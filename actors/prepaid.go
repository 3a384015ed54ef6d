// Prepaid wakes (SPEC §4.4, precision): at burst 1 a saturated time_based
// budget loses, every interval, the time from its due instant to the debit,
// since its pool cannot hold more than the one token. When the wake timer
// finds the head affordable and the head is bound to this budget alone, the
// budget debits it in that same step and says so in JobsWoken; the queue
// dispatches it at its next pump without asking the budget again, or refunds
// the cost. The debit thus happens one wake after the due instant instead of
// three hand-offs later (queue, budget, queue), and the window bound still
// holds on the debits: each is made when the pool affords it, at the time
// the budget reads from its clock.
//
// Until the queue confirms the dispatch (PrepaidDispatched) or refunds the
// cost, the debit is provisional: the budget keeps a shadow of its level as
// it would be without it, moved by every later refill, debit and credit,
// each capped at the capacity. A refund puts the level back to the shadow,
// not to level + cost: a credit that came while the level was lowered by
// the provisional debit would otherwise escape the cap that the pool,
// without the debit, would have applied, and so make a token (seen in the
// model test: 4 tokens dispatched in one instant on a pool of capacity 3).
// One provisional debit at a time: a wake that finds one outstanding wakes
// its head the ordinary way.

package actors

import (
	"math"

	"github.com/tollgate/tollgate/protocol"
)

// wakeDebiting is the wake timer's evaluation: a sole-budget head that the
// pool affords is debited at once and handed back as Debited, then the
// other parked jobs are looked at as evaluate does.
func (b *budgetCore) wakeDebiting(now uint64, out *stepOutput) {
	b.settle(now)
	h, ok := b.head()
	if !ok || !h.Sole || b.def.Strategy.Type != protocol.TimeBased || b.paused(now) || b.prov != nil ||
		b.free()+tokenEpsilon < float64(h.Cost) {
		b.wake(now, out, b.evaluate(now), "refill")
		return
	}
	b.parked.Delete(h)
	shadow := b.level
	b.debit(h.Cost)
	b.prov = &provisional{jobID: h.ID, shadow: shadow}
	b.traceJob(out, now, EventCommit, h.ID)
	woken := append([]string{h.ID}, b.evaluate(now)...)
	b.traceWoken(out, now, woken, "refill")
	out.sends = append(out.sends, budgetSend{woken: &JobsWoken{Key: b.key, JobIDs: woken, epoch: b.epoch,
		Debited: true, Cost: h.Cost, Incarnation: b.incarnation, Pool: b.poolNote()}})
	b.syncTimer(now, out)
}

// provisional is a wake's debit the queue has not confirmed or refunded.
type provisional struct {
	jobID string
	// shadow is the level as it would be without the debit, settled at
	// the core's at.
	shadow float64
}

// shadowCredit moves the shadow level by delta as a credit or a debit of
// the real level moves it (credits capped at the capacity).
func (b *budgetCore) shadowCredit(delta float64) {
	if b.prov != nil {
		b.prov.shadow = math.Min(float64(b.def.Capacity()), b.prov.shadow+delta)
	}
}

// PrepaidDispatched tells a budget that the job its wake debited was
// dispatched: the debit stands (no longer provisional).
type PrepaidDispatched struct {
	JobID       string
	Incarnation uint64
}

func (*PrepaidDispatched) isBudgetMsg() {}

// confirmProvisional ends the provisional state of jobID's debit.
func (b *budgetCore) confirmProvisional(m *PrepaidDispatched) {
	if m.Incarnation == b.incarnation && b.prov != nil && b.prov.jobID == m.JobID {
		b.prov = nil
	}
}

// prepaidJob is a ready job a budget's wake debited (JobsWoken.Debited).
type prepaidJob struct {
	key         string
	cost        uint32
	incarnation uint64
}

// notePrepaid keeps en's debit for the pump (woken by m, whose first job it
// is).
func (e *queueCore) notePrepaid(en *entry, m *JobsWoken) {
	if e.prepaid == nil {
		e.prepaid = make(map[string]prepaidJob)
	}
	e.prepaid[en.id()] = prepaidJob{key: m.Key, cost: m.Cost, incarnation: m.Incarnation}
}

// dispatchPrepaid dispatches en on s when its budget debited it already,
// and reports whether it did. A debit that no longer matches the job's
// binding is refunded, and the job then reserves as any other.
func (e *queueCore) dispatchPrepaid(now uint64, en *entry, s *stream) bool {
	p, ok := e.prepaid[en.id()]
	if !ok {
		return false
	}
	delete(e.prepaid, en.id())
	if b := en.budgets(); len(b) != 1 || b[0].Key != p.key || b[0].Cost != p.cost {
		e.refundPrepaid(en.id(), p)
		return false
	}
	e.dispatch(now, en, s)
	e.out.toBudget(p.key, &PrepaidDispatched{JobID: en.id(), Incarnation: p.incarnation})
	return true
}

// refundUnusedPrepaid gives back the debits the pump did not use (no
// stream had room, or the job left meanwhile).
func (e *queueCore) refundUnusedPrepaid() {
	for id, p := range e.prepaid {
		e.refundPrepaid(id, p)
		delete(e.prepaid, id)
	}
}

func (e *queueCore) refundPrepaid(jobID string, p prepaidJob) {
	e.out.toBudget(p.key, &RefundTokens{JobID: jobID, Cost: p.cost, Incarnation: p.incarnation})
}
