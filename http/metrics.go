package http

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

// scrapeTimeout bounds how long one scrape waits for the actors.
const scrapeTimeout = 10 * time.Second

// engineCollector is a Prometheus collector that asks the engine for its
// numbers on each scrape, so nothing on the dispatch path takes a lock or
// touches a metric: the actors count in their own state and answer when
// asked.
type engineCollector struct {
	engine Observer
	log    *slog.Logger
	series int // per-budget series bound (0: all)

	jobs, parked                          *prometheus.Desc
	enqueued, dispatched, acked, failed   *prometheus.Desc
	timedOut, settlements                 *prometheus.Desc
	folded, sealed, foldWorkers           *prometheus.Desc
	tokens, inFlight, held, budgetParked  *prometheus.Desc
	budgetDispatches, refusals, wakeAt    *prometheus.Desc
	streams, subscribers, scrapeError     *prometheus.Desc
	budgetAllocation, budgetCapacity      *prometheus.Desc
	headAffordableAt, heldUntil           *prometheus.Desc
	budgets, budgetsHeld, boundJobs       *prometheus.Desc
	holdsSet, holdsReleased, drains       *prometheus.Desc
	collected                             *prometheus.Desc
	queueWait, runTime                    *prometheus.Desc
	cronFired, cronSkipped, cronPaused    *prometheus.Desc
	cronLateSum, cronLateMax, cronEntries *prometheus.Desc
	jobStatuses                           []protocol.Status
}

