package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"expvar"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/tollgate/tollgate/actors"
	httpapi "github.com/tollgate/tollgate/http"
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Version is tollgate's own release number (the Server header).
const Version = "0.1.0"

// run is the testable body of main: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	if cmd == "serve" && len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		cmd = "version"
	}
	switch cmd {
	case "serve":
		cfg, err := parseServe(args, stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "tollgate: %v\n", err)
			return 1
		}
		if err := serve(ctx, cfg, stdout); err != nil {
			fmt.Fprintf(stderr, "tollgate: %v\n", err)
			return 1
		}
		return 0
	case "trace":
		return runTrace(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "tollgate %s (API %s)\n", Version, httpapi.APIVersion)
		return 0
	case "help":
		_, _ = parseServe([]string{"--help"}, stdout)
		return 0
	}
	fmt.Fprintf(stderr, "tollgate: unknown command %q (expected serve, trace, version or help)\n", cmd)
	return 1
}

func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "trace":
		return slog.LevelDebug - 4, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, errorf("invalid --log-level %q: expected trace, debug, info, warn or error", s)
}

func newLogger(cfg *serveConfig, stdout io.Writer) (*slog.Logger, io.Closer, error) {
	level, _ := parseLevel(cfg.LogLevel)
	w := stdout
	var closer io.Closer
	if cfg.LogDir != "" {
		if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("log dir: %w", err)
		}
		// open it now, so that a directory we cannot write is reported at
		// start rather than lost with the first log line
		path := filepath.Join(cfg.LogDir, "tollgate.log")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("log dir: %w", err)
		}
		_ = f.Close()
		rot := &lumberjack.Logger{Filename: path, MaxSize: cfg.LogMaxSizeMiB, MaxBackups: cfg.LogMaxFiles}
		w, closer = rot, rot
	}
	format := cfg.LogFormat
	if format == "auto" {
		format = "compact"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "pretty"
		}
	}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	case "pretty":
		h = tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly})
	default:
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	}
	return slog.New(h), closer, nil
}

