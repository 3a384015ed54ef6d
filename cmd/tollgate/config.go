package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	httpapi "github.com/tollgate/tollgate/http"
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// serveConfig is everything `tollgate serve` reads from flags and TOLLGATE_*
// variables (SPEC §9).
type serveConfig struct {
	RootDir           string
	Host              string
	Port              int
	TLSCert           string
	TLSKey            string
	TLSClientCA       string
	LogLevel          string
	LogFormat         string
	LogDir            string
	HeartbeatInterval time.Duration
	// StreamStallTimeout and StreamBufferLimit close a take stream whose
	// client stopped reading (SPEC §1.4); a stall timeout of 0 never does.
	StreamStallTimeout time.Duration
	StreamBufferLimit  int64
	// PayloadCacheSize bounds what keeping payloads of unfinished jobs in
	// memory costs, and GroupCacheSize the decoded job groups the store
	// keeps for payload reads (bytes; 0 = none).
	PayloadCacheSize, GroupCacheSize int64
	// MappedTableLimit bounds the resident pages of the store's mapped
	// tables before they are paged out (bytes; 0 = never page out).
	MappedTableLimit    int64
	GlobalInFlightLimit int
	DefaultRetryLimit   uint32
	BackoffBase         time.Duration
	BackoffExponent     float64
	BackoffJitter       time.Duration
	CompletedRetention  time.Duration
	DeadRetention       time.Duration
	ReaperInterval      time.Duration
	DefaultCommitMode   persistence.CommitMode
	EnqueueCommitMode   persistence.CommitMode
	MaxBudgets          int
	// DefaultJobTimeout fails a job in flight longer than this when it
	// sets no timeout_ms (SPEC §10.5; default 0 = never).
	DefaultJobTimeout time.Duration
	// BudgetIdleTTL collects a budget made by a create_with once it has
	// been idle and full this long (SPEC §10.3); 0 = never.
	BudgetIdleTTL time.Duration
	// MetricsBudgetSeries bounds the per-budget series of /metrics to the
	// budgets with the most unfinished jobs bound; 0 = every budget.
	MetricsBudgetSeries int
	// BudgetPools is memory (time_based pools start full after a restart)
	// or durable (they keep their level, SPEC §10.4).
	BudgetPools string
	// IdleTimeout closes a keep-alive connection that carries no request
	// for this long.
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds reading a request's body.
	BodyReadTimeout time.Duration
	// MaxConnections caps the open client connections; 0 derives it from
	// the descriptor limit (connlimit.go).
	MaxConnections int
	// MaxBodyMemory bounds the request-body bytes held across all
	// connections together.
	MaxBodyMemory int64
	// GCHeadroomMiB bounds the heap growth between collections once the
	// live heap is large (gctuner.go); 0 leaves GOGC alone.
	GCHeadroomMiB int
	// CPUProfile, when set, receives a pprof CPU profile of the whole run
	// (a diagnostic for performance work, not in SPEC §9).
	CPUProfile string
	// PprofAddr, when set, serves net/http/pprof on its own listener
	// (diagnostics; keep it on loopback).
	PprofAddr string
	// LogMaxSizeMiB is the size at which <log-dir>/tollgate.log is rotated,
	// and LogMaxFiles how many rotated files are kept (lumberjack).
	LogMaxSizeMiB int
	LogMaxFiles   int
	// AllowOrigins lists the origins besides the server's own whose
	// browsers may send state-changing requests (SPEC §1.5).
	AllowOrigins []string
	// AccessLog logs one info line per HTTP request (a take stream's when
	// it ends).
	AccessLog bool
	// SlowCommit is the store commit duration logged at warn; 0 = never.
	SlowCommit time.Duration
}

// durationValue is a flag.Value for SPEC §9 durations.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := protocol.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// byteSizeValue is a flag.Value for sizes in bytes, KiB, MiB or GiB
// (protocol.ParseByteSize).
type byteSizeValue struct{ n *int64 }

func (v byteSizeValue) String() string {
	if v.n == nil {
		return ""
	}
	if *v.n > 0 && *v.n%(1<<20) == 0 {
		return strconv.FormatInt(*v.n>>20, 10) + "MiB"
	}
	return strconv.FormatInt(*v.n, 10)
}

