package http

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestClientCancellationIsNotAnError: a request the client gave up on (an
// HTTP/2 reset, a closed connection) ends its handler with the request
// context's error; that is logged at debug, not as a server fault at error.
func TestClientCancellationIsNotAnError(t *testing.T) {
	var logs bytes.Buffer
	a := &API{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	e := echo.New()
	e.HTTPErrorHandler = a.handleError
	e.GET("/jobs", func(c echo.Context) error {
		return fmt.Errorf("actors: list: %w", c.Request().Context().Err())
	})
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequest("GET", "/jobs", nil).WithContext(ctx)
		e.ServeHTTP(httptest.NewRecorder(), r)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("client cancellations logged at error:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Fatalf("client cancellations not logged at debug:\n%s", logs.String())
	}
}
