package http

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// Query and administration endpoints (SPEC §6).

// pages are the cursor links of a list response; absent links are null.
type pages struct {
	Self string  `json:"self" msgpack:"self"`
	Next *string `json:"next" msgpack:"next"`
	Prev *string `json:"prev" msgpack:"prev"`
}

type jobsPage struct {
	Jobs  []*protocol.JobView `json:"jobs" msgpack:"jobs"`
	Pages pages               `json:"pages" msgpack:"pages"`
}

type errorsPage struct {
	Errors []protocol.ErrorRecord `json:"errors" msgpack:"errors"`
	Pages  pages                  `json:"pages" msgpack:"pages"`
}

// pageParams are order and limit, shared by the two paginated lists.
type pageParams struct {
	desc  bool
	limit int
}

func parsePageParams(rest map[string]string) (pageParams, error) {
	p := pageParams{limit: 50}
	if o, ok := rest["order"]; ok {
		switch o {
		case "asc":
		case "desc":
			p.desc = true
		default:
			return p, protocol.Invalid("invalid query parameters: order: expected `asc` or `desc`, got %q", o)
		}
	}
	if l, ok := rest["limit"]; ok {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return p, protocol.Invalid("invalid query parameters: limit: expected an integer, got %q", l)
		}
		if n < 1 || n > 2000 {
			return p, protocol.Invalid("limit must be between 1 and 2000")
		}
		p.limit = int(n)
	}
	return p, nil
}

func orderName(desc bool) string {
	if desc {
		return "desc"
	}
	return "asc"
}

// jobsLink builds a /jobs link in the layout of SPEC §6.2.
func jobsLink(from string, desc bool, limit int, f *protocol.JobFilter) string {
	var b strings.Builder
	b.WriteString("/jobs?")
	if from != "" {
		b.WriteString("from=" + url.QueryEscape(from) + "&")
	}
	b.WriteString("order=" + orderName(desc) + "&limit=" + strconv.Itoa(limit))
	f.AppendQuery(&b)
	return b.String()
}

func (a *API) listJobs(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	f, rest, err := parseJobFilter(c, "from", "order", "limit")
	if err != nil {
		return err
	}
	pp, err := parsePageParams(rest)
	if err != nil {
		return err
	}
	from := rest["from"]
	if from != "" && !protocol.ValidID(from) {
		return protocol.Invalid("invalid job ID: %q", from)
	}
	if err := f.Validate(); err != nil {
		return err
	}
	jobs, more, err := a.engine.ListJobs(c.Request().Context(), f, from, pp.desc, pp.limit)
	if err != nil {
		return err
	}
	filterErrorsHeader(c, f)
	resp := &jobsPage{Jobs: jobs, Pages: pages{Self: jobsLink(from, pp.desc, pp.limit, f)}}
	if more {
		next := jobsLink(jobs[len(jobs)-1].ID, pp.desc, pp.limit, f)
		resp.Pages.Next = &next
	}
	if from != "" && len(jobs) > 0 {
		prev := jobsLink(jobs[0].ID, !pp.desc, pp.limit, f)
		resp.Pages.Prev = &prev
	}
	return a.reply(c, http.StatusOK, resp)
}

func (a *API) countJobs(c echo.Context) error {
	f, err := parseFilterOnly(c)
	if err != nil {
		return err
	}
	n, err := a.engine.CountJobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	filterErrorsHeader(c, f)
	return a.reply(c, http.StatusOK, map[string]uint64{"count": n})
}

func (a *API) deleteJobs(c echo.Context) error {
	f, err := parseFilterOnly(c)
	if err != nil {
		return err
	}
	n, err := a.engine.DeleteJobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	filterErrorsHeader(c, f)
	return a.reply(c, http.StatusOK, map[string]int{"deleted": n})
}

// decodeJobPatch checks Accept and Content-Type, reads and decodes a job
// patch body.
func (a *API) decodeJobPatch(c echo.Context) (*protocol.JobPatch, error) {
	if _, err := responseFormat(c); err != nil {
		return nil, err
	}
	rf, err := requestFormat(c)
	if err != nil {
		return nil, err
	}
	body, err := a.readBody(c)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeJobPatch(rf, body)
}

func (a *API) patchJob(c echo.Context) error {
	p, err := a.decodeJobPatch(c)
	if err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	v, err := a.engine.PatchJob(c.Request().Context(), c.Param("id"), p)
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, v)
}