// serve runs the server until ctx ends, then shuts down in reverse order:
// take streams end (their jobs return to ready), HTTP stops, actors stop,
// the store commits what is pending and closes.
func serve(ctx context.Context, cfg *serveConfig, stdout io.Writer) error {
	// a bad certificate, key or CA is a start-up error: reported (exit 1)
	// before anything is opened or logged as listening
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return err
	}
	log, closer, err := newLogger(cfg, stdout)
	if err != nil {
		return err
	}
	if closer != nil {
		defer closer.Close()
	}
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.GCHeadroomMiB > 0 && os.Getenv("GOGC") == "" {
		tuner := newGCTuner(uint64(cfg.GCHeadroomMiB) << 20)
		tuner.start()
		defer tuner.stop()
	}
	if cfg.PprofAddr != "" {
		if err := servePprof(cfg.PprofAddr, log); err != nil {
			return err
		}
	}
	rootDir, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}
	slowCommit := cfg.SlowCommit
	if slowCommit == 0 {
		slowCommit = -1 // never
	}
	store, err := persistence.Open(persistence.Config{Dir: filepath.Join(rootDir, "data"), Logger: log.With("component", "store"), SlowCommit: slowCommit,
		GroupCacheBytes: cacheBound(cfg.GroupCacheSize), MappedTableBytes: cacheBound(cfg.MappedTableLimit)})
	if err != nil {
		return err
	}
	defer store.Close()

	engine, err := actors.Start(actors.Config{
		Store:  store,
		Logger: log,
		Engine: actors.EngineConfig{
			GlobalInFlightLimit: cfg.GlobalInFlightLimit,
			DefaultRetryLimit:   cfg.DefaultRetryLimit,
			DefaultBackoff: protocol.Backoff{
				Exponent: cfg.BackoffExponent,
				BaseMs:   durationMs(cfg.BackoffBase),
				JitterMs: durationMs(cfg.BackoffJitter),
			},
			CompletedRetention: cfg.CompletedRetention,
			DeadRetention:      cfg.DeadRetention,
			MaxBudgets:         cfg.MaxBudgets,
			BudgetIdleTTL:      cfg.BudgetIdleTTL,
			DurablePools:       cfg.BudgetPools == "durable",
			EnqueueSync:        cfg.EnqueueCommitMode == persistence.Fsync,
			DefaultSync:        cfg.DefaultCommitMode == persistence.Fsync,
			ReaperInterval:     cfg.ReaperInterval,
			DefaultJobTimeout:  cfg.DefaultJobTimeout,
			PayloadCacheBytes:  cacheBound(cfg.PayloadCacheSize),
		},
	})
	if err != nil {
		return err
	}
	defer engine.Stop()

	e, api := httpapi.New(httpapi.Config{Version: Version, HeartbeatInterval: cfg.HeartbeatInterval, AllowOrigins: cfg.AllowOrigins, Logger: log,
		AccessLog: cfg.AccessLog, StreamStallTimeout: cfg.StreamStallTimeout, StreamBufferLimit: cfg.StreamBufferLimit,
		BodyReadTimeout: cfg.BodyReadTimeout, MaxBodyMemory: cfg.MaxBodyMemory,
		MetricsBudgetSeries: cfg.MetricsBudgetSeries}, engine)
	fresh := &freshConns{}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug), ConnContext: httpapi.ConnContext}
	// http.Server.Shutdown waits 5 s before closing a connection that never
	// sent a request; nothing is lost by closing those as soon as the
	// listener is closed (RegisterOnShutdown runs then).
	srv.RegisterOnShutdown(fresh.closeAll)
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
		srv.Protocols.SetHTTP2(true)
		srv.TLSConfig = tlsConfig
	} else {
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	tcp, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	maxConns, nofile := cfg.MaxConnections, uint64(0)
	if maxConns == 0 {
		maxConns, nofile = defaultMaxConnections()
	}
	ln := newConnLimiter(tcp, maxConns)
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		fresh.track(c, state)
		ln.trackState(c, state)
	}
	log.Info("tollgate started", "version", Version, "api_version", httpapi.APIVersion, "root_dir", rootDir)
	log.Info("listening", "addr", ln.Addr().String(), "scheme", scheme, "max_connections", maxConns, "nofile", nofile)

	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	// the stored jobs load in the background; a load that fails stops the
	// server, which cannot serve them
	var loadErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: take streams end and their jobs go back to ready")
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-engine.Failed():
		loadErr = engine.LoadErr()
		log.Error("shutting down: the stored jobs could not be loaded", "err", loadErr)
	}
	api.Shutdown()
	engine.StopLoading() // requests waiting for the load end now
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	engine.Stop()
	if err := store.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	if loadErr != nil {
		return fmt.Errorf("load stored jobs: %w", loadErr)
	}
	log.Info("stopped: every acknowledged write is on disk")
	return nil
}

// loadTLS reads the certificate, key and client CA of cfg (nil without
// TLS flags), so that a bad one stops the start with one clear line.
func loadTLS(cfg *serveConfig) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca: no certificates in %s", cfg.TLSClientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// logStarted says what the server found on disk: where its data lives
// and what recovery did.
// freshConns tracks connections that have not sent a request yet, so that
// shutdown can close them at once.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, state http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state == http.StateNew {
		if f.conns == nil {
			f.conns = make(map[net.Conn]struct{})
		}
		f.conns[c] = struct{}{}
		return
	}
	delete(f.conns, c)
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
	}
	clear(f.conns)
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// servePprof serves the runtime profiles and expvar counters (badger's
// among them) on their own listener until the process exits.
func servePprof(addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	mux.Handle("/debug/vars", expvar.Handler()) // badger publishes its counters here
	log.Info("pprof listening", "addr", ln.Addr().String())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

// cacheBound is a cache size flag as the engine and the store take it,
// where 0 means their default: a flag of 0 (no cache) becomes -1.
func cacheBound(flag int64) int {
	if flag == 0 {
		return -1
	}
	return int(flag)
}
