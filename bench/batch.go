package main

// The batch scenario (SPEC §8.2): single-call enqueue throughput of plain
// jobs (the lifecycle scenario's enqueue) and of batched jobs folding into
// --jobs/100 keys (100 enqueues a key), against the same server in the
// same run, in ten interleaved rounds (plain, batched, plain, ...) so that
// both meet the same machine; then a check that every batched enqueue
// reached a worker exactly once inside the merged payloads.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// batchFold and batchWhen are the official Node helper's programs.
const (
	batchWhen = `(($existing | .) + ($new | .)) | length <= 100`
	batchFold = `$existing | . += ($new | .)`
)

// batchPhase is the outcome of one enqueue phase.
type batchPhase struct {
	Name     string  `json:"name"`
	Jobs     int64   `json:"enqueues"`
	Created  int64   `json:"created"`
	Folded   int64   `json:"folded"`
	Errors   int64   `json:"errors"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"enqueues_per_s"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	firstErr string
}

// runBatchScenario runs the batch scenario and prints its report; it
// returns the process exit status.
func runBatchScenario(ctx context.Context, cfg Config, log *slog.Logger, stdout io.Writer) int {
	runID := newRunID()
	if cfg.Queue == "" {
		cfg.Queue = "bench-" + runID
	}
	tgt, err := openTarget(ctx, cfg, log)
	if err != nil {
		log.Error("run failed", "err", err)
		return exitSetup
	}
	defer tgt.cleanup(cfg.KeepRoot)
	if tgt.proc != nil {
		defer func() { _ = tgt.proc.stop() }()
	}
	errs := newErrorLog()
	cl := newAPIClient(tgt.url, cfg.H2, cfg.RequestTimeout, cfg.Producers+8, errs)
	defer cl.tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	keys := max(1, cfg.Jobs/100)
	log.Info("batch scenario", "target", tgt.desc, "enqueues", cfg.Jobs, "keys", keys, "producers", cfg.Producers)

	plainQ, batchQ := cfg.Queue+"-plain", cfg.Queue+"-batch"
	plain := batchPhase{Name: "lifecycle (plain enqueue)"}
	batched := batchPhase{Name: "batch (folding enqueue)"}
	var plainLat, batchedLat []time.Duration
	const rounds = 10
	for r := range rounds {
		from, to := int64(cfg.Jobs*r/rounds), int64(cfg.Jobs*(r+1)/rounds)
		plainLat = append(plainLat, enqueuePhase(ctx, cl, &plain, from, to, cfg.Producers, func(seq int64) string {
			return fmt.Sprintf(`{"type":"bench","queue":%q,"payload":[{"s":%d}]}`, plainQ, seq)
		})...)
		batchedLat = append(batchedLat, enqueuePhase(ctx, cl, &batched, from, to, cfg.Producers, func(seq int64) string {
			return fmt.Sprintf(`{"type":"bench","queue":%q,"payload":[{"s":%d}],"batch":{"key":"%s-k%05d","when":%q,"fold":%q}}`,
				batchQ, seq, runID, seq%int64(keys), batchWhen, batchFold)
		})...)
	}
	plain.finish(plainLat)
	batched.finish(batchedLat)
	var problems []string
	for _, p := range []batchPhase{plain, batched} {
		if p.Errors > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d failed enqueues (first: %s)", p.Name, p.Errors, p.firstErr))
		}
	}
	delivered, items, dups, err := drainBatched(ctx, cl, batchQ, batched.Created, cfg)
	if err != nil {
		problems = append(problems, "drain: "+err.Error())
	}
	if items != int64(cfg.Jobs) || dups > 0 {
		problems = append(problems, fmt.Sprintf("workers saw %d enqueues in %d jobs (%d repeated), want %d", items, delivered, dups, cfg.Jobs))
	}
	ratio := 0.0
	if plain.PerSec > 0 {
		ratio = batched.PerSec / plain.PerSec
	}
	if cfg.JSON {
		_ = json.NewEncoder(stdout).Encode(map[string]any{
			"scenario": scenarioBatch, "target": tgt.desc, "keys": keys, "producers": cfg.Producers,
			"phases": []batchPhase{plain, batched}, "batched_over_plain": ratio,
			"jobs_delivered": delivered, "enqueues_delivered": items, "problems": problems,
		})
	} else {
		fmt.Fprintf(stdout, "scenario            %s\ntarget              %s\nenqueues per phase  %d (batched into %d keys, %d producers, POST /jobs one job a call, 10 interleaved rounds)\n",
			scenarioBatch, tgt.desc, cfg.Jobs, keys, cfg.Producers)
		for _, p := range []batchPhase{plain, batched} {
			fmt.Fprintf(stdout, "%-26s %9.0f enqueues/s  %6.2f s  created %d  folded %d  p50 %.2f ms  p99 %.2f ms\n",
				p.Name, p.PerSec, p.Seconds, p.Created, p.Folded, p.P50ms, p.P99ms)
		}
		fmt.Fprintf(stdout, "batched / plain      %.1f %%\n", 100*ratio)
		fmt.Fprintf(stdout, "delivered           %d jobs carrying %d enqueues (%d repeated)\n", delivered, items, dups)
		for _, p := range problems {
			fmt.Fprintf(stdout, "ANOMALY             %s\n", p)
		}
	}
	if len(problems) > 0 {
		return exitProblems
	}
	return exitOK
}

// enqueuePhase sends the enqueues from..to-1 from producers loops and adds
// their outcome to ph; it returns their latencies.
func enqueuePhase(ctx context.Context, cl *apiClient, ph *batchPhase, from, to int64, producers int, body func(seq int64) string) []time.Duration {
	var next, created, folded, failed atomic.Int64
	next.Store(from)
	var mu sync.Mutex
	lat := make([][]time.Duration, producers)
	start := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				seq := next.Add(1) - 1
				if seq >= to {
					return
				}
				t0 := time.Now()
				resp, err := cl.do(ctx, http.MethodPost, "/jobs", []byte(body(seq)))
				lat[p] = append(lat[p], time.Since(t0))
				switch {
				case err == nil && resp.status == http.StatusCreated:
					created.Add(1)
				case err == nil && resp.status == http.StatusOK && strings.Contains(string(resp.body), `"folded":true`):
					folded.Add(1)
				default:
					failed.Add(1)
					mu.Lock()
					if ph.firstErr == "" {
						ph.firstErr = fmt.Sprintf("status %d %s %v", resp.status, clip(resp.body, 200), err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	ph.Seconds += time.Since(start).Seconds()
	ph.Created += created.Load()
	ph.Folded += folded.Load()
	ph.Errors += failed.Load()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return all
}

// finish computes the phase's rate and latency quantiles.
func (ph *batchPhase) finish(lat []time.Duration) {
	ph.Jobs = int64(len(lat))
	if ph.Seconds > 0 {
		ph.PerSec = float64(ph.Jobs) / ph.Seconds
	}
	ph.P50ms, ph.P99ms = quantileMs(lat, 0.50), quantileMs(lat, 0.99)
}

// drainBatched takes and acks the batched queue's jobs until want jobs
// came, and counts the enqueues their payloads carry.
func drainBatched(ctx context.Context, cl *apiClient, queue string, want int64, cfg Config) (jobs, items, dups int64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := cl.openTake(ctx, queue, 100, "bench-batch")
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	seen := make(map[int64]bool, cfg.Jobs)
	rd := bufio.NewReaderSize(resp.Body, 1<<20)
	var acks []string
	flush := func() error {
		if len(acks) == 0 {
			return nil
		}
		b, _ := json.Marshal(map[string]any{"ids": acks})
		r, err := cl.do(ctx, http.MethodPost, "/jobs/success", b)
		if err != nil {
			return err
		}
		if r.status/100 != 2 {
			return fmt.Errorf("POST /jobs/success: status %d %s", r.status, clip(r.body, 200))
		}
		acks = acks[:0]
		return nil
	}
	for jobs < want {
		line, rerr := rd.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var f struct {
				ID      string `json:"id"`
				Payload []struct {
					S int64 `json:"s"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(line, &f); err != nil {
				return jobs, items, dups, fmt.Errorf("frame %s: %w", clip(line, 200), err)
			}
			jobs++
			for _, it := range f.Payload {
				if seen[it.S] {
					dups++
				}
				seen[it.S] = true
				items++
			}
			if acks = append(acks, f.ID); len(acks) >= 100 || jobs == want {
				if err := flush(); err != nil {
					return jobs, items, dups, err
				}
			}
		}
		if rerr != nil {
			return jobs, items, dups, fmt.Errorf("take stream: %w", rerr)
		}
	}
	return jobs, items, dups, flush()
}

func quantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
}
