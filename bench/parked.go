package main

// The parked phases of many-budgets: how much server memory a budget and a
// job parked on a budget cost.
//
//	phase 0  take streams open, nothing enqueued: rss0
//	phase 1  one job per budget (each makes its budget by create_with); the
//	         workers take them and do not ack: rss1
//	         bytes_per_budget = (rss1 - rss0) / budgets
//	phase 2  (a) up to held = allocation/cost jobs per budget, all in
//	         flight: rss_held, bytes_per_in_flight_job =
//	         (rss_held - rss1) / (budgets*(held-1));
//	         (b) then --parked more per budget: the budgets are full, so
//	         they park: rss2, bytes_per_parked_job = (rss2 - rss_held) /
//	         parked jobs
//	phase 3  the workers ack what they hold and go on as usual until every
//	         job is acked (drain)
//
// Jobs are bound round robin (job seq -> budget seq % budgets) and enqueued
// in seq order, so after phase (a) every budget has exactly held jobs in
// flight, and every job of phase (b) parks.
//
// Phase 2 is split so that bytes_per_parked_job does not include the
// in-flight jobs that phase (a) adds; (rss2 - rss1) / parked, which does,
// can be computed from the reported RSS figures.
//
// What the RSS figures measure: VmRSS of the server process (procstat.go),
// read rssSettle after a phase's target was seen and while nothing is
// enqueued or acked, as the median of rssSamples readings rssEvery apart,
// so that a transient peak of the phase (request buffers, a GC cycle) is
// not taken for the state. It is resident memory, not live heap: it
// includes the Go runtime's GC headroom and garbage not yet returned to the
// OS, so the per-item figures are upper bounds of what the state itself
// keeps alive (actors' BenchmarkParkedMemory measures live heap).
//
// Targets are seen from GET /jobs/count?status=in_flight and
// ?status=ready (answered from the server's counters, cheap at any size),
// relative to the counts before phase 1, together with the harness's own
// delivery count; a parked job is a ready one (SPEC §4.7). Once the RSS is
// read, one GET /metrics scrape reads the server's own parked count for
// the run's queue (tollgate_jobs_parked); the scrape is taken after the
// reading because with thousands of budgets it is several MB, which would
// otherwise show in the figure (it can still raise the reported peak).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Timing of the parked phases.
const (
	rssSettle   = time.Second            // idle after a target is reached before RSS is read
	rssSamples  = 5                      // readings per RSS figure (median)
	rssEvery    = 100 * time.Millisecond // between readings
	phasePoll   = 200 * time.Millisecond // GET /jobs/count interval while waiting for a target
	streamsWait = 30 * time.Second       // bound on waiting for the take streams to open
)

// ParkedReport is what many-budgets measured of the parked state.
type ParkedReport struct {
	Budgets         int `json:"budgets"`
	HeldPerBudget   int `json:"held_per_budget"`   // jobs in flight per budget: allocation/cost
	ParkedPerBudget int `json:"parked_per_budget"` // --parked
	// HeldJobs is budgets*held: the jobs the workers held in flight once
	// phase 2a reached its target (0 if it did not).
	HeldJobs int64 `json:"held_jobs"`
	// ParkedJobs is the server's tollgate_jobs_parked for the run's queue,
	// scraped once after rss2 was read; -1 when the scrape failed.
	ParkedJobs     int64 `json:"parked_jobs"`
	ParkedExpected int64 `json:"parked_expected"` // budgets * --parked
	// Reached says that every phase reached its target.
	Reached bool `json:"reached"`
	// Failed says which phase did not, and why.
	Failed string `json:"failed,omitempty"`

	// Server RSS in MiB (see the top of parked.go for what is measured);
	// zero against an external server.
	RSS0MiB    float64 `json:"rss0_mib"`     // phase 0: streams open, nothing enqueued
	RSS1MiB    float64 `json:"rss1_mib"`     // phase 1: budgets made, one job each in flight
	RSSHeldMiB float64 `json:"rss_held_mib"` // phase 2a: held jobs per budget in flight
	RSS2MiB    float64 `json:"rss2_mib"`     // phase 2b: and --parked parked per budget
	PeakMiB    float64 `json:"peak_rss_mib"` // VmHWM when rss2 was read

	BytesPerBudget      float64 `json:"bytes_per_budget"`        // (rss1 - rss0) / budgets
	BytesPerInFlightJob float64 `json:"bytes_per_in_flight_job"` // (rss_held - rss1) / (budgets*(held-1))
	BytesPerParkedJob   float64 `json:"bytes_per_parked_job"`    // (rss2 - rss_held) / parked jobs

	// Phase times, each from its first enqueue to its target (the RSS
	// readings are not included).
	BudgetsS float64 `json:"budgets_s"` // phase 1
	FillS    float64 `json:"fill_s"`    // phase 2a
	ParkS    float64 `json:"park_s"`    // phase 2b: time to park
	// Drain: from the workers' release to the end of the run.
	DrainS     float64 `json:"drain_s"`
	DrainJobsS float64 `json:"drain_jobs_s"`

	Note string `json:"note,omitempty"`
}

