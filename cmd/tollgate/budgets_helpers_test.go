package main

// Helpers for the budgets integration tests (SPEC §4). Every helper is
// prefixed "bud" so it cannot collide with the core_* helpers of the same
// package. The tests speak plain HTTP to the real binary started by
// servertest; nothing here knows the server's internals.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// budCanon renders a decoded value as canonical JSON (sorted keys), so that
// shapes can be compared exactly.
func budCanon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("canon: %v", err)
	}
	return string(b)
}

// budInt reads an integer field.
func budInt(t testing.TB, m map[string]any, field string) int64 {
	t.Helper()
	v, ok := m[field]
	if !ok {
		t.Fatalf("field %q missing in %v", field, m)
	}
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("field %q = %#v is not a number", field, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("field %q = %v is not an integer: %v", field, n, err)
	}
	return i
}

func budStr(t testing.TB, m map[string]any, field string) string {
	t.Helper()
	v, ok := m[field].(string)
	if !ok {
		t.Fatalf("field %q missing or not a string in %v", field, m)
	}
	return v
}

func budKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func budNowMs() int64 { return time.Now().UnixMilli() }

// budCheckBudget checks a budget object field by field: exactly the fields
// allocation, created_at, key, strategy, updated_at; strategy equal to want
// (canonical JSON, e.g. `{"duration_ms":3600000,"type":"time_based"}`).
// It returns created_at and updated_at.
func budCheckBudget(t testing.TB, m map[string]any, key string, allocation int64, strategy string) (created, updated int64) {
	t.Helper()
	if got := strings.Join(budKeys(m), ","); got != "allocation,created_at,key,strategy,updated_at" {
		t.Fatalf("budget fields %s, want allocation,created_at,key,strategy,updated_at: %v", got, m)
	}
	if k := budStr(t, m, "key"); k != key {
		t.Fatalf("budget key %q, want %q", k, key)
	}
	if a := budInt(t, m, "allocation"); a != allocation {
		t.Fatalf("budget %q allocation %d, want %d", key, a, allocation)
	}
	if s := budCanon(t, m["strategy"]); s != strategy {
		t.Fatalf("budget %q strategy %s, want %s", key, s, strategy)
	}
	created, updated = budInt(t, m, "created_at"), budInt(t, m, "updated_at")
	if updated < created {
		t.Fatalf("budget %q updated_at %d < created_at %d", key, updated, created)
	}
	return created, updated
}

// budPath builds /budgets/<escaped key>.
func budPath(key string) string { return "/budgets/" + url.PathEscape(key) }

// budMustPut creates or replaces a budget and returns the response object.
func budMustPut(t testing.TB, s *servertest.Server, key string, def any) map[string]any {
	t.Helper()
	return apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", budPath(key), def), http.StatusOK)
}

func budWIF(allocation int) map[string]any {
	return map[string]any{"allocation": allocation, "strategy": map[string]any{"type": "while_in_flight"}}
}

func budTB(allocation, durationMs int, burst int) map[string]any {
	st := map[string]any{"type": "time_based", "duration_ms": durationMs}
	if burst > 0 {
		st["burst"] = burst
	}
	return map[string]any{"allocation": allocation, "strategy": st}
}

// budBind is one binding; cost 0 means "omit cost".
func budBind(key string, cost int) map[string]any {
	b := map[string]any{"key": key}
	if cost != 0 {
		b["cost"] = cost
	}
	return b
}

func budJob(queue string, bindings ...map[string]any) map[string]any {
	j := map[string]any{"type": "bud", "queue": queue, "payload": map[string]any{"q": queue}}
	if len(bindings) > 0 {
		bs := make([]any, len(bindings))
		for i, b := range bindings {
			bs[i] = b
		}
		j["budgets"] = bs
	}
	return j
}

// budEnqueue posts one job and requires 201; returns the job object.
func budEnqueue(t testing.TB, s *servertest.Server, job map[string]any) map[string]any {
	t.Helper()
	return apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", job), http.StatusCreated)
}

// budEnqueueBulk posts jobs in one bulk and returns their ids in order.
func budEnqueueBulk(t testing.TB, s *servertest.Server, jobs ...map[string]any) []string {
	t.Helper()
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": jobs}), http.StatusCreated)
	arr, ok := m["jobs"].([]any)
	if !ok || len(arr) != len(jobs) {
		t.Fatalf("bulk response %v: want %d jobs", m, len(jobs))
	}
	ids := make([]string, len(arr))
	for i, j := range arr {
		ids[i] = budStr(t, j.(map[string]any), "id")
	}
	return ids
}

