package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// runner holds one run's state shared by producers and workers.
type runner struct {
	cfg   Config
	log   *slog.Logger
	sc    *scenario
	cl    *apiClient
	errs  *errorLog
	epoch time.Time
	runID string

	queueJSON string // the queue name as a JSON string
	pad       string // payload padding
	pace      *pacer

	seqs   seqTable
	c      counters
	issued atomic.Int64 // sequence numbers handed out
	// limit caps the sequence numbers handed out below --jobs while
	// many-budgets enqueues phase by phase (parked.go).
	limit atomic.Int64
	// hold, when not nil, makes workers keep every delivery unacked until
	// it is closed (many-budgets' parked phases).
	hold     chan struct{}
	holdOnce sync.Once
	// streamsOpen counts take streams that answered 200 and are being read.
	streamsOpen atomic.Int64

	enqHist, ackHist, reqHist lockedHist

	// stopProducers is closed to make producers stop early (first SIGINT,
	// --duration elapsed).
	stopProducers chan struct{}
	stopOnce      sync.Once
}

// newRunner prepares a run; the caller sets r.cl before driving it.
func newRunner(cfg Config, log *slog.Logger, sc *scenario, errs *errorLog, runID string) *runner {
	r := &runner{
		cfg: cfg, log: log, sc: sc, errs: errs, epoch: time.Now(), runID: runID,
		queueJSON: strconv.Quote(cfg.Queue), stopProducers: make(chan struct{}),
	}
	// {"s":<seq>,"t":<ns>,"p":"<pad>"} is about 40 bytes before padding.
	r.pad = strings.Repeat("x", max(0, cfg.PayloadBytes-40))
	if cfg.EnqueueRate > 0 {
		r.pace = &pacer{rate: cfg.EnqueueRate}
	}
	for _, h := range []*lockedHist{&r.enqHist, &r.ackHist, &r.reqHist} {
		h.h = newHist()
	}
	r.limit.Store(int64(cfg.Jobs))
	if sc.park {
		r.hold = make(chan struct{})
	}
	return r
}

// releaseHold lets the workers ack what they hold and whatever comes next.
func (r *runner) releaseHold() {
	if r.hold != nil {
		r.holdOnce.Do(func() { close(r.hold) })
	}
}

// now is the harness clock: monotonic time since the run began. Payloads
// carry it, so it is only ever compared within this process.
func (r *runner) now() time.Duration { return time.Since(r.epoch) }

func (r *runner) stopProducing() { r.stopOnce.Do(func() { close(r.stopProducers) }) }

func (r *runner) producersStopped() bool {
	select {
	case <-r.stopProducers:
		return true
	default:
		return false
	}
}

// claim hands out up to want sequence numbers, bounded by --jobs and the
// current limit.
func (r *runner) claim(want int) (lo int64, n int) {
	for {
		cur := r.issued.Load()
		k := min(int64(want), min(int64(r.cfg.Jobs), r.limit.Load())-cur)
		if k <= 0 {
			return 0, 0
		}
		if r.issued.CompareAndSwap(cur, cur+k) {
			return cur, int(k)
		}
	}
}

