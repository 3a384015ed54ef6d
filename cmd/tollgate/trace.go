package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
)

// traceConfig is what `tollgate trace` reads from its flags.
type traceConfig struct {
	URL    string
	Job    string
	Budget string
	Queue  string
	Color  string
	// CA, Cert and Key reach a TLS server: CA verifies its certificate
	// (default: the system roots), Cert and Key are the client
	// certificate a server with --tls-client-ca requires.
	CA, Cert, Key string
}

// traceEvent is one event of GET /debug/trace as the CLI reads it.
type traceEvent struct {
	Time         int64    `json:"time"`
	Kind         string   `json:"kind"`
	Actor        string   `json:"actor"`
	JobID        string   `json:"job_id"`
	Queue        string   `json:"queue"`
	Budget       string   `json:"budget"`
	Budgets      []string `json:"budgets"`
	Cost         uint32   `json:"cost"`
	TokensBefore *float64 `json:"tokens_before"`
	Tokens       *float64 `json:"tokens"`
	DueAt        int64    `json:"due_at"`
	Reason       string   `json:"reason"`
	WorkerID     string   `json:"worker_id"`
	Stream       uint64   `json:"stream"`
	Position     int      `json:"position"`
	Count        uint64   `json:"count"`
	Group        string   `json:"group"` // cron events
	Entry        string   `json:"entry"`
	Slot         int64    `json:"slot"`
	Reserved     *uint32  `json:"reserved"`  // settled events
	RealCost     *uint32  `json:"real_cost"` // settled events
}

func parseTrace(args []string, stderr io.Writer) (*traceConfig, error) {
	cfg := &traceConfig{URL: "http://127.0.0.1:7890", Color: "auto"}
	if v, ok := os.LookupEnv("TOLLGATE_URL"); ok && v != "" {
		cfg.URL = v
	}
	fs := flag.NewFlagSet("tollgate trace", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.URL, "url", cfg.URL, "")
	fs.StringVar(&cfg.Job, "job", "", "")
	fs.StringVar(&cfg.Budget, "budget", "", "")
	fs.StringVar(&cfg.Queue, "queue", "", "")
	fs.StringVar(&cfg.Color, "color", cfg.Color, "")
	fs.StringVar(&cfg.CA, "ca", "", "")
	fs.StringVar(&cfg.Cert, "cert", "", "")
	fs.StringVar(&cfg.Key, "key", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, `Usage: tollgate trace [--url URL] [--job ID] [--budget KEY] [--queue Q] [--color auto|always|never]
                      [--ca PEM] [--cert PEM --key PEM]

Follows GET /debug/trace and prints one line per dispatch event: a job
becoming ready, reservations granted or refused (tokens before -> after),
parking (place in line), wake timers, wake-ups, commits, dispatches, acks.
Filters take comma-separated lists and combine with AND.

  --url      server address (default http://127.0.0.1:7890) [TOLLGATE_URL]
  --job      only events of these job ids
  --budget   only events of these budget keys
  --queue    only events of these queues
  --color    auto = colour when stdout is a terminal and NO_COLOR is unset
  --ca       https: CA certificate(s) that signed the server's certificate
             (default: the system's roots)
  --cert     https: client certificate, for a server run with --tls-client-ca
  --key      https: the client certificate's private key
`)
			return nil, err
		}
		return nil, errorf("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, errorf("unexpected argument %q", fs.Arg(0))
	}
	switch cfg.Color {
	case "auto", "always", "never":
	default:
		return nil, errorf("invalid --color %q: expected auto, always or never", cfg.Color)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errorf("invalid --url %q: expected http://host:port", cfg.URL)
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errorf("--cert and --key must be given together")
	}
	if (cfg.CA != "" || cfg.Cert != "") && u.Scheme != "https" {
		return nil, errorf("--ca, --cert and --key need an https:// --url")
	}
	return cfg, nil
}

// runTrace is `tollgate trace`: it follows the server's trace stream until
// interrupted (exit 0) or until the stream fails (exit 1).
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseTrace(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate trace: %v\n", err)
		return 1
	}
	color := cfg.Color == "always"
	if cfg.Color == "auto" && os.Getenv("NO_COLOR") == "" {
		if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			color = true
		}
	}
	if err := followTrace(ctx, cfg, &tracePrinter{w: stdout, color: color}); err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintf(stderr, "tollgate trace: %v\n", err)
		return 1
	}
	return 0
}

func followTrace(ctx context.Context, cfg *traceConfig, p *tracePrinter) error {
	q := url.Values{}
	for name, v := range map[string]string{"job": cfg.Job, "budget": cfg.Budget, "queue": cfg.Queue} {
		if v != "" {
			q.Set(name, v)
		}
	}
	u := strings.TrimRight(cfg.URL, "/") + "/debug/trace"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	client, err := traceClient(cfg)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s: %d %s", u, resp.StatusCode, e.Error)
		}
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue // heartbeat
		}
		var ev traceEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("bad event %q: %w", line, err)
		}
		if err := p.print(&ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the server closed the trace stream")
}

