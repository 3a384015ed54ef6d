package actors

// The model test's part for SPEC §10: settlement (ack and failure with a
// settle list), holds (PUT/DELETE /budgets/{key}/hold, with and without
// drain) and idle collection of create_with budgets (runs with an idle TTL,
// the collect timer simulated like the others).
//
// The reference model keeps, per key, the hold in force as the API set it,
// whether the budget is on the fly (made by create_with, not written since),
// when a bound job last existed, and the settlements each accepted ack owes.
// The invariants added:
//   - held-dispatch: a reservation a budget handles after the hold reached
//     it is not granted before the hold's end (the hold a budget must keep
//     is the model's, whatever happened to the actor: a budget made anew
//     after a failure keeps it);
//   - hold-value: the end a budget is told is the later of the old and the
//     new hold (never shortened), 0 once deleted;
//   - settle-sent / settle-lost: every settle entry of an accepted ack is
//     sent to its budget once, with the binding's cost as reserved;
//   - pool-over-capacity: after every step a time_based level is at most
//     its capacity (a settlement credit, a refund, a refill are capped);
//   - time-based-window (model_test.go, recordCommit): the tokens granted in
//     a window are at most capacity + allocation·w/duration + the net
//     settlement applied to the pool inside that window (see settledIn);
//   - collected: a collected budget was on the fly, had no bound unfinished
//     job and no hold for the TTL, and its pool was full and untouched for
//     the TTL; after the liveness drain every such budget is collected.

import (
	"fmt"
	"sort"

	"github.com/tollgate/tollgate/protocol"
)

// settleSpec is one settle entry of an ack or failure: on the Job-th
// acked job (by pick), its Bind-th binding (modulo), with real cost Cost.
// Foreign names a key the job is not bound to (422 expected).
type settleSpec struct {
	Job, Bind int
	Cost      uint32
	Foreign   bool
}

// holdSpec is a PUT /budgets/{key}/hold: until = now + In (In < 0: in the
// past), or for_ms = max(In, 0) when ForMs.
type holdSpec struct {
	In    int64
	ForMs bool
	Drain bool
}

// modelSettle is a settlement a time_based budget applied: the pool moved
// by delta (reserved − real cost, before capping) at step seq.
type modelSettle struct {
	seq   uint64
	at    uint64
	delta float64
}

type settleKey struct{ job, key string }

// simExt is the model's state for SPEC §10.
type simExt struct {
	ttl       uint64            // --budget-idle-ttl (ms); 0: no collection
	collectAt uint64            // the collect timer (0: not armed)
	holds     map[string]uint64 // the hold in force as the API set it (end, Unix ms)
	holdEnded map[string]uint64 // when the last hold ended or will end
	onTheFly  map[string]bool
	lastBound map[string]uint64          // last moment a job bound to the key was unfinished
	owed      map[settleKey][]SettleCost // settlements accepted, not yet sent
	holdSent  map[*HoldBudget]uint64     // the hold each HoldBudget message must set (model's)
	stash     map[string]*simBudget      // budgets stopped in this step, for the collection check

	settles, debts, holdOps, drains, collections, heldRefusals int
}

func newSimExt() simExt {
	return simExt{
		holds:     make(map[string]uint64),
		holdEnded: make(map[string]uint64),
		onTheFly:  make(map[string]bool),
		lastBound: make(map[string]uint64),
		owed:      make(map[settleKey][]SettleCost),
		holdSent:  make(map[*HoldBudget]uint64),
		stash:     make(map[string]*simBudget),
	}
}

// armCollect is the collect timer (collectTimer): fired by poll.
func (s *sim) armCollect(at uint64) { s.ext.collectAt = at }

// pollCollect fires the collect timer when due.
func (s *sim) pollCollect() {
	if s.ext.collectAt != 0 && s.ext.collectAt <= s.now {
		s.ext.collectAt = 0
		s.push(simMsg{qm: &collectTick{}})
	}
}

// modelHoldAt is the model's hold on key in force at now (0: none).
func (s *sim) modelHoldAt(key string) uint64 {
	if h := s.ext.holds[key]; h > s.now {
		return h
	}
	return 0
}

// ---------------------------------------------------------------- ops

