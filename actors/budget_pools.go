// Durable pool levels (SPEC §10.4, --budget-pools durable): a restart,
// clean or not, never lets a time_based budget grant more than it would
// have without the restart.
//
// How: each answer of a budget actor that granted a reservation carries a
// note of its pool right after the grant (a poolNote): the level settled
// to that moment (a final reservation's debit taken) and the tokens held by
// reservations not yet committed. The queue actor keeps the latest note of
// each budget (its poolMark) and puts it in every batch that marks one of
// that budget's jobs dispatched, so a debit is durable with its dispatch:
// the note that batch carries is the job's own or a later one.
//
// Why the latest stored note, settled to any later instant T and less its
// held tokens, is never above the real level at T: the note's level counts
// every debit made before it; the held tokens cover the reservations then
// granted, whenever they are debited (taking tokens later only leaves the
// pool fuller, as a pool at capacity loses refill); and a job granted after
// the note that reached a worker had its dispatch stored with a later note,
// so the stored one would not be the latest. Refunds, releases and a
// reservation's debit taken at grant only make the stored level lower than
// the truth, never higher. A job whose dispatch was never stored was not
// delivered: it is ready again after the restart and takes its tokens then.
//
// A definition change: the stored level refills at the slowest rate, and
// clamps to the smallest capacity, the budget had since that level was
// taken (PoolLevel; a note taken before the budget applied a change but
// received after it is slowed the same way, poolMark.floor). A change of
// strategy type drops the stored level: a new time_based pool starts full
// (SPEC §4.9).
//
// For other writers of a level (a settlement with its ack, a drain with its
// hold): the budget takes a note with budgetCore.poolNote after
// changing its level, hands it to the queue actor in its answer, and the
// queue actor keeps it with notePool and writes it with the batch of that
// change. A settlement's extra debit is stored before its ack (owePools).

package actors

