// Latency histograms the queue actor keeps per queue for /metrics: how long
// ready jobs wait for a worker, and how long workers take to finish them.

package actors

// LatencyBuckets are the histograms' upper bounds, in seconds: from a
// millisecond (dispatch on an idle server) to an hour (a backlog or a long
// job).
var LatencyBuckets = [...]float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Histogram is a fixed-bucket latency histogram. The queue actor owns it and
// updates it without locks or allocation; a scrape copies it.
type Histogram struct {
	// Counts[i] counts observations <= LatencyBuckets[i] and above the
	// bucket before (not cumulative); Counts[len(LatencyBuckets)] is +Inf.
	Counts [len(LatencyBuckets) + 1]uint64
	// Count is the number of observations, SumSeconds their total.
	Count      uint64
	SumSeconds float64
}

// observeMs adds one observation of ms milliseconds.
func (h *Histogram) observeMs(ms uint64) {
	s := float64(ms) / 1000
	i := 0
	for i < len(LatencyBuckets) && s > LatencyBuckets[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.SumSeconds += s
}

// elapsedMs is now-since, 0 when since is later (a clock step, or a
// ready_at set in the future by hand).
func elapsedMs(now, since uint64) uint64 {
	if since >= now {
		return 0
	}
	return now - since
}
