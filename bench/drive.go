package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// driveResult is what drive hands back for the report: why the run ended
// and when its phases began and ended (harness clock).
type driveResult struct {
	outcome   string
	prodStart time.Duration // first producer started
	workStart time.Duration // first worker started
	end       time.Duration // the run was judged over
	backlog   *BacklogReport
	restart   *RestartReport
	parked    *ParkedReport
}

// drive runs the producers and workers the scenario calls for until every
// acknowledged job is acked, nothing moves for the idle timeout, --timeout
// passes or the user interrupts; then it stops them all and returns. proc
// is the server bench started (nil otherwise).
func (r *runner) drive(ctx context.Context, proc *serverProc, sigs <-chan os.Signal) driveResult {
	cfg := r.cfg
	loadCtx, cancelLoad := context.WithTimeout(ctx, cfg.Timeout)
	defer cancelLoad()
	workCtx, cancelWork := context.WithCancel(loadCtx)
	defer cancelWork()

	var interrupted atomic.Bool
	if sigs != nil {
		go r.watchSignals(loadCtx, sigs, func() { interrupted.Store(true); cancelLoad() })
	}
	progressDone := make(chan struct{})
	progressCtx, stopProgress := context.WithCancel(loadCtx)
	go func() {
		defer close(progressDone)
		r.progress(progressCtx, proc)
	}()

	var res driveResult
	var workers, producers sync.WaitGroup
	var drainStart time.Duration // many-budgets: the workers' release
	var drainPeak sync.WaitGroup // backlog: samplePeak
	var peakRSS atomic.Pointer[procSample]
	startWorkers := func() {
		res.workStart = r.now()
		for i := range cfg.Workers {
			workers.Go(func() { r.worker(workCtx, i) })
		}
	}
	producersDone := make(chan struct{})
	var prodEnd time.Duration // written before producersDone is closed
	startProducers := func() {
		var deadline time.Time
		if cfg.Duration > 0 {
			deadline = time.Now().Add(cfg.Duration)
		}
		if res.prodStart == 0 { // many-budgets' phases started enqueueing earlier
			res.prodStart = r.now()
		}
		for range cfg.Producers {
			producers.Go(func() { r.producer(loadCtx, deadline) })
		}
		go func() {
			producers.Wait()
			prodEnd = r.now()
			close(producersDone)
		}()
	}

	if r.sc.preload {
		startProducers()
		<-producersDone
		res.backlog = &BacklogReport{
			PreloadS:     round3((prodEnd - res.prodStart).Seconds()),
			PreloadJobsS: perSecond(r.c.enqueued.Load(), prodEnd-res.prodStart),
		}
		r.log.Info("backlog loaded", "jobs", r.c.enqueued.Load(), "seconds", res.backlog.PreloadS)
		r.restartLoaded(loadCtx, proc, res.backlog)
		startWorkers()
		if proc != nil {
			drainPeak.Add(1)
			go func() { defer drainPeak.Done(); r.samplePeak(workCtx, proc, &peakRSS) }()
		}
	} else if r.sc.park {
		// Workers first, holding what they take; the phases enqueue.
		startWorkers()
		res.prodStart = r.now()
		res.parked = r.buildParked(loadCtx, proc)
		r.log.Info("releasing the workers: drain")
		r.releaseHold()
		drainStart = r.now()
		r.limit.Store(int64(cfg.Jobs))
		startProducers() // whatever a failed phase left unenqueued
	} else {
		startWorkers()
		startProducers()
	}

	var killing atomic.Bool
	restartDone := make(chan struct{})
	if r.sc.restart && proc != nil {
		res.restart = &RestartReport{Kills: cfg.Kills}
		go func() {
			defer close(restartDone)
			r.restartLoop(loadCtx, proc, res.restart, &killing, producersDone)
		}()
	} else {
		close(restartDone)
	}

	res.outcome = r.waitDone(loadCtx, producersDone, restartDone, proc, &killing)
	if interrupted.Load() {
		res.outcome = outcomeInterrupted
	}
	res.end = r.now()
	// The load phase is over: stop everything and wait for it.
	r.stopProducing()
	cancelLoad()
	r.releaseHold() // a run cut short in the phases
	workers.Wait()
	drainPeak.Wait()
	producers.Wait()
	<-restartDone
	stopProgress()
	<-progressDone

	if b := res.backlog; b != nil {
		out, _ := r.seqs.counts()
		b.Drained = out == 0 && res.outcome == outcomeCompleted
		b.DrainS = round3((res.end - res.workStart).Seconds())
		b.DrainJobsS = perSecond(r.c.acked.Load(), res.end-res.workStart)
		if f := r.c.dispWin.first.Load(); f > 0 {
			b.FirstDispatchS = round3((time.Duration(f) - res.workStart).Seconds())
			if b.Restarted {
				b.FirstJobS = round3(b.workersAfterS + (time.Duration(f) - res.workStart).Seconds())
			}
		}
		if b.Restarted {
			if d, ok := proc.loadedAfter(); ok {
				b.LoadedS = round3(d.Seconds())
			}
			if p := peakRSS.Load(); p != nil {
				b.PeakRSSDrainMiB = mib(p.rss)
				b.PeakRSSDrainAnonMiB, b.PeakRSSDrainFileMiB = mib(p.rssAnon), mib(p.rssFile)
			}
			if s, ok := proc.sample(); ok {
				b.PeakRSSRestartedMiB = mib(s.peakRSS)
			}
		}
	}
	if p := res.parked; p != nil && drainStart > 0 {
		p.DrainS = round3((res.end - drainStart).Seconds())
		p.DrainJobsS = perSecond(r.c.acked.Load(), res.end-drainStart)
	}
	return res
}

