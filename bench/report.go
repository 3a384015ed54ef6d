package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Outcomes of a run.
const (
	outcomeCompleted   = "completed"   // every acknowledged job was acked
	outcomeIdle        = "idle"        // nothing moved for --idle-timeout after the producers finished
	outcomeTimeout     = "timeout"     // --timeout elapsed
	outcomeInterrupted = "interrupted" // second SIGINT
	outcomeServerDied  = "server-exited"
)

// Report is the result of one run, printed as a table or as JSON.
type Report struct {
	Scenario  string       `json:"scenario"`
	Target    string       `json:"target"`
	Transport string       `json:"transport"`
	Config    ReportConfig `json:"config"`
	Outcome   string       `json:"outcome"`
	ElapsedS  float64      `json:"elapsed_s"`

	Jobs       JobCounts  `json:"jobs"`
	Throughput Throughput `json:"throughput_jobs_s"`
	Latency    Latencies  `json:"latency_ms"`

	Budgets []BudgetReport `json:"budgets,omitempty"`
	Backlog *BacklogReport `json:"backlog,omitempty"`
	Parked  *ParkedReport  `json:"parked,omitempty"`
	Tenants *TenantsReport `json:"tenants,omitempty"`
	Restart *RestartReport `json:"restart,omitempty"`
	Server  *ServerReport  `json:"server,omitempty"`

	ClientCPUSeconds float64 `json:"client_cpu_s"`

	ErrorTotal int64         `json:"error_total"`
	Errors     []errorSample `json:"errors,omitempty"`
	Anomalies  []string      `json:"anomalies"`
}

// ReportConfig echoes the sizes the run used.
type ReportConfig struct {
	Jobs         int     `json:"jobs"`
	DurationS    float64 `json:"duration_s,omitempty"`
	EnqueueRate  float64 `json:"enqueue_rate,omitempty"`
	Producers    int     `json:"producers"`
	Workers      int     `json:"workers"`
	Prefetch     int     `json:"prefetch"`
	Batch        int     `json:"batch"`
	AckBatch     int     `json:"ack_batch"`
	AckWorkers   int     `json:"ack_workers"`
	PayloadBytes int     `json:"payload_bytes"`
	SleepMs      float64 `json:"sleep_ms,omitempty"`
	Cost         int     `json:"cost,omitempty"`
	Queue        string  `json:"queue"`
}

// JobCounts are the harness's own counts (by sequence number).
type JobCounts struct {
	Enqueued       int64 `json:"enqueued"`        // enqueue acknowledged by the server
	EnqueueFailed  int64 `json:"enqueue_failed"`  // in requests that failed
	Dispatched     int64 `json:"dispatched"`      // frames received, duplicates included
	Duplicates     int64 `json:"duplicates"`      // deliveries of a job already delivered
	Acked          int64 `json:"acked"`           // distinct jobs whose ack was accepted
	AckRejected    int64 `json:"ack_rejected"`    // 404 / not_found
	AckFailed      int64 `json:"ack_failed"`      // ack request errors
	Unfinished     int64 `json:"unfinished"`      // enqueued, never acked, no ack lost in transit
	AckUnknown     int64 `json:"ack_unknown"`     // enqueued, not acked: its ack failed in transit and it never came back
	AckedThenSeen  int64 `json:"acked_then_seen"` // dispatched (dequeued_at) after its ack was accepted
	AckRaced       int64 `json:"ack_raced"`       // read after its ack was accepted, dispatched before (not a bug)
	Unknown        int64 `json:"unknown"`         // frames that are not this run's jobs
	Heartbeats     int64 `json:"heartbeats"`
	StreamErrors   int64 `json:"stream_errors"`
	EnqueueReqs    int64 `json:"enqueue_requests"`
	AckReqs        int64 `json:"ack_requests"`
	NeverDelivered int64 `json:"never_delivered"` // unfinished jobs never delivered at all
}

// Throughput in jobs per second, each over its own phase: from the phase's
// start to its last event.
type Throughput struct {
	Enqueue  float64 `json:"enqueue"`
	Dispatch float64 `json:"dispatch"`
	Ack      float64 `json:"ack"`
}

