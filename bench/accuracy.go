package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// BudgetReport is how closely the server kept one budget (or, for
// many-budgets, the worst of them), as seen by the workers.
type BudgetReport struct {
	Key        string `json:"key"`
	Strategy   string `json:"strategy"`
	Allocation int    `json:"allocation"`
	DurationMs int64  `json:"duration_ms,omitempty"`
	Burst      int    `json:"burst,omitempty"`
	Budgets    int    `json:"budgets"` // how many budgets this line covers
	Dispatches int64  `json:"dispatches"`

	// MaxInFlightCost is the largest total cost delivered and not yet
	// acked at any instant. For while_in_flight it must not exceed the
	// allocation; the measurement can only under-count the server's view.
	MaxInFlightCost int64 `json:"max_in_flight_cost"`
	// MeanInFlightCost is the time-weighted mean over the busy period:
	// how well the server kept the budget used.
	MeanInFlightCost float64 `json:"mean_in_flight_cost"`
	// OverAllocation counts budgets whose MaxInFlightCost exceeded the
	// allocation (while_in_flight only).
	OverAllocation int `json:"over_allocation,omitempty"`

	// MaxInWindow is the largest cost dispatched within any window of
	// duration_ms, by delivery time; a token bucket allows at most
	// WindowBound = capacity + allocation (time_based only). Delivery
	// delays can bunch dispatches together, so the anomaly check uses
	// MaxInWindowServer when the server's clock is usable.
	MaxInWindow int64 `json:"max_in_window,omitempty"`
	// MaxInWindowServer is the same by the frames' dequeued_at.
	MaxInWindowServer int64 `json:"max_in_window_server,omitempty"`
	WindowBound       int64 `json:"window_bound,omitempty"`
	// WindowSlack is what timing noise alone may add: 1 ms of refill plus
	// one on the server clock, 5 ms plus one on delivery times.
	WindowSlack int64 `json:"window_slack,omitempty"`

	// Deviation of each dispatch from the ideal token-bucket schedule, in
	// ms: delivery time minus the earliest moment the job was both
	// enqueued and affordable given the dispatches before it (see
	// bucketDeviations). Negative = dispatched early (over the limit).
	DeviationP50Ms float64 `json:"deviation_p50_ms"`
	DeviationP99Ms float64 `json:"deviation_p99_ms"`
	DeviationMinMs float64 `json:"deviation_min_ms"`
	DeviationMaxMs float64 `json:"deviation_max_ms"`
	// Early counts dispatches more than 2 ms ahead of the ideal schedule.
	Early int64 `json:"early"`
	// The same on the server's clock (dequeued_at, whole ms): the
	// limiter's own precision, without delivery delays.
	ServerDeviationP50Ms float64 `json:"server_deviation_p50_ms,omitempty"`
	ServerDeviationP99Ms float64 `json:"server_deviation_p99_ms,omitempty"`
	ServerDeviationMinMs float64 `json:"server_deviation_min_ms,omitempty"`
	ServerEarly          int64   `json:"server_early,omitempty"`
	// The dispatch deviation: the same on the server's clock, with each
	// job's ideal moment no earlier than when the server took it in (its
	// ready_at) rather than when the harness built it. It leaves out the
	// enqueue request's own latency (reported as latency_ms.enqueue_req),
	// which the figures above count as lateness of every job the pool
	// could afford at once.
	DispatchDeviationP50Ms float64 `json:"dispatch_deviation_p50_ms,omitempty"`
	DispatchDeviationP99Ms float64 `json:"dispatch_deviation_p99_ms,omitempty"`
	DispatchDeviationMaxMs float64 `json:"dispatch_deviation_max_ms,omitempty"`
	// ServerClock says whether every frame had a dequeued_at consistent
	// with its delivery (not after it), so that the server-clock figures
	// and the bounds they give are used.
	ServerClock bool `json:"server_clock"`
	// IdealRate is the most jobs/s the budget admits: allocation/duration
	// for time_based; allocation/(cost*sleep) for while_in_flight when the
	// workers sleep. Compare with the observed dispatch and ack rates.
	IdealRate float64 `json:"ideal_rate_jobs_s,omitempty"`
	// AchievedRate is the long-run rate the budget let through, in tokens
	// per second (jobs/s at cost 1), time_based only: the cost dispatched
	// after the first full pool, over the time from the first dispatch to
	// the last (by dequeued_at when the server's clock is usable, else by
	// delivery). It measures the budget only while jobs wait on it all
	// along (the rate scenario enqueues faster than the budget admits).
	// AchievedRateError is its relative error against
	// allocation/duration: negative when slower.
	AchievedRate      float64 `json:"achieved_rate,omitempty"`
	AchievedRateError float64 `json:"achieved_rate_error,omitempty"`
	// Listed is how many of this run's budgets GET /budgets lists
	// (many-budgets, where create_with makes them); -1 when unknown.
	Listed int `json:"listed,omitempty"`
}