func (s *sim) doHold(op simOp) {
	_, exists := s.mbudgets[op.Key]
	req := protocol.HoldRequest{Drain: op.Hold.Drain}
	if op.Hold.ForMs {
		v := uint64(max(op.Hold.In, 0))
		req.ForMs = &v
	} else {
		v := uint64(max(int64(s.now)+op.Hold.In, 0))
		req.Until = &v
	}
	old := s.ext.holds[op.Key]
	if exists {
		// what the hold must be from now on, set before the engine runs:
		// it tells the budget at once
		until := max(req.End(s.now), old)
		if until > s.now {
			s.ext.holds[op.Key] = until
			s.ext.holdEnded[op.Key] = until
		} else {
			delete(s.ext.holds, op.Key)
		}
		s.ext.holdOps++
		if op.Hold.Drain {
			s.ext.drains++
		}
	}
	s.expectHoldVerdict(op, exists, "put hold", func(reply func(any)) {
		s.eng.putHold(s.now, &PutHold{Key: op.Key, Req: req}, reply)
	})
}

// expectHoldVerdict runs a hold operation and checks that it was answered,
// accepted exactly when the budget exists in the model.
func (s *sim) expectHoldVerdict(op simOp, exists bool, what string, run func(reply func(any))) {
	replied := false
	run(func(m any) {
		replied = true
		_, ok := m.(*Done)
		if ok != exists {
			s.fail("hold-verdict", "%s accepted=%v, model expected %v (%v)", op, ok, exists, m)
		}
	})
	if !replied {
		s.fail("no-reply", "%s was never answered", what)
	}
}

func (s *sim) doUnhold(op simOp) {
	_, exists := s.mbudgets[op.Key]
	if exists {
		if s.modelHoldAt(op.Key) != 0 {
			s.ext.holdEnded[op.Key] = s.now
		}
		delete(s.ext.holds, op.Key)
	}
	s.expectHoldVerdict(op, exists, "delete hold", func(reply func(any)) {
		s.eng.deleteHold(s.now, &DeleteHold{Key: op.Key}, reply)
	})
}

// settleLists builds the settle lists of an ack or failure of jobs (by
// position) from op.Settle: the lists by job id, and whether one entry
// names a key the job is not bound to. Duplicate keys of one job are
// skipped (the HTTP layer refuses them with 400).
func (s *sim) settleLists(op simOp, jobs []*mJob) (map[string][]protocol.Settlement, bool) {
	if len(op.Settle) == 0 || len(jobs) == 0 {
		return nil, false
	}
	lists := make(map[string][]protocol.Settlement)
	foreign := false
	for _, sp := range op.Settle {
		mj := jobs[sp.Job%len(jobs)]
		var key string
		switch {
		case sp.Foreign:
			key = "unbound"
			foreign = true
		case len(mj.bindings) == 0:
			continue
		default:
			key = mj.bindings[sp.Bind%len(mj.bindings)].Key
		}
		dup := false
		for _, e := range lists[mj.id] {
			dup = dup || e.Key == key
		}
		if !dup {
			lists[mj.id] = append(lists[mj.id], protocol.Settlement{Key: key, Cost: sp.Cost})
		}
	}
	return lists, foreign
}

// owe records the settlements an accepted ack of mj sends.
func (s *sim) owe(mj *mJob, list []protocol.Settlement) {
	for _, e := range list {
		for _, b := range mj.bindings {
			if b.Key == e.Key {
				k := settleKey{mj.id, e.Key}
				s.ext.owed[k] = append(s.ext.owed[k], SettleCost{JobID: mj.id, Reserved: b.Cost, Cost: e.Cost})
				s.ext.settles++
				if e.Cost > b.Cost {
					s.ext.debts++
				}
			}
		}
	}
}

// ---------------------------------------------------------------- hooks

// sentToBudget checks a §10 message the engine sends to key's budget as
// it is sent (sb nil: the budget is gone, the message is dropped).
func (s *sim) sentToBudget(key string, sb *simBudget, msg budgetMsg) {
	switch m := msg.(type) {
	case *SettleCost:
		k := settleKey{m.JobID, key}
		list := s.ext.owed[k]
		if len(list) == 0 {
			s.fail("settle-sent", "engine settles job %s on %s (reserved %d, cost %d), which the model owes nothing", m.JobID, key, m.Reserved, m.Cost)
			return
		}
		want := list[0]
		want.Owed = m.Owed // the durable-pools bookkeeping (budget_pools.go owePools), not the settlement
		if want != *m {
			s.fail("settle-sent", "engine settles %+v on %s, model expected %+v", *m, key, list[0])
		}
		if len(list) == 1 {
			delete(s.ext.owed, k)
		} else {
			s.ext.owed[k] = list[1:]
		}
	case *HoldBudget:
		want := s.modelHoldAt(key)
		got := m.Until
		if got <= s.now {
			got = 0
		}
		if got != want {
			s.fail("hold-value", "engine tells %s its hold ends at %d, model says %d (now %d)", key, m.Until, want, s.now)
		}
		s.ext.holdSent[m] = want
	}
}

