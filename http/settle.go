package http

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// successSettle reads the optional body of POST /jobs/{id}/success (SPEC
// §10.1): it is read only when its Content-Type names JSON or msgpack and it
// is not empty; any other body is ignored, as before settlement existed. It
// returns the validated settle list (nil when there is none).
func (a *API) successSettle(c echo.Context) ([]protocol.Settlement, error) {
	r := c.Request()
	if r.ContentLength == 0 {
		return nil, nil
	}
	ct := r.Header.Get("Content-Type")
	var f protocol.Format
	switch {
	case strings.Contains(ct, "application/msgpack"):
		f = protocol.Msgpack
	case strings.Contains(ct, "application/json"):
		f = protocol.JSON
	default:
		return nil, nil
	}
	body, err := a.readBody(c)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, nil
	}
	var req protocol.SuccessRequest
	if err := protocol.Decode(f, body, &req); err != nil {
		return nil, err
	}
	return protocol.ValidateSettle(req.Settle)
}