// jitterSlack is the delivery-time noise tolerated by the window check
// on delivery times.
const jitterSlack = 5 * time.Millisecond

// earlyTolerance is how far ahead of the ideal schedule a dispatch may be
// seen before it counts as early: dequeued_at is truncated to the
// millisecond (the server keeps its pools in ns, SPEC §4.4) and is stamped
// a little after the debit it dates.
const earlyTolerance = 2 * time.Millisecond

// report summarises one meter.
func (b *budgetMeter) report() BudgetReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := BudgetReport{
		Key: b.spec.Key, Strategy: b.spec.Strategy, Allocation: b.spec.Allocation,
		DurationMs: b.spec.DurationMs, Burst: b.spec.Burst, Budgets: 1,
		Dispatches: b.count, MaxInFlightCost: b.peak,
	}
	if busy := b.busyUntil - b.busyFrom; busy > 0 {
		r.MeanInFlightCost = b.area / busy.Seconds()
	}
	if b.spec.Strategy == strategyWhileInFlight && b.peak > int64(b.spec.Allocation) {
		r.OverAllocation = 1
	}
	if b.spec.Strategy != strategyTimeBased || len(b.recs) == 0 {
		return r
	}
	a := b.analyse()
	rate := float64(b.spec.Allocation) / float64(b.spec.Duration) // tokens per ns
	r.IdealRate = float64(b.spec.Allocation) / b.spec.Duration.Seconds()
	r.WindowBound = int64(b.spec.capacity() + b.spec.Allocation)
	r.MaxInWindow = windowMax(a.byDelivery, func(d dispatchRec) time.Duration { return d.at }, b.spec.Duration)
	r.ServerClock = a.serverClock
	if a.serverClock {
		r.MaxInWindowServer = windowMax(a.byServer, func(d dispatchRec) time.Duration { return d.server }, b.spec.Duration)
		r.WindowSlack = int64(math.Ceil(rate*float64(time.Millisecond))) + 1
	} else {
		r.WindowSlack = int64(math.Ceil(rate*float64(jitterSlack))) + 1
	}
	recs, when := a.byDelivery, func(d dispatchRec) time.Duration { return d.at }
	if a.serverClock {
		recs, when = a.byServer, func(d dispatchRec) time.Duration { return d.server }
	}
	if achieved, ok := achievedRate(recs, when, b.spec.capacity()); ok {
		configured := float64(b.spec.Allocation) / b.spec.Duration.Seconds()
		r.AchievedRate = achieved
		r.AchievedRateError = (achieved - configured) / configured
	}
	devs := slices.Clone(a.devs)
	slices.Sort(devs)
	r.DeviationP50Ms = ms(quantile(devs, 0.50))
	r.DeviationP99Ms = ms(quantile(devs, 0.99))
	r.DeviationMinMs = ms(devs[0])
	r.DeviationMaxMs = ms(devs[len(devs)-1])
	r.Early = countBelow(devs, -earlyTolerance)
	if a.serverClock {
		sdevs := slices.Clone(a.serverDevs)
		slices.Sort(sdevs)
		r.ServerDeviationP50Ms = ms(quantile(sdevs, 0.50))
		r.ServerDeviationP99Ms = ms(quantile(sdevs, 0.99))
		r.ServerDeviationMinMs = ms(sdevs[0])
		r.ServerEarly = countBelow(sdevs, -earlyTolerance)
		ddevs := slices.Clone(a.dispatchDevs)
		slices.Sort(ddevs)
		r.DispatchDeviationP50Ms = ms(quantile(ddevs, 0.50))
		r.DispatchDeviationP99Ms = ms(quantile(ddevs, 0.99))
		r.DispatchDeviationMaxMs = ms(ddevs[len(ddevs)-1])
	}
	return r
}

