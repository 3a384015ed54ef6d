package main

// Helpers for the observability integration tests (observe_*_test.go):
// shortcuts on the apitest client and a reader of GET /debug/trace. Every
// helper is prefixed "obs".

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// obsWait bounds every wait on the server.
const obsWait = 20 * time.Second

func obsNum(t testing.TB, m map[string]any, field string) float64 {
	t.Helper()
	n, ok := m[field].(json.Number)
	if !ok {
		t.Fatalf("field %q missing or not a number in %v", field, m)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func obsBudget(t testing.TB, s *servertest.Server, key string, def map[string]any) {
	t.Helper()
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/"+url.PathEscape(key), def), http.StatusOK)
}

// obsEnqueue bulk-enqueues n jobs of queue bound to budget; ids in order.
func obsEnqueue(t testing.TB, s *servertest.Server, queue, budget string, n int) []string {
	t.Helper()
	jobs := make([]any, n)
	for i := range jobs {
		jobs[i] = map[string]any{"type": "obs", "queue": queue, "payload": map[string]any{"i": i},
			"budgets": []any{map[string]any{"key": budget}}}
	}
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": jobs}), http.StatusCreated)
	arr, _ := m["jobs"].([]any)
	if len(arr) != n {
		t.Fatalf("bulk enqueue returned %v", m)
	}
	ids := make([]string, n)
	for i, j := range arr {
		ids[i], _ = j.(map[string]any)["id"].(string)
	}
	return ids
}

func obsAck(t testing.TB, s *servertest.Server, id string) {
	t.Helper()
	if r := apitest.DoJSON(t, s.URL, "POST", "/jobs/"+id+"/success", nil); r.Status != http.StatusNoContent {
		t.Fatalf("ack %s: %v", id, r)
	}
}

// obsEvent is one event of /debug/trace, decoded as the trace CLI does.
type obsEvent traceEvent

func (e obsEvent) String() string {
	s := fmt.Sprintf("%d %-17s %-14s job=%s q=%s", e.Time, e.Kind, e.Actor, e.JobID, e.Queue)
	if e.Tokens != nil {
		s += fmt.Sprintf(" tokens=%g", *e.Tokens)
	}
	if e.Position != 0 {
		s += fmt.Sprintf(" pos=%d", e.Position)
	}
	if e.DueAt != 0 {
		s += fmt.Sprintf(" due=%d", e.DueAt)
	}
	if e.Reason != "" {
		s += " reason=" + e.Reason
	}
	if e.WorkerID != "" {
		s += " worker=" + e.WorkerID
	}
	return s
}

// obsTrace is an open /debug/trace stream read by a goroutine.
type obsTrace struct {
	t      testing.TB
	cancel context.CancelFunc
	events chan obsEvent
	done   chan struct{}
	err    error
	seen   []obsEvent
}

// obsOpenTrace opens GET /debug/trace?query. The server subscribes before
// it answers, so every event after this returns is seen.
func obsOpenTrace(t testing.TB, s *servertest.Server, query string) *obsTrace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+"/debug/trace?"+query, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open trace: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("trace: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	tr := &obsTrace{t: t, cancel: cancel, events: make(chan obsEvent, 1<<14), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue // heartbeat
			}
			var e obsEvent
			if err := json.Unmarshal(line, &e); err != nil {
				tr.err = fmt.Errorf("bad event %q: %v", line, err)
				return
			}
			tr.events <- e
		}
		tr.err = sc.Err()
	}()
	t.Cleanup(func() {
		cancel()
		<-tr.done
	})
	return tr
}

func (tr *obsTrace) dump() string {
	var b strings.Builder
	for _, e := range tr.seen {
		b.WriteString("  " + e.String() + "\n")
	}
	return b.String()
}

// until reads events until cond holds over every event seen so far.
func (tr *obsTrace) until(what string, cond func() bool) {
	tr.t.Helper()
	deadline := time.NewTimer(obsWait)
	defer deadline.Stop()
	for !cond() {
		select {
		case e := <-tr.events:
			if e.Kind == "dropped" {
				tr.t.Fatalf("the trace reader lost %d events", e.Count)
			}
			tr.seen = append(tr.seen, e)
		case <-tr.done:
			tr.t.Fatalf("trace stream ended waiting for %s: %v\n%s", what, tr.err, tr.dump())
		case <-deadline.C:
			tr.t.Fatalf("no %s within %v; events:\n%s", what, obsWait, tr.dump())
		}
	}
}

// count counts seen events of kind (and job, when not empty).
func (tr *obsTrace) count(kind, job string) int {
	n := 0
	for _, e := range tr.seen {
		if e.Kind == kind && (job == "" || e.JobID == job) {
			n++
		}
	}
	return n
}

// index is the position in the stream of the n-th (from 0) event of kind
// and job, or -1.
func (tr *obsTrace) index(kind, job string, n int) int {
	for i, e := range tr.seen {
		if e.Kind == kind && (job == "" || e.JobID == job) {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

func (tr *obsTrace) get(kind, job string, n int) obsEvent {
	tr.t.Helper()
	i := tr.index(kind, job, n)
	if i < 0 {
		tr.t.Fatalf("no %s #%d for job %q:\n%s", kind, n, job, tr.dump())
	}
	return tr.seen[i]
}

// inOrder requires each (kind, job, n) step to come after the previous one.
func (tr *obsTrace) inOrder(steps ...[3]any) {
	tr.t.Helper()
	last := -1
	for _, st := range steps {
		i := tr.index(st[0].(string), st[1].(string), st[2].(int))
		if i < 0 || i < last {
			tr.t.Fatalf("step %v at %d, after %d: out of order or missing\n%s", st, i, last, tr.dump())
		}
		last = i
	}
}

// obsMetrics scrapes /metrics and parses it with the Prometheus parser.
func obsMetrics(t testing.TB, s *servertest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	r := apitest.DoJSON(t, s.URL, "GET", "/metrics", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %v", r)
	}
	b := r.Body
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, b)
	}
	return fams
}

// obsValue is the value of the sample of family name whose labels include
// labels (ok false when there is none).
func obsValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// obsRequireMetric requires a sample equal to want.
func obsRequireMetric(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := obsValue(fams, name, labels)
	if !ok {
		t.Fatalf("no sample %s%v", name, labels)
	}
	if got != want {
		t.Fatalf("%s%v = %v, want %v", name, labels, got, want)
	}
}
