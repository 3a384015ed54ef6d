package main

import (
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Per-job flags in seqTable.
const (
	flagEnqueued   uint8 = 1 << iota // the server acknowledged the enqueue (201/200)
	flagAcked                        // an ack of this job was accepted (204)
	flagAckUnknown                   // an ack request for it failed in transit (outcome unknown)
)

// seqChunk is how many jobs one lazily allocated chunk of seqTable covers.
const seqChunk = 1 << 16

// seqTable is the harness's own record of every job, indexed by the
// sequence number carried in the job's payload. It is the ground truth for
// losses and duplicates: it never relies on what the server says about a
// job beyond the ID used to ack it.
type seqTable struct {
	mu         sync.Mutex
	flags      [][]uint8
	deliveries [][]uint8         // saturating at 255
	ackedAt    [][]time.Duration // when the (first) accepted ack's response arrived
	// outstanding counts jobs whose enqueue was acknowledged but whose
	// ack was neither accepted nor lost in transit.
	outstanding int64
	completed   int64 // distinct jobs acked
}

func (t *seqTable) slot(seq int64) (flags, deliveries *uint8) {
	c, i := t.chunk(seq)
	return &t.flags[c][i], &t.deliveries[c][i]
}

// chunk returns the chunk and index of seq, allocating the chunk.
func (t *seqTable) chunk(seq int64) (c, i int) {
	c, i = int(seq/seqChunk), int(seq%seqChunk)
	for len(t.flags) <= c {
		t.flags = append(t.flags, nil)
		t.deliveries = append(t.deliveries, nil)
		t.ackedAt = append(t.ackedAt, nil)
	}
	if t.flags[c] == nil {
		t.flags[c] = make([]uint8, seqChunk)
		t.deliveries[c] = make([]uint8, seqChunk)
		t.ackedAt[c] = make([]time.Duration, seqChunk)
	}
	return c, i
}

// enqueued marks jobs lo..lo+n-1 as acknowledged by the server.
func (t *seqTable) enqueued(lo int64, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := lo; s < lo+int64(n); s++ {
		f, _ := t.slot(s)
		if *f&flagEnqueued != 0 {
			continue
		}
		*f |= flagEnqueued
		if *f&(flagAcked|flagAckUnknown) == 0 {
			t.outstanding++
		}
	}
}

// delivered records one delivery of seq and returns how many deliveries it
// had before, and when its ack had been accepted (0: not acked).
func (t *seqTable) delivered(seq int64) (before int, ackedAt time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, i := t.chunk(seq)
	d := &t.deliveries[c][i]
	before = int(*d)
	if *d < 255 {
		*d++
	}
	if t.flags[c][i]&flagAcked != 0 {
		ackedAt = max(1, t.ackedAt[c][i])
	}
	return before, ackedAt
}

// acked marks seq as acked at time at and reports whether this was the
// first ack.
func (t *seqTable) acked(seq int64, at time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, i := t.chunk(seq)
	f := &t.flags[c][i]
	if *f&flagAcked != 0 {
		return false
	}
	if *f&(flagEnqueued|flagAckUnknown) == flagEnqueued {
		t.outstanding--
	}
	*f |= flagAcked
	t.ackedAt[c][i] = at
	t.completed++
	return true
}

// ackUnknown records that an ack request for seq failed in transit (the
// server may have applied it before the connection broke, as when it is
// killed). Such a job no longer counts as outstanding: if the server did
// not apply the ack it redelivers the job, which is then acked as usual.
func (t *seqTable) ackUnknown(seq int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, _ := t.slot(seq)
	if *f&(flagAcked|flagAckUnknown) != 0 {
		return
	}
	if *f&flagEnqueued != 0 {
		t.outstanding--
	}
	*f |= flagAckUnknown
}

// counts returns outstanding and completed.
func (t *seqTable) counts() (outstanding, completed int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.outstanding, t.completed
}

// tally is the end-of-run walk over every job.
type tally struct {
	// lost: enqueue acknowledged, never acked, no ack lost in transit.
	lost int64
	// neverDelivered: lost jobs that were never delivered at all.
	neverDelivered int64
	// ackUnknown: enqueue acknowledged, not acked, but an ack request
	// failed in transit and the job never came back: most likely the
	// server applied the ack just before the connection broke.
	ackUnknown int64
	// orphans: acked although the enqueue request failed on the client
	// side (the server stored it before the connection broke).
	orphans int64
}

// tally walks the table once, for the report.
func (t *seqTable) tally(issued int64) tally {
	t.mu.Lock()
	defer t.mu.Unlock()
	var r tally
	for s := int64(0); s < issued; s++ {
		f, d := t.slot(s)
		enq, acked, unknown := *f&flagEnqueued != 0, *f&flagAcked != 0, *f&flagAckUnknown != 0
		switch {
		case enq && !acked && unknown:
			r.ackUnknown++
		case enq && !acked:
			r.lost++
			if *d == 0 {
				r.neverDelivered++
			}
		case !enq && acked:
			r.orphans++
		}
	}
	return r
}

// window tracks the first and last time an event happened, for rates.
type window struct{ first, last atomic.Int64 }

func (w *window) note(at time.Duration) {
	w.first.CompareAndSwap(0, int64(at))
	for {
		l := w.last.Load()
		if int64(at) <= l || w.last.CompareAndSwap(l, int64(at)) {
			return
		}
	}
}

// counters are the live totals shown by the progress line.
type counters struct {
	enqueueReqs   atomic.Int64
	enqueued      atomic.Int64 // jobs acknowledged by the server
	enqueueFailed atomic.Int64 // jobs in requests that failed
	dispatched    atomic.Int64 // frames received (including duplicates)
	duplicates    atomic.Int64 // deliveries of a job seen before
	ackedThenSeen atomic.Int64 // dispatches (by dequeued_at) after the job's ack was accepted
	ackRaced      atomic.Int64 // deliveries read after the ack was accepted, dispatched before it
	unknown       atomic.Int64 // frames that are not this run's jobs
	heartbeats    atomic.Int64
	ackReqs       atomic.Int64
	acked         atomic.Int64 // acks accepted (204, or absent from not_found)
	ackRejected   atomic.Int64 // 404 / listed in not_found
	ackFailed     atomic.Int64 // request errors and unexpected statuses
	streamErrors  atomic.Int64 // take streams that failed or ended
	reconnects    atomic.Int64

	enqWin, dispWin, ackWin window
}

// latency histograms are recorded in microseconds.
const (
	histMin = 1
	histMax = int64(time.Hour / time.Microsecond)
	histSig = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histSig) }

