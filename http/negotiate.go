package http

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

var bodyFormats = []string{"application/json", "application/msgpack"}

// negotiationError is a 406 or 415 with the list of supported types.
type negotiationError struct {
	status    int
	message   string
	supported []string
}

func (e *negotiationError) Error() string { return e.message }

// responseFormat picks the response format from Accept (SPEC §1.2).
func responseFormat(c echo.Context) (protocol.Format, error) {
	accept := c.Request().Header.Get("Accept")
	switch {
	case accept == "":
		return protocol.JSON, nil
	case strings.Contains(accept, "application/msgpack"):
		return protocol.Msgpack, nil
	case strings.Contains(accept, "application/json"), strings.Contains(accept, "*/*"):
		return protocol.JSON, nil
	}
	return protocol.JSON, &negotiationError{status: http.StatusNotAcceptable, message: "not acceptable", supported: bodyFormats}
}

// requestFormat picks the body format from Content-Type (SPEC §1.2).
func requestFormat(c echo.Context) (protocol.Format, error) {
	ct := c.Request().Header.Get("Content-Type")
	switch {
	case ct == "":
		return protocol.JSON, nil
	case strings.Contains(ct, "application/msgpack"):
		return protocol.Msgpack, nil
	case strings.Contains(ct, "application/json"), strings.Contains(ct, "application/merge-patch+json"):
		return protocol.JSON, nil
	}
	return protocol.JSON, &negotiationError{status: http.StatusUnsupportedMediaType, message: "unsupported media type", supported: bodyFormats}
}

// errBodyTooLarge answers a body over the limit.
var errBodyTooLarge = &protocol.Error{Code: protocol.CodeTooLarge, Message: "request body too large"}

// decodeBody checks Accept and Content-Type (406, then 415), reads the body
// within the size limit (413) and decodes it into v (400).
func (a *API) decodeBody(c echo.Context, v any) error {
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
	return protocol.Decode(f, body, v)
}

// reply encodes v in the negotiated format.
func (a *API) reply(c echo.Context, status int, v any) error {
	f, err := responseFormat(c)
	if err != nil {
		return err
	}
	b, err := encodeBody(f, v)
	if err != nil {
		return fmt.Errorf("http: encode response: %w", err)
	}
	return c.Blob(status, f.ContentType(), b)
}

// encodeBody encodes a response body; a JSON body ends with a newline, as
// curl users and line-oriented tools expect (msgpack bodies are binary and
// get nothing).
func encodeBody(f protocol.Format, v any) ([]byte, error) {
	b, err := protocol.Encode(f, v)
	if err != nil || f != protocol.JSON {
		return b, err
	}
	return append(b, '\n'), nil
}