// Latency is a summary of one HDR histogram, in milliseconds.
type Latency struct {
	N    int64   `json:"n"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Latencies are the run's histograms.
type Latencies struct {
	// EnqueueToDelivered: enqueue request sent -> frame read by a worker.
	EnqueueToDelivered Latency `json:"enqueue_to_delivered"`
	// DeliveredToAcked: frame read -> ack response received (includes --sleep).
	DeliveredToAcked Latency `json:"delivered_to_acked"`
	// EnqueueRequest: round trip of one enqueue request (one batch).
	EnqueueRequest Latency `json:"enqueue_request"`
}

// BacklogReport times the phases of the backlog scenario: preload, a
// restart of the loaded server (when bench started it), drain.
type BacklogReport struct {
	PreloadS     float64 `json:"preload_s"`
	PreloadJobsS float64 `json:"preload_jobs_s"`
	DrainS       float64 `json:"drain_s"`
	DrainJobsS   float64 `json:"drain_jobs_s"`
	Drained      bool    `json:"drained"`
	// FirstDispatchS: workers started -> first job delivered.
	FirstDispatchS float64 `json:"first_dispatch_s"`

	// Restarted says the loaded server was stopped (SIGTERM) and started
	// again on the same root directory before the drain; RestartNote says
	// why not (external server, failure).
	Restarted   bool   `json:"restarted"`
	RestartNote string `json:"restart_note,omitempty"`
	// StopS: SIGTERM -> the old process exited; StopError: its exit was
	// not 0 (or it had to be killed).
	StopS float64 `json:"stop_s,omitempty"`
	// DiskMiB: what the server's root directory took on disk once the
	// loaded server had stopped.
	DiskMiB   float64 `json:"disk_mib,omitempty"`
	StopError string  `json:"stop_error,omitempty"`
	// StartupS: exec of the new process -> first 200 from GET /health,
	// polled every 10 ms once its "listening" line gave the port;
	// ListeningS: exec -> that line.
	StartupS   float64 `json:"startup_s,omitempty"`
	ListeningS float64 `json:"listening_s,omitempty"`
	// EnqueueS: exec -> a plain enqueue answered (one job, to a queue no
	// worker takes, sent right after /health answered); FirstJobS: exec ->
	// the first job delivered to a worker; LoadedS: exec -> the server's
	// "stored jobs loaded" line (its background load ended), 0 when not
	// seen by the end of the run.
	EnqueueS  float64 `json:"enqueue_s,omitempty"`
	FirstJobS float64 `json:"first_job_s,omitempty"`
	LoadedS   float64 `json:"loaded_s,omitempty"`
	// workersAfterS: exec -> the drain's workers were started.
	workersAfterS float64
	// Server RSS in MiB: right after the preload, holding the backlog
	// (RSSLoadedMiB; then the settle wait, RSSSettledMiB, before the
	// stop); right after the restarted server first answered
	// /health, before any worker (RSSServingMiB), with its VmHWM then
	// (PeakRSSStartupMiB); the largest VmRSS read every 100 ms while
	// draining (PeakRSSDrainMiB); the restarted process's VmHWM at the
	// end (PeakRSSRestartedMiB).
	RSSLoadedMiB float64 `json:"rss_loaded_mib,omitempty"`
	// RSSLoadedAnonMiB and RSSLoadedFileMiB split RSSLoadedMiB: anonymous
	// (Go heap and runtime) and file-mapped (binary, badger's tables and
	// write-ahead log).
	RSSLoadedAnonMiB float64 `json:"rss_loaded_anon_mib,omitempty"`
	RSSLoadedFileMiB float64 `json:"rss_loaded_file_mib,omitempty"`
	// RSSSettledMiB is the lowest VmRSS read every 250 ms over
	// --settle-wait after the preload (0: not read), split as read then.
	RSSSettledMiB     float64 `json:"rss_settled_mib,omitempty"`
	RSSSettledAnonMiB float64 `json:"rss_settled_anon_mib,omitempty"`
	RSSSettledFileMiB float64 `json:"rss_settled_file_mib,omitempty"`
	RSSServingMiB     float64 `json:"rss_serving_mib,omitempty"`
	PeakRSSStartupMiB float64 `json:"peak_rss_startup_mib,omitempty"`
	PeakRSSDrainMiB   float64 `json:"peak_rss_drain_mib,omitempty"`
	// PeakRSSDrainAnonMiB and PeakRSSDrainFileMiB split PeakRSSDrainMiB
	// as read at that moment.
	PeakRSSDrainAnonMiB float64 `json:"peak_rss_drain_anon_mib,omitempty"`
	PeakRSSDrainFileMiB float64 `json:"peak_rss_drain_file_mib,omitempty"`
	PeakRSSRestartedMiB float64 `json:"peak_rss_restarted_mib,omitempty"`
}

// RestartReport is what the restart scenario found.
type RestartReport struct {
	Kills int `json:"kills"`
	// RecoveryS is, per kill, SIGKILL -> new process answering /health.
	RecoveryS []float64 `json:"recovery_s"`
	// Lost jobs: enqueue acknowledged, never acked by the end, and no ack
	// of theirs lost in transit.
	Lost int64 `json:"lost"`
	// AckUnknown: jobs whose ack request broke with the connection at the
	// kill and that never came back: the server most likely applied the
	// ack before it died (not counted as lost).
	AckUnknown int64 `json:"ack_unknown"`
	// Duplicates: deliveries beyond the first (expected for jobs in
	// flight at the kill).
	Duplicates int64 `json:"duplicates"`
	// AckedThenRedelivered: dispatches (by dequeued_at) of a job after
	// its ack had been accepted (the ack was lost).
	AckedThenRedelivered int64 `json:"acked_then_redelivered"`
	// Orphans: jobs acked whose enqueue request failed on the client side
	// (stored although the response never arrived; not a bug).
	Orphans int64 `json:"orphans"`
}

// ServerReport is the started server's resource use during the run.
type ServerReport struct {
	PID          int     `json:"pid"`
	CPUSeconds   float64 `json:"cpu_s"`
	CPUPercent   float64 `json:"cpu_percent"` // of one core, over the run
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	LogLines     int64   `json:"log_lines"`
	Starts       int     `json:"starts"`
	// Exit is the result of the final SIGTERM: "0" or the error.
	Exit string `json:"exit"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	f := func(us int64) float64 { return math.Round(float64(us)) / 1000 }
	return Latency{
		N: h.TotalCount(), P50: f(h.ValueAtQuantile(50)), P90: f(h.ValueAtQuantile(90)),
		P99: f(h.ValueAtQuantile(99)), P999: f(h.ValueAtQuantile(99.9)), Max: f(h.Max()),
		Mean: math.Round(h.Mean()) / 1000,
	}
}

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 || n == 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*10) / 10
}

