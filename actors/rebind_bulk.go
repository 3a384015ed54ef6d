package actors

import (
	"context"
	"sort"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Budget rebinding, bulk routes (SPEC §8.3.5).

// RebindJobs applies one change to every listed job that still matches
// Filter's non-jq filters, in one transaction. Op is RebindAdd, RebindPut,
// RebindCost, RebindRemove or RebindClear.
type RebindJobs struct {
	IDs     []string
	Filter  *protocol.JobFilter
	Op      RebindOp
	Binding protocol.NewBinding
}

// RebindJobsResponse counts the rewritten jobs and lists the in-flight
// ones the change would have altered, by ascending id.
type RebindJobsResponse struct {
	Changed int
	Blocked []string
}

func (*RebindJobs) isQueueMsg() {}

// RebindJobs selects every visible job matching f and applies the change.
func (e *Engine) RebindJobs(ctx context.Context, f *protocol.JobFilter, op RebindOp, b protocol.NewBinding) (*RebindJobsResponse, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	var ids []string
	if err := e.matchIDs(ctx, f, "", false, queryBatch, func(batch []string) (bool, error) {
		return e.readMatching(ctx, f, batch, func(j *protocol.Job) bool {
			if !j.Status.Terminal() {
				ids = append(ids, j.ID)
			}
			return true
		})
	}); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &RebindJobs{IDs: ids, Filter: f, Op: op, Binding: b})
	if err != nil {
		return nil, err
	}
	return res.(*RebindJobsResponse), nil
}

func (e *queueCore) rebindJobs(now uint64, m *RebindJobs, reply func(any)) {
	var set []protocol.NewBinding
	switch m.Op {
	case RebindAdd, RebindPut, RebindCost:
		if m.Binding.Cost == 0 {
			reply(protocol.Unprocessable("budget '%s' cost must be at least 1", m.Binding.Key))
			return
		}
		set = []protocol.NewBinding{m.Binding}
	}
	created := make(map[string]*protocol.Budget)
	var createdOrder []string
	if err := e.resolveBindings(now, &protocol.NewJob{Bindings: set}, created, &createdOrder); err != nil {
		reply(err)
		return
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	e.createBudgets(created, createdOrder, batch)
	ids := append([]string(nil), m.IDs...)
	sort.Strings(ids)
	resp := &RebindJobsResponse{Blocked: []string{}}
	u := &undoLog{}
	single := &RebindJob{Op: m.Op, Binding: m.Binding}
	var scratch protocol.Job // what a compact job is read into (queued_compact.go)
	var cold entryScratch    // a cold job thaws only if it changes (coldjobs.go)
	for _, id := range ids {
		en := e.jobs.lookID(id, &cold)
		if en == nil || (m.Filter != nil && !m.Filter.MatchMeta(en.peek(&scratch), en.visibleStatus(now))) {
			continue
		}
		list, changed, _, err := rebindList(id, en.budgets(), single)
		if err != nil || !changed || len(list) > protocol.MaxBindings {
			continue // already bound (POST), not bound (PATCH), or full
		}
		if en.state == stInFlight || en.state == stReserving {
			resp.Blocked = append(resp.Blocked, id)
			continue
		}
		en = e.jobs.get(id)
		u.noteJob(en)
		e.applyBindings(en, list)
		e.putRecord(en, batch)
		resp.Changed++
	}
	e.persistOrRestoreRebind(batch, reply, resp, u, createdOrder)
	e.pump(now)
}
