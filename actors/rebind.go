package actors

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Budget rebinding of one job (SPEC §8.3.4).

// RebindOp is the change a rebinding route makes.
type RebindOp int

// The rebinding changes.
const (
	RebindAdd    RebindOp = iota // POST /jobs/{id}/budgets/{key}
	RebindPut                    // PUT /jobs/{id}/budgets/{key}
	RebindCost                   // PATCH /jobs/{id}/budgets/{key}
	RebindRemove                 // DELETE /jobs/{id}/budgets/{key}
	RebindSet                    // PUT /jobs/{id}/budgets
	RebindClear                  // DELETE /jobs/{id}/budgets
)

// RebindJob changes one job's bindings. Binding is the key (and cost,
// create_with) of the single-key ops; Set is the list of RebindSet.
type RebindJob struct {
	ID      string
	Op      RebindOp
	Binding protocol.NewBinding
	Set     []protocol.NewBinding
}

func (*RebindJob) isQueueMsg() {}

// RebindJob applies a single-job rebinding and returns the job without
// payload. A job caught between ready and in flight (gathering its budget
// holds) is rebound by the queue actor as soon as that reservation ends.
func (e *Engine) RebindJob(ctx context.Context, m *RebindJob) (*protocol.JobView, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, m)
	if err != nil {
		return nil, err
	}
	return res.(*JobResponse).Job, nil
}

// upstreamStatus is upstream's internal status name used in §8.3.4 texts.
func upstreamStatus(st protocol.Status) string {
	switch st {
	case protocol.StatusInFlight:
		return "InFlight"
	case protocol.StatusCompleted:
		return "Completed"
	case protocol.StatusDead:
		return "Dead"
	}
	return string(st)
}

func notQueued(id string, st protocol.Status) error {
	return protocol.Unprocessable("job '%s' is %s \u2014 only queued jobs may have their budgets changed", id, upstreamStatus(st))
}

// rebindList computes the job's new bindings, whether they differ, and
// the bindings whose cost the request sets (to resolve).
func rebindList(id string, old []protocol.Binding, m *RebindJob) (out []protocol.Binding, changed bool, set []protocol.NewBinding, err error) {
	key := m.Binding.Key
	idx := -1
	for i, b := range old {
		if b.Key == key {
			idx = i
		}
	}
	costZero := func(k string) error { return protocol.Unprocessable("budget '%s' cost must be at least 1", k) }
	out = append([]protocol.Binding(nil), old...)
	switch m.Op {
	case RebindAdd:
		if idx >= 0 {
			return nil, false, nil, protocol.Errorf(protocol.CodeConflict, "job '%s' already draws on budget '%s'. Use PUT to replace the binding, or PATCH to change its cost.", id, key)
		}
		if m.Binding.Cost == 0 {
			return nil, false, nil, costZero(key)
		}
		out = append(out, protocol.Binding{Key: key, Cost: m.Binding.Cost})
		return out, true, []protocol.NewBinding{m.Binding}, nil
	case RebindPut, RebindCost:
		if m.Op == RebindCost && idx < 0 {
			return nil, false, nil, protocol.Errorf(protocol.CodeNotFound, "job '%s' does not draw on budget '%s'", id, key)
		}
		if m.Binding.Cost == 0 {
			return nil, false, nil, costZero(key)
		}
		if idx >= 0 {
			if out[idx].Cost == m.Binding.Cost {
				return old, false, nil, nil
			}
			out[idx].Cost = m.Binding.Cost
		} else {
			out = append(out, protocol.Binding{Key: key, Cost: m.Binding.Cost})
		}
		return out, true, []protocol.NewBinding{m.Binding}, nil
	case RebindRemove:
		if idx < 0 {
			return old, false, nil, nil
		}
		return append(out[:idx], out[idx+1:]...), true, nil, nil
	case RebindClear:
		return nil, len(old) > 0, nil, nil
	case RebindSet:
		seen := make(map[string]bool, len(m.Set))
		out = make([]protocol.Binding, 0, len(m.Set))
		for _, b := range m.Set {
			if seen[b.Key] {
				return nil, false, nil, protocol.Unprocessable("budget '%s' named more than once", b.Key)
			}
			seen[b.Key] = true
			if b.Cost == 0 {
				return nil, false, nil, costZero(b.Key)
			}
			out = append(out, protocol.Binding{Key: b.Key, Cost: b.Cost})
		}
		same := len(out) == len(old)
		for i := 0; same && i < len(out); i++ {
			same = out[i] == old[i]
		}
		if same {
			return old, false, nil, nil
		}
		if len(out) == 0 {
			out = nil
		}
		return out, true, m.Set, nil
	}
	return nil, false, nil, fmt.Errorf("actors: unknown rebind op %d", m.Op)
}

func (e *queueCore) rebindJob(now uint64, m *RebindJob, reply func(any)) {
	var cold entryScratch // a cold job thaws only if it changes (coldjobs.go)
	en := e.jobs.lookID(m.ID, &cold)
	if en == nil {
		if t, ok := e.terminal[m.ID]; ok && (t.purgeAt == 0 || t.purgeAt > now) {
			st := protocol.StatusCompleted
			if t.dead {
				st = protocol.StatusDead
			}
			reply(notQueued(m.ID, st))
			return
		}
		reply(protocol.Errorf(protocol.CodeNotFound, "job '%s' not found", m.ID))
		return
	}
	switch en.state {
	case stInFlight:
		reply(notQueued(m.ID, protocol.StatusInFlight))
		return
	case stReserving:
		// Decide once the reservation has ended in dispatch or parking.
		e.afterReservation(m.ID, func(now uint64) { e.rebindJob(now, m, reply) })
		return
	}
	list, changed, set, err := rebindList(m.ID, en.budgets(), m)
	if err != nil {
		reply(err)
		return
	}
	if !changed {
		var scratch protocol.Job // what a compact job is read into (queued_compact.go)
		reply(&JobResponse{Job: en.peek(&scratch).View(now, false)})
		return
	}
	if len(list) > protocol.MaxBindings {
		reply(protocol.Unprocessable("job '%s' cannot draw on more than %d budgets", m.ID, protocol.MaxBindings))
		return
	}
	created := make(map[string]*protocol.Budget)
	var createdOrder []string
	if err := e.resolveBindings(now, &protocol.NewJob{Bindings: set}, created, &createdOrder); err != nil {
		reply(err)
		return
	}
	en = e.jobs.get(m.ID) // it changes: a cold job thaws
	j := en.full()
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	e.createBudgets(created, createdOrder, batch)
	u := &undoLog{}
	u.noteJob(en)
	e.applyBindings(en, list)
	e.putRecord(en, batch)
	e.persistOrRestoreRebind(batch, reply, &JobResponse{Job: j.View(now, false)}, u, createdOrder)
	e.pump(now)
}

// applyBindings moves the job's bound counts to its new bindings and, for
// a ready job, takes it off any budget it was parked on and places it again
// at its (priority, id) place (SPEC §8.3.6). A scheduled job only carries
// the new bindings.
func (e *queueCore) applyBindings(en *entry, list []protocol.Binding) {
	e.unbind(en.full())
	k := idKey(en.full().ID)
	e.indexKeys(en.full(), k, false)
	defer func() { e.indexKeys(en.full(), k, true) }()
	if en.state == stReady || en.state == stParked {
		e.detach(en)
		en.full().Budgets = list
		e.makeReady(en)
	} else {
		en.full().Budgets = list
	}
	e.bind(en.full())
}