// lockedHist is a histogram shared by a few goroutines.
type lockedHist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func (l *lockedHist) merge(from *hdrhistogram.Histogram) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.h.Merge(from)
}

// recordDur records d in microseconds, clamped to the histogram's range.
func recordDur(h *hdrhistogram.Histogram, d time.Duration) {
	us := int64(d / time.Microsecond)
	us = max(histMin, min(histMax, us))
	_ = h.RecordValue(us)
}

// dispatchRec is one delivery of a job bound to a time_based budget.
type dispatchRec struct {
	at     time.Duration // delivery seen by a worker
	ready  time.Duration // enqueue request sent
	server time.Duration // the frame's dequeued_at (server clock, whole ms); 0 if absent
	// arrived is the frame's ready_at (server clock, whole ms): when the
	// server took the job in, for a job enqueued ready; 0 if absent
	arrived time.Duration
	cost    int32
}

// budgetMeter watches one budget from the workers' side: the cost in
// flight (delivered and not yet acked), and for time_based budgets every
// dispatch time.
type budgetMeter struct {
	spec budgetSpec

	mu        sync.Mutex
	created   time.Duration // when the pool was last full (PUT sent)
	hasCreate bool
	cur, peak int64
	area      float64 // cost-seconds in flight, for the mean
	last      time.Duration
	busyFrom  time.Duration
	busyUntil time.Duration
	count     int64
	recs      []dispatchRec
}

func newBudgetMeter(spec budgetSpec) *budgetMeter { return &budgetMeter{spec: spec} }

func (b *budgetMeter) setCreated(at time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.created, b.hasCreate = at, true
}

// advance integrates the in-flight cost up to now. Callers hold b.mu.
func (b *budgetMeter) advance(now time.Duration) {
	if b.last != 0 && now > b.last {
		b.area += float64(b.cur) * (now - b.last).Seconds()
	}
	if now > b.last {
		b.last = now
	}
}

// dispatched is called when a worker receives a job bound to b.
func (b *budgetMeter) dispatched(now, ready, server, arrived time.Duration, cost int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	if b.count == 0 {
		b.busyFrom = now
	}
	b.count++
	b.cur += int64(cost)
	b.peak = max(b.peak, b.cur)
	if b.spec.Strategy == strategyTimeBased {
		b.recs = append(b.recs, dispatchRec{at: now, ready: ready, server: server, arrived: arrived, cost: int32(cost)})
	}
}

// released is called just before the ack of a job bound to b is sent: the
// server cannot hand the tokens to anyone else before it has the ack, so
// counting the release this early never hides a real overrun.
func (b *budgetMeter) released(now time.Duration, cost int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	b.cur -= int64(cost)
	b.busyUntil = now
}
