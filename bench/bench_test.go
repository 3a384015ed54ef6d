package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// runJSON runs the harness in-process with --json and decodes the report.
func runJSON(t *testing.T, args ...string) (Report, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append(args, "--json", "--progress", "0"), &stdout, &stderr, nil)
	t.Logf("stderr:\n%s", stderr.String())
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report (exit %d): %v\n%s", code, err, stdout.String())
	}
	return rep, code
}

// TestCeilingTiny runs the ceiling scenario end to end, in-process, in each
// HTTP shape, and checks that the report's counts add up.
func TestCeilingTiny(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		jobs     int64
		enqReqs  int64
		transp   string
		ackBatch int
	}{
		{name: "bulk-http1", args: nil, jobs: 2000, enqReqs: 40, transp: "http/1.1", ackBatch: 50},
		{name: "bulk-h2", args: []string{"--h2"}, jobs: 2000, enqReqs: 40, transp: "h2c", ackBatch: 50},
		{name: "single-http1", args: []string{"--batch", "1", "--ack-batch", "1", "--jobs", "300"},
			jobs: 300, enqReqs: 300, transp: "http/1.1", ackBatch: 1},
		{name: "single-h2-unlimited-prefetch", args: []string{"--h2", "--batch", "1", "--ack-batch", "1", "--jobs", "300", "--prefetch", "0"},
			jobs: 300, enqReqs: 300, transp: "h2c", ackBatch: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			rep, code := runJSON(t, append([]string{"--scenario", "ceiling", "--tiny"}, tc.args...)...)
			if code != exitOK {
				t.Errorf("exit code %d, want %d", code, exitOK)
			}
			j := rep.Jobs
			checks := []struct {
				what      string
				got, want int64
			}{
				{"enqueued", j.Enqueued, tc.jobs},
				{"dispatched", j.Dispatched, tc.jobs},
				{"acked", j.Acked, tc.jobs},
				{"unfinished", j.Unfinished, 0},
				{"duplicates", j.Duplicates, 0},
				{"enqueue_failed", j.EnqueueFailed, 0},
				{"ack_rejected", j.AckRejected, 0},
				{"ack_failed", j.AckFailed, 0},
				{"unknown", j.Unknown, 0},
				{"enqueue_requests", j.EnqueueReqs, tc.enqReqs},
				{"latency n enqueue->delivered", rep.Latency.EnqueueToDelivered.N, tc.jobs},
				{"latency n delivered->acked", rep.Latency.DeliveredToAcked.N, tc.jobs},
				{"error_total", rep.ErrorTotal, 0},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
				}
			}
			if rep.Outcome != outcomeCompleted || len(rep.Anomalies) != 0 {
				t.Errorf("outcome %q anomalies %v, want completed and none", rep.Outcome, rep.Anomalies)
			}
			if tc.ackBatch == 1 && j.AckReqs != tc.jobs {
				t.Errorf("ack requests = %d, want one per job (%d)", j.AckReqs, tc.jobs)
			}
			if tc.ackBatch > 1 && (j.AckReqs < tc.jobs/int64(tc.ackBatch) || j.AckReqs > tc.jobs) {
				t.Errorf("ack requests = %d, want between %d and %d", j.AckReqs, tc.jobs/int64(tc.ackBatch), tc.jobs)
			}
			tp := rep.Throughput
			if tp.Enqueue <= 0 || tp.Dispatch <= 0 || tp.Ack <= 0 {
				t.Errorf("throughput %+v: every rate must be positive", tp)
			}
			if l := rep.Latency.EnqueueToDelivered; l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
				t.Errorf("enqueue->delivered percentiles out of order: %+v", l)
			}
			if !strings.HasPrefix(rep.Transport, tc.transp) {
				t.Errorf("transport %q, want prefix %q", rep.Transport, tc.transp)
			}
			if rep.Server != nil {
				t.Errorf("ceiling has no server process, report has %+v", rep.Server)
			}
			// Everything the run started must be gone (streams, ack loops,
			// the in-process server).
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before+2 {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines after the run, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// TestCeilingTextReport checks the line-oriented report has its key lines.
func TestCeilingTextReport(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--scenario", "ceiling", "--tiny", "--progress", "0"}, &stdout, &stderr, nil)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, key := range []string{"scenario ", "outcome ", "jobs ", "throughput_jobs_s ", "latency_ms.enq_to_deliver ",
		"latency_ms.deliver_to_ack ", "anomalies "} {
		found := false
		for _, l := range strings.Split(stdout.String(), "\n") {
			found = found || strings.HasPrefix(l, key)
		}
		if !found {
			t.Errorf("report has no %q line:\n%s", key, stdout.String())
		}
	}
}

