package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"
)

// report builds the counts, rates, latencies and budget figures of the run.
func (r *runner) report(tgt *target, res driveResult) *Report {
	cfg := r.cfg
	outcome, end := res.outcome, res.end
	transport := "http/1.1 keep-alive"
	if cfg.H2 {
		transport = "h2c (HTTP/2 cleartext, prior knowledge)"
	}
	out, completed := r.seqs.counts()
	tl := r.seqs.tally(r.issued.Load())
	rep := &Report{
		Scenario: cfg.Scenario, Target: tgt.desc, Transport: transport, Outcome: outcome,
		ElapsedS: round3(end.Seconds()),
		Config: ReportConfig{
			Jobs: cfg.Jobs, DurationS: cfg.Duration.Seconds(), EnqueueRate: cfg.EnqueueRate,
			Producers: cfg.Producers, Workers: cfg.Workers, Prefetch: cfg.Prefetch, Batch: cfg.Batch,
			AckBatch: cfg.AckBatch, AckWorkers: r.ackWorkers(), PayloadBytes: cfg.PayloadBytes,
			SleepMs: float64(cfg.Sleep) / 1e6, Queue: cfg.Queue,
		},
		Jobs: JobCounts{
			Enqueued: r.c.enqueued.Load(), EnqueueFailed: r.c.enqueueFailed.Load(),
			Dispatched: r.c.dispatched.Load(), Duplicates: r.c.duplicates.Load(),
			Acked: completed, AckRejected: r.c.ackRejected.Load(), AckFailed: r.c.ackFailed.Load(),
			Unfinished: out, AckedThenSeen: r.c.ackedThenSeen.Load(), AckRaced: r.c.ackRaced.Load(), Unknown: r.c.unknown.Load(),
			Heartbeats: r.c.heartbeats.Load(), StreamErrors: r.c.streamErrors.Load(),
			EnqueueReqs: r.c.enqueueReqs.Load(), AckReqs: r.c.ackReqs.Load(), NeverDelivered: tl.neverDelivered,
			AckUnknown: tl.ackUnknown,
		},
		Latency: Latencies{
			EnqueueToDelivered: summarize(r.enqHist.h),
			DeliveredToAcked:   summarize(r.ackHist.h),
			EnqueueRequest:     summarize(r.reqHist.h),
		},
		Anomalies: []string{},
	}
	if len(r.sc.budgets) > 0 {
		rep.Config.Cost = cfg.Cost
		rep.Budgets = summarizeBudgets(r.sc.budgets)
		for i, b := range rep.Budgets {
			if b.Strategy == strategyWhileInFlight && b.Budgets == 1 && cfg.Sleep > 0 {
				rep.Budgets[i].IdealRate = math.Round(float64(b.Allocation)/(float64(cfg.Cost)*cfg.Sleep.Seconds())*10) / 10
			}
		}
	}
	// Each rate runs from its phase's start to its last event.
	rep.Throughput.Enqueue = perSecond(r.c.enqueued.Load(), phase(r.c.enqWin.last.Load(), res.prodStart))
	takeStart := max(res.prodStart, res.workStart)
	rep.Throughput.Dispatch = perSecond(r.c.dispatched.Load(), phase(r.c.dispWin.last.Load(), takeStart))
	rep.Throughput.Ack = perSecond(r.c.acked.Load(), phase(r.c.ackWin.last.Load(), takeStart))
	rep.Backlog = res.backlog
	rep.Parked = res.parked
	if x := res.restart; x != nil {
		x.Duplicates = rep.Jobs.Duplicates
		x.AckedThenRedelivered = rep.Jobs.AckedThenSeen
		x.Lost = tl.lost
		x.AckUnknown = tl.ackUnknown
		x.Orphans = tl.orphans
		rep.Restart = x
	}
	return rep
}

// addResources fills in CPU time and memory: the harness's own, and the
// server's when bench started it (over all its incarnations).
func addResources(rep *Report, proc *serverProc, selfStart procSample, srvCPUStart float64, end time.Duration) {
	if self, err := readProc(0); err == nil {
		rep.ClientCPUSeconds = round2(self.cpuSeconds - selfStart.cpuSeconds)
	}
	if proc == nil {
		return
	}
	cpu, peak := proc.totals()
	rep.Server = &ServerReport{PID: proc.currentPID(), CPUSeconds: round2(cpu - srvCPUStart), PeakRSSBytes: peak, Starts: proc.startCount()}
	if end > 0 {
		rep.Server.CPUPercent = math.Round((cpu-srvCPUStart)/end.Seconds()*1000) / 10
	}
}

