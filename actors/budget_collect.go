// The budget catalog's side of holds and idle collection (SPEC §10.2,
// §10.3).
//
// Holds: the catalog keeps each budget's stored hold (its end, and whether
// a hold in force since emptied the pool), never shortens it, writes it
// under its own key (persistence/holds.go) and tells the budget actor the
// exact end with HoldBudget. The new end gates dispatch at once; a drain is
// applied once its write is durable; a refused write puts the old end back.
//
// Collection: a budget made by a create_with (marked on the fly, durably)
// and not written since by POST, PUT or PATCH is collected once it has been
// indistinguishable from a new one for --budget-idle-ttl: no unfinished job
// bound to it, no cron template drawing on it, no hold, a full pool. The
// catalog knows the first three; when a budget's last bound job leaves, it
// is placed in an ordered set by the moment it would be due, and one timer
// is armed for the earliest. When that timer fires, each due budget is asked
// when its pool is (or will be) full again (budgetIdleQuery): if that is
// more than the TTL ago it is deleted, and its actor stopped, as by DELETE;
// otherwise it is placed again at that moment plus the TTL. Nothing scans
// the catalog.

package actors

import (
	"log/slog"
	"math"

	"github.com/google/btree"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// EventBudgetCollected is traced when an idle on-the-fly budget is
// collected.
const EventBudgetCollected EventKind = "budget_collected"

// budgetLife is what the catalog keeps of a budget for holds and
// collection.
type budgetLife struct {
	hold     protocol.BudgetHold // the stored hold (Until 0: none)
	onTheFly bool                // made by a create_with, not written since
	idleDue  uint64              // its moment in the collector's set (0: not there)
	asked    uint64              // the idle query awaited (0: none)
}

type idleItem struct {
	due uint64
	key string
}

func idleLess(a, b idleItem) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.key < b.key
}

// budgetCollector is the queue core's bookkeeping of idle budgets, and the
// counters of holds and collections for the metrics endpoint.
type budgetCollector struct {
	due   *btree.BTreeG[idleItem]
	idled []string // keys whose last bound job left in this Receive
	gen   uint64
	armed uint64 // the moment the collect timer is armed for (0: none)

	holdsSet, holdsReleased, drains, collected uint64

	release memoryRelease // when to hand memory back (memory_release.go)
}

// collectTimer is implemented by an outbox that can arm the collect
// timer: the queue actor's. Cores driven without one collect only when
// told (onCollectTick).
type collectTimer interface {
	// armCollect arms the one collect timer for at (Unix ms), replacing
	// the one armed before.
	armCollect(at uint64)
}

// collectTick is the collect timer's message.
type collectTick struct{}

// budgetIdleQuery asks a budget when it is fresh again (budgetCore.freshAt);
// it answers with a budgetIdleAnswer.
type budgetIdleQuery struct{ gen uint64 }

// budgetIdleAnswer answers a budgetIdleQuery: At is the moment the budget
// is fresh from (Unix ms); Busy when it still parks, holds or has in flight
// a job.
type budgetIdleAnswer struct {
	Key   string
	At    uint64
	Busy  bool
	gen   uint64
	epoch uint64 // the engine's the answering budget was made for
}

// PutHold is PUT /budgets/{key}/hold. Answered with Done once durable.
type PutHold struct {
	Key string
	Req protocol.HoldRequest
}

// DeleteHold is DELETE /budgets/{key}/hold. Answered with Done.
type DeleteHold struct{ Key string }

func (*budgetIdleQuery) isBudgetMsg() {}
func (*budgetIdleAnswer) isQueueMsg() {}
func (*collectTick) isQueueMsg()      {}
func (*PutHold) isQueueMsg()          {}
func (*DeleteHold) isQueueMsg()       {}

// ---------------------------------------------------------------- holds

// putHold sets or extends a budget's hold (never shortens it).
func (e *queueCore) putHold(now uint64, m *PutHold, reply func(any)) {
	be := e.budgets[m.Key]
	if be == nil {
		reply(budgetNotFound(m.Key))
		return
	}
	old := be.life.hold
	until := max(m.Req.End(now), old.Until)
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	if until > now {
		// a drain stays recorded while the hold it came with lasts
		be.life.hold = protocol.BudgetHold{Until: until, Drained: m.Req.Drain || (old.Drained && old.Until > now)}
		batch.PutBudgetHold(m.Key, &be.life.hold)
		e.collect.holdsSet++
		e.out.toBudget(m.Key, &HoldBudget{Until: until})
	} else {
		// holds nothing (the drain still applies)
		be.life.hold = protocol.BudgetHold{}
		batch.DeleteBudgetHold(m.Key)
	}
	out := e.out
	e.out.persist(batch, func(err error) {
		out.toSelf(&commitDone{err: err, then: func(now uint64, err error) {
			current := e.budgets[m.Key] == be
			if err != nil {
				if current {
					be.life.hold = old
					e.out.toBudget(m.Key, &HoldBudget{Until: old.Until})
				}
				reply(storageError(err))
				return
			}
			if current && m.Req.Drain {
				e.collect.drains++
				e.out.toBudget(m.Key, &HoldBudget{Until: be.life.hold.Until, Drain: true})
			}
			e.considerIdle(now, m.Key)
			reply(&Done{})
		}})
	})
}