func TestParseConfigPrecedence(t *testing.T) {
	var out bytes.Buffer
	c, err := parseConfig([]string{"--scenario", "inflight", "--tiny", "--jobs", "7"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	// explicit flag > tiny scenario preset > tiny preset > scenario > global
	if c.Jobs != 7 || c.BudgetAlloc != 4 || c.Sleep != 20*time.Millisecond || c.Workers != 2 || c.PayloadBytes != 200 {
		t.Errorf("got jobs=%d alloc=%d sleep=%s workers=%d payload=%d", c.Jobs, c.BudgetAlloc, c.Sleep, c.Workers, c.PayloadBytes)
	}
	c, err = parseConfig([]string{"--scenario", "rate"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.BudgetAlloc != 2000 || c.BudgetDuration != time.Second || c.Timeout != 2*time.Minute {
		t.Errorf("rate defaults: alloc=%d duration=%s timeout=%s", c.BudgetAlloc, c.BudgetDuration, c.Timeout)
	}
	bad := [][]string{
		{"--scenario", "nope"},
		{"--url", "http://10.0.0.1:7890"},
		{"--url", "http://example.com:7890"},
		{"--url", "http://127.0.0.1:7890", "--scenario", "restart"},
		{"--scenario", "inflight", "--cost", "5", "--budget-alloc", "4"},
		{"--workers", "0"},
	}
	for _, args := range bad {
		if _, err := parseConfig(args, &out); err == nil {
			t.Errorf("parseConfig(%q) accepted", args)
		}
	}
	if _, err := parseConfig([]string{"--url", "http://localhost:7890/"}, &out); err != nil {
		t.Errorf("localhost rejected: %v", err)
	}
	if got := normalizeURL("http://localhost:7890/"); got != "http://127.0.0.1:7890" {
		t.Errorf("normalizeURL = %q", got)
	}
}

func TestWindowMax(t *testing.T) {
	ms := time.Millisecond
	recs := []dispatchRec{{at: 0, cost: 1}, {at: 1 * ms, cost: 1}, {at: 999 * ms, cost: 1}, {at: 1000 * ms, cost: 1}, {at: 1500 * ms, cost: 2}}
	if got := windowMax(recs, func(d dispatchRec) time.Duration { return d.at }, time.Second); got != 4 {
		// [1ms, 1001ms) holds 1ms, 999ms, 1000ms; [999ms,1999ms) holds 1+1+2.
		t.Errorf("windowMax = %d, want 4", got)
	}
}

// TestAchievedRate: 200 dispatches at burst 1 paced 50 ms apart are 20/s
// (the 9.95 s, not 10 s, for 200 jobs); a burst of 20 at the start
// does not count as rate; one dispatch or a burst alone gives no figure.
func TestAchievedRate(t *testing.T) {
	at := func(d dispatchRec) time.Duration { return d.at }
	paced := func(first, n int, gap time.Duration) []dispatchRec {
		var recs []dispatchRec
		for i := range n {
			recs = append(recs, dispatchRec{at: time.Duration(max(0, i-first+1)) * gap, cost: 1})
		}
		return recs
	}
	cases := []struct {
		name     string
		recs     []dispatchRec
		capacity int
		want     float64
		ok       bool
	}{
		{"burst 1, 50 ms apart", paced(1, 200, 50*time.Millisecond), 1, 20, true},
		{"burst 1, 50.25 ms apart", paced(1, 200, 50250*time.Microsecond), 1, 1 / 0.05025, true},
		{"burst 20 then 20/s", paced(20, 220, 50*time.Millisecond), 20, 20, true},
		{"one dispatch", paced(1, 1, 50*time.Millisecond), 1, 0, false},
		{"a burst alone", paced(5, 5, 50*time.Millisecond), 5, 0, false},
	}
	for _, c := range cases {
		got, ok := achievedRate(c.recs, at, c.capacity)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: achievedRate = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestBucketDeviations(t *testing.T) {
	ms := time.Millisecond
	rate := 10.0 / float64(time.Second) // 10 per second, capacity 2
	// Burst of 2 at 0, then one every 100 ms: the ideal schedule exactly.
	ideal := []dispatchRec{{at: 0, cost: 1}, {at: 0, cost: 1}, {at: 100 * ms, cost: 1}, {at: 200 * ms, cost: 1}}
	at := func(d dispatchRec) time.Duration { return d.at }
	ready := func(d dispatchRec) time.Duration { return d.ready }
	for i, d := range bucketDeviations(ideal, at, at, ready, 0, 2, rate) {
		if d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("ideal dispatch %d deviates by %s", i, d)
		}
	}
	// A third job at 50 ms is 50 ms early; one at 300 ms after a job enqueued
	// at 250 ms with tokens to spare is 50 ms late.
	devs := bucketDeviations([]dispatchRec{{at: 0, cost: 1}, {at: 0, cost: 1}, {at: 50 * ms, cost: 1},
		{at: 300 * ms, ready: 250 * ms, cost: 1}}, at, at, ready, 0, 2, rate)
	near := func(got, want time.Duration) bool { return got > want-time.Microsecond && got < want+time.Microsecond }
	if !near(devs[2], -50*ms) {
		t.Errorf("early dispatch deviation = %s, want -50ms", devs[2])
	}
	if !near(devs[3], 50*ms) {
		t.Errorf("late dispatch deviation = %s, want 50ms", devs[3])
	}
	// A job built at 0 that reached the server at 30 ms and went at once is
	// 30 ms late from its build, on time from its arrival; one that went at
	// 40 ms is 10 ms late from its arrival.
	recs := []dispatchRec{{at: 30 * ms, arrived: 30 * ms, cost: 1}, {at: 40 * ms, arrived: 30 * ms, cost: 1}}
	arrived := func(d dispatchRec) time.Duration { return max(d.ready, d.arrived) }
	fromBuild := bucketDeviations(recs, at, at, ready, 0, 2, rate)
	fromArrival := bucketDeviations(recs, at, at, arrived, 0, 2, rate)
	if !near(fromBuild[0], 30*ms) || !near(fromArrival[0], 0) || !near(fromArrival[1], 10*ms) {
		t.Errorf("deviations from build %v, from arrival %v; want 30ms first, then 0 and 10ms", fromBuild, fromArrival)
	}
}

func TestScenarioBindings(t *testing.T) {
	cfg := Config{Scenario: scenarioManyBudgets, Budgets: 3, BudgetAlloc: 5, Cost: 2}
	sc := newScenario(cfg, "p")
	if len(sc.budgets) != 3 || sc.budgetsOf(4)[0] != 1 {
		t.Fatalf("budgets %d, budgetsOf(4) = %v", len(sc.budgets), sc.budgetsOf(4))
	}
	want := `[{"key":"p-b00001","cost":2,"create_with":{"allocation":5,"strategy":{"type":"while_in_flight"}}}]`
	if sc.bindingJSON[1] != want {
		t.Errorf("binding JSON\n got %s\nwant %s", sc.bindingJSON[1], want)
	}
	var v any
	for _, js := range sc.bindingJSON {
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Errorf("binding JSON %s: %v", js, err)
		}
	}
	rate := newScenario(Config{Scenario: scenarioRate, BudgetAlloc: 100, BudgetDuration: 2 * time.Second, BudgetBurst: 7, Cost: 1}, "p")
	if got := rate.budgets[0].spec.definition(); got != `{"allocation":100,"strategy":{"type":"time_based","duration_ms":2000,"burst":7}}` {
		t.Errorf("rate definition %s", got)
	}
}

func TestParseConfigManyBudgets(t *testing.T) {
	var out bytes.Buffer
	c, err := parseConfig([]string{"--scenario", "many-budgets"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	// 8192 budgets * (10 in flight + 100 parked).
	if c.Budgets != 8192 || c.Parked != 100 || c.Jobs != 8192*110 || c.Prefetch != 0 || c.Timeout != 10*time.Minute {
		t.Errorf("defaults: budgets=%d parked=%d jobs=%d prefetch=%d timeout=%s", c.Budgets, c.Parked, c.Jobs, c.Prefetch, c.Timeout)
	}
	if got := strings.Join(c.ServerFlags, " "); got != "--global-in-flight-limit=0" {
		t.Errorf("server flags %q, want the in-flight cap lifted", got)
	}
	c, err = parseConfig([]string{"--scenario", "many-budgets", "--tiny"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Budgets != 256 || c.Parked != 20 || c.Jobs != 256*30 {
		t.Errorf("tiny: budgets=%d parked=%d jobs=%d", c.Budgets, c.Parked, c.Jobs)
	}
	// Cost 3 of allocation 10: 3 jobs in flight per budget.
	c, err = parseConfig([]string{"--scenario", "many-budgets", "--budgets", "4", "--parked", "5", "--cost", "3",
		"--prefetch", "7", "--server-flag=--global-in-flight-limit=50"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.heldPerBudget() != 3 || c.Jobs != 4*(3+5) || c.Prefetch != 7 || len(c.ServerFlags) != 1 {
		t.Errorf("held=%d jobs=%d prefetch=%d server flags %q", c.heldPerBudget(), c.Jobs, c.Prefetch, c.ServerFlags)
	}
	if c, err = parseConfig([]string{"--scenario", "many-budgets", "--parked", "0", "--budgets", "2"}, &out); err != nil || c.Jobs != 20 {
		t.Errorf("--parked 0: jobs=%d err=%v", c.Jobs, err)
	}
	bad := [][]string{
		{"--scenario", "many-budgets", "--jobs", "1000"},
		{"--scenario", "many-budgets", "--duration", "10s"},
		{"--scenario", "many-budgets", "--parked", "-1"},
		// 4 streams * 20480 = 8192*10: no room left to try (and park) the rest.
		{"--scenario", "many-budgets", "--workers", "4", "--prefetch", "20480"},
	}
	for _, args := range bad {
		if _, err := parseConfig(args, &out); err == nil {
			t.Errorf("parseConfig(%q) accepted", args)
		}
	}
	if _, err := parseConfig([]string{"--scenario", "many-budgets", "--workers", "4", "--prefetch", "20481"}, &out); err != nil {
		t.Errorf("a prefetch with room rejected: %v", err)
	}
}

func TestParkedArithmetic(t *testing.T) {
	for _, c := range []struct {
		delta, n int64
		want     float64
	}{{10 << 20, 8192, 1280}, {1000, 3, 333}, {1001, 2, 501}, {-3000, 1000, -3}, {5, 0, 0}, {5, -1, 0}} {
		if got := bytesPer(c.delta, c.n); got != c.want {
			t.Errorf("bytesPer(%d, %d) = %g, want %g", c.delta, c.n, got, c.want)
		}
	}
	if m := median([]int64{5, 1, 9, 3, 7}); m != 5 {
		t.Errorf("median odd = %d", m)
	}
	if m := median([]int64{4, 1, 9, 3}); m != 3 {
		t.Errorf("median even = %d, want the lower middle 3", m)
	}
	if m := median(nil); m != 0 {
		t.Errorf("median of none = %d", m)
	}
	if got := mib(1536 << 10); got != 1.5 {
		t.Errorf("mib = %g", got)
	}
	for body, want := range map[string]int64{`{"count":819200}`: 819200, "{\"count\": 0}\n": 0} {
		if n, err := parseCount([]byte(body)); err != nil || n != want {
			t.Errorf("parseCount(%q) = %d, %v", body, n, err)
		}
	}
	if _, err := parseCount([]byte(`{"error":"x"}`)); err == nil {
		t.Error("parseCount accepted an error body")
	}
}

func TestPromValue(t *testing.T) {
	body := []byte(`# HELP tollgate_jobs_parked Ready jobs parked on a budget, by queue.
# TYPE tollgate_jobs_parked gauge
tollgate_jobs_parked{queue="bench-a"} 5120
tollgate_jobs_parked{queue="bench-ab"} 7
tollgate_jobs_parked_other{queue="bench-x"} 1
tollgate_jobs_parked{queue="big"} 1.2e+06
`)
	for labels, want := range map[string]float64{`queue="bench-a"`: 5120, `queue="bench-ab"`: 7, `queue="big"`: 1.2e6} {
		if v, ok := promValue(body, "tollgate_jobs_parked", labels); !ok || v != want {
			t.Errorf("promValue(%s) = %g, %t; want %g", labels, v, ok, want)
		}
	}
	if _, ok := promValue(body, "tollgate_jobs_parked", `queue="bench-x"`); ok {
		t.Error("promValue matched another metric's sample")
	}
}

// TestHolder checks that held deliveries stay until the release and then
// come out in order, followed by the later ones; and that a stream ending
// before the release still hands on what was held (the acker drains it).
func TestHolder(t *testing.T) {
	r := &runner{hold: make(chan struct{})}
	in, out := make(chan delivery), make(chan delivery, 10)
	done := make(chan struct{})
	go func() { r.holder(in, out); close(done) }()
	for i := range 3 {
		in <- delivery{seq: int64(i)}
	}
	select {
	case d := <-out:
		t.Fatalf("delivery %d passed before the release", d.seq)
	case <-time.After(50 * time.Millisecond):
	}
	r.releaseHold()
	r.releaseHold() // idempotent
	in <- delivery{seq: 3}
	close(in)
	<-done
	var got []int64
	for d := range out {
		got = append(got, d.seq)
	}
	if len(got) != 4 || got[0] != 0 || got[3] != 3 {
		t.Errorf("after the release got %v, want [0 1 2 3]", got)
	}

	r = &runner{hold: make(chan struct{})}
	in, out = make(chan delivery, 2), make(chan delivery, 2)
	in <- delivery{seq: 7}
	close(in)
	r.holder(in, out)
	if d, ok := <-out; !ok || d.seq != 7 {
		t.Errorf("stream ended before the release: got %v %t", d, ok)
	}
}

// TestPhaseReportLines checks the text report's lines for the parked and
// the backlog sections.
func TestPhaseReportLines(t *testing.T) {
	rep := &Report{
		Parked: &ParkedReport{Budgets: 8192, HeldPerBudget: 10, ParkedPerBudget: 100, ParkedJobs: 819200, ParkedExpected: 819200,
			Reached: true, RSS0MiB: 20, RSS1MiB: 60, BytesPerBudget: 5120, BytesPerParkedJob: 300},
		Backlog: &BacklogReport{Restarted: true, StartupS: 1.25, RSSServingMiB: 512.5,
			RSSSettledMiB: 140.5, RSSSettledAnonMiB: 100.25, RSSSettledFileMiB: 40.25},
	}
	var b bytes.Buffer
	rep.writeText(&b)
	for _, want := range []string{
		"parked                     budgets=8192 held_per_budget=10 parked_per_budget=100 held_jobs=0 parked_jobs=819200 expected=819200 reached=true",
		"parked.bytes               per_budget=5120 per_in_flight_job=0 per_parked_job=300",
		"backlog.restart            startup_s=1.250 ",
		"backlog.rss_mib            loaded=0.0 (anon=0.0 file=0.0) settled=140.5 (anon=100.2 file=40.2) serving=512.5 ",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	rep.Backlog = &BacklogReport{RestartNote: "skipped: external server (--url); start-up time and RSS not measured"}
	b.Reset()
	rep.writeText(&b)
	if !strings.Contains(b.String(), "backlog.restart            skipped: external server") {
		t.Errorf("report lacks the skipped restart:\n%s", b.String())
	}
}

// TestHelpShowsRealDefaults: --help prints the defaults a run uses (not
// the zero values the flags are declared with) and each scenario's
// overrides.
func TestHelpShowsRealDefaults(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseConfig([]string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	help := out.String()
	for _, want := range []string{
		"jobs to enqueue (cap in --duration mode) (default 100000)",
		"prefetch of each take stream (0 = unlimited) (default 100)",
		"stop and report after this long (default 2m)\n",
		"  rate          --budget-alloc=2000 --budget-duration=1s --jobs=20000 --prefetch=500\n",
		"  --tiny        --ack-batch=50",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q:\n%s", want, help)
		}
	}
}

// TestTenantsReturnedShare: the share given back is of the growth from
// rss0 to rss1, and it is left out when a figure is missing.
func TestTenantsReturnedShare(t *testing.T) {
	tr := &TenantsReport{RSSLaterMiB: 70}
	tr.noteReturned(&ParkedReport{RSS0MiB: 20, RSS1MiB: 520})
	if tr.ReturnedPct != 90 {
		t.Fatalf("returned %.3f %%, want 90", tr.ReturnedPct)
	}
	for _, c := range []struct {
		later float64
		p     *ParkedReport
	}{{70, nil}, {0, &ParkedReport{RSS0MiB: 20, RSS1MiB: 520}}, {70, &ParkedReport{RSS0MiB: 20, RSS1MiB: 20}}} {
		tr := &TenantsReport{RSSLaterMiB: c.later}
		tr.noteReturned(c.p)
		if tr.ReturnedPct != 0 {
			t.Errorf("later %.0f, parked %+v: returned %.3f %%, want none", c.later, c.p, tr.ReturnedPct)
		}
	}
}
