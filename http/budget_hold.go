package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// putBudgetHold answers PUT /budgets/{key}/hold (SPEC §10.2): 400 for a
// body that does not decode or names not exactly one of until and for_ms,
// 404 for a budget that does not exist, else 200 with the budget's state.
func (a *API) putBudgetHold(c echo.Context) error {
	var req protocol.HoldRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Check(); err != nil {
		return err
	}
	key, err := existingBudgetKey(c)
	if err != nil {
		return err
	}
	s, err := a.engine.HoldBudget(c.Request().Context(), key, req)
	if err != nil {
		return err
	}
	a.log.InfoContext(c.Request().Context(), "budget held", "budget", key, "held_until", s.HeldUntil, "drain", req.Drain)
	return a.reply(c, http.StatusOK, toBudgetStateBody(s))
}

// deleteBudgetHold answers DELETE /budgets/{key}/hold: 204, held or not;
// 404 for a budget that does not exist.
func (a *API) deleteBudgetHold(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	key, err := existingBudgetKey(c)
	if err != nil {
		return err
	}
	if err := a.engine.ReleaseBudget(c.Request().Context(), key); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
