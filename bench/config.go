package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Scenario names accepted by --scenario.
const (
	scenarioLifecycle   = "lifecycle"
	scenarioInflight    = "inflight"
	scenarioRate        = "rate"
	scenarioMulti       = "multi"
	scenarioManyBudgets = "many-budgets"
	scenarioBacklog     = "backlog"
	scenarioRestart     = "restart"
	scenarioCeiling     = "ceiling"
	scenarioCron        = "cron"
	scenarioBatch       = "batch"
	scenarioTenants     = "tenants"
)

var scenarioNames = []string{
	scenarioLifecycle, scenarioInflight, scenarioRate, scenarioMulti,
	scenarioManyBudgets, scenarioBacklog, scenarioRestart, scenarioCeiling, scenarioCron, scenarioBatch,
	scenarioTenants,
}

// Config is everything one run needs. Zero values are filled in by
// parseConfig from, in order of precedence: explicit flags, the --tiny
// preset, the scenario's defaults and the global defaults.
type Config struct {
	// Scenario is one of scenarioNames. Default lifecycle.
	Scenario string
	// URL of a running server (http://127.0.0.1:PORT). Empty: bench starts one.
	URL string
	// ServerBin is a prebuilt tollgate binary; empty: go build ./cmd/tollgate.
	ServerBin string
	// ServerFlags are extra flags for `tollgate serve`.
	ServerFlags []string
	// KeepRoot keeps the server's temporary root directory after the run.
	KeepRoot bool
	// H2 uses HTTP/2 cleartext (prior knowledge) instead of HTTP/1.1.
	H2 bool

	// Jobs is the total number of jobs to enqueue (fixed-total mode), and
	// the cap in fixed-duration mode.
	Jobs int
	// Duration > 0 selects fixed-duration mode: producers stop after it.
	Duration time.Duration
	// EnqueueRate caps the total enqueue rate in jobs/s; 0 = unlimited.
	EnqueueRate float64
	// Producers is the number of concurrent enqueue loops.
	Producers int
	// Workers is the number of take streams.
	Workers int
	// Prefetch is each stream's prefetch (0 = unlimited, as in the API).
	Prefetch int
	// Batch > 1 enqueues with POST /jobs/bulk in batches of this size.
	Batch int
	// AckBatch > 1 acks with POST /jobs/success, up to this many IDs a call.
	AckBatch int
	// AckWorkers is the number of concurrent ack loops per worker.
	AckWorkers int
	// PayloadBytes is the approximate size of each job's JSON payload.
	PayloadBytes int
	// Sleep is how long a worker "works" on each job before acking it.
	Sleep time.Duration

	// BudgetAlloc is the allocation of the scenario's budget(s).
	BudgetAlloc int
	// BudgetDuration is the time_based budget's duration_ms.
	BudgetDuration time.Duration
	// BudgetBurst is the time_based budget's burst; 0 = unset.
	BudgetBurst int
	// Budgets is the number of budgets in many-budgets.
	Budgets int
	// Parked is how many jobs many-budgets parks on each budget beyond the
	// ones its allocation lets into flight (see parked.go).
	Parked int
	// Cost is each job's cost on each of its budgets.
	Cost int

	// KillAt is the fraction of --jobs (or of --duration) after which the
	// restart scenario kills the server.
	KillAt float64
	// Kills is how many times the restart scenario kills the server.
	Kills int

	// Queue is the queue name; default bench-<run id>, so that runs against
	// a shared server never see each other's jobs.
	Queue string
	// Timeout bounds the whole run; afterwards it stops and reports.
	Timeout time.Duration
	// IdleTimeout ends the drain when nothing was delivered or acked for
	// this long after the producers finished.
	IdleTimeout time.Duration
	// CollectWait is how long tenants keeps reading the RSS once every
	// budget was collected (its lowest reading is reported).
	CollectWait time.Duration
	// SettleWait is how long backlog keeps reading the RSS once the
	// preload ended, before the restart (its lowest reading is reported).
	SettleWait time.Duration
	// RequestTimeout bounds each non-streaming request.
	RequestTimeout time.Duration
	// Progress is the interval of the progress line; 0 disables it.
	Progress time.Duration
	// JSON prints the report as JSON.
	JSON bool
	// DispatchLog, if set, receives a CSV of every dispatch of a
	// time_based budget with its deviation from the ideal schedule.
	DispatchLog string
	// Tiny selects a preset small enough for CI.
	Tiny bool
	// CronEntries, CronGroupSize and CronInstall size the cron scenario
	// (cron.go): entries firing every second, entries per group, and
	// entries installed afterwards for the install time and RSS.
	CronEntries, CronGroupSize, CronInstall int
	// LogLevel of the harness's own logs.
	LogLevel string
	// CPUProfile, when set, is where the harness writes its own CPU
	// profile (the client side; the server has its own --cpu-profile).
	CPUProfile string
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// defaults holds flag values by flag name, applied to flags that were not
// set on the command line.
type defaults map[string]string

// globalDefaults apply to every scenario unless overridden.
var globalDefaults = defaults{
	"jobs": "100000", "producers": "2", "workers": "4", "prefetch": "100",
	"batch": "100", "ack-batch": "100", "ack-workers": "0", "payload-bytes": "200",
	"sleep": "0s", "budget-alloc": "100", "budget-duration": "1s", "budget-burst": "0",
	"budgets": "8192", "parked": "100", "cost": "1", "kill-at": "0.5", "kills": "1",
	"timeout": "2m", "idle-timeout": "15s", "request-timeout": "30s", "progress": "1s",
	"enqueue-rate": "0", "cron-entries": "10000", "cron-group-size": "1000", "cron-install": "100000",
}

// scenarioDefaults override globalDefaults per scenario.
var scenarioDefaults = map[string]defaults{
	scenarioLifecycle: {},
	scenarioCeiling:   {"jobs": "1000000"},
	// 50 slots of 10 ms each: an ideal server acks 5000 jobs/s.
	scenarioInflight: {"jobs": "20000", "budget-alloc": "50", "sleep": "10ms"},
	// 2000/s with the default burst of 2000: about 9 s for 20000 jobs.
	scenarioRate:  {"jobs": "20000", "budget-alloc": "2000", "budget-duration": "1s", "prefetch": "500"},
	scenarioMulti: {},
	// 10,000 entries every second for 60 s; 2 workers take and ack.
	// Acks come every 20 ms, so a prefetch of 2000 per stream is ample.
	scenarioCron: {"duration": "60s", "workers": "2", "prefetch": "2000"},
	// --jobs and --prefetch are derived (deriveManyBudgets): 8192 budgets
	// * (10 held + 100 parked) = 901,120 jobs.
	scenarioManyBudgets: {"budget-alloc": "10", "batch": "1000", "idle-timeout": "30s", "timeout": "10m"},
	scenarioBacklog:     {"jobs": "1000000", "batch": "1000", "idle-timeout": "30s", "timeout": "10m", "settle-wait": "6s"},
	// many-budgets' phases with one time_based budget per tenant, made by
	// create_with, and one job each; then the idle budgets are collected
	// (tenants.go).
	scenarioTenants: {"budgets": "100000", "budget-alloc": "1", "parked": "0", "batch": "1000", "idle-timeout": "30s", "timeout": "15m",
		"collect-wait": "150s"},
	// Paced faster than the workers drain (4*100 slots / 40 ms = 10000/s),
	// so that the kill finds both a backlog and jobs in flight.
	scenarioRestart: {"jobs": "100000", "enqueue-rate": "20000", "sleep": "40ms"},
	// 100,000 single enqueues per phase; batched ones fold 100 a key.
	scenarioBatch: {"jobs": "100000", "producers": "8"},
}

// tinyDefaults is the --tiny preset: a few seconds per scenario.
var tinyDefaults = map[string]defaults{
	"": {"jobs": "2000", "producers": "2", "workers": "2", "prefetch": "50",
		"batch": "50", "ack-batch": "50", "timeout": "60s", "idle-timeout": "5s"},
	scenarioInflight:    {"jobs": "200", "budget-alloc": "4", "sleep": "20ms"},
	scenarioRate:        {"jobs": "300", "budget-alloc": "100", "budget-duration": "1s", "prefetch": "100"},
	scenarioManyBudgets: {"budgets": "256", "parked": "20"},
	scenarioTenants:     {"budgets": "2000", "collect-wait": "0s"},
	scenarioBacklog:     {"jobs": "5000", "batch": "500", "settle-wait": "0s"},
	scenarioRestart:     {"jobs": "4000", "enqueue-rate": "2000", "sleep": "100ms", "idle-timeout": "10s"},
	scenarioCron:        {"cron-entries": "200", "cron-group-size": "100", "cron-install": "2000", "duration": "3s"},
}

// parseConfig parses args into a Config. It writes usage to out on -h.
func parseConfig(args []string, out io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Scenario, "scenario", scenarioLifecycle, "scenario: "+strings.Join(scenarioNames, ", "))
	fs.StringVar(&c.URL, "url", "", "target a running server, e.g. http://127.0.0.1:7890 (default: start one)")
	fs.StringVar(&c.ServerBin, "server-bin", "", "tollgate binary to start (default: go build ./cmd/tollgate)")
	fs.Var((*stringList)(&c.ServerFlags), "server-flag", "extra flag for `tollgate serve` (repeatable), e.g. --server-flag=--global-in-flight-limit=0")
	fs.BoolVar(&c.KeepRoot, "keep-root", false, "keep the started server's root directory")
	fs.BoolVar(&c.H2, "h2", false, "use HTTP/2 cleartext (prior knowledge) instead of HTTP/1.1")
	fs.IntVar(&c.Jobs, "jobs", 0, "jobs to enqueue (cap in --duration mode)")
	fs.DurationVar(&c.Duration, "duration", 0, "fixed-duration mode: enqueue for this long (0 = fixed total)")
	fs.Float64Var(&c.EnqueueRate, "enqueue-rate", 0, "cap on the total enqueue rate, jobs/s (0 = unlimited)")
	fs.IntVar(&c.Producers, "producers", 0, "concurrent enqueue loops")
	fs.IntVar(&c.Workers, "workers", 0, "take streams")
	fs.IntVar(&c.Prefetch, "prefetch", 0, "prefetch of each take stream (0 = unlimited)")
	fs.IntVar(&c.Batch, "batch", 0, "jobs per enqueue; > 1 uses POST /jobs/bulk")
	fs.IntVar(&c.AckBatch, "ack-batch", 0, "IDs per ack; > 1 uses POST /jobs/success")
	fs.IntVar(&c.AckWorkers, "ack-workers", 0, "concurrent ack loops per worker (0 = 2 with bulk acks, 8 with single acks)")
	fs.IntVar(&c.PayloadBytes, "payload-bytes", 0, "approximate JSON payload size per job")
	fs.DurationVar(&c.Sleep, "sleep", 0, "time each job \"works\" in the worker before its ack")
	fs.IntVar(&c.BudgetAlloc, "budget-alloc", 0, "budget allocation (inflight, rate, many-budgets)")
	fs.DurationVar(&c.BudgetDuration, "budget-duration", 0, "time_based budget duration (rate)")
	fs.IntVar(&c.BudgetBurst, "budget-burst", 0, "time_based budget burst (rate; 0 = unset)")
	fs.IntVar(&c.Budgets, "budgets", 0, "number of budgets (many-budgets)")
	fs.IntVar(&c.Parked, "parked", 0, "many-budgets: jobs parked on each budget beyond its allocation")
	fs.IntVar(&c.Cost, "cost", 0, "cost of each job on each of its budgets")
	fs.Float64Var(&c.KillAt, "kill-at", 0, "restart: kill after this fraction of the jobs (or of --duration)")
	fs.IntVar(&c.Kills, "kills", 0, "restart: number of kill -9 / restart cycles")
	fs.StringVar(&c.Queue, "queue", "", "queue name (default bench-<run id>)")
	fs.DurationVar(&c.Timeout, "timeout", 0, "stop and report after this long")
	fs.DurationVar(&c.CollectWait, "collect-wait", 0, "tenants: after the budgets are collected, keep reading RSS this long (the runtime returns freed memory after its periodic collection)")
	fs.DurationVar(&c.SettleWait, "settle-wait", 0, "backlog: after the preload, keep reading the server's RSS this long before the restart (the server hands memory back once a burst of jobs is quiet)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 0, "after the producers finish, stop when nothing moved for this long")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", 0, "timeout of each non-streaming request")
	fs.DurationVar(&c.Progress, "progress", 0, "progress line interval on stderr (0 = none)")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.StringVar(&c.DispatchLog, "dispatch-log", "", "write a CSV of every time_based dispatch and its deviation to this file")
	fs.BoolVar(&c.Tiny, "tiny", false, "preset small enough for CI (a few seconds)")
	fs.IntVar(&c.CronEntries, "cron-entries", 0, "cron: entries firing every second")
	fs.IntVar(&c.CronGroupSize, "cron-group-size", 0, "cron: entries per group (one PUT each)")
	fs.IntVar(&c.CronInstall, "cron-install", 0, "cron: entries installed after the run, for install time and RSS (0: skip)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "harness log level: debug, info, warn, error")
	fs.StringVar(&c.CPUProfile, "cpu-profile", "", "write the harness's own CPU profile (client side) to this file")
	// Show the defaults a run really uses: the global ones on each flag,
	// then what each scenario and --tiny change.
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := globalDefaults[f.Name]; ok {
			f.DefValue = v
		}
	})
	fs.Usage = func() { printUsage(fs) }
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	layers := []defaults{globalDefaults, scenarioDefaults[c.Scenario]}
	if c.Tiny {
		layers = append(layers, tinyDefaults[""], tinyDefaults[c.Scenario])
	}
	merged := defaults{}
	for _, l := range layers {
		for k, v := range l {
			merged[k] = v
		}
	}
	for name, v := range merged {
		if set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return c, fmt.Errorf("default for --%s: %w", name, err)
		}
	}
	if err := c.deriveManyBudgets(set); err != nil {
		return c, err
	}
	return c, c.validate()
}