// writeJSON prints the report as indented JSON.
func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeText prints the report as one "key  value" line per fact, so that
// two runs diff line by line.
func (r *Report) writeText(w io.Writer) {
	line := func(key, format string, args ...any) {
		fmt.Fprintf(w, "%-26s %s\n", key, fmt.Sprintf(format, args...))
	}
	lat := func(key string, l Latency) {
		line(key, "p50=%.3f p90=%.3f p99=%.3f p99.9=%.3f max=%.3f mean=%.3f n=%d",
			l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean, l.N)
	}
	c := r.Config
	line("scenario", "%s", r.Scenario)
	line("target", "%s", r.Target)
	line("transport", "%s", r.Transport)
	line("config", "jobs=%d producers=%d workers=%d prefetch=%d batch=%d ack_batch=%d ack_workers=%d payload_bytes=%d",
		c.Jobs, c.Producers, c.Workers, c.Prefetch, c.Batch, c.AckBatch, c.AckWorkers, c.PayloadBytes)
	if c.DurationS > 0 || c.EnqueueRate > 0 || c.SleepMs > 0 {
		line("config.pace", "duration_s=%g enqueue_rate=%g sleep_ms=%g", c.DurationS, c.EnqueueRate, c.SleepMs)
	}
	line("outcome", "%s", r.Outcome)
	line("elapsed_s", "%.3f", r.ElapsedS)
	j := r.Jobs
	line("jobs", "enqueued=%d dispatched=%d acked=%d unfinished=%d ack_unknown=%d", j.Enqueued, j.Dispatched, j.Acked, j.Unfinished, j.AckUnknown)
	line("jobs.problems", "enqueue_failed=%d duplicates=%d acked_then_seen=%d ack_raced=%d ack_rejected=%d ack_failed=%d unknown=%d never_delivered=%d",
		j.EnqueueFailed, j.Duplicates, j.AckedThenSeen, j.AckRaced, j.AckRejected, j.AckFailed, j.Unknown, j.NeverDelivered)
	line("jobs.requests", "enqueue=%d ack=%d heartbeats=%d stream_errors=%d", j.EnqueueReqs, j.AckReqs, j.Heartbeats, j.StreamErrors)
	t := r.Throughput
	line("throughput_jobs_s", "enqueue=%.1f dispatch=%.1f ack=%.1f", t.Enqueue, t.Dispatch, t.Ack)
	lat("latency_ms.enq_to_deliver", r.Latency.EnqueueToDelivered)
	lat("latency_ms.deliver_to_ack", r.Latency.DeliveredToAcked)
	lat("latency_ms.enqueue_req", r.Latency.EnqueueRequest)
	for _, b := range r.Budgets {
		k := "budget." + b.Strategy
		line(k, "key=%s budgets=%d allocation=%d duration_ms=%d burst=%d dispatches=%d",
			b.Key, b.Budgets, b.Allocation, b.DurationMs, b.Burst, b.Dispatches)
		line(k+".in_flight", "max_cost=%d allocation=%d mean_cost=%.2f over_allocation=%d",
			b.MaxInFlightCost, b.Allocation, b.MeanInFlightCost, b.OverAllocation)
		if b.Strategy == strategyWhileInFlight && b.IdealRate > 0 {
			line(k+".ideal", "ideal_rate=%.1f/s (allocation/(cost*sleep))", b.IdealRate)
		}
		if b.Listed != 0 {
			line(k+".listed", "get_budgets_lists=%d", b.Listed)
		}
		if b.Strategy == strategyTimeBased {
			line(k+".window", "max_in_window=%d max_in_window_server=%d bound=%d (burst+allocation) slack=%d ideal_rate=%.1f/s",
				b.MaxInWindow, b.MaxInWindowServer, b.WindowBound, b.WindowSlack, b.IdealRate)
			line(k+".rate", "achieved_rate=%.3f/s configured=%.3f/s error=%+.3f%%",
				b.AchievedRate, b.IdealRate, 100*b.AchievedRateError)
			line(k+".deviation_ms", "p50=%.3f p99=%.3f min=%.3f max=%.3f early=%d",
				b.DeviationP50Ms, b.DeviationP99Ms, b.DeviationMinMs, b.DeviationMaxMs, b.Early)
			line(k+".server_dev_ms", "p50=%.3f p99=%.3f min=%.3f early=%d server_clock=%t",
				b.ServerDeviationP50Ms, b.ServerDeviationP99Ms, b.ServerDeviationMinMs, b.ServerEarly, b.ServerClock)
			if b.ServerClock {
				line(k+".dispatch_dev_ms", "p50=%.3f p99=%.3f max=%.3f (server clock, from arrival at the server)",
					b.DispatchDeviationP50Ms, b.DispatchDeviationP99Ms, b.DispatchDeviationMaxMs)
			}
		}
	}
	if b := r.Backlog; b != nil {
		line("backlog", "preload_s=%.3f preload_jobs_s=%.1f drain_s=%.3f drain_jobs_s=%.1f drained=%t first_dispatch_s=%.3f",
			b.PreloadS, b.PreloadJobsS, b.DrainS, b.DrainJobsS, b.Drained, b.FirstDispatchS)
		if b.Restarted {
			line("backlog.restart", "startup_s=%.3f listening_s=%.3f enqueue_s=%.3f first_job_s=%.3f loaded_s=%.3f stop_s=%.3f disk_mib=%.1f",
				b.StartupS, b.ListeningS, b.EnqueueS, b.FirstJobS, b.LoadedS, b.StopS, b.DiskMiB)
			line("backlog.rss_mib", "loaded=%.1f (anon=%.1f file=%.1f) settled=%.1f (anon=%.1f file=%.1f) serving=%.1f peak_startup=%.1f peak_drain=%.1f (anon=%.1f file=%.1f) peak_restarted=%.1f",
				b.RSSLoadedMiB, b.RSSLoadedAnonMiB, b.RSSLoadedFileMiB, b.RSSSettledMiB, b.RSSSettledAnonMiB, b.RSSSettledFileMiB, b.RSSServingMiB, b.PeakRSSStartupMiB, b.PeakRSSDrainMiB, b.PeakRSSDrainAnonMiB, b.PeakRSSDrainFileMiB, b.PeakRSSRestartedMiB)
		}
		if b.RestartNote != "" {
			line("backlog.restart", "%s", b.RestartNote)
		}
		if b.StopError != "" {
			line("backlog.stop_error", "%s", b.StopError)
		}
	}
	if tr := r.Tenants; tr != nil {
		line("tenants", "idle_ttl=%s collected=%t left=%d collect_s=%.3f rss_collected=%.1f rss_later=%.1f",
			tr.IdleTTL, tr.Collected, tr.Left, tr.CollectS, tr.RSSCollectedMiB, tr.RSSLaterMiB)
		if tr.ReturnedPct != 0 {
			line("tenants.returned_pct", "%.1f", tr.ReturnedPct)
		}
	}
	if p := r.Parked; p != nil {
		line("parked", "budgets=%d held_per_budget=%d parked_per_budget=%d held_jobs=%d parked_jobs=%d expected=%d reached=%t",
			p.Budgets, p.HeldPerBudget, p.ParkedPerBudget, p.HeldJobs, p.ParkedJobs, p.ParkedExpected, p.Reached)
		line("parked.rss_mib", "rss0=%.1f rss1=%.1f rss_held=%.1f rss2=%.1f peak=%.1f",
			p.RSS0MiB, p.RSS1MiB, p.RSSHeldMiB, p.RSS2MiB, p.PeakMiB)
		line("parked.bytes", "per_budget=%.0f per_in_flight_job=%.0f per_parked_job=%.0f",
			p.BytesPerBudget, p.BytesPerInFlightJob, p.BytesPerParkedJob)
		line("parked.time_s", "budgets=%.3f fill=%.3f park=%.3f drain=%.3f drain_jobs_s=%.1f",
			p.BudgetsS, p.FillS, p.ParkS, p.DrainS, p.DrainJobsS)
		if p.Failed != "" {
			line("parked.failed", "%s", p.Failed)
		}
		if p.Note != "" {
			line("parked.note", "%s", p.Note)
		}
	}
	if x := r.Restart; x != nil {
		rec := make([]string, len(x.RecoveryS))
		for i, s := range x.RecoveryS {
			rec[i] = fmt.Sprintf("%.3f", s)
		}
		line("restart", "kills=%d recovery_s=[%s] lost=%d ack_unknown=%d duplicates=%d acked_then_redelivered=%d orphans=%d",
			x.Kills, strings.Join(rec, " "), x.Lost, x.AckUnknown, x.Duplicates, x.AckedThenRedelivered, x.Orphans)
	}
	if s := r.Server; s != nil {
		line("server", "pid=%d cpu_s=%.2f cpu_percent=%.1f peak_rss_mib=%.1f log_lines=%d starts=%d exit=%s",
			s.PID, s.CPUSeconds, s.CPUPercent, float64(s.PeakRSSBytes)/(1<<20), s.LogLines, s.Starts, s.Exit)
	}
	line("client", "cpu_s=%.2f", r.ClientCPUSeconds)
	line("errors", "total=%d", r.ErrorTotal)
	for i, e := range r.Errors {
		line(fmt.Sprintf("error.%d", i+1), "op=%s count=%d status=%d request=%q response=%q err=%q",
			e.Op, e.Count, e.Status, e.Request, e.Response, e.Err)
	}
	if len(r.Anomalies) == 0 {
		line("anomalies", "none")
	}
	for i, a := range r.Anomalies {
		line(fmt.Sprintf("anomaly.%d", i+1), "%s", a)
	}
}