// traceClient is the HTTP client for the trace stream: the default one, or
// one with the CA and client certificate the flags name.
func traceClient(cfg *traceConfig) (*http.Client, error) {
	if cfg.CA == "" && cfg.Cert == "" {
		return http.DefaultClient, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CA != "" {
		pem, err := os.ReadFile(cfg.CA)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca: no certificates in %s", cfg.CA)
		}
	}
	if cfg.Cert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}

// ANSI colours.
const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiCyan   = "\x1b[36m"
)

// kindColor groups the steps: green moves a job forward, red holds it back,
// yellow is about time, cyan is a question asked, blue is budget admin.
var kindColor = map[string]string{
	"ready": ansiCyan, "reserve_requested": ansiCyan,
	"reserve_granted": ansiGreen, "commit": ansiGreen, "dispatched": ansiGreen, "acked": ansiGreen, "woken": ansiGreen, "returned": ansiGreen,
	"reserve_refused": ansiRed, "parked": ansiRed, "failed": ansiRed, "timed_out": ansiRed, "dropped": ansiRed + ansiBold,
	"timer_armed": ansiYellow, "timer_fired": ansiYellow, "timer_cancelled": ansiYellow,
	"requeued": ansiYellow, "release": ansiYellow, "unparked": ansiYellow,
	"budget_created": ansiBlue, "budget_updated": ansiBlue, "budget_deleted": ansiBlue, "settled": ansiBlue,
}

// tracePrinter renders events as one readable line each.
type tracePrinter struct {
	w     io.Writer
	color bool
	buf   bytes.Buffer
}

func (p *tracePrinter) paint(code, s string) string {
	if !p.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

func fmtTokens(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (p *tracePrinter) print(ev *traceEvent) error {
	b := &p.buf
	b.Reset()
	at := time.UnixMilli(ev.Time)
	b.WriteString(p.paint(ansiDim, at.Format("15:04:05.000")))
	b.WriteString("  ")
	if ev.Kind == "dropped" {
		b.WriteString(p.paint(kindColor["dropped"], fmt.Sprintf("!! %d events dropped: this reader was too slow", ev.Count)))
		b.WriteByte('\n')
		_, err := p.w.Write(b.Bytes())
		return err
	}
	fmt.Fprintf(b, "%-20s %s", ev.Actor, p.paint(kindColor[ev.Kind], fmt.Sprintf("%-17s", ev.Kind)))
	field := func(k, v string) {
		b.WriteByte(' ')
		b.WriteString(p.paint(ansiDim, k+"="))
		b.WriteString(v)
	}
	if ev.JobID != "" {
		field("job", ev.JobID)
	}
	if ev.Queue != "" {
		field("queue", ev.Queue)
	}
	if ev.Budget != "" && ev.Actor != "budget/"+ev.Budget {
		field("budget", ev.Budget)
	}
	if ev.Budget == "" && len(ev.Budgets) > 0 {
		field("budgets", strings.Join(ev.Budgets, ","))
	}
	if ev.Reserved != nil && ev.RealCost != nil {
		field("cost", fmt.Sprintf("%d reserved, %d real", *ev.Reserved, *ev.RealCost))
	} else if ev.Cost != 0 {
		field("cost", strconv.FormatUint(uint64(ev.Cost), 10))
	}
	switch {
	case ev.TokensBefore != nil && ev.Tokens != nil:
		field("tokens", fmtTokens(*ev.TokensBefore)+"→"+fmtTokens(*ev.Tokens))
	case ev.Tokens != nil:
		field("tokens", fmtTokens(*ev.Tokens))
	}
	if ev.Position != 0 {
		field("position", strconv.Itoa(ev.Position))
	}
	if ev.DueAt != 0 {
		due := time.UnixMilli(ev.DueAt)
		v := due.Format("15:04:05.000")
		switch ev.Kind {
		case "timer_armed":
			v += fmt.Sprintf(" (in %s)", due.Sub(at).Round(time.Millisecond))
		case "timer_fired":
			v += fmt.Sprintf(" (%s late)", at.Sub(due).Round(time.Millisecond))
		}
		field("due", v)
	}
	if ev.Group != "" || ev.Entry != "" {
		field("cron", ev.Group+"/"+ev.Entry)
	}
	if ev.Slot != 0 {
		slot := time.UnixMilli(ev.Slot)
		field("slot", slot.Format("15:04:05.000")+fmt.Sprintf(" (%s late)", at.Sub(slot).Round(time.Millisecond)))
	}
	if ev.Reason != "" {
		field("reason", ev.Reason)
	}
	if ev.WorkerID != "" {
		field("worker", ev.WorkerID)
	}
	if ev.Stream != 0 {
		field("stream", strconv.FormatUint(ev.Stream, 10))
	}
	b.WriteByte('\n')
	_, err := p.w.Write(b.Bytes())
	return err
}