// printUsage prints the flags with their global defaults, then the
// overrides of each scenario and of --tiny.
func printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: go run ./bench [flags]\n\n")
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nScenario defaults (over the ones above; flags given win):\n")
	for _, name := range scenarioNames {
		fmt.Fprintf(w, "  %-13s %s\n", name, formatDefaults(scenarioDefaults[name]))
	}
	fmt.Fprintf(w, "  %-13s %s\n", "--tiny", formatDefaults(tinyDefaults[""]))
	for _, name := range scenarioNames {
		if d, ok := tinyDefaults[name]; ok {
			fmt.Fprintf(w, "  %-13s %s\n", "--tiny "+name, formatDefaults(d))
		}
	}
	fmt.Fprintf(w, "  many-budgets also derives --jobs and --prefetch (see --parked).\n")
}

// formatDefaults renders overrides as sorted --name=value pairs.
func formatDefaults(d defaults) string {
	if len(d) == 0 {
		return "(none)"
	}
	names := make([]string, 0, len(d))
	for k := range d {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = "--" + k + "=" + d[k]
	}
	return strings.Join(parts, " ")
}

// heldPerBudget is how many jobs of cost --cost fit in flight on one
// while_in_flight budget of --budget-alloc.
func (c *Config) heldPerBudget() int {
	if c.Cost < 1 {
		return 0
	}
	return c.BudgetAlloc / c.Cost
}