// deleteHold lifts a budget's hold at once.
func (e *queueCore) deleteHold(now uint64, m *DeleteHold, reply func(any)) {
	be := e.budgets[m.Key]
	if be == nil {
		reply(budgetNotFound(m.Key))
		return
	}
	old := be.life.hold
	be.life.hold = protocol.BudgetHold{}
	if old.Until > now {
		e.collect.holdsReleased++
	}
	e.out.toBudget(m.Key, &HoldBudget{})
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.DeleteBudgetHold(m.Key)
	e.persistOrUndo(batch, reply, &Done{}, func(uint64) {
		if e.budgets[m.Key] == be {
			be.life.hold = old
			e.out.toBudget(m.Key, &HoldBudget{Until: old.Until})
		}
	})
	e.considerIdle(now, m.Key)
}

// loadBudgetExtras restores holds and on-the-fly marks at start-up. A hold
// still in force is handed to its budget, with its drain (SPEC §10.2: the
// pool starts empty at the restart).
func (e *queueCore) loadBudgetExtras(now uint64, x *persistence.BudgetExtras) {
	for key := range x.OnTheFly {
		if be := e.budgets[key]; be != nil {
			be.life.onTheFly = true
		}
	}
	for key, h := range x.Holds {
		be := e.budgets[key]
		if be == nil || h.Until <= now {
			continue
		}
		be.life.hold = h
		e.out.toBudget(key, &HoldBudget{Until: h.Until, Drain: h.Drained})
	}
}

// ---------------------------------------------------------------- collection

// madeOnTheFly marks a budget a create_with made.
func (e *queueCore) madeOnTheFly(be *budgetEntry, batch *persistence.Batch) {
	be.life.onTheFly = true
	batch.MarkBudgetOnTheFly(be.budget.Key)
}

// writtenByAPI unmarks a budget PUT or PATCH wrote: it is never collected.
func (e *queueCore) writtenByAPI(be *budgetEntry, batch *persistence.Batch) {
	if be.life.onTheFly {
		be.life.onTheFly = false
		batch.UnmarkBudgetOnTheFly(be.budget.Key)
	}
	e.unplace(be)
}

// unbound notes a budget whose last bound unfinished job left; it is
// considered at the end of the Receive (flushIdle), with that moment.
func (e *queueCore) unbound(be *budgetEntry) {
	if e.cfg.BudgetIdleTTL > 0 && be.life.onTheFly {
		e.collect.idled = append(e.collect.idled, be.budget.Key)
	}
}

// flushIdle considers the budgets unbound since the last call and arms
// the collect timer. The queue actor calls it at the end of each Receive.
func (e *queueCore) flushIdle(now uint64) {
	for _, key := range e.collect.idled {
		e.considerIdle(now, key)
	}
	e.collect.idled = emptied(e.collect.idled) // map_shrink.go
	e.armCollect()
}

// collectable reports whether a budget may be collected once fresh.
func (e *queueCore) collectable(be *budgetEntry) bool {
	return e.cfg.BudgetIdleTTL > 0 && !e.loading && be.life.onTheFly && be.boundTotal == 0 && len(e.cron.claims[be.budget.Key]) == 0
}

func (e *queueCore) idleTTL() uint64 { return uint64(e.cfg.BudgetIdleTTL.Milliseconds()) }

// considerIdle places a collectable budget in the set, due the TTL after
// now or after its hold ends.
func (e *queueCore) considerIdle(now uint64, key string) {
	be := e.budgets[key]
	if be == nil || !e.collectable(be) {
		return
	}
	e.place(be, addMs(max(now, be.life.hold.Until), e.idleTTL()))
}

func (e *queueCore) place(be *budgetEntry, due uint64) {
	e.unplace(be)
	if e.collect.due == nil {
		e.collect.due = btree.NewG(16, idleLess)
	}
	be.life.idleDue = due
	e.collect.due.ReplaceOrInsert(idleItem{due: due, key: be.budget.Key})
}

// unplace takes a budget out of the set and forgets a query awaited.
func (e *queueCore) unplace(be *budgetEntry) {
	if be.life.idleDue != 0 {
		e.collect.due.Delete(idleItem{due: be.life.idleDue, key: be.budget.Key})
		be.life.idleDue = 0
	}
	be.life.asked = 0
}