func newEngineCollector(engine Observer, log *slog.Logger, series int) *engineCollector {
	q := []string{"queue"}
	qs := []string{"queue", "status"}
	b := []string{"budget"}
	bt := []string{"budget", "type"}
	d := prometheus.NewDesc
	return &engineCollector{
		engine:           engine,
		log:              log,
		series:           series,
		heldUntil:        d("tollgate_budget_held_until_seconds", "When the budget's hold ends (Unix seconds); absent when not held.", b, nil),
		budgets:          d("tollgate_budgets", "Budgets in the catalog (every one, whatever --metrics-budget-series).", nil, nil),
		budgetsHeld:      d("tollgate_budgets_held", "Budgets with a hold in force.", nil, nil),
		boundJobs:        d("tollgate_budget_bound_jobs", "Bindings of unfinished jobs to budgets, summed over every budget.", nil, nil),
		holdsSet:         d("tollgate_budget_holds_total", "Holds put or extended since the server started.", nil, nil),
		holdsReleased:    d("tollgate_budget_hold_releases_total", "Holds lifted early by DELETE since the server started.", nil, nil),
		drains:           d("tollgate_budget_drains_total", "Holds that drained their budget's pool since the server started.", nil, nil),
		collected:        d("tollgate_budgets_collected_total", "Idle on-the-fly budgets collected since the server started.", nil, nil),
		jobs:             d("tollgate_jobs", "Jobs by queue and visible status (a parked job is ready).", qs, nil),
		parked:           d("tollgate_jobs_parked", "Ready jobs parked on a budget, by queue.", q, nil),
		enqueued:         d("tollgate_jobs_enqueued_total", "Jobs enqueued since the server started.", q, nil),
		folded:           d("tollgate_jobs_folded_total", "Enqueues folded into a pending batched job since the server started, by the job's queue.", q, nil),
		sealed:           d("tollgate_batches_sealed_total", "Batched jobs that stopped taking folds since the server started, by queue.", q, nil),
		foldWorkers:      d("tollgate_fold_workers_busy", "Fold workers evaluating batch programs (when, fold) now.", nil, nil),
		dispatched:       d("tollgate_jobs_dispatched_total", "Jobs handed to a take stream since the server started.", q, nil),
		acked:            d("tollgate_jobs_acked_total", "Jobs acknowledged as done since the server started.", q, nil),
		failed:           d("tollgate_jobs_failed_total", "Job failures reported since the server started.", q, nil),
		timedOut:         d("tollgate_jobs_timed_out_total", "Jobs the server failed because they stayed in flight past their timeout, since the server started (also counted as failures).", q, nil),
		settlements:      d("tollgate_budget_settlements_total", "Acks that settled a real cost on the budget (time_based) since it was loaded or created.", b, nil),
		tokens:           d("tollgate_budget_tokens_available", "Tokens a new reservation could take now (time_based: settled to now).", bt, nil),
		inFlight:         d("tollgate_budget_cost_in_flight", "Cost of the budget's jobs in flight.", b, nil),
		held:             d("tollgate_budget_cost_held", "Cost reserved by jobs about to dispatch.", b, nil),
		budgetParked:     d("tollgate_budget_parked_jobs", "Jobs parked on the budget.", b, nil),
		budgetDispatches: d("tollgate_budget_dispatches_total", "Dispatches that debited the budget since it was loaded or created.", b, nil),
		refusals:         d("tollgate_budget_refusals_total", "Reservations the budget refused (the job parked) since it was loaded or created.", b, nil),
		wakeAt:           d("tollgate_budget_wake_timer_seconds", "When the budget's wake timer fires (Unix seconds); absent when none is armed.", b, nil),
		headAffordableAt: d("tollgate_budget_head_affordable_seconds", "time_based: when the head parked job's cost is covered (Unix seconds).", b, nil),
		budgetAllocation: d("tollgate_budget_allocation", "The budget's allocation.", b, nil),
		budgetCapacity:   d("tollgate_budget_capacity", "The most tokens the budget's pool can hold.", b, nil),
		streams:          d("tollgate_take_streams", "Open take streams.", nil, nil),
		subscribers:      d("tollgate_trace_subscribers", "Open /debug/trace streams.", nil, nil),
		scrapeError:      d("tollgate_scrape_error", "1 when the engine did not answer this scrape.", nil, nil),
		queueWait:        d("tollgate_job_queue_wait_seconds", "Time from a job being ready (the later of its ready_at and its enqueue) to its dispatch, by queue; parked time included.", q, nil),
		runTime:          d("tollgate_job_run_seconds", "Time from a job's dispatch to its success or failure report, by queue.", q, nil),
		cronFired:        d("tollgate_cron_firings_total", "Cron firings that enqueued a job (or found its unique key held) since the server started.", nil, nil),
		cronSkipped:      d("tollgate_cron_skips_total", "Cron firings skipped because the enqueue failed since the server started.", nil, nil),
		cronPaused:       d("tollgate_cron_paused_ticks_total", "Cron ticks of paused entries or groups (nothing enqueued) since the server started.", nil, nil),
		cronLateSum:      d("tollgate_cron_lateness_seconds_total", "Sum over cron firings of the time from the slot to the firing.", nil, nil),
		cronLateMax:      d("tollgate_cron_lateness_max_seconds", "The latest a cron firing has run after its slot since the server started.", nil, nil),
		cronEntries:      d("tollgate_cron_entries", "Cron entries installed.", nil, nil),
		jobStatuses:      []protocol.Status{protocol.StatusReady, protocol.StatusScheduled, protocol.StatusInFlight, protocol.StatusCompleted, protocol.StatusDead},
	}
}

// Describe sends every descriptor.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.parked, c.enqueued, c.folded, c.sealed, c.foldWorkers, c.dispatched, c.acked, c.failed, c.timedOut, c.settlements,
		c.tokens, c.inFlight, c.held, c.budgetParked, c.budgetDispatches, c.refusals, c.wakeAt,
		c.headAffordableAt, c.budgetAllocation, c.budgetCapacity, c.streams, c.subscribers, c.scrapeError,
		c.queueWait, c.runTime,
		c.cronFired, c.cronSkipped, c.cronPaused, c.cronLateSum, c.cronLateMax, c.cronEntries,
		c.heldUntil, c.budgets, c.budgetsHeld, c.boundJobs, c.holdsSet, c.holdsReleased, c.drains, c.collected} {
		ch <- d
	}
}

