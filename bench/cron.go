package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The cron scenario: --cron-entries entries of "* * * * * *" (every
// second), installed with PUT /crons/{group} in groups of at most
// --cron-group-size, fire for --duration while workers take and ack the
// jobs. Lateness is measured from each job's slot (its ready_at, the firing
// time, truncated to the whole second) to the moment its job arrives on a
// take stream, so it includes the firing, the commit and the dispatch.
// Then every group is deleted and --cron-install entries that never fire
// during the run are installed, for the install time and the server's RSS
// with that many entries.

// CronReport is the cron scenario's result.
type CronReport struct {
	Target        string  `json:"target"`
	Entries       int     `json:"entries"`
	GroupSize     int     `json:"group_size"`
	DurationS     float64 `json:"duration_s"`
	InstallS      float64 `json:"install_s"`
	Jobs          int     `json:"jobs"` // jobs taken whose slot is in the window
	FiringsPerS   float64 `json:"firings_s"`
	ExpectedPerS  int     `json:"expected_firings_s"`
	LatenessP50Ms float64 `json:"lateness_p50_ms"`
	LatenessP99Ms float64 `json:"lateness_p99_ms"`
	LatenessMaxMs float64 `json:"lateness_max_ms"`
	Within500Ms   float64 `json:"within_500ms_fraction"`
	ServerCPUS    float64 `json:"server_cpu_s"`
	ServerCPUPct  float64 `json:"server_cpu_pct"`
	ServerRSSMiB  float64 `json:"server_rss_mib"`
	// FiringLateMeanMs and FiringLateMaxMs are the server's own figures
	// (GET /metrics) from each slot to its firing, over the window (the
	// mean) and the whole run (the max): exact even when a firing is more
	// than a second late, when the slot can no longer be read from ready_at.
	FiringLateMeanMs float64 `json:"firing_lateness_mean_ms"`
	FiringLateMaxMs  float64 `json:"firing_lateness_max_ms"`
	BigEntries       int     `json:"big_entries"`
	BigInstallS      float64 `json:"big_install_s"`
	BigRSSMiB        float64 `json:"big_rss_mib"`
	BigRSSBaseMiB    float64 `json:"big_rss_before_mib"`
	Errors           []string
}

type cronTaken struct {
	slotMs    int64
	arrivedMs int64
}

// runCron runs the cron scenario against a started or given server.
func runCron(ctx context.Context, cfg Config, log *slog.Logger, tgt *target, stdout io.Writer) error {
	hc := &http.Client{Timeout: cfg.RequestTimeout}
	rep := &CronReport{Target: tgt.desc, Entries: cfg.CronEntries, GroupSize: cfg.CronGroupSize, BigEntries: cfg.CronInstall}
	call := func(method, path string, body []byte) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, tgt.url+path, strings.NewReader(string(body)))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return b, fmt.Errorf("%s %s: status %d: %.200s", method, path, resp.StatusCode, b)
		}
		return b, err
	}
	install := func(n int, expr string) (time.Duration, error) {
		start := time.Now()
		for g := 0; g*cfg.CronGroupSize < n; g++ {
			var sb strings.Builder
			sb.WriteString(`{"entries":[`)
			for i := g * cfg.CronGroupSize; i < min(n, (g+1)*cfg.CronGroupSize); i++ {
				if i > g*cfg.CronGroupSize {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"name":"e%06d","expression":%q,"job":{"type":"cron","queue":%q,"payload":{"e":%d}}}`, i, expr, cfg.Queue, i)
			}
			sb.WriteString(`]}`)
			if _, err := call(http.MethodPut, fmt.Sprintf("/crons/bench-%04d", g), []byte(sb.String())); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}

	// Workers: take streams that record each job's slot and arrival, and
	// ack in bulk.
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var mu sync.Mutex
	var taken []cronTaken
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cronWorker(wctx, hc, tgt.url, cfg.Queue, cfg.Prefetch, func(t cronTaken) {
				mu.Lock()
				taken = append(taken, t)
				mu.Unlock()
			}); err != nil && wctx.Err() == nil {
				log.Warn("cron worker", "err", err)
			}
		}()
	}

	d, err := install(cfg.CronEntries, "* * * * * *")
	if err != nil {
		return err
	}
	rep.InstallS = d.Seconds()
	log.Info("cron entries installed", "entries", cfg.CronEntries, "install", d)
	// measure whole seconds from the second after the next one
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	to := from.Add(cfg.Duration)
	time.Sleep(time.Until(from))
	cpu0, _ := cronServerCPU(tgt)
	m0 := cronMetrics(ctx, hc, tgt.url)
	time.Sleep(time.Until(to))
	cpu1, rss := cronServerCPU(tgt)
	m1 := cronMetrics(ctx, hc, tgt.url)
	if n := m1["tollgate_cron_firings_total"] - m0["tollgate_cron_firings_total"]; n > 0 {
		rep.FiringLateMeanMs = 1000 * (m1["tollgate_cron_lateness_seconds_total"] - m0["tollgate_cron_lateness_seconds_total"]) / n
	}
	rep.FiringLateMaxMs = 1000 * m1["tollgate_cron_lateness_max_seconds"]
	// give the last slots time to arrive, then stop firing
	time.Sleep(2 * time.Second)
	if _, err := call(http.MethodDelete, "/crons", nil); err != nil {
		return err
	}
	// let the workers drain what fired (bounded), so that the install
	// phase starts from an empty server
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b, err := call(http.MethodGet, "/jobs/count?queue="+cfg.Queue+"&status=ready,in_flight", nil)
		var c struct {
			Count int64 `json:"count"`
		}
		if err != nil || json.Unmarshal(b, &c) != nil || c.Count == 0 {
			break
		}
	}
	stopWorkers()
	wg.Wait()

	var lat []float64
	for _, t := range taken {
		if t.slotMs >= from.UnixMilli() && t.slotMs < to.UnixMilli() {
			lat = append(lat, float64(t.arrivedMs-t.slotMs))
		}
	}
	slices.Sort(lat)
	rep.DurationS = cfg.Duration.Seconds()
	rep.Jobs = len(lat)
	rep.ExpectedPerS = cfg.CronEntries
	rep.FiringsPerS = float64(len(lat)) / cfg.Duration.Seconds()
	if len(lat) > 0 {
		rep.LatenessP50Ms = lat[len(lat)/2]
		rep.LatenessP99Ms = lat[min(len(lat)-1, len(lat)*99/100)]
		rep.LatenessMaxMs = lat[len(lat)-1]
		within := 0
		for _, l := range lat {
			if l <= 500 {
				within++
			}
		}
		rep.Within500Ms = float64(within) / float64(len(lat))
	}
	rep.ServerCPUS = cpu1 - cpu0
	rep.ServerCPUPct = 100 * rep.ServerCPUS / cfg.Duration.Seconds()
	rep.ServerRSSMiB = float64(rss) / (1 << 20)

	// Install time and memory for many entries that do not fire during
	// the run (once a year).
	if _, err := call(http.MethodPost, "/reset", nil); err != nil {
		return err
	}
	if cfg.CronInstall > 0 {
		_, base := cronServerCPU(tgt)
		d, err := install(cfg.CronInstall, "0 0 1 1 *")
		if err != nil {
			return err
		}
		_, rss := cronServerCPU(tgt)
		rep.BigInstallS, rep.BigRSSMiB, rep.BigRSSBaseMiB = d.Seconds(), float64(rss)/(1<<20), float64(base)/(1<<20)
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "scenario            cron\ntarget              %s\n", rep.Target)
	fmt.Fprintf(stdout, "entries             %d (groups of %d, every second), installed in %.2f s\n", rep.Entries, rep.GroupSize, rep.InstallS)
	fmt.Fprintf(stdout, "window              %.0f s\n", rep.DurationS)
	fmt.Fprintf(stdout, "firings             %d (%.0f/s, expected %d/s)\n", rep.Jobs, rep.FiringsPerS, rep.ExpectedPerS)
	fmt.Fprintf(stdout, "lateness slot->take p50 %.0f ms  p99 %.0f ms  max %.0f ms  within 500 ms %.4f\n", rep.LatenessP50Ms, rep.LatenessP99Ms, rep.LatenessMaxMs, rep.Within500Ms)
	fmt.Fprintf(stdout, "lateness slot->fire mean %.1f ms  max %.0f ms (server metrics)\n", rep.FiringLateMeanMs, rep.FiringLateMaxMs)
	fmt.Fprintf(stdout, "server CPU          %.2f s (%.0f %% of one core)  RSS %.0f MiB\n", rep.ServerCPUS, rep.ServerCPUPct, rep.ServerRSSMiB)
	if rep.BigEntries > 0 {
		fmt.Fprintf(stdout, "install             %d entries in %.2f s  RSS %.0f MiB (%.0f MiB before)\n", rep.BigEntries, rep.BigInstallS, rep.BigRSSMiB, rep.BigRSSBaseMiB)
	}
	return nil
}

// cronServerCPU reads the started server's CPU seconds and RSS (zero when
// bench drives a server it did not start).
func cronServerCPU(tgt *target) (float64, int64) {
	if tgt.proc == nil {
		return 0, 0
	}
	s, ok := tgt.proc.sample()
	if !ok {
		return 0, 0
	}
	return s.cpuSeconds, s.rss
}

// cronWorker holds one NDJSON take stream, records each job's slot and
// arrival, and acks what it took in bulk.
func cronWorker(ctx context.Context, hc *http.Client, base, queue string, prefetch int, record func(cronTaken)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/jobs/take?prefetch=%d&queue=%s", base, prefetch, queue), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	stream := &http.Client{Transport: hc.Transport}
	resp, err := stream.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("take: status %d", resp.StatusCode)
	}
	acks := make(chan string, 100000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ids []string
		flush := func() {
			if len(ids) == 0 {
				return
			}
			body, _ := json.Marshal(map[string]any{"ids": ids})
			r, err := http.NewRequest(http.MethodPost, base+"/jobs/success", strings.NewReader(string(body)))
			if err == nil {
				r.Header.Set("Content-Type", "application/json")
				if resp, err := hc.Do(r); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			ids = ids[:0]
		}
		for {
			select {
			case id, ok := <-acks:
				if !ok {
					flush()
					return
				}
				if ids = append(ids, id); len(ids) >= 1000 {
					flush()
				}
			case <-tick.C:
				flush()
			}
		}
	}()
	defer func() { close(acks); <-done }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		arrived := time.Now().UnixMilli()
		var j struct {
			ID      string `json:"id"`
			ReadyAt int64  `json:"ready_at"`
		}
		if json.Unmarshal(line, &j) != nil || j.ID == "" {
			continue
		}
		record(cronTaken{slotMs: j.ReadyAt / 1000 * 1000, arrivedMs: arrived})
		acks <- j.ID
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// cronMetrics reads the unlabelled tollgate_cron_* values of GET /metrics
// (empty when the scrape fails).
func cronMetrics(ctx context.Context, hc *http.Client, base string) map[string]float64 {
	out := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := hc.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "tollgate_cron_") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}
