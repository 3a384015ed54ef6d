package http

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// statusOf is the one table from domain error codes to HTTP statuses.
var statusOf = map[protocol.Code]int{
	protocol.CodeInvalid:       http.StatusBadRequest,
	protocol.CodeNotFound:      http.StatusNotFound,
	protocol.CodeConflict:      http.StatusConflict,
	protocol.CodeUnprocessable: http.StatusUnprocessableEntity,
	protocol.CodeTooLarge:      http.StatusRequestEntityTooLarge,
	protocol.CodeUnavailable:   http.StatusServiceUnavailable,
	protocol.CodeForbidden:     http.StatusForbidden,
}

// echoErrorText gives the SPEC's texts for errors echo raises itself.
var echoErrorText = map[int]string{
	http.StatusNotFound:              "not found",
	http.StatusMethodNotAllowed:      "method not allowed",
	http.StatusRequestEntityTooLarge: "request body too large",
}

// retryAfterSeconds is the Retry-After of every 503: long enough for a
// compaction or an operator's cleanup to free space, short enough that a
// client retrying on it does not wait long once the server has recovered.
const retryAfterSeconds = "2"

type errorBody struct {
	Error     string   `json:"error" msgpack:"error"`
	Supported []string `json:"supported,omitempty" msgpack:"supported,omitempty"`
}

// notFoundList is the 422 body of POST /jobs/success.
type notFoundList struct {
	NotFound []string `json:"not_found" msgpack:"not_found"`
}

func (e *notFoundList) Error() string { return "some ids were not in flight" }

// handleError maps any handler error to a status and an error body in the
// negotiated format (JSON when the Accept header itself is the problem).
func (a *API) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if cerr := c.Request().Context().Err(); cerr != nil && errors.Is(err, cerr) {
		// the client went away (connection closed, HTTP/2 stream reset):
		// no one reads an answer, and it is no fault of the server's
		a.log.Debug("request cancelled by the client", "err", err, "method", c.Request().Method, "path", c.Request().URL.Path)
		return
	}
	status := http.StatusInternalServerError
	var body any = &errorBody{Error: "internal server error"}
	var (
		pe  *protocol.Error
		ne  *negotiationError
		he  *echo.HTTPError
		nfl *notFoundList
	)
	switch {
	case errors.As(err, &pe):
		status = statusOf[pe.Code]
		// texts may quote input (a path key, a query value); a response
		// is valid UTF-8 for strict readers whatever the input was
		body = &errorBody{Error: strings.ToValidUTF8(pe.Message, "\uFFFD")}
	case errors.As(err, &ne):
		status = ne.status
		body = &errorBody{Error: ne.message, Supported: ne.supported}
	case errors.As(err, &nfl):
		status = http.StatusUnprocessableEntity
		body = nfl
	case errors.As(err, &he):
		status = he.Code
		text, ok := echoErrorText[he.Code]
		if !ok {
			text = http.StatusText(he.Code)
			if status >= 500 {
				a.log.Error("request failed", "err", err, "path", c.Path())
				text = "internal server error"
			}
		}
		body = &errorBody{Error: text}
	default:
		a.log.Error("request failed", "err", err, "method", c.Request().Method, "path", c.Request().URL.Path)
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if status == http.StatusServiceUnavailable {
		// the store, the body memory bound or a shutdown: all pass
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
	}
	f, ferr := responseFormat(c)
	if ferr != nil || status == http.StatusNotAcceptable {
		f = protocol.JSON
	}
	b, encErr := encodeBody(f, body)
	if encErr != nil {
		a.log.Error("encode error body", "err", encErr)
		_ = c.NoContent(http.StatusInternalServerError)
		return
	}
	if status == http.StatusServiceUnavailable {
		// the store refused a write, or the server stops: try again soon
		// (SPEC §1.5)
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
	}
	if werr := c.Blob(status, f.ContentType(), b); werr != nil {
		a.log.Debug("write error body", "err", werr, slog.Int("status", status))
	}
}
