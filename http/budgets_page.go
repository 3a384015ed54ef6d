package http

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// GET /budgets with paging, an addition to SPEC §4.11: without limit or
// from the route answers every budget as before; with either, a page of
// budgets in key order after the key from (exclusive), limit of them
// (1..2000, default 50), and links in the style of GET /jobs.

const defaultBudgetPage = 50

type budgetsPage struct {
	Budgets []protocol.Budget `json:"budgets" msgpack:"budgets"`
	Pages   budgetPageLinks   `json:"pages" msgpack:"pages"`
}

type budgetPageLinks struct {
	Self string  `json:"self" msgpack:"self"`
	Next *string `json:"next" msgpack:"next"`
}

func (a *API) listBudgetsPage(c echo.Context, q url.Values) error {
	limit := defaultBudgetPage
	if v := q.Get("limit"); q.Has("limit") {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return protocol.Invalid("invalid query parameters: limit: expected an integer, got %q", v)
		}
		if n < 1 || n > 2000 {
			return protocol.Invalid("limit must be between 1 and 2000")
		}
		limit = int(n)
	}
	from := q.Get("from")
	bs, more, err := a.engine.BudgetsPage(c.Request().Context(), from, limit)
	if err != nil {
		return err
	}
	if bs == nil {
		bs = []protocol.Budget{}
	}
	resp := &budgetsPage{Budgets: bs, Pages: budgetPageLinks{Self: budgetsLink(from, limit)}}
	if more {
		next := budgetsLink(bs[len(bs)-1].Key, limit)
		resp.Pages.Next = &next
	}
	return a.reply(c, http.StatusOK, resp)
}

func budgetsLink(from string, limit int) string {
	l := "/budgets?"
	if from != "" {
		l += "from=" + url.QueryEscape(from) + "&"
	}
	return l + "limit=" + strconv.Itoa(limit)
}