func (v byteSizeValue) Set(s string) error {
	n, err := protocol.ParseByteSize(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

// commitModeValue is a flag.Value for buffered|fsync.
type commitModeValue struct{ m *persistence.CommitMode }

func (v commitModeValue) String() string {
	if v.m == nil {
		return ""
	}
	return string(*v.m)
}

func (v commitModeValue) Set(s string) error {
	m, err := persistence.ParseCommitMode(s)
	if err != nil {
		return err
	}
	*v.m = m
	return nil
}

// listValue is a flag.Value for a comma list that may also be repeated.
type listValue struct{ v *[]string }

func (l listValue) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listValue) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l.v = append(*l.v, item)
		}
	}
	return nil
}

// checkOrigin accepts "*" or an origin: http(s)://host[:port], nothing else.
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return errorf("invalid --allow-origin %q: expected scheme://host[:port] or *", o)
	}
	return nil
}

type uint32Value struct{ v *uint32 }

func (u uint32Value) String() string {
	if u.v == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*u.v), 10)
}

func (u uint32Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return errors.New("expected a non-negative 32-bit integer")
	}
	*u.v = uint32(n)
	return nil
}

// flagSpec ties a flag to its environment variable.
type flagSpec struct {
	name, env, usage string
}

// parseServe reads flags, then fills every flag not given on the command
// line from its TOLLGATE_* variable.
func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	cfg := &serveConfig{
		RootDir:             "./tollgate-root",
		Host:                "127.0.0.1",
		Port:                7890,
		LogLevel:            "info",
		LogFormat:           "auto",
		HeartbeatInterval:   3 * time.Second,
		StreamStallTimeout:  60 * time.Second,
		StreamBufferLimit:   4 << 20,
		PayloadCacheSize:    8 << 20,
		GroupCacheSize:      64 << 20,
		MappedTableLimit:    64 << 20,
		GlobalInFlightLimit: 1024,
		DefaultRetryLimit:   25,
		BackoffBase:         15 * time.Second,
		BackoffExponent:     4.0,
		BackoffJitter:       30 * time.Second,
		DeadRetention:       7 * 24 * time.Hour,
		ReaperInterval:      30 * time.Second,
		DefaultCommitMode:   persistence.Buffered,
		MaxBudgets:          8192,
		BudgetPools:         "memory",
		GCHeadroomMiB:       48,
		LogMaxSizeMiB:       100,
		LogMaxFiles:         5,
		SlowCommit:          time.Second,
		IdleTimeout:         2 * time.Minute,
		ReadHeaderTimeout:   30 * time.Second,
		BodyReadTimeout:     time.Minute,
		MaxBodyMemory:       httpapi.DefaultMaxBodyMemory,
	}
	enqueueMode := persistence.CommitMode("")
	fs := flag.NewFlagSet("tollgate serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	specs := []flagSpec{}
	def := func(name, env, usage string) { specs = append(specs, flagSpec{name, env, usage}) }

	fs.StringVar(&cfg.RootDir, "root-dir", cfg.RootDir, "")
	def("root-dir", "TOLLGATE_ROOT_DIR", "data directory (created if missing); the store lives in <root>/data")
	fs.StringVar(&cfg.Host, "host", cfg.Host, "")
	def("host", "TOLLGATE_HOST", "listen address")
	fs.IntVar(&cfg.Port, "port", cfg.Port, "")
	def("port", "TOLLGATE_PORT", "listen port (0: any free port)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "")
	def("tls-cert", "TOLLGATE_TLS_CERT", "PEM certificate chain; needs --tls-key")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "")
	def("tls-key", "TOLLGATE_TLS_KEY", "PEM private key; needs --tls-cert")
	fs.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "")
	def("tls-client-ca", "TOLLGATE_TLS_CLIENT_CA", "require client certificates signed by this CA; needs cert and key")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "")
	def("log-level", "TOLLGATE_LOG_LEVEL", "trace|debug|info|warn|error")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "")
	def("log-format", "TOLLGATE_LOG_FORMAT", "pretty|compact|json; auto = pretty on a terminal, compact otherwise")
	fs.StringVar(&cfg.CPUProfile, "cpu-profile", "", "")
	def("cpu-profile", "TOLLGATE_CPU_PROFILE", "write a pprof CPU profile of the run to this file (diagnostics)")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", "", "")
	def("pprof-addr", "TOLLGATE_PPROF_ADDR", "serve /debug/pprof/ on this address, e.g. 127.0.0.1:6060 (diagnostics)")
	fs.StringVar(&cfg.LogDir, "log-dir", "", "")
	def("log-dir", "TOLLGATE_LOG_DIR", "write logs to <dir>/tollgate.log instead of stdout")
	fs.IntVar(&cfg.LogMaxSizeMiB, "log-max-size", cfg.LogMaxSizeMiB, "")
	def("log-max-size", "TOLLGATE_LOG_MAX_SIZE", "with --log-dir: rotate tollgate.log when it reaches this many MiB")
	fs.IntVar(&cfg.LogMaxFiles, "log-max-files", cfg.LogMaxFiles, "")
	def("log-max-files", "TOLLGATE_LOG_MAX_FILES", "with --log-dir: rotated log files kept (older ones are deleted)")
	fs.Var(listValue{&cfg.AllowOrigins}, "allow-origin", "")
	def("allow-origin", "TOLLGATE_ALLOW_ORIGIN", "origins (comma list, or repeat the flag; * = any) whose web pages may send POST/PUT/PATCH/DELETE besides the server's own")
	fs.BoolVar(&cfg.AccessLog, "access-log", false, "")
	def("access-log", "TOLLGATE_ACCESS_LOG", "log one line per HTTP request: method, path, status, duration, bytes (true|false)")
	fs.Var(durationValue{&cfg.SlowCommit}, "slow-commit-threshold", "")
	def("slow-commit-threshold", "TOLLGATE_SLOW_COMMIT_THRESHOLD", "warn when writing to disk takes longer than this; 0 = never")
	fs.Var(durationValue{&cfg.HeartbeatInterval}, "heartbeat-interval", "")
	def("heartbeat-interval", "TOLLGATE_HEARTBEAT_INTERVAL", "idle time before a take-stream heartbeat")
	fs.Var(durationValue{&cfg.StreamStallTimeout}, "stream-stall-timeout", "")
	def("stream-stall-timeout", "TOLLGATE_STREAM_STALL_TIMEOUT", "close a take stream whose frames stay unwritten this long; 0 = never")
	fs.Var(byteSizeValue{&cfg.StreamBufferLimit}, "stream-buffer-limit", "")
	def("stream-buffer-limit", "TOLLGATE_STREAM_BUFFER_LIMIT", "close a take stream whose unwritten frames exceed this many bytes (or KiB, MiB, GiB)")
	fs.Var(byteSizeValue{&cfg.PayloadCacheSize}, "payload-cache-size", "")
	def("payload-cache-size", "TOLLGATE_PAYLOAD_CACHE_SIZE", "memory for payloads of unfinished jobs, bytes (or KiB, MiB, GiB); beyond it payloads are read from the store; 0 = none")
	fs.Var(byteSizeValue{&cfg.GroupCacheSize}, "group-cache-size", "")
	def("group-cache-size", "TOLLGATE_GROUP_CACHE_SIZE", "memory for decoded job groups the store keeps for payload reads, bytes (or KiB, MiB, GiB); 0 = none")
	fs.Var(byteSizeValue{&cfg.MappedTableLimit}, "mapped-table-limit", "")
	def("mapped-table-limit", "TOLLGATE_MAPPED_TABLE_LIMIT", "resident pages of the store's memory-mapped table files past which they are paged out (checked every second; Linux), bytes (or KiB, MiB, GiB); 0 = never")
	fs.IntVar(&cfg.GlobalInFlightLimit, "global-in-flight-limit", cfg.GlobalInFlightLimit, "")
	fs.IntVar(&cfg.GlobalInFlightLimit, "l", cfg.GlobalInFlightLimit, "")
	def("global-in-flight-limit", "TOLLGATE_GLOBAL_IN_FLIGHT_LIMIT", "server-wide in-flight cap (-l); 0 = none")
	fs.Var(uint32Value{&cfg.DefaultRetryLimit}, "default-retry-limit", "")
	def("default-retry-limit", "TOLLGATE_DEFAULT_RETRY_LIMIT", "retries before dead")
	fs.Var(durationValue{&cfg.BackoffBase}, "default-backoff-base", "")
	def("default-backoff-base", "TOLLGATE_DEFAULT_BACKOFF_BASE", "backoff base_ms default")
	fs.Float64Var(&cfg.BackoffExponent, "default-backoff-exponent", cfg.BackoffExponent, "")
	def("default-backoff-exponent", "TOLLGATE_DEFAULT_BACKOFF_EXPONENT", "backoff exponent default")
	fs.Var(durationValue{&cfg.BackoffJitter}, "default-backoff-jitter", "")
	def("default-backoff-jitter", "TOLLGATE_DEFAULT_BACKOFF_JITTER", "backoff jitter_ms default")
	fs.Var(durationValue{&cfg.CompletedRetention}, "default-completed-job-retention", "")
	def("default-completed-job-retention", "TOLLGATE_DEFAULT_COMPLETED_JOB_RETENTION", "keep completed jobs this long")
	fs.Var(durationValue{&cfg.DeadRetention}, "default-dead-job-retention", "")
	def("default-dead-job-retention", "TOLLGATE_DEFAULT_DEAD_JOB_RETENTION", "keep dead jobs this long")
	fs.Var(durationValue{&cfg.ReaperInterval}, "reaper-check-interval", "")
	def("reaper-check-interval", "TOLLGATE_REAPER_CHECK_INTERVAL", "reaper period")
	fs.Var(durationValue{&cfg.DefaultJobTimeout}, "default-job-timeout", "")
	def("default-job-timeout", "TOLLGATE_DEFAULT_JOB_TIMEOUT", "fail a job in flight this long when it sets no timeout_ms; 0 = never")
	fs.Var(commitModeValue{&cfg.DefaultCommitMode}, "default-commit-mode", "")
	def("default-commit-mode", "TOLLGATE_DEFAULT_COMMIT_MODE", "buffered|fsync")
	fs.Var(commitModeValue{&enqueueMode}, "enqueue-commit-mode", "")
	def("enqueue-commit-mode", "TOLLGATE_ENQUEUE_COMMIT_MODE", "commit mode for enqueues (default: --default-commit-mode)")
	fs.IntVar(&cfg.MaxBudgets, "max-budgets", cfg.MaxBudgets, "")
	def("max-budgets", "TOLLGATE_MAX_BUDGETS", "maximum number of budgets; 0 = unlimited")
	fs.Var(durationValue{&cfg.BudgetIdleTTL}, "budget-idle-ttl", "")
	def("budget-idle-ttl", "TOLLGATE_BUDGET_IDLE_TTL", "delete a budget made by create_with once idle and full this long; 0 = never")
	fs.IntVar(&cfg.MetricsBudgetSeries, "metrics-budget-series", cfg.MetricsBudgetSeries, "")
	def("metrics-budget-series", "TOLLGATE_METRICS_BUDGET_SERIES", "per-budget /metrics series only for this many budgets, those with the most unfinished jobs; 0 = all")
	fs.StringVar(&cfg.BudgetPools, "budget-pools", cfg.BudgetPools, "")
	def("budget-pools", "TOLLGATE_BUDGET_POOLS", "memory|durable: time_based pools start full after a restart, or keep their level")
	fs.Var(durationValue{&cfg.IdleTimeout}, "idle-timeout", "")
	def("idle-timeout", "TOLLGATE_IDLE_TIMEOUT", "close a keep-alive connection idle this long")
	fs.Var(durationValue{&cfg.ReadHeaderTimeout}, "read-header-timeout", "")
	def("read-header-timeout", "TOLLGATE_READ_HEADER_TIMEOUT", "time allowed to send a request's headers")
	fs.Var(durationValue{&cfg.BodyReadTimeout}, "body-read-timeout", "")
	def("body-read-timeout", "TOLLGATE_BODY_READ_TIMEOUT", "time allowed to send a request's body")
	fs.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "")
	def("max-connections", "TOLLGATE_MAX_CONNECTIONS", "open client connections at most; 0 = the descriptor limit minus a reserve for the store")
	fs.Var(byteSizeValue{&cfg.MaxBodyMemory}, "max-body-memory", "")
	def("max-body-memory", "TOLLGATE_MAX_BODY_MEMORY", "request-body bytes held in memory across all connections (e.g. 256MiB); over it requests get 503")
	fs.IntVar(&cfg.GCHeadroomMiB, "gc-headroom-mib", cfg.GCHeadroomMiB, "")
	def("gc-headroom-mib", "TOLLGATE_GC_HEADROOM_MIB", "heap growth allowed between collections once the heap is large, MiB; 0 or a GOGC variable leaves Go's default")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printServeUsage(stderr, fs, specs)
			return nil, err
		}
		return nil, errorf("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["l"] {
		given["global-in-flight-limit"] = true
	}
	for _, s := range specs {
		v, ok := os.LookupEnv(s.env)
		if !ok || given[s.name] {
			continue
		}
		if err := fs.Set(s.name, v); err != nil {
			return nil, errorf("invalid value %q for %s: %v", v, s.env, err)
		}
	}
	if enqueueMode == "" {
		enqueueMode = cfg.DefaultCommitMode
	}
	cfg.EnqueueCommitMode = enqueueMode
	return cfg, cfg.validate()
}