// analysis is a time_based meter's dispatches, ordered both ways, with
// their deviations. devs follows byDelivery, serverDevs and dispatchDevs
// byServer.
type analysis struct {
	byDelivery, byServer           []dispatchRec
	devs, serverDevs, dispatchDevs []time.Duration
	serverClock                    bool
}

// analyse orders the dispatches and computes both deviations. Callers
// hold b.mu.
func (b *budgetMeter) analyse() analysis {
	var a analysis
	a.byDelivery = slices.Clone(b.recs)
	slices.SortFunc(a.byDelivery, func(x, y dispatchRec) int { return cmpDur(x.at, y.at) })
	// dequeued_at is whole ms on the same machine clock: the dispatch
	// happened in [server, server+1ms) and before the delivery.
	a.serverClock = true
	for _, d := range a.byDelivery {
		if d.server <= 0 || d.server > d.at+time.Millisecond {
			a.serverClock = false
			break
		}
	}
	capacity := float64(b.spec.capacity())
	rate := float64(b.spec.Allocation) / float64(b.spec.Duration)
	start := b.created
	if !b.hasCreate {
		start = a.byDelivery[0].at
	}
	at := func(d dispatchRec) time.Duration { return d.at }
	anchor := at
	if a.serverClock {
		// The latest the dispatch can have happened: never later than its
		// delivery, nor than the end of its dequeued_at millisecond. This
		// keeps one slow delivery from pushing the schedule of the jobs
		// after it (which would make them look early).
		anchor = func(d dispatchRec) time.Duration { return min(d.at, d.server+time.Millisecond) }
	}
	built := func(d dispatchRec) time.Duration { return d.ready }
	a.devs = bucketDeviations(a.byDelivery, at, anchor, built, start, capacity, rate)
	if a.serverClock {
		a.byServer = slices.Clone(b.recs)
		slices.SortFunc(a.byServer, func(x, y dispatchRec) int {
			if c := cmpDur(x.server, y.server); c != 0 {
				return c
			}
			return cmpDur(x.at, y.at)
		})
		srv := func(d dispatchRec) time.Duration { return d.server }
		// The pool was made after the PUT was sent, in whole ms too.
		a.serverDevs = bucketDeviations(a.byServer, srv, srv, built, start.Truncate(time.Millisecond), capacity, rate)
		arrived := func(d dispatchRec) time.Duration { return max(d.ready, d.arrived) }
		a.dispatchDevs = bucketDeviations(a.byServer, srv, srv, arrived, start.Truncate(time.Millisecond), capacity, rate)
	}
	return a
}

func countBelow(sorted []time.Duration, limit time.Duration) int64 {
	var n int64
	for _, d := range sorted {
		if d >= limit {
			break
		}
		n++
	}
	return n
}

// writeDispatchLog writes one CSV line per dispatch of a time_based
// budget, times in microseconds since the run began, for plotting or for
// checking a suspicious deviation by hand.
func (b *budgetMeter) writeDispatchLog(w io.Writer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spec.Strategy != strategyTimeBased || len(b.recs) == 0 {
		return nil
	}
	a := b.analyse()
	recs, devs := a.byDelivery, a.devs
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# budget=%s allocation=%d duration_ms=%d burst=%d created_us=%d\n",
		b.spec.Key, b.spec.Allocation, b.spec.DurationMs, b.spec.Burst, b.created.Microseconds())
	fmt.Fprintln(bw, "budget,n,delivered_us,enqueued_us,server_ready_us,server_dequeued_us,cost,deviation_us")
	for i, d := range recs {
		fmt.Fprintf(bw, "%s,%d,%d,%d,%d,%d,%d,%d\n", b.spec.Key, i, d.at.Microseconds(), d.ready.Microseconds(),
			d.arrived.Microseconds(), d.server.Microseconds(), d.cost, devs[i].Microseconds())
	}
	return bw.Flush()
}