// backlogListenTimeout bounds the restarted server's start-up to its
// "listening" line (the run's --timeout bounds it too): it loads its store,
// a million jobs by default, before it listens.
const backlogListenTimeout = 5 * time.Minute

// restartLoaded reads the RSS of the server that holds the preloaded
// backlog (and again over --settle-wait), stops it with SIGTERM and starts
// it again on the same root directory, timing the start-up and reading its
// RSS as soon as it serves. Against an external server it only says so.
func (r *runner) restartLoaded(ctx context.Context, proc *serverProc, b *BacklogReport) {
	if proc == nil {
		b.RestartNote = "skipped: external server (--url); start-up time and RSS not measured"
		return
	}
	if s, ok := proc.sample(); ok {
		b.RSSLoadedMiB = mib(s.rss)
		b.RSSLoadedAnonMiB, b.RSSLoadedFileMiB = mib(s.rssAnon), mib(s.rssFile)
	}
	r.settle(ctx, proc, b)
	r.log.Info("backlog: stopping the server (SIGTERM) to time its start-up", "pid", proc.currentPID())
	t0 := time.Now()
	if err := proc.stop(); err != nil {
		b.StopError = err.Error()
	}
	b.StopS = round3(time.Since(t0).Seconds())
	if n, err := diskUsage(proc.root); err == nil {
		b.DiskMiB = mib(n)
	}
	proc.listenTimeout = backlogListenTimeout
	err := proc.start(ctx)
	proc.listenTimeout = 0
	if err != nil {
		b.RestartNote = "restart failed: " + err.Error()
		r.log.Error("backlog: restart failed", "err", err)
		return
	}
	r.cl.setBase("http://" + proc.address())
	// Read before anything else touches the server.
	if s, ok := proc.sample(); ok {
		b.RSSServingMiB = mib(s.rss)
		b.PeakRSSStartupMiB = mib(s.peakRSS)
	}
	listening, healthy := proc.startupTimes()
	b.Restarted = true
	b.ListeningS = round3(listening.Seconds())
	b.StartupS = round3(healthy.Seconds())
	probe := []byte(`{"type":"probe","queue":"bench-probe","payload":{}}`)
	if resp, err := r.cl.do(ctx, http.MethodPost, "/jobs", probe); err == nil && resp.status < 300 {
		b.EnqueueS = round3(proc.sinceStart().Seconds())
	} else {
		r.log.Warn("backlog: the probe enqueue after the restart failed", "err", err, "status", resp.status)
	}
	b.workersAfterS = proc.sinceStart().Seconds() // the workers start next
	r.log.Info("backlog: server serving again", "startup_s", b.StartupS, "rss_serving_mib", b.RSSServingMiB, "addr", proc.address())
}

// settle reads the server's RSS every 250 ms for --settle-wait after the
// preload and keeps the lowest reading in b.
func (r *runner) settle(ctx context.Context, proc *serverProc, b *BacklogReport) {
	if r.cfg.SettleWait <= 0 {
		return
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	end := time.After(r.cfg.SettleWait)
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case <-t.C:
		}
		if s, ok := proc.sample(); ok && (b.RSSSettledMiB == 0 || mib(s.rss) < b.RSSSettledMiB) {
			b.RSSSettledMiB = mib(s.rss)
			b.RSSSettledAnonMiB, b.RSSSettledFileMiB = mib(s.rssAnon), mib(s.rssFile)
		}
	}
}