func budAck(t testing.TB, s *servertest.Server, id string) {
	t.Helper()
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/"+id+"/success", nil))
}

func budGetJob(t testing.TB, s *servertest.Server, id string) map[string]any {
	t.Helper()
	return apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/jobs/"+id, nil), http.StatusOK)
}

// budWaitStatus polls GET /jobs/{id} until every job has the status, within d.
func budWaitStatus(t testing.TB, s *servertest.Server, d time.Duration, status string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pending := ""
		for _, id := range ids {
			j := budGetJob(t, s, id)
			if budStr(t, j, "status") != status {
				pending = id + " is " + budStr(t, j, "status")
				break
			}
		}
		if pending == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not %s within %v: %s", status, d, pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// budFrame is one job received on a take stream.
type budFrame struct {
	job map[string]any
	at  time.Time
}

func (f budFrame) id() string { s, _ := f.job["id"].(string); return s }

// budStream is an open NDJSON take stream read by a goroutine; frames are
// handed over through a channel and read with deadlines.
type budStream struct {
	t      testing.TB
	name   string
	cancel context.CancelFunc
	body   io.Closer
	frames chan budFrame
	done   chan struct{}
	err    error // set before done is closed
	opened time.Time
}

// budOpenStream opens GET /jobs/take?queue=<queues>&prefetch=<n>.
func budOpenStream(t testing.TB, s *servertest.Server, queues string, prefetch int) *budStream {
	t.Helper()
	q := url.Values{}
	if queues != "" {
		q.Set("queue", queues)
	}
	q.Set("prefetch", fmt.Sprint(prefetch))
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+"/jobs/take?"+q.Encode(), nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	opened := time.Now()
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open take stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("take stream: status %d %q", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		resp.Body.Close()
		cancel()
		t.Fatalf("take stream Content-Type %q, want application/x-ndjson", ct)
	}
	st := &budStream{t: t, name: queues, cancel: cancel, body: resp.Body,
		frames: make(chan budFrame, 1024), done: make(chan struct{}), opened: opened}
	go func() {
		defer close(st.done)
		rd := bufio.NewReaderSize(resp.Body, 1<<16)
		for {
			line, err := rd.ReadBytes('\n')
			at := time.Now()
			if len(bytes.TrimSpace(line)) > 0 {
				dec := json.NewDecoder(bytes.NewReader(line))
				dec.UseNumber()
				var m map[string]any
				if derr := dec.Decode(&m); derr != nil {
					st.err = fmt.Errorf("bad frame %q: %v", line, derr)
					return
				}
				st.frames <- budFrame{job: m, at: at}
			}
			if err != nil {
				st.err = err
				return
			}
		}
	}()
	t.Cleanup(st.close)
	return st
}

// next waits up to d for the next job frame.
func (st *budStream) next(d time.Duration) budFrame {
	st.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case f := <-st.frames:
		return f
	case <-st.done:
		select {
		case f := <-st.frames:
			return f
		default:
		}
		st.t.Fatalf("stream %q ended while waiting for a job: %v", st.name, st.err)
	case <-timer.C:
		st.t.Fatalf("stream %q: no job within %v", st.name, d)
	}
	return budFrame{}
}

// take reads exactly n frames, each within d of the previous.
func (st *budStream) take(n int, d time.Duration) []budFrame {
	st.t.Helper()
	out := make([]budFrame, 0, n)
	for len(out) < n {
		out = append(out, st.next(d))
	}
	return out
}

// none asserts that no job frame arrives within d.
func (st *budStream) none(d time.Duration, why string) {
	st.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case f := <-st.frames:
		st.t.Fatalf("stream %q: unexpected job %s (%v) — %s", st.name, f.id(), budCanon(st.t, f.job["budgets"]), why)
	case <-st.done:
		select {
		case f := <-st.frames:
			st.t.Fatalf("stream %q: unexpected job %s — %s", st.name, f.id(), why)
		default:
		}
		st.t.Fatalf("stream %q ended: %v", st.name, st.err)
	case <-timer.C:
	}
}

// close cancels the request and waits (bounded) for the reader to stop.
func (st *budStream) close() {
	st.cancel()
	st.body.Close()
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		st.t.Errorf("stream %q reader did not stop", st.name)
	}
}

func budIDs(fs []budFrame) []string {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.id()
	}
	return ids
}

// budSameSet reports whether a and b hold the same strings (any order).
func budSameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