// patchJobs is PATCH /jobs. Check order (SPEC §6.6): query (400), terminal
// status filter (422), IDs (400), queue (422), priority (422), jq (400).
func (a *API) patchJobs(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	f, _, err := parseJobFilter(c)
	if err != nil {
		return err
	}
	for _, st := range []protocol.Status{protocol.StatusCompleted, protocol.StatusDead} {
		if f.HasStatus(st) {
			return protocol.Unprocessable("cannot patch jobs in %s status", st)
		}
	}
	if err := f.CheckIDs(); err != nil {
		return err
	}
	p, err := a.decodeJobPatch(c)
	if err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	if err := f.Compile(); err != nil {
		return err
	}
	n, err := a.engine.PatchJobs(c.Request().Context(), f, p)
	if err != nil {
		return err
	}
	filterErrorsHeader(c, f)
	return a.reply(c, http.StatusOK, map[string]int{"patched": n})
}

func (a *API) jobErrors(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	q, err := protocol.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	rest := make(map[string]string)
	for name, vals := range q {
		switch name {
		case "from", "order", "limit":
			rest[name] = vals[0]
		default:
			return protocol.Invalid("invalid query parameters: unknown field `%s`, expected one of `from`, `order`, `limit`", name)
		}
	}
	pp, err := parsePageParams(rest)
	if err != nil {
		return err
	}
	var from uint32
	fromStr, hasFrom := rest["from"]
	if hasFrom && fromStr == "" {
		hasFrom = false
	}
	if hasFrom {
		n, err := strconv.ParseUint(fromStr, 10, 32)
		if err != nil {
			return protocol.Invalid("invalid query parameters: from: expected an attempt number, got %q", fromStr)
		}
		from = uint32(n)
	}
	id := c.Param("id")
	recs, more, err := a.engine.JobErrors(c.Request().Context(), id, from, hasFrom, pp.desc, pp.limit)
	if err != nil {
		return err
	}
	link := func(from string, desc bool) string {
		var b strings.Builder
		b.WriteString("/jobs/" + url.PathEscape(id) + "/errors?")
		if from != "" {
			b.WriteString("from=" + from + "&")
		}
		b.WriteString("order=" + orderName(desc) + "&limit=" + strconv.Itoa(pp.limit))
		return b.String()
	}
	self := ""
	if hasFrom {
		self = strconv.FormatUint(uint64(from), 10)
	}
	resp := &errorsPage{Errors: recs, Pages: pages{Self: link(self, pp.desc)}}
	if more {
		next := link(strconv.FormatUint(uint64(recs[len(recs)-1].Attempt), 10), pp.desc)
		resp.Pages.Next = &next
	}
	if hasFrom && len(recs) > 0 {
		prev := link(strconv.FormatUint(uint64(recs[0].Attempt), 10), !pp.desc)
		resp.Pages.Prev = &prev
	}
	return a.reply(c, http.StatusOK, resp)
}

func (a *API) jobError(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	s := c.Param("attempt")
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return protocol.Invalid("invalid path parameter: attempt: expected a uint32, got %q", s)
	}
	rec, err := a.engine.JobError(c.Request().Context(), c.Param("id"), uint32(n))
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, rec)
}

// parseFilterOnly checks Accept and parses the shared job filters of a
// request that takes nothing else in its query (count, delete, bulk
// rebinding).
func parseFilterOnly(c echo.Context) (*protocol.JobFilter, error) {
	if _, err := responseFormat(c); err != nil {
		return nil, err
	}
	f, _, err := parseJobFilter(c)
	if err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// parseJobFilter parses the query string strictly (protocol.ParseQuery)
// and then as shared job filters plus the extra parameters named.
func parseJobFilter(c echo.Context, extra ...string) (*protocol.JobFilter, map[string]string, error) {
	q, err := protocol.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return nil, nil, err
	}
	return protocol.ParseJobFilter(q, extra...)
}

// filterErrorsHeader sets Tollgate-Filter-Errors to the number of jobs on
// which the jq filter was stopped by a bound (SPEC §6.1), when there were
// any.
func filterErrorsHeader(c echo.Context, f *protocol.JobFilter) {
	if n := f.BoundedErrors(); n > 0 {
		c.Response().Header().Set("Tollgate-Filter-Errors", strconv.FormatInt(n, 10))
	}
}