// appendJob appends one enqueue request object for job seq.
func (r *runner) appendJob(b []byte, seq int64, t time.Duration) []byte {
	b = append(b, `{"type":"bench","queue":`...)
	b = append(b, r.queueJSON...)
	b = append(b, `,"payload":{"s":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, int64(t), 10)
	b = append(b, `,"p":"`...)
	b = append(b, r.pad...)
	b = append(b, `"}`...)
	if len(r.sc.bindingJSON) > 0 {
		b = append(b, `,"budgets":`...)
		b = append(b, r.sc.bindingJSON[seq%int64(len(r.sc.bindingJSON))]...)
	}
	return append(b, '}')
}

// producer enqueues until --jobs are handed out, the producers are
// stopped, deadline passes (zero: none) or ctx ends.
func (r *runner) producer(ctx context.Context, deadline time.Time) {
	var body []byte
	backoff := newBackoff()
	h := newHist()
	defer r.reqHist.merge(h)
	for ctx.Err() == nil && !r.producersStopped() {
		if !deadline.IsZero() && time.Now().After(deadline) {
			return
		}
		lo, n := r.claim(r.cfg.Batch)
		if n == 0 {
			return
		}
		if r.pace.wait(ctx, n) != nil {
			return
		}
		sent := r.now()
		path := "/jobs"
		if r.cfg.Batch == 1 {
			body = r.appendJob(body[:0], lo, sent)
		} else {
			path = "/jobs/bulk"
			body = append(body[:0], `{"jobs":[`...)
			for s := lo; s < lo+int64(n); s++ {
				if s > lo {
					body = append(body, ',')
				}
				body = r.appendJob(body, s, sent)
			}
			body = append(body, "]}"...)
		}
		resp, err := r.cl.do(ctx, http.MethodPost, path, body)
		r.c.enqueueReqs.Add(1)
		done := r.now()
		if err == nil && resp.status == http.StatusCreated && r.checkEnqueued(path, body, resp, n) {
			recordDur(h, done-sent)
			r.seqs.enqueued(lo, n)
			r.c.enqueued.Add(int64(n))
			r.c.enqWin.note(done)
			backoff.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		r.c.enqueueFailed.Add(int64(n))
		if err != nil {
			r.errs.add("enqueue", http.MethodPost, path, body, 0, nil, err)
		} else if resp.status != http.StatusCreated {
			r.errs.add("enqueue", http.MethodPost, path, body, resp.status, resp.body, nil)
		}
		if backoff.wait(ctx) != nil {
			return
		}
	}
}

// checkEnqueued verifies that an enqueue response names n new jobs.
func (r *runner) checkEnqueued(path string, body []byte, resp response, n int) bool {
	if n == 1 && r.cfg.Batch == 1 {
		var one struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(resp.body, &one) == nil && one.ID != "" {
			return true
		}
	} else {
		if got, lastID, err := scanEnqueueReply(resp.body); err == nil && got == n && lastID != "" {
			return true
		}
		var many struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		if json.Unmarshal(resp.body, &many) == nil && len(many.Jobs) == n && many.Jobs[n-1].ID != "" {
			return true
		}
	}
	r.errs.add("enqueue-response", http.MethodPost, path, body, resp.status, resp.body,
		fmt.Errorf("response does not list %d job(s) with ids", n))
	return false
}

// delivery is one job a worker received.
type delivery struct {
	id    string
	seq   int64
	at    time.Duration
	known bool // a job of this run (its seq is valid)
}

// takeFrame is the part of a take frame the worker reads.
type takeFrame struct {
	ID         string `json:"id"`
	DequeuedAt int64  `json:"dequeued_at"`
	ReadyAt    int64  `json:"ready_at"`
	Payload    struct {
		S *int64 `json:"s"`
		T int64  `json:"t"`
	} `json:"payload"`
}

// worker holds one take stream (reopening it if it breaks) and acks what
// it receives, after --sleep.
func (r *runner) worker(ctx context.Context, n int) {
	var wg sync.WaitGroup
	jobs := make(chan delivery, 4096)
	acks := jobs
	if r.hold != nil {
		held := make(chan delivery, 4096)
		in := acks
		wg.Go(func() { r.holder(in, held) })
		acks = held
	}
	if r.cfg.Sleep > 0 {
		slept := make(chan delivery, 4096)
		in := acks
		wg.Go(func() { r.delayer(ctx, in, slept) })
		acks = slept
	}
	for range r.ackWorkers() {
		wg.Go(func() { r.acker(ctx, acks) })
	}
	backoff := newBackoff()
	workerID := fmt.Sprintf("bench-%s-w%d", r.runID, n)
	for ctx.Err() == nil {
		got, err := r.stream(ctx, workerID, jobs)
		if ctx.Err() != nil {
			break
		}
		r.c.streamErrors.Add(1)
		r.log.Debug("take stream ended", "worker_id", workerID, "err", err)
		if got > 0 {
			backoff.reset()
		}
		if backoff.wait(ctx) != nil {
			break
		}
		r.c.reconnects.Add(1)
	}
	close(jobs)
	wg.Wait()
}

// ackWorkers is the number of ack loops per worker.
func (r *runner) ackWorkers() int {
	switch {
	case r.cfg.AckWorkers > 0:
		return r.cfg.AckWorkers
	case r.cfg.AckBatch > 1:
		return 2
	default:
		return 8
	}
}

// stream reads one take stream until it fails or ctx ends, and returns
// how many jobs it delivered.
func (r *runner) stream(ctx context.Context, workerID string, out chan<- delivery) (int, error) {
	resp, err := r.cl.openTake(ctx, r.cfg.Queue, r.cfg.Prefetch, workerID)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	r.streamsOpen.Add(1)
	defer r.streamsOpen.Add(-1)
	h := newHist()
	defer r.enqHist.merge(h)
	br := bufio.NewReaderSize(resp.Body, 256<<10)
	got := 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("take stream ended by the server")
			}
			return got, err
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			r.c.heartbeats.Add(1)
			continue
		}
		now := r.now()
		f, err := decodeTakeFrame(line)
		if err != nil || f.ID == "" {
			r.c.unknown.Add(1)
			r.errs.add("take-frame", "GET", "/jobs/take", nil, 200, line, fmt.Errorf("undecodable frame: %v", err))
			continue
		}
		got++
		r.c.dispatched.Add(1)
		r.c.dispWin.note(now)
		d := delivery{id: f.ID, at: now}
		if s := f.Payload.S; s != nil && *s >= 0 && *s < r.issued.Load() {
			d.seq, d.known = *s, true
			var server, arrived time.Duration
			if f.DequeuedAt > 0 {
				server = time.Duration(f.DequeuedAt*int64(time.Millisecond) - r.epoch.UnixNano())
			}
			if f.ReadyAt > 0 {
				arrived = time.Duration(f.ReadyAt*int64(time.Millisecond) - r.epoch.UnixNano())
			}
			before, ackedAt := r.seqs.delivered(d.seq)
			if before > 0 {
				r.c.duplicates.Add(1)
			}
			if ackedAt > 0 {
				// Read after its ack was accepted. A bug only if the server
				// dispatched it after that, too: another worker may ack a
				// redelivered job (by ID, from any connection) before this
				// stream's frame is read.
				if server == 0 || server > ackedAt+time.Millisecond {
					r.c.ackedThenSeen.Add(1)
					r.errs.add("acked-then-delivered", "GET", "/jobs/take", nil, 200, line,
						fmt.Errorf("dispatched %s after its ack was accepted", (server-ackedAt).Round(time.Microsecond)))
				} else {
					r.c.ackRaced.Add(1)
				}
			}
			ready := time.Duration(f.Payload.T)
			recordDur(h, now-ready)
			for _, bi := range r.sc.budgetsOf(d.seq) {
				r.sc.budgets[bi].dispatched(now, ready, server, arrived, r.cfg.Cost)
			}
		} else {
			r.c.unknown.Add(1)
			r.errs.add("take-frame", "GET", "/jobs/take", nil, 200, line, errors.New("frame is not a job of this run"))
		}
		select {
		case out <- d:
		case <-ctx.Done():
			return got, ctx.Err()
		}
	}
}