// deriveManyBudgets sets what many-budgets computes rather than takes:
//   - --jobs = budgets * (held + parked), held = allocation/cost jobs in
//     flight per budget, so that every budget ends with held jobs in
//     flight and --parked parked;
//   - --prefetch, unless given, = 0 (unlimited): the streams must hold
//     every budget's allocation while the workers keep their jobs unacked,
//     and still have room, or the server never tries the jobs beyond the
//     allocations (it only does when a stream can take one) and they stay
//     ready instead of parking. A given --prefetch must be 0 or more than
//     budgets*held / workers;
//   - --server-flag=--global-in-flight-limit=0 unless a server flag sets
//     the cap: the default cap of 1024 would stop dispatch long before
//     budgets*held jobs are in flight, and the jobs behind it would wait
//     for the cap, not park on their budgets.
func (c *Config) deriveManyBudgets(set map[string]bool) error {
	if c.Scenario != scenarioManyBudgets && c.Scenario != scenarioTenants {
		return nil
	}
	c.tenantFlags()
	if set["jobs"] || set["duration"] {
		return errors.New("many-budgets derives the number of jobs from --budgets, --budget-alloc/--cost and --parked: drop --jobs and --duration")
	}
	held := c.heldPerBudget()
	if c.Budgets < 1 || held < 1 || c.Parked < 0 || c.Workers < 1 {
		return nil // validate reports it
	}
	c.Jobs = c.Budgets * (held + c.Parked)
	need := c.Budgets * held
	if !set["prefetch"] {
		c.Prefetch = 0
	} else if c.Prefetch > 0 && c.Prefetch*c.Workers <= need {
		return fmt.Errorf("many-budgets holds %d jobs in flight (budgets*allocation/cost) and needs room for more: --prefetch %d * --workers %d is too small (use 0 or leave it unset)",
			need, c.Prefetch, c.Workers)
	}
	for _, f := range c.ServerFlags {
		if strings.Contains(f, "global-in-flight-limit") || f == "-l" || strings.HasPrefix(f, "-l=") {
			return nil
		}
	}
	c.ServerFlags = append(c.ServerFlags, "--global-in-flight-limit=0")
	return nil
}

