// Settlement on the queue side (SPEC §10.1): an ack or failure report may
// carry the job's real cost on some of its budgets. The queue core checks
// that every settled key is bound to the job (after the job lookup, before
// anything changes), acks or fails the job as usual, and once that write is
// durable sends each budget a SettleCost with the cost the dispatch debited
// (the binding's cost: an in-flight job's bindings never change, §8.3.1).
// A refused write settles nothing. The job's stored bindings never change.

package actors

import (
	"context"

	"github.com/tollgate/tollgate/protocol"
)

// pendingSettle is a settlement waiting for its ack to be durable.
type pendingSettle struct {
	key string
	msg SettleCost
}

// checkSettle is the 422 of a settle list naming a budget the job is not
// bound to.
func checkSettle(j *protocol.Job, list []protocol.Settlement) error {
	for _, s := range list {
		if _, ok := bindingCost(j.Budgets, s.Key); !ok {
			return protocol.Unprocessable("budget '%s' is not bound to job %s", s.Key, j.ID)
		}
	}
	return nil
}

// settlementsOf turns a job's checked settle list into the messages its
// budgets get.
func settlementsOf(j *protocol.Job, list []protocol.Settlement, into []pendingSettle) []pendingSettle {
	for _, s := range list {
		reserved, _ := bindingCost(j.Budgets, s.Key)
		into = append(into, pendingSettle{key: s.Key, msg: SettleCost{JobID: j.ID, Reserved: reserved, Cost: s.Cost}})
	}
	return into
}

// inFlightJob returns the job if it is in flight.
func (e *queueCore) inFlightJob(id string) (*protocol.Job, bool) {
	en := e.jobs.get(id)
	if en == nil || en.state != stInFlight {
		return nil, false
	}
	return en.full(), true
}

// ackSettling acks m.IDs; the settle lists of the ids in flight are checked
// first (one key not bound fails the whole request, nothing acked), those
// of ids not in flight are ignored.
func (e *queueCore) ackSettling(now uint64, m *AckJobs, reply func(any)) {
	if len(m.Settle) == 0 {
		e.ack(now, m.IDs, reply)
		return
	}
	var pending []pendingSettle
	seen := make(map[string]bool, len(m.Settle))
	for _, id := range m.IDs {
		list := m.Settle[id]
		if len(list) == 0 || seen[id] {
			continue
		}
		seen[id] = true
		j, ok := e.inFlightJob(id)
		if !ok {
			continue
		}
		if err := checkSettle(j, list); err != nil {
			reply(err)
			return
		}
		pending = settlementsOf(j, list, pending)
	}
	e.owePools(pending)
	e.ack(now, m.IDs, e.settleWhenDurable(pending, reply))
}

// failSettling is fail with a settle list, checked once the job is known
// to be in flight.
func (e *queueCore) failSettling(now uint64, m *FailJob, reply func(any)) {
	j, ok := e.inFlightJob(m.ID)
	if !ok || len(m.Settle) == 0 {
		e.fail(now, m, reply)
		return
	}
	if err := checkSettle(j, m.Settle); err != nil {
		reply(err)
		return
	}
	pending := settlementsOf(j, m.Settle, nil)
	e.owePools(pending)
	e.fail(now, m, e.settleWhenDurable(pending, reply))
}

// settleWhenDurable wraps a request's reply: when the request's write is
// durable (the reply is not an error), the settlements are sent from the
// queue actor and then the client is answered, so a state read after the
// answer sees them. An error reply (a refused write) settles nothing.
func (e *queueCore) settleWhenDurable(pending []pendingSettle, reply func(any)) func(any) {
	if len(pending) == 0 {
		return reply
	}
	out := e.out
	return func(resp any) {
		if _, failed := resp.(error); failed {
			reply(resp)
			return
		}
		// called by the group committer: come back into the actor
		out.toSelf(&commitDone{then: func(now uint64, _ error) {
			for _, p := range pending {
				msg := p.msg
				e.out.toBudget(p.key, &msg)
			}
			reply(resp)
		}})
	}
}

// AckSettling reports success for in-flight jobs with their settle lists
// (by job id; SPEC §10.1) and returns the IDs that were not in flight. A
// settle entry naming a budget an in-flight job is not bound to fails the
// whole request with 422 and acks nothing.
func (e *Engine) AckSettling(ctx context.Context, ids []string, settle map[string][]protocol.Settlement) ([]string, error) {
	res, err := e.call(ctx, &AckJobs{IDs: ids, Settle: settle})
	if err != nil {
		return nil, err
	}
	return res.(*AckJobsResponse).NotFound, nil
}

// FailSettling reports a failure of an in-flight job with its settle list.
func (e *Engine) FailSettling(ctx context.Context, id string, req *protocol.FailureRequest, settle []protocol.Settlement) (*protocol.JobView, error) {
	res, err := e.call(ctx, &FailJob{ID: id, Req: req, Settle: settle})
	if err != nil {
		return nil, err
	}
	return res.(*JobResponse).Job, nil
}