// armCollect arms the collect timer for the earliest due budget.
func (e *queueCore) armCollect() {
	if e.collect.due == nil {
		return
	}
	first, ok := e.collect.due.Min()
	if !ok || first.due == e.collect.armed {
		return
	}
	if t, ok := e.out.(collectTimer); ok {
		t.armCollect(first.due)
		e.collect.armed = first.due
	}
}

// onCollectTick asks every budget due by now whether it is fresh.
func (e *queueCore) onCollectTick(now uint64) {
	e.collect.armed = 0
	for e.collect.due != nil {
		first, ok := e.collect.due.Min()
		if !ok || first.due > now {
			break
		}
		e.collect.due.DeleteMin()
		be := e.budgets[first.key]
		if be == nil || be.life.idleDue != first.due {
			continue // deleted, or placed again since
		}
		be.life.idleDue = 0
		if !e.collectable(be) {
			continue
		}
		if be.life.hold.Until > now {
			e.place(be, addMs(be.life.hold.Until, e.idleTTL()))
			continue
		}
		e.collect.gen++
		be.life.asked = e.collect.gen
		e.out.toBudget(first.key, &budgetIdleQuery{gen: e.collect.gen})
	}
	e.armCollect()
}

// onBudgetIdle collects a budget fresh for the TTL, or places it again for
// when it will have been.
func (e *queueCore) onBudgetIdle(now uint64, m *budgetIdleAnswer) {
	be := e.budgets[m.Key]
	if m.epoch != e.epoch || be == nil || be.life.asked != m.gen || m.gen == 0 {
		return // deleted, bound, held or asked again since
	}
	be.life.asked = 0
	if !e.collectable(be) {
		return
	}
	ttl := e.idleTTL()
	switch {
	case m.Busy:
		e.place(be, addMs(now, ttl))
	case addMs(m.At, ttl) > now:
		e.place(be, addMs(m.At, ttl))
	default:
		e.collectBudget(be)
		e.maybeReleaseMemory(now)
	}
	e.armCollect()
}

// collectBudget deletes a budget as DELETE /budgets/{key} would.
func (e *queueCore) collectBudget(be *budgetEntry) {
	key := be.budget.Key
	delete(e.budgets, key)
	e.out.stopBudget(key)
	e.collect.collected++
	if e.tracer.on() {
		e.tracer.emit(Event{Kind: EventBudgetCollected, Actor: "queue", Budget: key})
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.DeleteBudget(key)
	old := be.budget
	e.persistOrUndo(batch, func(any) {}, nil, func(uint64) {
		e.restoreDeletedBudget(old)
		if re := e.budgets[key]; re != nil && re.budget == old {
			re.life.onTheFly = true
		}
	})
}

// ---------------------------------------------------------------- budget actor

// onIdleQuery answers when the budget is fresh again.
func (b *budgetCore) onIdleQuery(now uint64, m *budgetIdleQuery, out *stepOutput) {
	at, ok := b.freshAt(now)
	out.sends = append(out.sends, budgetSend{other: &budgetIdleAnswer{Key: b.key, At: at, Busy: !ok, gen: m.gen, epoch: b.epoch}})
}

// considerLoaded places every loaded on-the-fly budget nothing is bound to.
func (e *queueCore) considerLoaded(now uint64) {
	if e.cfg.BudgetIdleTTL <= 0 {
		return
	}
	for key, be := range e.budgets {
		if be.boundTotal == 0 {
			e.considerIdle(now, key)
		}
	}
}

// armCollect arms the queue actor's one collect timer for at (Unix ms).
func (a *queueActor) armCollect(at uint64) {
	if a.collectCancel != nil {
		a.collectCancel()
	}
	due := uint64(math.MaxUint64)
	if at < math.MaxUint64/nsPerMs {
		due = at * nsPerMs
	}
	a.collectCancel = a.timers.SendOnce(delayUntilNs(due, a.clock.Now()), a.self, &collectTick{})
}

// budgetLog is the logger the budget actors share.
func (a *queueActor) budgetLog() *slog.Logger {
	if a.budgetLogger == nil { // a queue actor made without one (tests)
		a.budgetLogger = a.log
	}
	return a.budgetLogger
}

// stopBudgetActors stops every budget actor, as a parent stops its
// children, when the queue actor stops or restarts (the budget actors are
// spawned from the root: spawnBudget).
func (a *queueActor) stopBudgetActors() {
	for key, l := range a.budgets {
		a.root.Stop(l.pid)
		delete(a.budgets, key)
	}
	a.toBudgets = a.toBudgets[:0]
}
