package http

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
	"github.com/tollgate/tollgate/protocol/prototest"
)

// obsServer serves the API of a real engine on an in-memory store.
func obsServer(t *testing.T) (*httptest.Server, *actors.Engine) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	require.NoError(t, err)
	engine, err := actors.Start(actors.Config{Store: store, Logger: log})
	require.NoError(t, err)
	e, api := New(Config{Version: "test", Logger: log, HeartbeatInterval: 50 * time.Millisecond}, engine)
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		api.Shutdown()
		srv.Close()
		engine.Stop()
		_ = store.Close()
	})
	return srv, engine
}

func obsGet(t *testing.T, url, accept string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func TestObserveBudgetStateEndpoint(t *testing.T) {
	srv, engine := obsServer(t)
	ctx := context.Background()
	def := protocol.Definition{Allocation: 4, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 1000, Burst: 8}}
	_, _, err := engine.CreateBudget(ctx, "a/b", def, false)
	require.NoError(t, err)

	resp, body := obsGet(t, srv.URL+"/budgets/a%2Fb/state", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "a/b", got["key"])
	require.EqualValues(t, 8, got["capacity"])
	require.EqualValues(t, 8, got["tokens"], "a new time_based pool is full")
	require.EqualValues(t, 0, got["parked"])
	require.NotContains(t, got, "head")
	require.NotContains(t, got, "wake_at")
	require.Equal(t, map[string]any{"type": "time_based", "duration_ms": float64(1000), "burst": float64(8)}, got["strategy"])

	resp, body = obsGet(t, srv.URL+"/budgets/a%2Fb/state", "application/msgpack")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/msgpack", resp.Header.Get("Content-Type"))
	var mp map[string]any
	require.NoError(t, msgpack.Unmarshal(body, &mp))
	require.Equal(t, "a/b", mp["key"])

	for path, text := range map[string]string{
		"/budgets/nope/state":  "budget 'nope' not found",
		"/budgets/a%2Cb/state": "budget 'a,b' not found",
	} {
		resp, body = obsGet(t, srv.URL+path, "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.JSONEq(t, `{"error":"`+text+`"}`, string(body))
	}
	// The budget object itself keeps its shape.
	resp, body = obsGet(t, srv.URL+"/budgets/a%2Fb", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var budget map[string]any
	require.NoError(t, json.Unmarshal(body, &budget))
	require.Len(t, budget, 5, "%s", body)
}

func TestObserveTraceEndpointErrors(t *testing.T) {
	srv, _ := obsServer(t)
	resp, body := obsGet(t, srv.URL+"/debug/trace?jobs=x", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.JSONEq(t, "{\"error\":\"invalid query parameters: unknown field `jobs`, expected one of `job`, `budget`, `queue`, `buffer`\"}", string(body))
	resp, _ = obsGet(t, srv.URL+"/debug/trace?buffer=0", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = obsGet(t, srv.URL+"/debug/trace", "text/plain")
	require.Equal(t, http.StatusNotAcceptable, resp.StatusCode)
}

// obsOpenTrace opens GET /debug/trace and returns the response.
func obsOpenTrace(t *testing.T, url, accept string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

func TestObserveTraceEndpointStreams(t *testing.T) {
	srv, engine := obsServer(t)
	ctx := context.Background()
	nd := obsOpenTrace(t, srv.URL+"/debug/trace?budget=b1", "application/x-ndjson")
	require.Equal(t, "application/x-ndjson", nd.Header.Get("Content-Type"))
	mp := obsOpenTrace(t, srv.URL+"/debug/trace?budget=b1", "application/vnd.zizq.msgpack-stream")
	require.Equal(t, "application/vnd.zizq.msgpack-stream", mp.Header.Get("Content-Type"))
	// Each stream subscribes before it answers, so no event is missed.
	require.Equal(t, 2, engine.Tracer().Subscribers())

	def := protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	for _, k := range []string{"b0", "b1"} {
		_, _, err := engine.CreateBudget(ctx, k, def, false)
		require.NoError(t, err)
	}

	// NDJSON: heartbeats are empty lines; the first event is b1's creation.
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(nd.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var ev map[string]any
	for ev == nil {
		select {
		case l := <-lines:
			if strings.TrimSpace(l) != "" {
				require.NoError(t, json.Unmarshal([]byte(l), &ev))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event on the NDJSON trace stream")
		}
	}
	require.Equal(t, "budget_created", ev["kind"])
	require.Equal(t, "b1", ev["budget"])
	require.Equal(t, "budget/b1", ev["actor"])
	require.EqualValues(t, 1, ev["tokens"])
	require.InDelta(t, float64(time.Now().UnixMilli()), ev["time"], 10_000)

	// msgpack stream: 4-byte length frames; zero-length ones are heartbeats.
	frames := make(chan []byte, 16)
	go func() {
		for {
			f, err := prototest.ReadMsgpackFrame(mp.Body)
			if err != nil {
				close(frames)
				return
			}
			frames <- f
		}
	}()
	for {
		select {
		case f := <-frames:
			if len(f) == 0 {
				continue
			}
			var m map[string]any
			require.NoError(t, msgpack.Unmarshal(f, &m))
			require.Equal(t, "budget_created", m["kind"])
			require.Equal(t, "b1", m["budget"])
			return
		case <-time.After(10 * time.Second):
			t.Fatal("no event on the msgpack trace stream")
		}
	}
}

func TestObserveMetricsEndpoint(t *testing.T) {
	srv, engine := obsServer(t)
	ctx := context.Background()
	def := protocol.Definition{Allocation: 3, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	_, _, err := engine.CreateBudget(ctx, "m", def, false)
	require.NoError(t, err)
	_, err = engine.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "mq", Priority: 1, Payload: []byte(`1`), Budgets: []protocol.Binding{{Key: "m", Cost: 2}}}}}, false)
	require.NoError(t, err)

	resp, body := obsGet(t, srv.URL+"/metrics", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var parser expfmt.TextParser
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "%s", body)
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := fams[name]
		require.NotNil(t, f, "no family %s", name)
	next:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	require.EqualValues(t, 1, value("tollgate_jobs", map[string]string{"queue": "mq", "status": "ready"}))
	require.EqualValues(t, 0, value("tollgate_jobs", map[string]string{"queue": "mq", "status": "in_flight"}))
	require.EqualValues(t, 1, value("tollgate_jobs_enqueued_total", map[string]string{"queue": "mq"}))
	require.EqualValues(t, 3, value("tollgate_budget_tokens_available", map[string]string{"budget": "m", "type": "while_in_flight"}))
	require.EqualValues(t, 0, value("tollgate_budget_parked_jobs", map[string]string{"budget": "m"}))
	require.EqualValues(t, 0, value("tollgate_scrape_error", nil))
	require.NotNil(t, fams["go_goroutines"], "Go runtime metrics are exported")
}
