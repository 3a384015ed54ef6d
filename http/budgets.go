package http

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// budgetKey returns the percent-decoded {key} path segment (SPEC §4.3).
func budgetKey(c echo.Context) (string, error) {
	key, err := url.PathUnescape(c.Param("key"))
	if err != nil {
		return "", protocol.Invalid("invalid path parameter: %s", err.Error())
	}
	return key, nil
}

// existingBudgetKey is budgetKey for GET/PATCH/DELETE: a key that breaks
// the key rules names no budget (404).
func existingBudgetKey(c echo.Context) (string, error) {
	key, err := budgetKey(c)
	if err != nil {
		return "", err
	}
	if protocol.CheckBudgetKey(key) != "" {
		return "", protocol.Errorf(protocol.CodeNotFound, "budget '%s' not found", key)
	}
	return key, nil
}

type budgetsResponse struct {
	Budgets []protocol.Budget `json:"budgets" msgpack:"budgets"`
}

func (a *API) listBudgets(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	if q := c.Request().URL.Query(); q.Has("limit") || q.Has("from") {
		return a.listBudgetsPage(c, q)
	}
	bs, err := a.engine.Budgets(c.Request().Context())
	if err != nil {
		return err
	}
	if bs == nil {
		bs = []protocol.Budget{}
	}
	return a.reply(c, http.StatusOK, &budgetsResponse{Budgets: bs})
}

func (a *API) getBudget(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	key, err := existingBudgetKey(c)
	if err != nil {
		return err
	}
	b, err := a.engine.GetBudget(c.Request().Context(), key)
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, b)
}

// decodeDefinition reads a budget body and validates key and values in the
// order of SPEC §4.10: decode (400), key (422), values (422).
func (a *API) decodeDefinition(c echo.Context) (string, protocol.Definition, error) {
	var req protocol.BudgetRequest
	if err := a.decodeBody(c, &req); err != nil {
		return "", protocol.Definition{}, err
	}
	key, err := budgetKey(c)
	if err != nil {
		return "", protocol.Definition{}, err
	}
	if err := protocol.ValidateBudgetKey(key); err != nil {
		return "", protocol.Definition{}, err
	}
	def, err := req.Definition()
	return key, def, err
}

func (a *API) createBudget(c echo.Context) error {
	key, def, err := a.decodeDefinition(c)
	if err != nil {
		return err
	}
	b, _, err := a.engine.CreateBudget(c.Request().Context(), key, def, false)
	if err != nil {
		return err
	}
	a.logBudgetChange(c, "created", key, b)
	return a.reply(c, http.StatusCreated, b)
}

func (a *API) putBudget(c echo.Context) error {
	key, def, err := a.decodeDefinition(c)
	if err != nil {
		return err
	}
	b, created, err := a.engine.CreateBudget(c.Request().Context(), key, def, true)
	if err != nil {
		return err
	}
	what := "replaced"
	if created {
		what = "created"
	}
	a.logBudgetChange(c, what, key, b)
	return a.reply(c, http.StatusOK, b)
}

func (a *API) patchBudget(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	f, err := requestFormat(c)
	if err != nil {
		return err
	}
	body, err := a.readBody(c)
	if err != nil {
		return err
	}
	patch, err := protocol.DecodeBudgetPatch(f, body)
	if err != nil {
		return err
	}
	key, err := existingBudgetKey(c)
	if err != nil {
		return err
	}
	b, err := a.engine.PatchBudget(c.Request().Context(), key, patch)
	if err != nil {
		return err
	}
	a.logBudgetChange(c, "updated", key, b)
	return a.reply(c, http.StatusOK, b)
}

func (a *API) deleteBudget(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	key, err := existingBudgetKey(c)
	if err != nil {
		return err
	}
	if err := a.engine.DeleteBudget(c.Request().Context(), key); err != nil {
		return err
	}
	a.logBudgetChange(c, "deleted", key, nil)
	return c.NoContent(http.StatusNoContent)
}