// validate rejects impossible combinations.
func (c *Config) validate() error {
	known := false
	for _, s := range scenarioNames {
		known = known || s == c.Scenario
	}
	var errs []error
	if !known {
		errs = append(errs, fmt.Errorf("unknown scenario %q (want one of %s)", c.Scenario, strings.Join(scenarioNames, ", ")))
	}
	positive := map[string]int{"jobs": c.Jobs, "producers": c.Producers, "workers": c.Workers,
		"batch": c.Batch, "ack-batch": c.AckBatch, "budget-alloc": c.BudgetAlloc, "budgets": c.Budgets,
		"cost": c.Cost, "kills": c.Kills}
	for name, v := range positive {
		if v < 1 {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", name))
		}
	}
	if c.Prefetch < 0 || c.PayloadBytes < 0 || c.AckWorkers < 0 || c.BudgetBurst < 0 || c.EnqueueRate < 0 || c.Parked < 0 {
		errs = append(errs, errors.New("--prefetch, --payload-bytes, --ack-workers, --budget-burst, --enqueue-rate and --parked must not be negative"))
	}
	if c.Cost > c.BudgetAlloc && c.Scenario != scenarioLifecycle && c.Scenario != scenarioCeiling {
		errs = append(errs, fmt.Errorf("--cost %d exceeds --budget-alloc %d", c.Cost, c.BudgetAlloc))
	}
	if c.BudgetDuration < time.Millisecond {
		errs = append(errs, errors.New("--budget-duration must be at least 1ms"))
	}
	if c.Scenario == scenarioCron && (c.CronEntries < 1 || c.CronGroupSize < 1 || c.CronGroupSize > 1000 || c.CronInstall < 0 || c.Duration <= 0) {
		errs = append(errs, errors.New("cron: --cron-entries must be at least 1, --cron-group-size 1 to 1000, --cron-install not negative, --duration positive"))
	}
	if c.KillAt <= 0 || c.KillAt >= 1 {
		errs = append(errs, errors.New("--kill-at must be between 0 and 1"))
	}
	if c.Timeout <= 0 || c.IdleTimeout <= 0 || c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("--timeout, --idle-timeout and --request-timeout must be positive"))
	}
	if c.URL != "" {
		if c.Scenario == scenarioRestart {
			errs = append(errs, errors.New("restart needs bench to start the server itself: drop --url"))
		}
		if c.Scenario == scenarioCeiling {
			errs = append(errs, errors.New("ceiling runs its own in-process handler: drop --url"))
		}
		if err := checkLoopbackURL(c.URL); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkLoopbackURL accepts only http URLs on 127.0.0.0/8 (or localhost):
// the harness must never send load anywhere but this machine.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if u.Scheme != "http" {
		return fmt.Errorf("--url: scheme must be http, got %q", u.Scheme)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return fmt.Errorf("--url: host must be 127.0.0.1 (loopback only), got %q", host)
	}
	return nil
}

// normalizeURL maps localhost to 127.0.0.1 and strips a trailing slash.
func normalizeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.Hostname() == "localhost" {
		port := u.Port()
		u.Host = "127.0.0.1"
		if port != "" {
			u.Host += ":" + port
		}
	}
	return strings.TrimRight(u.String(), "/")
}