import (
	"math"
	"sync/atomic"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// EventPoolRestored is traced when a budget's pool starts from its stored
// level.
const EventPoolRestored EventKind = "pool_restored"

// poolNote is a time_based pool's state right after a change its budget
// actor made: level tokens settled at atNs, pending of them held by
// reservations; seq orders the notes of one budget actor (0: no note). Its
// refill is the queue actor's to add (poolMark.floor): a note stays small,
// as every granted answer carries one.
type poolNote struct {
	seq     uint64
	level   float64
	atNs    uint64
	pending uint64
}

// poolMark is what the queue actor knows of a time_based budget's pool for
// durable mode: the latest note, as stored, and the slowest refill since it
// was taken.
type poolMark struct {
	seq   uint64                // the latest note's
	level persistence.PoolLevel // the latest note, with floor's refill
	// floor is the slowest refill (and smallest capacity) of the
	// definitions written since the mark was made. The budget actor
	// applied one of them when it took any note still to come (a note may
	// have been taken before the budget applied a change the queue already
	// wrote; a mark is made at the first note or definition change, and
	// dropped with a change of type).
	floor persistence.PoolLevel
	// inBatch is set while the mark is being put in one batch (putPools).
	inBatch bool
	// owed is what acked settlements debit beyond their dispatch's
	// debit, written with their acks, that no note of the budget counts
	// yet (owePools, onPoolSettled): every note taken meanwhile is lowered
	// by it.
	owed float64
}

// refillOf is a level carrying def's refill and capacity (its level and
// time unset).
func refillOf(def protocol.Definition) persistence.PoolLevel {
	return persistence.PoolLevel{Allocation: def.Allocation, DurationMs: uint64(max(def.Strategy.DurationMs, 0)), Capacity: def.Capacity()}
}

// poolRate is p's refill in tokens per ms (0 when it has none).
func poolRate(p persistence.PoolLevel) float64 {
	if p.DurationMs == 0 {
		return 0
	}
	return float64(p.Allocation) / float64(p.DurationMs)
}

// slower returns p with the slower refill and the smaller capacity of p and
// q, its level clamped to that capacity.
func slower(p, q persistence.PoolLevel) persistence.PoolLevel {
	if poolRate(q) < poolRate(p) {
		p.Allocation, p.DurationMs = q.Allocation, q.DurationMs
	}
	p.Capacity = min(p.Capacity, q.Capacity)
	p.Level = math.Min(p.Level, float64(p.Capacity))
	return p
}

// restoredLevel is the level a time_based pool of definition def starts
// with at now (Unix ns) from the stored level p: p settled to now at the
// slower of its refill and def's, up to the smaller capacity, less the
// tokens it held for reservations then (they may all have been debited
// since). A clock that went back settles nothing. Only a stored debt gives
// a level below zero (held tokens beyond a capacity lowered since leave the
// pool empty).
func restoredLevel(p persistence.PoolLevel, def protocol.Definition, now uint64) float64 {
	debt := p.Level < -tokenEpsilon
	p = slower(p, refillOf(def))
	level := p.Level
	if now > p.AtNs {
		level = math.Min(float64(p.Capacity), level+float64(now-p.AtNs)/nsPerMs*poolRate(p))
	}
	level -= float64(p.Pending)
	if !debt {
		level = math.Max(level, 0)
	}
	return level
}

// restorePool hands a budget actor, as its first message after a start,
// the level its pool had when the server stopped.
type restorePool struct{ level persistence.PoolLevel }

func (*restorePool) isBudgetMsg() {}

// restoreLevel starts the time_based pool from a stored level
// (restoredLevel).
func (b *budgetCore) restoreLevel(now uint64, p persistence.PoolLevel) {
	if b.def.Strategy.Type != protocol.TimeBased {
		return
	}
	b.level = restoredLevel(p, b.def, now)
	b.at = now
	b.evaluateTimer()
}

// poolNoteSeqs numbers pool notes across every budget core, so a core made
// anew under a key (after a failure, budget_recovery.go) never writes a
// note the queue actor takes for an older one.
var poolNoteSeqs atomic.Uint64

// poolNote takes a note of the time_based pool as it is now, after a change
// this budget just made to it, with the level settled (no note for other
// strategies, or without durable pools).
func (b *budgetCore) poolNote() poolNote {
	if !b.durablePools || b.def.Strategy.Type != protocol.TimeBased {
		return poolNote{}
	}
	return poolNote{seq: poolNoteSeqs.Add(1), level: b.level, atNs: b.at, pending: b.held}
}

// notePool keeps n as key's latest pool note (durable mode, time_based
// budgets only; older notes of the same budget actor are ignored).
func (e *queueCore) notePool(key string, n poolNote) *poolMark {
	if n.seq == 0 || !e.cfg.DurablePools {
		return nil
	}
	be := e.budgets[key]
	if be == nil || be.budget.Strategy.Type != protocol.TimeBased {
		return nil
	}
	m := be.pool
	if m == nil {
		m = &poolMark{floor: refillOf(be.budget.Definition())}
		be.pool = m
	}
	if n.seq > m.seq {
		m.seq = n.seq
		m.level = m.floor
		m.level.Level, m.level.AtNs, m.level.Pending = math.Min(n.level, float64(m.floor.Capacity))-m.owed, n.atNs, n.pending
	}
	return m
}

// putPools puts in batch the latest level of each time_based budget of a
// job being marked dispatched in it, once per batch: put collects the marks
// put so far and is handed back; donePools ends the batch.
func (e *queueCore) putPools(en *entry, batch *persistence.Batch, put []*poolMark) []*poolMark {
	for _, b := range en.full().Budgets {
		be := e.budgets[b.Key]
		if be == nil || be.pool == nil || be.pool.inBatch || be.pool.seq == 0 {
			continue
		}
		batch.PutPool(b.Key, be.pool.level)
		be.pool.inBatch = true
		put = append(put, be.pool)
	}
	return put
}

func donePools(put []*poolMark) {
	for _, m := range put {
		m.inBatch = false
	}
}

// poolsOnDefinition keeps the stored level of budget be right across a
// definition change to def, in the batch that writes it (durable mode): a
// change of strategy type drops it, a time_based change slows it to the
// slower refill and smaller capacity of the two.
func (e *queueCore) poolsOnDefinition(be *budgetEntry, old, def protocol.Definition, batch *persistence.Batch) {
	if !e.cfg.DurablePools {
		return
	}
	key := be.budget.Key
	if old.Strategy.Type != protocol.TimeBased || def.Strategy.Type != protocol.TimeBased {
		be.pool = nil
		batch.DeletePool(key)
		return
	}
	m := be.pool
	if m == nil {
		m = &poolMark{floor: refillOf(old)}
		be.pool = m
	}
	m.floor = slower(m.floor, refillOf(def))
	if m.seq > 0 {
		m.level = slower(m.level, m.floor)
		batch.PutPool(key, m.level)
	}
}

// restorePools starts each time_based budget's pool from its stored level
// (durable mode, at load, after the budgets are loaded). The stored level
// is kept as the budget's mark, with no note yet, so a settlement acked
// before the budget's next grant lowers that level (owePools).
func (e *queueCore) restorePools(levels map[string]persistence.PoolLevel) {
	for key, p := range levels {
		be := e.budgets[key]
		if be == nil || be.budget.Strategy.Type != protocol.TimeBased {
			continue
		}
		be.pool = &poolMark{floor: refillOf(be.budget.Definition()), level: slower(p, refillOf(be.budget.Definition()))}
		e.out.toBudget(key, &restorePool{level: p})
	}
}

// ---------------------------------------------------------------- settlement

// owePools makes the settlements of an ack durable with it (durable mode,
// SPEC §10.4): for each that debits beyond its dispatch's debit, the
// budget's stored level is lowered by the difference, in a batch submitted
// before the ack's (batches are written in the order submitted, so an ack
// that is durable has its debit stored too). Until the budget's note that
// counts the settlement arrives (onPoolSettled), the debit is owed: notes
// taken before it are lowered by it. A credit changes nothing stored: the
// stored level stays below the true one, on the safe side.
func (e *queueCore) owePools(pending []pendingSettle) {
	if !e.cfg.DurablePools {
		return
	}
	var batch *persistence.Batch
	for i := range pending {
		p := &pending[i]
		be := e.budgets[p.key]
		if p.msg.Cost <= p.msg.Reserved || be == nil || be.pool == nil || be.budget.Strategy.Type != protocol.TimeBased {
			continue
		}
		extra := float64(p.msg.Cost - p.msg.Reserved)
		be.pool.owed += extra
		be.pool.level.Level -= extra
		p.msg.Owed = extra
		if batch == nil {
			batch = persistence.NewBatch(e.cfg.DefaultSync)
		}
		batch.PutPool(p.key, be.pool.level)
	}
	if batch != nil {
		e.out.persist(batch, func(error) {}) // a refused write: the ack after it is refused too
	}
}

// poolSettled is a budget's note of its pool right after it applied a
// settlement the queue counted as owed (Owed, SettleCost.Owed).
type poolSettled struct {
	Key   string
	Note  poolNote
	Owed  float64
	epoch uint64
}

func (*poolSettled) isQueueMsg() {}

// onPoolSettled ends what a settlement owed: the note carried counts it.
func (e *queueCore) onPoolSettled(m *poolSettled) {
	be := e.budgets[m.Key]
	if m.epoch != e.epoch || be == nil || be.pool == nil {
		return
	}
	be.pool.owed = math.Max(0, be.pool.owed-m.Owed)
	e.notePool(m.Key, m.Note)
}
