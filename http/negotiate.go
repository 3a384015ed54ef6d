package http

import (
	"errors"
	"fmt"
	"io"
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

// readBody reads the request body within the limit.
func (a *API) readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > a.cfg.BodyLimit {
		return nil, errBodyTooLarge
	}
	body, err := readAllSized(io.LimitReader(r.Body, a.cfg.BodyLimit+1), r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errBodyTooLarge
		}
		return nil, protocol.Invalid("failed to read body: %s", err.Error())
	}
	if int64(len(body)) > a.cfg.BodyLimit {
		return nil, errBodyTooLarge
	}
	return body, nil
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

// readAllSized is io.ReadAll with the buffer sized from the declared
// Content-Length (when there is one), so a large body is read without the
// repeated grow-and-copy of io.ReadAll.
func readAllSized(r io.Reader, contentLength int64) ([]byte, error) {
	if contentLength <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, contentLength+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
