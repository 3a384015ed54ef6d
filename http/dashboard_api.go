package http

// Read endpoints the dashboard (/ui/) needs and the rest of the API did not
// have: every queue's counts and every budget's pool in one answer
// (GET /stats), and the head of a budget's parked line
// (GET /budgets/{key}/parked). Both speak JSON and msgpack like the rest.

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

// Parked line limits of GET /budgets/{key}/parked.
const (
	defaultLineLimit = 100
	maxLineLimit     = 2000
)

// queueStatsBody is one queue of GET /stats: jobs by visible status (a
// parked job is ready and also counted in parked) and the traffic counters
// since the server started.
type queueStatsBody struct {
	Queue      string `json:"queue" msgpack:"queue"`
	Ready      int    `json:"ready" msgpack:"ready"`
	Parked     int    `json:"parked" msgpack:"parked"`
	Scheduled  int    `json:"scheduled" msgpack:"scheduled"`
	InFlight   int    `json:"in_flight" msgpack:"in_flight"`
	Completed  int    `json:"completed" msgpack:"completed"`
	Dead       int    `json:"dead" msgpack:"dead"`
	Enqueued   uint64 `json:"enqueued" msgpack:"enqueued"`
	Dispatched uint64 `json:"dispatched" msgpack:"dispatched"`
	Acked      uint64 `json:"acked" msgpack:"acked"`
	Failed     uint64 `json:"failed" msgpack:"failed"`
}

// statsBody is the body of GET /stats; a section left out by `include`
// is absent.
type statsBody struct {
	// At is the server time of the answer (Unix ms).
	At      uint64              `json:"at" msgpack:"at"`
	Queues  *[]queueStatsBody   `json:"queues,omitempty" msgpack:"queues,omitempty"`
	Budgets *[]*budgetStateBody `json:"budgets,omitempty" msgpack:"budgets,omitempty"`
	// Streams is the number of open take streams (with the queues).
	Streams *int `json:"streams,omitempty" msgpack:"streams,omitempty"`
}

// parseStatsInclude reads `include`: a comma list of queues and budgets
// (default both). Queue counts cost a walk over every job the server holds;
// budget pools cost one question per budget.
func parseStatsInclude(c echo.Context) (queues, budgets bool, err error) {
	queues, budgets = true, true
	q, err := protocol.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return false, false, err
	}
	for name, values := range q {
		if name != "include" {
			return false, false, protocol.Invalid("invalid query parameters: unknown field `%s`, expected `include`", name)
		}
		v := values[len(values)-1]
		if v == "" {
			continue
		}
		queues, budgets = false, false
		for _, part := range splitList(v) {
			switch part {
			case "queues":
				queues = true
			case "budgets":
				budgets = true
			default:
				return false, false, protocol.Invalid("invalid query parameters: include: expected `queues` or `budgets`, got %q", part)
			}
		}
	}
	return queues, budgets, nil
}

// stats answers GET /stats with what /metrics exposes, as one document:
// each queue's counts and counters, each budget's live pool.
func (a *API) stats(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	withQueues, withBudgets, err := parseStatsInclude(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	body := &statsBody{At: uint64(time.Now().UnixMilli())}
	var states []actors.BudgetState
	if withQueues {
		m, err := a.engine.Metrics(ctx)
		if err != nil {
			return err
		}
		queues := make([]queueStatsBody, len(m.Queues))
		body.Queues = &queues
		for i, q := range m.Queues {
			queues[i] = queueStatsBody{
				Queue: q.Queue, Ready: q.Ready, Parked: q.Parked, Scheduled: q.Scheduled, InFlight: q.InFlight,
				Completed: q.Completed, Dead: q.Dead,
				Enqueued: q.Enqueued, Dispatched: q.Dispatched, Acked: q.Acked, Failed: q.Failed,
			}
		}
		body.Streams = &m.Streams
		states = m.Budgets
	} else if withBudgets {
		if states, err = a.engine.BudgetStates(ctx); err != nil {
			return err
		}
	}
	if withBudgets {
		budgets := make([]*budgetStateBody, len(states))
		body.Budgets = &budgets
		for i := range states {
			budgets[i] = toBudgetStateBody(&states[i])
		}
	}
	return a.reply(c, http.StatusOK, body)
}

// parkedJobBody is one job of a parked line.
type parkedJobBody struct {
	ID       string `json:"id" msgpack:"id"`
	Queue    string `json:"queue" msgpack:"queue"`
	Priority uint16 `json:"priority" msgpack:"priority"`
	Cost     uint32 `json:"cost" msgpack:"cost"`
	// HoldsBack is false when no take stream consumes the job's queue: the
	// job keeps its place but the jobs behind it are served first.
	HoldsBack bool `json:"holds_back" msgpack:"holds_back"`
}

// budgetLineBody is the body of GET /budgets/{key}/parked.
type budgetLineBody struct {
	Key string `json:"key" msgpack:"key"`
	// Total is the number of jobs parked on the budget; Jobs holds the
	// first `limit` of them in the order the budget serves them.
	Total int             `json:"total" msgpack:"total"`
	Jobs  []parkedJobBody `json:"jobs" msgpack:"jobs"`
}

// budgetLine answers GET /budgets/{key}/parked?limit=N: the jobs parked on
// the budget in dispatch order ((priority, id), SPEC §4.7), the first N.
func (a *API) budgetLine(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	limit := defaultLineLimit
	q, err := protocol.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	for name, values := range q {
		if name != "limit" {
			return protocol.Invalid("invalid query parameters: unknown field `%s`, expected `limit`", name)
		}
		n, err := strconv.Atoi(values[len(values)-1])
		if err != nil || n < 1 || n > maxLineLimit {
			return protocol.Invalid("invalid query parameters: limit: expected an integer from 1 to %d, got %q", maxLineLimit, values[len(values)-1])
		}
		limit = n
	}
	key, err := existingBudgetKey(c)
	if err != nil {
		return err
	}
	l, err := a.engine.BudgetLine(c.Request().Context(), key, limit)
	if err != nil {
		return err
	}
	body := &budgetLineBody{Key: key, Total: l.Total, Jobs: make([]parkedJobBody, len(l.Jobs))}
	for i, j := range l.Jobs {
		body.Jobs[i] = parkedJobBody{ID: j.ID, Queue: j.Queue, Priority: j.Priority, Cost: j.Cost, HoldsBack: j.HoldsBack}
	}
	return a.reply(c, http.StatusOK, body)
}

// toBudgetStateBody maps a budget's live state to its wire body.
func toBudgetStateBody(s *actors.BudgetState) *budgetStateBody {
	body := &budgetStateBody{
		Key: s.Key, Allocation: s.Definition.Allocation, Strategy: s.Definition.Strategy,
		Capacity: s.Definition.Capacity(), At: s.At, Tokens: *roundTokens(&s.Tokens),
		Held: s.Held, InFlight: s.InFlight, Parked: s.Parked, WakeAt: s.WakeAt,
		Dispatches: s.Dispatches, Refusals: s.Refusals, HeldUntil: s.HeldUntil,
	}
	if s.HeadID != "" {
		body.Head = &budgetHeadBody{ID: s.HeadID, Queue: s.HeadQueue, Cost: s.HeadCost, AffordableAt: s.HeadAffordableAt}
	}
	return body
}
