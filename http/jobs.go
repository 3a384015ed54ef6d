package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

func (a *API) enqueue(c echo.Context) error {
	var req protocol.EnqueueRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	nj, err := req.Validate()
	if err != nil {
		return err
	}
	views, err := a.engine.Enqueue(c.Request().Context(), []*protocol.NewJob{nj}, false)
	if err != nil {
		return err
	}
	return a.reply(c, enqueueStatus(views), views[0])
}

type bulkResponse struct {
	Jobs []*protocol.JobView `json:"jobs" msgpack:"jobs"`
}

// AppendJSON writes what json.Marshal writes for r, without reflection.
func (r *bulkResponse) AppendJSON(dst []byte) ([]byte, error) {
	if dst == nil {
		dst = make([]byte, 0, 16+len(r.Jobs)*256)
	}
	dst = append(dst, `{"jobs":`...)
	dst, err := protocol.AppendJobViewsJSON(dst, r.Jobs)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

func (a *API) enqueueBulk(c echo.Context) error {
	var req protocol.BulkEnqueueRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	jobs, err := req.Validate()
	if err != nil {
		return err
	}
	views := []*protocol.JobView{}
	if len(jobs) > 0 {
		if views, err = a.engine.Enqueue(c.Request().Context(), jobs, true); err != nil {
			return err
		}
	}
	return a.reply(c, enqueueStatus(views), &bulkResponse{Jobs: views})
}

// enqueueStatus is 200 when every result is a duplicate or a fold, else 201.
func enqueueStatus(views []*protocol.JobView) int {
	if len(views) == 0 {
		return http.StatusCreated
	}
	for _, v := range views {
		if !(v.Duplicate != nil && *v.Duplicate) && !(v.Folded != nil && *v.Folded) {
			return http.StatusCreated
		}
	}
	return http.StatusOK
}

func (a *API) getJob(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	v, err := a.engine.GetJob(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, v)
}

func (a *API) deleteJob(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	if err := a.engine.DeleteJob(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) ack(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	id := c.Param("id")
	settle, err := a.successSettle(c)
	if err != nil {
		return err
	}
	var bySettle map[string][]protocol.Settlement
	if len(settle) > 0 {
		bySettle = map[string][]protocol.Settlement{id: settle}
	}
	notFound, err := a.engine.AckSettling(c.Request().Context(), []string{id}, bySettle)
	if err != nil {
		return err
	}
	if len(notFound) > 0 {
		return protocol.ErrNotInFlight
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) ackMany(c echo.Context) error {
	var req protocol.AckManyRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	settle, err := req.ValidateSettleMany()
	if err != nil {
		return err
	}
	notFound, err := a.engine.AckSettling(c.Request().Context(), req.IDs, settle)
	if err != nil {
		return err
	}
	if len(notFound) > 0 {
		return &notFoundList{NotFound: notFound}
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) fail(c echo.Context) error {
	var req protocol.FailureRequest
	if err := a.decodeBody(c, &req); err != nil {
		return err
	}
	settle, err := protocol.ValidateSettle(req.Settle)
	if err != nil {
		return err
	}
	v, err := a.engine.FailSettling(c.Request().Context(), c.Param("id"), &req, settle)
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, v)
}
