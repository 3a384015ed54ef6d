package http

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// bodyMemory bounds the request-body bytes held in memory across all
// connections together. A body is read in growing pieces and every piece is
// counted before it is allocated, so a client that declares a large
// Content-Length and then sends slowly holds only what it has sent; once
// the bound is reached further bodies are refused with 503 until earlier
// requests finish.
type bodyMemory struct {
	limit int64
	used  atomic.Int64
}

// take counts n more bytes; false (and nothing counted) when that would pass
// the bound.
func (m *bodyMemory) take(n int64) bool {
	if m.used.Add(n) > m.limit {
		m.used.Add(-n)
		return false
	}
	return true
}

func (m *bodyMemory) give(n int64) { m.used.Add(-n) }

// bodyHeldKey is the echo context key under which readBody records the
// bytes a request holds, released by releaseBody when the request ends.
const bodyHeldKey = "tollgate.body_held"

// bodyChunk is the piece in which a body larger than itself (or of unknown
// length) is read. Pieces come from a pool and go back to it once the body
// is assembled, so refused and abandoned bodies leave no garbage behind.
const bodyChunk = 64 << 10

var chunkPool = sync.Pool{New: func() any { return new([bodyChunk]byte) }}

// errBodyMemory answers a body that does not fit in --max-body-memory.
var errBodyMemory = &protocol.Error{Code: protocol.CodeUnavailable,
	Message: "server busy: request bodies in memory are at the server's limit"}

// releaseBody gives back, when a request ends, the body bytes it held.
func (a *API) releaseBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		defer func() {
			if n, ok := c.Get(bodyHeldKey).(int64); ok && n > 0 {
				a.bodies.give(n)
			}
		}()
		return next(c)
	}
}

// readBody reads the request body within the size limit (413), the body
// read timeout and the server-wide body memory bound (503).
func (a *API) readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > a.cfg.BodyLimit {
		return nil, errBodyTooLarge
	}
	// Not every writer supports deadlines (tests' recorders); the server's
	// own connections do, over HTTP/1.1 and HTTP/2.
	rc := http.NewResponseController(c.Response())
	deadline := rc.SetReadDeadline(time.Now().Add(a.cfg.BodyReadTimeout)) == nil
	body, err := a.readBodyCounted(c, io.LimitReader(r.Body, a.cfg.BodyLimit+1), r.ContentLength)
	if err == nil && deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		// The rest of the body was not read: close the connection rather
		// than let the server read and discard it, without a deadline.
		c.Response().Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			return nil, err
		case errors.As(err, &mbe):
			return nil, errBodyTooLarge
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, protocol.Invalid("failed to read body: not received within %s", a.cfg.BodyReadTimeout)
		}
		return nil, protocol.Invalid("failed to read body: %s", err.Error())
	}
	if int64(len(body)) > a.cfg.BodyLimit {
		return nil, errBodyTooLarge
	}
	return body, nil
}

// readBodyCounted reads r, counting every piece in the body memory bound
// before it is taken; what the request holds at the end (its body) is
// recorded on the context for releaseBody. A body that declares a small
// length is read straight into a buffer of that size; any other is read in
// pooled chunks, then copied once into a buffer of its real size.
func (a *API) readBodyCounted(c echo.Context, r io.Reader, contentLength int64) ([]byte, error) {
	held, _ := c.Get(bodyHeldKey).(int64)
	take := func(n int64) error {
		if !a.bodies.take(n) {
			return errBodyMemory
		}
		held += n
		c.Set(bodyHeldKey, held)
		return nil
	}
	give := func(n int64) {
		a.bodies.give(n)
		held -= n
		c.Set(bodyHeldKey, held)
	}
	if contentLength >= 0 && contentLength < bodyChunk {
		// +1 sees a body longer than declared without a second read
		if err := take(contentLength + 1); err != nil {
			return nil, err
		}
		b := make([]byte, contentLength+1)
		n, err := io.ReadFull(r, b)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			// ReadFull reports the expected end (the declared length, not
			// the extra byte) as unexpected; only a body cut short before
			// its declared length is one.
			err = nil
			if int64(n) < contentLength {
				err = io.ErrUnexpectedEOF
			}
		}
		return b[:n], err
	}
	var (
		chunks []*[bodyChunk]byte
		total  int
		err    error
	)
	defer func() {
		for _, ch := range chunks {
			chunkPool.Put(ch)
		}
		give(int64(len(chunks)) * bodyChunk)
	}()
	for err == nil {
		if total == len(chunks)*bodyChunk {
			if err = take(bodyChunk); err != nil {
				return nil, err
			}
			chunks = append(chunks, chunkPool.Get().(*[bodyChunk]byte))
		}
		ch := chunks[len(chunks)-1]
		var n int
		n, err = r.Read(ch[total%bodyChunk:])
		total += n
	}
	if err != io.EOF {
		return nil, err
	}
	if err := take(int64(total)); err != nil {
		return nil, err
	}
	b := make([]byte, total)
	for i, ch := range chunks {
		copy(b[i*bodyChunk:], ch[:])
	}
	return b, nil
}