// statusCounts is the server's count of in-flight and ready jobs.
type statusCounts struct{ inFlight, ready int64 }

// buildParked runs phases 0 to 2 with the workers started and holding.
// It returns the report so far when a phase does not reach its target
// within the idle timeout (or ctx ends); the caller then releases the
// workers and drains all the same.
func (r *runner) buildParked(ctx context.Context, proc *serverProc) *ParkedReport {
	cfg := r.cfg
	held := cfg.heldPerBudget()
	budgets := int64(cfg.Budgets)
	p := &ParkedReport{
		Budgets: cfg.Budgets, HeldPerBudget: held, ParkedPerBudget: cfg.Parked,
		ParkedExpected: budgets * int64(cfg.Parked), ParkedJobs: -1,
	}
	if proc == nil {
		p.Note = "external server (--url): RSS not measured; GET /jobs/count is server-wide, taken relative to the start; " +
			"the server needs --global-in-flight-limit 0 (or at least budgets*allocation/cost)"
	}
	fail := func(phase string, err error) *ParkedReport {
		p.Failed = phase + ": " + err.Error()
		r.log.Warn("parked state not reached; draining", "phase", phase, "err", err)
		return p
	}

	// Phase 0.
	if err := r.waitStreams(ctx); err != nil {
		return fail("phase 0", err)
	}
	base, err := r.statusCounts(ctx)
	if err != nil {
		return fail("phase 0", err)
	}
	rss0, _ := r.settledRSS(ctx, proc)
	p.RSS0MiB = mib(rss0)

	// wantPark is how many jobs the first and the last budget must report
	// parked (GET /budgets/{key}/state) besides the counts: a ready job is
	// only parked once the server tried to dispatch it.
	var wantPark int64
	edges := []string{r.sc.budgets[0].spec.Key, r.sc.budgets[len(r.sc.budgets)-1].spec.Key}
	parkedOnEdges := func(ctx context.Context) (string, bool, error) {
		var got []string
		ok := true
		for _, key := range edges {
			n, err := r.budgetParked(ctx, key)
			if err != nil {
				return "", false, err
			}
			got = append(got, fmt.Sprintf("%s parked %d", key, n))
			ok = ok && n == wantPark
		}
		return fmt.Sprintf("%v (want %d each)", got, wantPark), ok, nil
	}

	phase := func(name string, limit int64, want statusCounts) (time.Duration, error) {
		start := time.Now()
		r.log.Info("parked: "+name, "enqueue_up_to", limit, "want_in_flight", want.inFlight, "want_ready", want.ready)
		r.enqueueUpTo(ctx, limit)
		if f := r.c.enqueueFailed.Load(); f > 0 {
			return 0, fmt.Errorf("%d enqueues failed (see errors)", f)
		}
		err := r.waitCounts(ctx, proc, base, want, parkedOnEdges)
		return time.Since(start), err
	}

	// Phase 1: one job per budget.
	d, err := phase("phase 1: one job per budget", budgets, statusCounts{inFlight: budgets})
	if err != nil {
		return fail("phase 1", err)
	}
	p.BudgetsS = round3(d.Seconds())
	rss1, _ := r.settledRSS(ctx, proc)
	p.RSS1MiB = mib(rss1)

	// Phase 2a: fill every budget's allocation.
	heldTotal := budgets * int64(held)
	rssHeld := rss1
	if held > 1 {
		d, err = phase("phase 2a: fill the allocations", heldTotal, statusCounts{inFlight: heldTotal})
		if err != nil {
			return fail("phase 2a", err)
		}
		p.FillS = round3(d.Seconds())
		rssHeld, _ = r.settledRSS(ctx, proc)
	}
	p.RSSHeldMiB = mib(rssHeld)
	p.HeldJobs = heldTotal

	// Phase 2b: park --parked jobs on each budget.
	rss2 := rssHeld
	var peak int64
	if p.ParkedExpected > 0 {
		wantPark = int64(cfg.Parked)
		d, err = phase("phase 2b: park", int64(cfg.Jobs), statusCounts{inFlight: heldTotal, ready: p.ParkedExpected})
		if err != nil {
			return fail("phase 2b", err)
		}
		p.ParkS = round3(d.Seconds())
		rss2, peak = r.settledRSS(ctx, proc)
	} else if proc != nil {
		_, peak = proc.totals()
	}
	p.RSS2MiB = mib(rss2)
	p.PeakMiB = mib(peak)
	p.Reached = true
	if proc != nil {
		p.BytesPerBudget = bytesPer(rss1-rss0, budgets)
		p.BytesPerInFlightJob = bytesPer(rssHeld-rss1, heldTotal-budgets)
		p.BytesPerParkedJob = bytesPer(rss2-rssHeld, p.ParkedExpected)
	}
	if n, err := r.scrapeParked(ctx); err != nil {
		r.log.Warn("could not read the server's parked count", "err", err)
	} else {
		p.ParkedJobs = n
	}
	r.log.Info("parked state measured", "rss0_mib", p.RSS0MiB, "rss1_mib", p.RSS1MiB, "rss_held_mib", p.RSSHeldMiB,
		"rss2_mib", p.RSS2MiB, "parked_jobs", p.ParkedJobs, "bytes_per_budget", p.BytesPerBudget,
		"bytes_per_parked_job", p.BytesPerParkedJob)
	return p
}