func (c *serveConfig) validate() error {
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errorf("--tls-cert and --tls-key must be given together")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return errorf("--tls-client-ca requires --tls-cert and --tls-key")
	case c.Port < 0 || c.Port > 65535:
		return errorf("invalid --port %d: must be 0..65535", c.Port)
	case c.GlobalInFlightLimit < 0:
		return errorf("invalid --global-in-flight-limit %d: must be >= 0", c.GlobalInFlightLimit)
	case c.GCHeadroomMiB < 0:
		return errorf("invalid --gc-headroom-mib %d: must be >= 0", c.GCHeadroomMiB)
	case c.MaxBudgets < 0:
		return errorf("invalid --max-budgets %d: must be >= 0", c.MaxBudgets)
	case c.MetricsBudgetSeries < 0:
		return errorf("invalid --metrics-budget-series %d: must be >= 0", c.MetricsBudgetSeries)
	case c.BudgetPools != "memory" && c.BudgetPools != "durable":
		return errorf("invalid --budget-pools %q: must be memory or durable", c.BudgetPools)
	case c.BackoffExponent < 0 || c.BackoffExponent != c.BackoffExponent:
		return errorf("invalid --default-backoff-exponent: must be a finite number >= 0")
	case c.HeartbeatInterval <= 0:
		return errorf("invalid --heartbeat-interval: must be positive")
	case c.IdleTimeout <= 0 || c.ReadHeaderTimeout <= 0 || c.BodyReadTimeout <= 0:
		return errorf("invalid --idle-timeout, --read-header-timeout or --body-read-timeout: must be positive")
	case c.MaxConnections < 0:
		return errorf("invalid --max-connections %d: must be >= 0", c.MaxConnections)
	case c.MaxBodyMemory < 8<<20:
		return errorf("invalid --max-body-memory %d: must be at least 8MiB, the largest body", c.MaxBodyMemory)
	case c.ReaperInterval <= 0:
		return errorf("invalid --reaper-check-interval: must be positive")
	case c.LogMaxSizeMiB < 1:
		return errorf("invalid --log-max-size %d: must be at least 1 (MiB)", c.LogMaxSizeMiB)
	case c.LogMaxFiles < 1:
		return errorf("invalid --log-max-files %d: must be at least 1", c.LogMaxFiles)
	case c.StreamBufferLimit <= 0:
		return errorf("invalid --stream-buffer-limit: must be at least 1 byte")
	case c.PayloadCacheSize < 0 || c.PayloadCacheSize > math.MaxInt32:
		return errorf("invalid --payload-cache-size %d: must be from 0 to 2GiB", c.PayloadCacheSize)
	case c.GroupCacheSize < 0 || c.GroupCacheSize > math.MaxInt32:
		return errorf("invalid --group-cache-size %d: must be from 0 to 2GiB", c.GroupCacheSize)
	case c.MappedTableLimit < 0 || c.MappedTableLimit > math.MaxInt32:
		return errorf("invalid --mapped-table-limit %d: must be from 0 to 2GiB", c.MappedTableLimit)
	}
	for _, o := range c.AllowOrigins {
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	switch c.LogFormat {
	case "auto", "pretty", "compact", "json":
	default:
		return errorf("invalid --log-format %q: expected pretty, compact or json", c.LogFormat)
	}
	return nil
}

func printServeUsage(w io.Writer, fs *flag.FlagSet, specs []flagSpec) {
	fmt.Fprintln(w, "Usage: tollgate [serve] [flags]\n       tollgate trace [--url URL] [--job ID] [--budget KEY] [--queue Q] [--ca PEM] [--cert PEM --key PEM]\n       tollgate version (or --version)\n\nFlags (each also read from its environment variable; the flag wins):")
	for _, s := range specs {
		f := fs.Lookup(s.name)
		dflt := f.DefValue
		if dflt == "" {
			dflt = "-"
		}
		fmt.Fprintf(w, "  --%-34s %s (default %s) [%s]\n", s.name, s.usage, dflt, s.env)
	}
	fmt.Fprintln(w, "\nDurations are milliseconds or a number with ms, s, m, h, d, w (e.g. 12.5s).")
}

// durationMs is a duration as whole milliseconds for the engine.
func durationMs(d time.Duration) uint32 {
	ms := d / time.Millisecond
	if ms > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(ms)
}