// samplePeak keeps in peak the sample of the largest VmRSS of the server,
// read every 100 ms until ctx ends: the peak of one phase, which VmHWM (the
// peak since the process started) cannot give, and how it splits.
func (r *runner) samplePeak(ctx context.Context, proc *serverProc, peak *atomic.Pointer[procSample]) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if s, ok := proc.sample(); ok {
			if p := peak.Load(); p == nil || s.rss > p.rss {
				peak.Store(&s)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchSignals makes the first interrupt stop the producers (the run then
// drains) and the second cancel the run.
func (r *runner) watchSignals(ctx context.Context, sigs <-chan os.Signal, cancel func()) {
	for n := 1; ; n++ {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		if n == 1 {
			r.log.Warn("interrupt: stopping producers and draining (interrupt again to cancel)")
			r.stopProducing()
			continue
		}
		r.log.Warn("second interrupt: cancelling")
		cancel()
		return
	}
}

// waitDone blocks until the run is over and says why.
func (r *runner) waitDone(ctx context.Context, producersDone, restartDone <-chan struct{}, proc *serverProc, killing *atomic.Bool) string {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastMoved := time.Now()
	lastSeen := int64(-1)
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				r.log.Warn("timeout: stopping", "timeout", r.cfg.Timeout)
				return outcomeTimeout
			}
			return outcomeInterrupted
		case <-tick.C:
		}
		if proc != nil && !killing.Load() {
			select {
			case <-proc.doneCh():
				r.log.Error("server exited during the run", "err", proc.exit(), "tail", proc.tailText())
				return outcomeServerDied
			default:
			}
		}
		moved := r.c.dispatched.Load() + r.c.acked.Load() + r.c.enqueued.Load()
		if moved != lastSeen {
			lastSeen, lastMoved = moved, time.Now()
		}
		select {
		case <-producersDone:
		default:
			continue
		}
		select {
		case <-restartDone:
		default:
			continue
		}
		if out, _ := r.seqs.counts(); out == 0 {
			return outcomeCompleted
		}
		if idle := r.idleTimeout(); time.Since(lastMoved) > idle {
			out, _ := r.seqs.counts()
			r.log.Warn("idle: nothing moved, stopping", "idle_timeout", idle, "unfinished", out)
			return outcomeIdle
		}
	}
}

// idleTimeout is --idle-timeout, stretched so that a correct server never
// looks idle: at least twice a job's work time and twice the refill time of
// one job's cost on any time_based budget.
func (r *runner) idleTimeout() time.Duration {
	d := max(r.cfg.IdleTimeout, 2*r.cfg.Sleep)
	for _, b := range r.sc.budgets {
		if b.spec.Strategy == strategyTimeBased {
			perJob := time.Duration(float64(b.spec.Duration) * float64(r.cfg.Cost) / float64(b.spec.Allocation))
			d = max(d, 2*perJob)
		}
	}
	return d
}

// restartLoop kills the server with SIGKILL at the configured points of
// the run and starts it again on the same root directory.
func (r *runner) restartLoop(ctx context.Context, p *serverProc, rep *RestartReport, killing *atomic.Bool, producersDone <-chan struct{}) {
	start := time.Now()
	for k := range r.cfg.Kills {
		frac := r.cfg.KillAt * float64(k+1) / float64(r.cfg.Kills)
		reached := func() bool {
			if r.cfg.Duration > 0 {
				return time.Since(start) >= time.Duration(frac*float64(r.cfg.Duration))
			}
			return float64(r.c.enqueued.Load()) >= frac*float64(r.cfg.Jobs)
		}
		for !reached() {
			select {
			case <-ctx.Done():
				return
			case <-producersDone:
				if !reached() {
					r.log.Warn("producers finished before the kill point; killing now")
				}
			case <-time.After(5 * time.Millisecond):
				continue
			}
			break
		}
		out, _ := r.seqs.counts()
		r.log.Info("killing server (SIGKILL)", "kill", k+1, "enqueued", r.c.enqueued.Load(), "unfinished", out)
		killing.Store(true)
		t0 := time.Now()
		p.kill()
		err := p.start(ctx)
		if err != nil {
			r.log.Error("restart failed", "err", err)
			return // killing stays set: waitDone ends on the timeout or idle
		}
		r.cl.setBase("http://" + p.address())
		killing.Store(false)
		rec := time.Since(t0)
		rep.RecoveryS = append(rep.RecoveryS, round3(rec.Seconds()))
		r.log.Info("server restarted", "kill", k+1, "recovery", rec.Round(time.Millisecond), "addr", p.address())
	}
}

// progress logs one line per --progress interval until ctx ends.
func (r *runner) progress(ctx context.Context, proc *serverProc) {
	if r.cfg.Progress <= 0 {
		return
	}
	t := time.NewTicker(r.cfg.Progress)
	defer t.Stop()
	var lastEnq, lastDisp, lastAck int64
	var lastCPU float64
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		enq, disp, ack := r.c.enqueued.Load(), r.c.dispatched.Load(), r.c.acked.Load()
		out, _ := r.seqs.counts()
		attrs := []any{
			"elapsed", r.now().Round(time.Millisecond),
			"enqueued", enq, "dispatched", disp, "acked", ack, "unfinished", out,
			"enq_per_s", int64(float64(enq-lastEnq) / dt),
			"disp_per_s", int64(float64(disp-lastDisp) / dt),
			"ack_per_s", int64(float64(ack-lastAck) / dt),
		}
		if e := r.c.enqueueFailed.Load() + r.c.ackFailed.Load() + r.c.streamErrors.Load(); e > 0 {
			attrs = append(attrs, "errors", e)
		}
		if proc != nil {
			if s, ok := proc.sample(); ok {
				cpu, _ := proc.totals() // over all incarnations (restart)
				if lastCPU > 0 {
					attrs = append(attrs, "server_cpu_pct", int64((cpu-lastCPU)/dt*100))
				}
				attrs = append(attrs, "server_rss_mib", s.rss>>20)
				lastCPU = cpu
			}
		}
		r.log.Info("progress", attrs...)
		lastEnq, lastDisp, lastAck, last = enq, disp, ack, now
	}
}
