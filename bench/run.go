package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"time"
)

// Exit statuses of run.
const (
	exitOK       = 0 // completed, no anomaly
	exitProblems = 1 // ran, but timed out, stalled or saw anomalies
	exitUsage    = 2 // bad flags
	exitSetup    = 3 // could not start (build, server, budgets)
)

// run is main without the process: it parses args, runs the scenario and
// prints the report to stdout. sigs delivers interrupts (may be nil).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintf(stderr, "bench: --log-level: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("component", "bench")
	if cfg.Scenario == scenarioBatch {
		return runBatchScenario(ctx, cfg, log, stdout)
	}
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "bench: --cpu-profile: %v\n", err)
			return exitUsage
		}
		defer stop()
	}
	rep, err := execute(ctx, cfg, log, sigs)
	if errors.Is(err, errCronReported) {
		return exitOK
	}
	if err != nil {
		log.Error("run failed", "err", err)
		return exitSetup
	}
	if cfg.JSON {
		if err := rep.writeJSON(stdout); err != nil {
			log.Error("write report", "err", err)
			return exitSetup
		}
	} else {
		rep.writeText(stdout)
	}
	if rep.Outcome != outcomeCompleted || len(rep.Anomalies) > 0 {
		return exitProblems
	}
	return exitOK
}

// errCronReported says the cron scenario printed its own report.
var errCronReported = errors.New("cron scenario reported")

// target is what the load is aimed at.
type target struct {
	url     string
	desc    string
	proc    *serverProc     // when bench started tollgate
	ceiling *ceilingServer  // ceiling scenario
	cleanup func(keep bool) // removes temp dirs
}

// openTarget starts the in-process handler, starts tollgate, or checks a
// running server, according to cfg.
func openTarget(ctx context.Context, cfg Config, log *slog.Logger) (*target, error) {
	switch {
	case cfg.Scenario == scenarioCeiling:
		cs, err := startCeiling(log)
		if err != nil {
			return nil, err
		}
		return &target{url: cs.url(), desc: "in-process trivial handler " + cs.url(), ceiling: cs, cleanup: func(bool) {}}, nil
	case cfg.URL != "":
		u := normalizeURL(cfg.URL)
		hc := &http.Client{Timeout: 5 * time.Second}
		resp, err := hc.Get(u + "/health")
		if err != nil {
			return nil, fmt.Errorf("GET %s/health: %w", u, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s/health: status %d", u, resp.StatusCode)
		}
		return &target{url: u, desc: "running server " + u, cleanup: func(bool) {}}, nil
	}
	dir, err := os.MkdirTemp("", "tollgate-bench-")
	if err != nil {
		return nil, err
	}
	cleanup := func(keep bool) {
		if keep {
			log.Info("kept server root", "root_dir", dir+"/root")
			return
		}
		_ = os.RemoveAll(dir)
	}
	bin := cfg.ServerBin
	if bin == "" {
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		log.Info("building server", "pkg", "./cmd/tollgate")
		if bin, err = buildServer(bctx, dir); err != nil {
			cleanup(false)
			return nil, err
		}
	}
	p := &serverProc{log: log, bin: bin, root: dir + "/root", flags: cfg.ServerFlags}
	if err := p.start(ctx); err != nil {
		p.kill()
		cleanup(cfg.KeepRoot)
		return nil, err
	}
	u := "http://" + p.address()
	return &target{url: u, desc: fmt.Sprintf("tollgate started by bench (%s)", u), proc: p, cleanup: cleanup}, nil
}

// execute runs one scenario end to end and builds its report. It returns
// an error only when the run could not start.
func execute(ctx context.Context, cfg Config, log *slog.Logger, sigs <-chan os.Signal) (*Report, error) {
	runID := newRunID()
	if cfg.Queue == "" {
		cfg.Queue = "bench-" + runID
	}
	tgt, err := openTarget(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	keep := cfg.KeepRoot
	defer func() { tgt.cleanup(keep) }()
	if tgt.ceiling != nil {
		defer tgt.ceiling.close()
	}
	stopped := false
	var stopErr error
	stopServer := func() {
		if tgt.proc != nil && !stopped {
			stopped = true
			stopErr = tgt.proc.stop()
		}
	}
	defer stopServer()

	if cfg.Scenario == scenarioCron {
		if err := runCron(ctx, cfg, log, tgt, os.Stdout); err != nil {
			return nil, err
		}
		stopServer()
		if stopErr != nil {
			return nil, fmt.Errorf("server did not exit 0 after SIGTERM: %w", stopErr)
		}
		return nil, errCronReported
	}
	errs := newErrorLog()
	sc := newScenario(cfg, "bench-"+runID)
	r := newRunner(cfg, log, sc, errs, runID)
	r.cl = newAPIClient(tgt.url, cfg.H2, cfg.RequestTimeout, cfg.Producers+cfg.Workers*(1+r.ackWorkers())+8, errs)
	defer r.cl.tr.CloseIdleConnections()
	if err := sc.setupBudgets(ctx, r.cl, r.now); err != nil {
		return nil, err
	}
	log.Info("run starting", "scenario", cfg.Scenario, "target", tgt.desc, "h2", cfg.H2, "jobs", cfg.Jobs,
		"producers", cfg.Producers, "workers", cfg.Workers, "prefetch", cfg.Prefetch, "batch", cfg.Batch,
		"ack_batch", cfg.AckBatch, "queue", cfg.Queue)
	selfStart, _ := readProc(0)
	var srvCPUStart float64
	if tgt.proc != nil {
		srvCPUStart, _ = tgt.proc.totals()
	}

	res := r.drive(ctx, tgt.proc, sigs)

	rep := r.report(tgt, res)
	addResources(rep, tgt.proc, selfStart, srvCPUStart, res.end)
	if cfg.DispatchLog != "" {
		if err := writeDispatchLogs(cfg.DispatchLog, sc.budgets); err != nil {
			log.Warn("dispatch log", "err", err)
		}
	}
	if sc.name == scenarioManyBudgets {
		r.checkListed(ctx, rep)
	}
	if sc.collect {
		rep.Tenants = r.measureCollected(ctx, tgt.proc)
		rep.Tenants.noteReturned(rep.Parked)
		if rep.Tenants.Failed != "" {
			rep.Anomalies = append(rep.Anomalies, "tenants: "+rep.Tenants.Failed)
		}
	}
	if cfg.URL != "" && len(sc.budgets) > 0 {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n := sc.deleteBudgets(cctx, r.cl)
		cancel()
		log.Info("deleted this run's budgets", "deleted", n, "of", len(sc.budgets))
	}
	stopServer()
	if rep.Server != nil {
		rep.Server.Exit = "0"
		rep.Server.LogLines = tgt.proc.lineCount()
		if stopErr != nil {
			rep.Server.Exit = stopErr.Error()
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("server did not exit 0 after SIGTERM: %v", stopErr))
		}
	}
	rep.Errors, rep.ErrorTotal = errs.snapshot()
	rep.Anomalies = append(rep.Anomalies, sc.notes...)
	rep.Anomalies = append(rep.Anomalies, r.anomalies(rep)...)
	if len(rep.Anomalies) > 0 && sc.restart {
		keep = true // the data directory is the evidence
	}
	return rep, nil
}

// newRunID returns 6 random hex digits naming this run's queue and budgets.
func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startCPUProfile profiles the harness process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
