package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

// Budget rebinding, single-job routes (SPEC §8.3.4). Checks in order: body
// (400), path key and body values (422), then the queue actor's job and
// change checks.

func (a *API) rebindReply(c echo.Context, m *actors.RebindJob) error {
	v, err := a.engine.RebindJob(c.Request().Context(), m)
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, v)
}

// rebindKeyed handles POST and PUT /jobs/{id}/budgets/{key} (binding body).
func (a *API) rebindKeyed(op actors.RebindOp) echo.HandlerFunc {
	return func(c echo.Context) error {
		b, err := a.decodeKeyedBinding(c)
		if err != nil {
			return err
		}
		return a.rebindReply(c, &actors.RebindJob{ID: c.Param("id"), Op: op, Binding: b})
	}
}

func (a *API) rebindCost(c echo.Context) error {
	var req protocol.RebindCostRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	key, err := budgetKey(c)
	if err != nil {
		return err
	}
	if err := protocol.CheckRebindKey(key); err != nil {
		return err
	}
	return a.rebindReply(c, &actors.RebindJob{ID: c.Param("id"), Op: actors.RebindCost, Binding: protocol.NewBinding{Key: key, Cost: *req.Cost}})
}

func (a *API) rebindRemove(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	key, err := budgetKey(c)
	if err != nil {
		return err
	}
	return a.rebindReply(c, &actors.RebindJob{ID: c.Param("id"), Op: actors.RebindRemove, Binding: protocol.NewBinding{Key: key}})
}

func (a *API) rebindSet(c echo.Context) error {
	var req protocol.RebindSetRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	set, err := req.Validate()
	if err != nil {
		return err
	}
	return a.rebindReply(c, &actors.RebindJob{ID: c.Param("id"), Op: actors.RebindSet, Set: set})
}

func (a *API) rebindClear(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	return a.rebindReply(c, &actors.RebindJob{ID: c.Param("id"), Op: actors.RebindClear})
}

// Bulk routes (SPEC §8.3.5): shared filters select the jobs (400s as for
// DELETE /jobs), then the body (400) and its values (422).

type rebindBulkBody struct {
	Changed int      `json:"changed" msgpack:"changed"`
	Blocked []string `json:"blocked" msgpack:"blocked"`
}

func (a *API) rebindBulkReply(c echo.Context, f *protocol.JobFilter, op actors.RebindOp, b protocol.NewBinding) error {
	res, err := a.engine.RebindJobs(c.Request().Context(), f, op, b)
	if err != nil {
		return err
	}
	filterErrorsHeader(c, f)
	return a.reply(c, http.StatusOK, &rebindBulkBody{Changed: res.Changed, Blocked: res.Blocked})
}

func (a *API) rebindBulkKeyed(op actors.RebindOp) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := parseFilterOnly(c)
		if err != nil {
			return err
		}
		b, err := a.decodeKeyedBinding(c)
		if err != nil {
			return err
		}
		return a.rebindBulkReply(c, f, op, b)
	}
}

func (a *API) rebindBulkCost(c echo.Context) error {
	f, err := parseFilterOnly(c)
	if err != nil {
		return err
	}
	var req protocol.RebindCostRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	key, err := budgetKey(c)
	if err != nil {
		return err
	}
	if err := protocol.CheckRebindKey(key); err != nil {
		return err
	}
	return a.rebindBulkReply(c, f, actors.RebindCost, protocol.NewBinding{Key: key, Cost: *req.Cost})
}

func (a *API) rebindBulkRemove(c echo.Context) error {
	f, err := parseFilterOnly(c)
	if err != nil {
		return err
	}
	key, err := budgetKey(c)
	if err != nil {
		return err
	}
	return a.rebindBulkReply(c, f, actors.RebindRemove, protocol.NewBinding{Key: key})
}

func (a *API) rebindBulkClear(c echo.Context) error {
	f, err := parseFilterOnly(c)
	if err != nil {
		return err
	}
	return a.rebindBulkReply(c, f, actors.RebindClear, protocol.NewBinding{})
}

// decodeKeyedBinding reads a binding body for the {key} of the path:
// decode (400), key rules (422), cost and create_with (400/422).
func (a *API) decodeKeyedBinding(c echo.Context) (protocol.NewBinding, error) {
	var req protocol.RebindBindingRequest
	if err := a.decodeBody(c, &req); err != nil {
		return protocol.NewBinding{}, err
	}
	key, err := budgetKey(c)
	if err != nil {
		return protocol.NewBinding{}, err
	}
	if err := protocol.CheckRebindKey(key); err != nil {
		return protocol.NewBinding{}, err
	}
	return req.Validate(key)
}