// stepped observes a budget step on a §10 message or a grant: before is
// whether the core was time_based when it took m.
func (s *sim) stepped(sb *simBudget, m budgetMsg, timeBased bool) {
	if c := sb.core; c.def.Strategy.Type == protocol.TimeBased {
		if c.level > float64(c.def.Capacity())+tokenEpsilon {
			// every change but a debit caps the level at the capacity
			s.fail("pool-over-capacity", "budget %s %s: level %.3f after %T, capacity %d", sb.key, modelDefString(c.def), c.level, m, c.def.Capacity())
		}
		// when the pool, as it is now, is full again (for the collection check)
		if tok, capacity := c.levelAt(s.now*nsPerMs), float64(c.def.Capacity()); tok < capacity-tokenEpsilon {
			sb.fullAt = float64(s.now) + (capacity-tok)*float64(c.def.Strategy.DurationMs)/float64(c.def.Allocation)
		}
	}
	switch m := m.(type) {
	case *HoldBudget:
		if want, ok := s.ext.holdSent[m]; ok {
			sb.modelHold = want
			delete(s.ext.holdSent, m)
		}
		if m.Drain {
			sb.lastPoolEvent = s.now
		}
	case *SettleCost:
		if timeBased {
			sb.settles = append(sb.settles, modelSettle{seq: s.seq, at: s.now, delta: float64(m.Reserved) - float64(m.Cost)})
			sb.lastPoolEvent = s.now
		}
	case *ReserveRequest:
		a := sb.out.sends[0].answer
		if !a.Granted {
			if sb.modelHold > s.now {
				s.ext.heldRefusals++
			}
			return
		}
		sb.lastPoolEvent = s.now
		if sb.modelHold > s.now {
			s.fail("held-dispatch", "budget %s granted job %s at %d while held until %d", sb.key, m.Job.ID, s.now-simEpoch, sb.modelHold-simEpoch)
		}
	}
}

// The window bound with settlements (recordCommit): let F be the free
// tokens (level − held). F ≤ capacity always; a grant takes its cost from F
// and needs F ≥ cost, so F ≥ 0 right after it; a refill adds at most
// allocation·dt/duration, a settlement at most its reserved − cost (a
// credit is capped, a debit is not), a drain and a hold only lower or keep
// it, a release gives back a grant that is not counted. Summing from just
// before the first grant of a window to just after its last: granted ≤
// capacity + allocation·w/duration + the settlements applied in between.

// trimSettles drops the settlements older than every commit kept.
func (sb *simBudget) trimSettles() {
	if len(sb.commits) == 0 {
		sb.settles = sb.settles[:0]
		return
	}
	first := sb.commits[0].seq
	i := sort.Search(len(sb.settles), func(i int) bool { return sb.settles[i].seq > first })
	if i > 0 {
		sb.settles = append(sb.settles[:0], sb.settles[i:]...)
	}
}

// onCollected checks a collection the engine traced.
func (s *sim) onCollected(key string) {
	s.ext.collections++
	sb := s.ext.stash[key]
	_, bound := s.maxBound(key)
	switch {
	case s.ext.ttl == 0:
		s.fail("collected", "budget %s collected without an idle TTL", key)
	case !s.ext.onTheFly[key]:
		s.fail("collected", "budget %s collected, but it was not made by create_with or was written since", key)
	case bound > 0:
		s.fail("collected", "budget %s collected with %d unfinished jobs bound", key, bound)
	case s.ext.lastBound[key]+s.ext.ttl > s.now:
		s.fail("collected", "budget %s collected %d ms after its last bound job left, TTL %d", key, s.now-s.ext.lastBound[key], s.ext.ttl)
	case s.ext.holdEnded[key]+s.ext.ttl > s.now:
		s.fail("collected", "budget %s collected with a hold that ends (or ended) at %d, TTL %d, now %d", key, s.ext.holdEnded[key], s.ext.ttl, s.now)
	case sb == nil:
		s.fail("collected", "budget %s collected but its actor was not stopped", key)
	case sb.core.parked.Len() > 0 || sb.core.inFlight > 0 || sb.core.held > 0:
		s.fail("collected", "budget %s collected with parked %d, in flight %d, held %d", key, sb.core.parked.Len(), sb.core.inFlight, sb.core.held)
	case sb.lastPoolEvent+s.ext.ttl > s.now && sb.lastPoolEvent != 0:
		s.fail("collected", "budget %s collected %d ms after its pool last moved, TTL %d", key, s.now-sb.lastPoolEvent, s.ext.ttl)
	case sb.fullAt+float64(s.ext.ttl) > float64(s.now)+1: // the engine rounds to whole ms
		s.fail("collected", "budget %s %s collected at %d, its pool was full again at %.1f only, TTL %d", key, modelDefString(sb.core.def), s.now-simEpoch, sb.fullAt-simEpoch, s.ext.ttl)
	case sb.core.def.Strategy.Type == protocol.TimeBased && sb.core.tokens(s.now*nsPerMs)+tokenEpsilon < float64(sb.core.def.Capacity()):
		s.fail("collected", "budget %s %s collected with %.3f tokens, capacity %d", key, modelDefString(sb.core.def), sb.core.tokens(s.now*nsPerMs), sb.core.def.Capacity())
	}
	delete(s.mbudgets, key)
	delete(s.ext.holds, key)
	delete(s.ext.onTheFly, key)
	delete(s.ext.holdEnded, key)
}

