package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// opsHistogram is the histogram sample of family name for queue.
func opsHistogram(t testing.TB, fams map[string]*dto.MetricFamily, name, queue string) *dto.Histogram {
	t.Helper()
	f := fams[name]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no histogram family %s", name)
	}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "queue" && lp.GetValue() == queue {
				return m.GetHistogram()
			}
		}
	}
	t.Fatalf("%s has no sample for queue %q", name, queue)
	return nil
}

// opsBucket is the cumulative count at upper bound le.
func opsBucket(t testing.TB, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket le=%v", le)
	return 0
}

// TestOpsLatencyHistograms: a job that waited at least 300 ms for a
// worker and ran at least 300 ms shows in both histograms of its queue,
// above the 250 ms bucket (lower bounds only: the machine may be slow).
func TestOpsLatencyHistograms(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	// the server's times are whole milliseconds and its ready_at is set
	// before the enqueue's answer, so the waits start from the answer and
	// the answer from the delivery, with 10 ms for the rounding
	apitest.EnqueueN(t, s.URL, "histq", 1)
	enqueued := time.Now()
	time.Sleep(time.Until(enqueued.Add(310 * time.Millisecond)))
	tk := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("histq", 1), Accept: apitest.AcceptNDJSON, WorkerID: "w-hist"})
	id := tk.NextJob(t, obsWait).ID
	taken := time.Now()
	time.Sleep(time.Until(taken.Add(310 * time.Millisecond)))
	obsAck(t, s, id)

	fams := obsMetrics(t, s)
	for _, name := range []string{"tollgate_job_queue_wait_seconds", "tollgate_job_run_seconds"} {
		h := opsHistogram(t, fams, name, "histq")
		if h.GetSampleCount() != 1 || h.GetSampleSum() < 0.3 {
			t.Errorf("%s{queue=histq}: count %d sum %v, want 1 and >= 0.3", name, h.GetSampleCount(), h.GetSampleSum())
		}
		if got := opsBucket(t, h, 0.25); got != 0 {
			t.Errorf("%s: %d observations <= 0.25 s, want 0", name, got)
		}
	}
}

// promName finds metric names in a PromQL expression.
var promName = regexp.MustCompile(`\b((?:tollgate|go|process)_[a-z0-9_]+)`)

// TestOpsGrafanaDashboardMetricsExist: every metric the dashboard in docs/
// queries is served by /metrics of a running server that has a budget and
// some traffic.
func TestOpsGrafanaDashboardMetricsExist(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard does not parse: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}

	s := servertest.Start(t)
	obsBudget(t, s, "dash-b", map[string]any{"allocation": 5, "strategy": map[string]any{"type": "time_based", "duration_ms": 60000}})
	ids := obsEnqueue(t, s, "dashq", "dash-b", 1)
	tk := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("dashq", 1), Accept: apitest.AcceptNDJSON, WorkerID: "w-dash"})
	if got := tk.NextJob(t, obsWait).ID; got != ids[0] {
		t.Fatalf("took %s, want %s", got, ids[0])
	}
	obsAck(t, s, ids[0])
	fams := obsMetrics(t, s)

	seen := 0
	for _, e := range exprs {
		for _, m := range promName.FindAllString(e, -1) {
			seen++
			base := m
			if f := fams[m]; f == nil {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					base = strings.TrimSuffix(base, suffix)
				}
				if f := fams[base]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM || base == m {
					t.Errorf("the dashboard queries %s (in %q), which /metrics does not serve", m, e)
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d metric references in the dashboard: is the parser right?", seen)
	}
}