// achievedRate is the long-run rate of dispatches recs (sorted by
// when(d)), in tokens per second, for a pool full at the first: the cost
// beyond that full pool over the time from the first dispatch to the last.
// false when there is no such cost or no such time.
func achievedRate(recs []dispatchRec, when func(dispatchRec) time.Duration, capacity int) (float64, bool) {
	if len(recs) < 2 {
		return 0, false
	}
	var cost int64
	for _, d := range recs {
		cost += int64(d.cost)
	}
	span := when(recs[len(recs)-1]) - when(recs[0])
	dripped := cost - int64(capacity)
	if span <= 0 || dripped <= 0 {
		return 0, false
	}
	return float64(dripped) / span.Seconds(), true
}

// windowMax returns the largest total cost of the dispatches (sorted by
// time(d)) that fall within any half-open window [t, t+w).
func windowMax(recs []dispatchRec, time func(dispatchRec) time.Duration, w time.Duration) int64 {
	var best, sum int64
	lo := 0
	for hi := range recs {
		sum += int64(recs[hi].cost)
		for time(recs[hi])-time(recs[lo]) >= w {
			sum -= int64(recs[lo].cost)
			lo++
		}
		best = max(best, sum)
	}
	return best
}

// bucketDeviations returns, for each dispatch (sorted by at), at(d) minus
// the earliest moment a token bucket (SPEC §4.4: capacity, rate in tokens
// per nanosecond, full at start) could have released it, given the
// dispatches before it and the job's own enqueue time (ready).
//
// A sequence fits a token bucket iff every run of dispatches j..k satisfies
// cost(j..k) <= capacity + rate*(t_k - t_j), and cost(0..k) <= capacity +
// rate*(t_k - start). So dispatch k can go no earlier than
//
//	max(start, max_j (anchor_j - P_{j-1}/rate)) + (P_k - capacity)/rate
//
// with P the prefix sums of cost, which one pass computes. anchor_j is the
// latest moment dispatch j can have happened (its delivery, or less when
// the server's clock says so). Working on pairs of times means only the
// difference of two delays enters a deviation, and an early dispatch does
// not push the schedule of later ones. start is when the budget was PUT
// (sent), before the server made the pool, which errs towards "late".
func bucketDeviations(recs []dispatchRec, at, anchor, ready func(dispatchRec) time.Duration, start time.Duration, capacity, rate float64) []time.Duration {
	out := make([]time.Duration, 0, len(recs))
	best := float64(start) // max over j of anchor_j - P_{j-1}/rate, and start
	var prefix float64     // P_{k-1}, then P_k
	for _, d := range recs {
		best = math.Max(best, float64(anchor(d))-prefix/rate)
		prefix += float64(d.cost)
		earliest := time.Duration(math.Ceil(best + (prefix-capacity)/rate))
		ideal := max(earliest, ready(d))
		out = append(out, at(d)-ideal)
	}
	return out
}

// quantile of sorted values (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// summarizeBudgets reports each budget of a scenario, or for many budgets
// one line with the worst values and the number over their allocation.
func summarizeBudgets(meters []*budgetMeter) []BudgetReport {
	if len(meters) <= 4 {
		out := make([]BudgetReport, 0, len(meters))
		for _, m := range meters {
			out = append(out, m.report())
		}
		return out
	}
	agg := BudgetReport{Key: "(all)", Budgets: len(meters)}
	var meanSum float64
	used := 0
	for _, m := range meters {
		r := m.report()
		agg.Strategy, agg.Allocation = r.Strategy, r.Allocation
		agg.Dispatches += r.Dispatches
		agg.MaxInFlightCost = max(agg.MaxInFlightCost, r.MaxInFlightCost)
		agg.OverAllocation += r.OverAllocation
		if r.Dispatches > 0 {
			meanSum += r.MeanInFlightCost
			used++
		}
	}
	if used > 0 {
		agg.MeanInFlightCost = meanSum / float64(used)
	}
	return []BudgetReport{agg}
}