// Collect asks the engine and turns its answer into constant metrics.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	m, err := c.engine.MetricsBounded(ctx, c.series)
	if err != nil {
		c.log.Warn("metrics: engine did not answer", "err", err)
		ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, 0)
	ch <- prometheus.MustNewConstMetric(c.foldWorkers, prometheus.GaugeValue, float64(c.engine.FoldWorkersBusy()))
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, q := range m.Queues {
		counts := map[protocol.Status]int{
			protocol.StatusReady: q.Ready, protocol.StatusScheduled: q.Scheduled, protocol.StatusInFlight: q.InFlight,
			protocol.StatusCompleted: q.Completed, protocol.StatusDead: q.Dead,
		}
		for _, st := range c.jobStatuses {
			gauge(c.jobs, float64(counts[st]), q.Queue, string(st))
		}
		gauge(c.parked, float64(q.Parked), q.Queue)
		counter(c.enqueued, float64(q.Enqueued), q.Queue)
		counter(c.dispatched, float64(q.Dispatched), q.Queue)
		counter(c.acked, float64(q.Acked), q.Queue)
		counter(c.failed, float64(q.Failed), q.Queue)
		counter(c.timedOut, float64(q.TimedOut), q.Queue)
		ch <- constHistogram(c.queueWait, &q.Wait, q.Queue)
		ch <- constHistogram(c.runTime, &q.Run, q.Queue)
		counter(c.folded, float64(q.Folded), q.Queue)
		counter(c.sealed, float64(q.Sealed), q.Queue)
	}
	for _, b := range m.Budgets {
		gauge(c.tokens, b.Tokens, b.Key, string(b.Definition.Strategy.Type))
		gauge(c.inFlight, float64(b.InFlight), b.Key)
		gauge(c.held, float64(b.Held), b.Key)
		gauge(c.budgetParked, float64(b.Parked), b.Key)
		gauge(c.budgetAllocation, float64(b.Definition.Allocation), b.Key)
		gauge(c.budgetCapacity, float64(b.Definition.Capacity()), b.Key)
		counter(c.budgetDispatches, float64(b.Dispatches), b.Key)
		counter(c.refusals, float64(b.Refusals), b.Key)
		counter(c.settlements, float64(b.Settlements), b.Key)
		if b.WakeAt != 0 {
			gauge(c.wakeAt, float64(b.WakeAt)/1000, b.Key)
		}
		if b.HeadAffordableAt != 0 {
			gauge(c.headAffordableAt, float64(b.HeadAffordableAt)/1000, b.Key)
		}
		if b.HeldUntil != 0 {
			gauge(c.heldUntil, float64(b.HeldUntil)/1000, b.Key)
		}
	}
	bt := m.BudgetTotals
	gauge(c.budgets, float64(bt.Budgets))
	gauge(c.budgetsHeld, float64(bt.Held))
	gauge(c.boundJobs, float64(bt.BoundJobs))
	counter(c.holdsSet, float64(bt.HoldsSet))
	counter(c.holdsReleased, float64(bt.HoldsReleased))
	counter(c.drains, float64(bt.Drains))
	counter(c.collected, float64(bt.Collected))
	cs := c.engine.CronStats()
	counter(c.cronFired, float64(cs.Fired.Load()))
	counter(c.cronSkipped, float64(cs.Skipped.Load()))
	counter(c.cronPaused, float64(cs.Paused.Load()))
	counter(c.cronLateSum, float64(cs.LatenessMs.Load())/1000)
	gauge(c.cronLateMax, float64(cs.LatenessMax.Load())/1000)
	gauge(c.cronEntries, float64(cs.Entries.Load()))
	gauge(c.streams, float64(m.Streams))
	gauge(c.subscribers, float64(m.Subscribers))
}

// constHistogram turns an actor-kept histogram into a Prometheus one
// (whose buckets are cumulative).
func constHistogram(d *prometheus.Desc, h *actors.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(actors.LatencyBuckets))
	var cum uint64
	for i, le := range actors.LatencyBuckets {
		cum += h.Counts[i]
		buckets[le] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.SumSeconds, buckets, labels...)
}

// metricsHandler serves GET /metrics in the Prometheus text format (or
// protobuf, when a scraper asks for it) from a registry of its own: the
// engine collector plus the Go runtime and process collectors.
func (a *API) metricsHandler() echo.HandlerFunc {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newEngineCollector(a.engine, a.log, a.cfg.MetricsBudgetSeries),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
	return echo.WrapHandler(h)
}