// checkListed compares GET /budgets with the budgets many-budgets used:
// create_with must have made exactly one per key.
func (r *runner) checkListed(ctx context.Context, rep *Report) {
	if len(rep.Budgets) != 1 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	n, err := r.sc.countBudgets(lctx, r.cl, "bench-"+r.runID)
	if err != nil {
		rep.Budgets[0].Listed = -1
		r.log.Warn("could not list budgets", "err", err)
		return
	}
	rep.Budgets[0].Listed = n
	if want := min(r.cfg.Budgets, int(r.issued.Load())); n != want && rep.Outcome == outcomeCompleted {
		rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("GET /budgets lists %d of this run's budgets, want %d (one per key used)", n, want))
	}
}

// anomalies lists what looks like a server bug in this run.
func (r *runner) anomalies(rep *Report) []string {
	var a []string
	j := rep.Jobs
	add := func(format string, args ...any) { a = append(a, fmt.Sprintf(format, args...)) }
	if !r.sc.restart {
		if j.Duplicates > 0 {
			add("%d duplicate deliveries without any stream closing", j.Duplicates)
		}
		if j.AckRejected > 0 {
			add("%d acks rejected as not in flight for jobs the worker held", j.AckRejected)
		}
		if j.EnqueueFailed > 0 || j.AckFailed > 0 {
			add("%d enqueue and %d ack failures (see errors)", j.EnqueueFailed, j.AckFailed)
		}
		if j.StreamErrors > 0 {
			add("%d take streams failed or were ended by the server", j.StreamErrors)
		}
	}
	if rep.Outcome == outcomeIdle && j.NeverDelivered > 0 {
		add("%d of %d unfinished jobs were never delivered although nothing moved for %s",
			j.NeverDelivered, j.Unfinished, r.idleTimeout())
	}
	if rep.Restart != nil && rep.Outcome != outcomeCompleted && j.Unfinished > 0 {
		add("%d acknowledged enqueues never completed after the restart (outcome %s)", j.Unfinished, rep.Outcome)
	}
	if j.AckedThenSeen > 0 {
		add("%d dispatches of jobs after their ack had been accepted (lost acks)", j.AckedThenSeen)
	}
	if j.Unknown > 0 {
		add("%d frames that are not jobs of this run", j.Unknown)
	}
	if p := rep.Parked; p != nil {
		if p.Failed != "" {
			add("many-budgets: the parked state was not reached: %s", p.Failed)
		} else if p.ParkedJobs >= 0 && p.ParkedJobs != p.ParkedExpected {
			add("many-budgets: the server reports %d jobs of the queue parked (tollgate_jobs_parked), want %d",
				p.ParkedJobs, p.ParkedExpected)
		}
	}
	if b := rep.Backlog; b != nil {
		if b.StopError != "" {
			add("backlog: the loaded server did not exit 0 after SIGTERM before the restart: %s", b.StopError)
		}
		if !b.Restarted && rep.Server != nil {
			add("backlog: the loaded server was not restarted: %s", b.RestartNote)
		}
	}
	for _, b := range rep.Budgets {
		if b.OverAllocation > 0 {
			add("budget %s: %d budget(s) had more cost in flight than allocated (max %d > %d)",
				b.Key, b.OverAllocation, b.MaxInFlightCost, b.Allocation)
		}
		if b.Strategy != strategyTimeBased {
			continue
		}
		win, clock := b.MaxInWindow, "delivery"
		if b.ServerClock {
			win, clock = b.MaxInWindowServer, "dequeued_at"
		}
		if win > b.WindowBound+b.WindowSlack {
			add("budget %s: %d dispatched within one duration_ms window by %s, bound %d (+%d slack)",
				b.Key, win, clock, b.WindowBound, b.WindowSlack)
		}
		// Like the window check: delivery times can bunch (a batch of
		// deliveries held up, then read together), which makes the jobs
		// delivered right after look early against a schedule derived
		// from deliveries; when the server's clock is usable its dispatch
		// times decide, and the delivery figure stays in the report.
		if b.Early > 0 && !b.ServerClock {
			add("budget %s: %d deliveries ahead of the token-bucket schedule (min deviation %.3f ms)",
				b.Key, b.Early, b.DeviationMinMs)
		}
		if b.ServerEarly > 0 {
			add("budget %s: %d dispatches ahead of the token-bucket schedule by dequeued_at (min deviation %.3f ms)",
				b.Key, b.ServerEarly, b.ServerDeviationMinMs)
		}
	}
	return a
}

// phase is the length of a phase from start to its last event (ns since
// the epoch), or 0 when nothing happened.
func phase(last int64, start time.Duration) time.Duration {
	if last == 0 {
		return 0
	}
	return time.Duration(last) - start
}

// writeDispatchLogs writes the CSV of every time_based budget to path.
func writeDispatchLogs(path string, meters []*budgetMeter) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for _, m := range meters {
		if err := m.writeDispatchLog(f); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