// holder keeps every delivery until r.hold is closed (or in ends), then
// passes on what it kept and everything after. It keeps reading while it
// holds, into memory, so that the take stream is always read and the
// server can go on dispatching to it.
func (r *runner) holder(in <-chan delivery, out chan<- delivery) {
	defer close(out)
	var held []delivery
	for holding := true; holding; {
		select {
		case d, ok := <-in:
			if !ok {
				holding = false
				continue
			}
			held = append(held, d)
		case <-r.hold:
			holding = false
		}
	}
	for _, d := range held {
		out <- d
	}
	for d := range in {
		out <- d
	}
}

// delayer holds each delivery until --sleep after it arrived. Deliveries
// come in order and the sleep is constant, so a FIFO is a timer queue.
func (r *runner) delayer(ctx context.Context, in <-chan delivery, out chan<- delivery) {
	defer close(out)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for d := range in {
		if wait := d.at + r.cfg.Sleep - r.now(); wait > 0 && ctx.Err() == nil {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		out <- d
	}
}

// acker acks deliveries, batching whatever is already waiting up to
// --ack-batch when bulk acks are on.
func (r *runner) acker(ctx context.Context, in <-chan delivery) {
	h := newHist()
	defer r.ackHist.merge(h)
	batch := make([]delivery, 0, r.cfg.AckBatch)
	var body []byte
	for d := range in {
		if ctx.Err() != nil {
			continue // shutting down: drain without acking
		}
		batch = append(batch[:0], d)
	fill:
		for len(batch) < r.cfg.AckBatch {
			select {
			case d2, ok := <-in:
				if !ok {
					break fill
				}
				batch = append(batch, d2)
			default:
				break fill
			}
		}
		body = r.ack(ctx, batch, body, h)
	}
}

// ack sends one ack request for batch and records the outcome. It returns
// the body buffer for reuse.
func (r *runner) ack(ctx context.Context, batch []delivery, body []byte, h *hdrhistogram.Histogram) []byte {
	sent := r.now()
	for _, d := range batch {
		if d.known {
			for _, bi := range r.sc.budgetsOf(d.seq) {
				r.sc.budgets[bi].released(sent, r.cfg.Cost)
			}
		}
	}
	var path string
	body = body[:0]
	if r.cfg.AckBatch == 1 {
		path = "/jobs/" + batch[0].id + "/success"
	} else {
		path = "/jobs/success"
		body = append(body, `{"ids":[`...)
		for i, d := range batch {
			if i > 0 {
				body = append(body, ',')
			}
			body = strconv.AppendQuote(body, d.id)
		}
		body = append(body, "]}"...)
	}
	var reqBody []byte
	if len(body) > 0 {
		reqBody = body
	}
	resp, err := r.cl.do(ctx, http.MethodPost, path, reqBody)
	r.c.ackReqs.Add(1)
	done := r.now()
	if err != nil {
		if ctx.Err() == nil {
			r.c.ackFailed.Add(int64(len(batch)))
			r.errs.add("ack", http.MethodPost, path, reqBody, 0, nil, err)
			for _, d := range batch {
				if d.known {
					r.seqs.ackUnknown(d.seq)
				}
			}
		}
		return body
	}
	var notFound map[string]bool
	switch {
	case resp.status == http.StatusNoContent:
	case resp.status == http.StatusNotFound && r.cfg.AckBatch == 1:
		notFound = map[string]bool{batch[0].id: true}
		if !r.sc.restart {
			r.errs.add("ack-rejected", http.MethodPost, path, reqBody, resp.status, resp.body, nil)
		}
	case resp.status == http.StatusUnprocessableEntity && r.cfg.AckBatch > 1:
		var nf struct {
			NotFound []string `json:"not_found"`
		}
		if json.Unmarshal(resp.body, &nf) != nil {
			r.c.ackFailed.Add(int64(len(batch)))
			r.errs.add("ack", http.MethodPost, path, reqBody, resp.status, resp.body, errors.New("422 body without not_found"))
			return body
		}
		notFound = make(map[string]bool, len(nf.NotFound))
		for _, id := range nf.NotFound {
			notFound[id] = true
		}
		if !r.sc.restart {
			r.errs.add("ack-rejected", http.MethodPost, path, reqBody, resp.status, resp.body, nil)
		}
	default:
		r.c.ackFailed.Add(int64(len(batch)))
		r.errs.add("ack", http.MethodPost, path, reqBody, resp.status, resp.body, nil)
		return body
	}
	for _, d := range batch {
		if notFound[d.id] {
			r.c.ackRejected.Add(1)
			continue
		}
		r.c.acked.Add(1)
		recordDur(h, done-d.at)
		if d.known {
			r.seqs.acked(d.seq, done)
		}
	}
	r.c.ackWin.note(done)
	return body
}

// pacer spaces enqueues to a total rate shared by all producers.
type pacer struct {
	mu   sync.Mutex
	rate float64 // jobs per second
	next time.Time
}

// wait blocks until n more jobs may be sent. A nil pacer never waits.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	return sleepCtx(ctx, time.Until(at))
}

// backoff is a capped exponential retry delay.
type backoff struct{ d time.Duration }

const (
	backoffMin = 20 * time.Millisecond
	backoffMax = 500 * time.Millisecond
)

func newBackoff() *backoff { return &backoff{d: backoffMin} }
func (b *backoff) reset()  { b.d = backoffMin }

func (b *backoff) wait(ctx context.Context) error {
	d := b.d
	b.d = min(backoffMax, b.d*2)
	return sleepCtx(ctx, d)
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