// collectedBy is the liveness of collection: with a TTL, once no job is
// left, the clock runs on (to the collect timer) until every on-the-fly
// budget is collected.
func (s *sim) collectedBy() {
	if s.ext.ttl == 0 || s.viol != nil {
		return
	}
	for round := 0; round < 200 && s.viol == nil && s.ext.collectAt != 0; round++ {
		dt := uint64(1)
		if s.ext.collectAt > s.now {
			dt = s.ext.collectAt - s.now
		}
		s.exec(simOp{Kind: opAdvance, Dt: dt, Drain: -1})
	}
	for key := range s.mbudgets {
		if s.ext.onTheFly[key] {
			s.fail("not-collected", "on-the-fly budget %s with nothing bound is still there at %d (TTL %d, collect timer %d)", key, s.now-simEpoch, s.ext.ttl, s.ext.collectAt)
			return
		}
	}
}

// checkExtQuiescent: with nothing pending, every settlement owed was sent.
func (s *sim) checkExtQuiescent() {
	for k, list := range s.ext.owed {
		s.fail("settle-lost", "job %s acked with a settle entry for %s (%+v) that never reached the budget", k.job, k.key, list)
		return
	}
}

// genSettle adds settle entries to an ack or failure of n picks.
func (s *sim) genSettle(op *simOp, n int) {
	r := s.rng
	if r.IntN(3) != 0 {
		return
	}
	for range 1 + r.IntN(3) {
		sp := settleSpec{Job: r.IntN(max(n, 1)), Bind: r.IntN(3)}
		switch y := r.IntN(10); {
		case y < 3:
			sp.Cost = 0
		case y < 7:
			sp.Cost = uint32(r.IntN(6))
		case y < 9:
			sp.Cost = 3 + uint32(r.IntN(12)) // often a debt
		default:
			sp.Cost = 20 + uint32(r.IntN(30))
		}
		if r.IntN(40) == 0 {
			sp.Foreign = true
		}
		op.Settle = append(op.Settle, sp)
	}
}

// genHold makes a hold or an unhold op.
func (s *sim) genHold(op *simOp) {
	r := s.rng
	op.Key = simKeys[r.IntN(len(simKeys))]
	if r.IntN(4) == 0 {
		op.Kind = opUnhold
		return
	}
	op.Kind = opHold
	switch y := r.IntN(10); {
	case y < 1:
		op.Hold.In = -int64(r.IntN(50)) // past: holds nothing
	case y < 7:
		op.Hold.In = int64(r.IntN(300))
	default:
		op.Hold.In = 300 + int64(r.IntN(2000))
	}
	op.Hold.ForMs = r.IntN(2) == 0
	op.Hold.Drain = r.IntN(3) == 0
}

func (o simOp) extString() string {
	var b fmtBuilder
	for _, sp := range o.Settle {
		if sp.Foreign {
			b.f(" settle{#%d unbound:%d}", sp.Job, sp.Cost)
		} else {
			b.f(" settle{#%d b%d:%d}", sp.Job, sp.Bind, sp.Cost)
		}
	}
	switch o.Kind {
	case opHold:
		kind := "until now+"
		if o.Hold.ForMs {
			kind = "for_ms "
		}
		b.f(" %s %s%d drain=%v", o.Key, kind, o.Hold.In, o.Hold.Drain)
	case opUnhold:
		b.f(" %s", o.Key)
	}
	return b.s
}

type fmtBuilder struct{ s string }

func (b *fmtBuilder) f(format string, args ...any) { b.s += fmt.Sprintf(format, args...) }