// enqueueUpTo runs the producers until sequence numbers up to limit are
// handed out (or ctx ends), and waits for them.
func (r *runner) enqueueUpTo(ctx context.Context, limit int64) {
	r.limit.Store(limit)
	var wg sync.WaitGroup
	for range r.cfg.Producers {
		wg.Go(func() { r.producer(ctx, time.Time{}) })
	}
	wg.Wait()
}

// waitStreams waits until every worker's take stream is open.
func (r *runner) waitStreams(ctx context.Context) error {
	deadline := time.Now().Add(streamsWait)
	for r.streamsOpen.Load() < int64(r.cfg.Workers) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d take streams open after %s", r.streamsOpen.Load(), r.cfg.Workers, streamsWait)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// waitCounts polls the server's counts every phasePoll until, relative to
// base, exactly want.inFlight jobs are in flight and want.ready are ready
// (parked), the workers have received want.inFlight jobs and extra says
// yes. It gives up when nothing changes for the idle timeout, the server
// exits or ctx ends.
func (r *runner) waitCounts(ctx context.Context, proc *serverProc, base, want statusCounts,
	extra func(context.Context) (string, bool, error)) error {
	idle := r.idleTimeout()
	var last statusCounts
	var lastDisp int64 = -1
	lastExtra := ""
	lastMoved := time.Now()
	for {
		got, err := r.statusCounts(ctx)
		if err != nil {
			return err
		}
		got.inFlight -= base.inFlight
		got.ready -= base.ready
		disp := r.c.dispatched.Load()
		ex, ok, err := extra(ctx)
		if err != nil {
			return err
		}
		if got == want && disp == want.inFlight && ok {
			return nil
		}
		if got != last || disp != lastDisp || ex != lastExtra {
			last, lastDisp, lastExtra, lastMoved = got, disp, ex, time.Now()
		}
		if time.Since(lastMoved) > idle {
			return fmt.Errorf("stalled for %s at in_flight=%d ready=%d delivered=%d %s, want in_flight=%d ready=%d delivered=%d",
				idle, got.inFlight, got.ready, disp, ex, want.inFlight, want.ready, want.inFlight)
		}
		if proc != nil {
			select {
			case <-proc.doneCh():
				return fmt.Errorf("server exited: %v", proc.exit())
			default:
			}
		}
		if err := sleepCtx(ctx, phasePoll); err != nil {
			return fmt.Errorf("at in_flight=%d ready=%d delivered=%d, want in_flight=%d ready=%d: %w",
				got.inFlight, got.ready, disp, want.inFlight, want.ready, err)
		}
	}
}

// statusCounts asks GET /jobs/count for the in-flight and the ready jobs.
func (r *runner) statusCounts(ctx context.Context) (statusCounts, error) {
	var c statusCounts
	for _, q := range []struct {
		status string
		n      *int64
	}{{"in_flight", &c.inFlight}, {"ready", &c.ready}} {
		path := "/jobs/count?status=" + q.status
		resp, err := r.cl.do(ctx, http.MethodGet, path, nil)
		if err != nil {
			return c, fmt.Errorf("GET %s: %w", path, err)
		}
		n, err := parseCount(resp.body)
		if resp.status != http.StatusOK || err != nil {
			r.errs.add("count", http.MethodGet, path, nil, resp.status, resp.body, err)
			return c, fmt.Errorf("GET %s: status %d: %s", path, resp.status, clip(resp.body, 200))
		}
		*q.n = n
	}
	return c, nil
}

// budgetParked asks GET /budgets/{key}/state how many jobs are parked on
// the budget.
func (r *runner) budgetParked(ctx context.Context, key string) (int64, error) {
	path := "/budgets/" + key + "/state"
	resp, err := r.cl.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	var st struct {
		Parked *int64 `json:"parked"`
	}
	if resp.status != http.StatusOK || json.Unmarshal(resp.body, &st) != nil || st.Parked == nil {
		r.errs.add("budget-state", http.MethodGet, path, nil, resp.status, resp.body, nil)
		return 0, fmt.Errorf("GET %s: status %d: %s", path, resp.status, clip(resp.body, 200))
	}
	return *st.Parked, nil
}

// parseCount decodes {"count":N}.
func parseCount(body []byte) (int64, error) {
	const prefix = `{"count":`
	b := bytes.TrimSpace(body)
	if !bytes.HasPrefix(b, []byte(prefix)) || !bytes.HasSuffix(b, []byte("}")) {
		return 0, fmt.Errorf("not a count: %s", clip(body, 100))
	}
	return strconv.ParseInt(string(bytes.TrimSpace(b[len(prefix):len(b)-1])), 10, 64)
}

// settledRSS waits rssSettle, then returns the median of rssSamples VmRSS
// readings rssEvery apart, and VmHWM at the last one. Zero without a
// server process (or when ctx ends first).
func (r *runner) settledRSS(ctx context.Context, proc *serverProc) (rss, peak int64) {
	if proc == nil || sleepCtx(ctx, rssSettle) != nil {
		return 0, 0
	}
	var samples []int64
	for i := range rssSamples {
		if i > 0 && sleepCtx(ctx, rssEvery) != nil {
			break
		}
		if s, ok := proc.sample(); ok {
			samples = append(samples, s.rss)
			peak = s.peakRSS
		}
	}
	return median(samples), peak
}

// median of xs (the lower middle one for an even count); 0 for none.
func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// bytesPer is delta bytes over n items, to a whole byte; 0 when n < 1. A
// negative delta (the runtime returned memory in between) stays negative:
// it says the figure is below the noise.
func bytesPer(delta, n int64) float64 {
	if n < 1 {
		return 0
	}
	return math.Round(float64(delta) / float64(n))
}

// mib is bytes in MiB to one decimal.
func mib(b int64) float64 { return float64(b*10/(1<<20)) / 10 }

// scrapeParked reads tollgate_jobs_parked for the run's queue from GET
// /metrics.
func (r *runner) scrapeParked(ctx context.Context) (int64, error) {
	resp, err := r.cl.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return 0, err
	}
	if resp.status != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: status %d", resp.status)
	}
	v, ok := promValue(resp.body, "tollgate_jobs_parked", `queue=`+strconv.Quote(r.cfg.Queue))
	if !ok {
		return 0, errors.New("GET /metrics has no tollgate_jobs_parked for the queue")
	}
	return int64(v), nil
}

// promValue finds the sample `name{labels} value` in a Prometheus text
// exposition (labels exactly as written, e.g. queue="q") and returns its
// value.
func promValue(body []byte, name, labels string) (float64, bool) {
	prefix := name + "{" + labels + "} "
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) <= len(prefix) || line[:len(prefix)] != prefix {
			continue
		}
		f := bytes.Fields([]byte(line[len(prefix):]))
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(f[0]), 64)
		return v, err == nil
	}
	return 0, false
}
