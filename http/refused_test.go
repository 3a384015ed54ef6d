package http

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/persistence/storetest"
)

// refusingServer serves a real engine whose store refuses commits on
// demand.
func refusingServer(t *testing.T) (*httptest.Server, *storetest.Failing) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inner, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	require.NoError(t, err)
	store := storetest.NewFailing(inner)
	engine, err := actors.Start(actors.Config{Store: store, Logger: log})
	require.NoError(t, err)
	e, api := New(Config{Version: "test", Logger: log, HeartbeatInterval: 50 * time.Millisecond}, engine)
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		api.Shutdown()
		srv.Close()
		engine.Stop()
		_ = inner.Close()
	})
	return srv, store
}

func refusedDo(t *testing.T, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestStoreRefusalAnswers503: SPEC §1.5's row for a store that cannot
// write: a refused enqueue is 503 storage unavailable with the reason and
// Retry-After, reads keep answering and see nothing of it, and a take
// stream whose dispatch the store refused ends (its worker reconnects)
// instead of hanging or being handed the job anyway.
func TestStoreRefusalAnswers503(t *testing.T) {
	srv, store := refusingServer(t)
	resp, body := refusedDo(t, http.MethodPost, srv.URL+"/jobs", `{"type":"t","queue":"q","payload":{}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)

	store.FailAll(errors.New("no space left on device"))
	resp, body = refusedDo(t, http.MethodPost, srv.URL+"/jobs", `{"type":"t","queue":"q","payload":{"refused":1}}`)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.JSONEq(t, `{"error":"storage unavailable: no space left on device"}`, body)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	resp, body = refusedDo(t, http.MethodGet, srv.URL+"/jobs/count", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.JSONEq(t, `{"count":1}`, body)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/jobs/take", nil)
	require.NoError(t, err)
	take, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer take.Body.Close()
	got, err := io.ReadAll(take.Body) // ends when the server ends the stream
	require.NoError(t, err, "the stream did not end")
	require.Empty(t, strings.TrimSpace(string(got)), "a job whose dispatch was refused was written")

	store.Heal()
	resp, body = refusedDo(t, http.MethodGet, srv.URL+"/jobs?status=ready", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"status":"ready"`, "the job is ready again")
}
