package main

// The fault suite's client side: a ledger of what the server acknowledged,
// delivered and acked, and the producers and workers that fill it. Nothing
// here calls t.Fatal: the goroutines record, the test checks the ledger.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// The queues of the suite's jobs; the budgeted ones bind to one budget.
const (
	faultPlainQueue = "fault-plain"
	faultWIFQueue   = "fault-wif"
	faultTBQueue    = "fault-tb"
)

// Per lifetime and producer, how many requests are sent; time_based jobs
// are capped so the drain (at the budget's pace) stays short.
const (
	faultRequestsPerProducer = 400
	faultTBPerLifetime       = 30
	faultWIFPerLifetime      = 120
)

var faultClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 20 * time.Second}

// faultLedger is what the clients saw, across lifetimes.
type faultLedger struct {
	mu           sync.Mutex
	acknowledged map[string]string // enqueues answered 201: id -> queue
	acked        map[string]bool   // acked with 204 (or not named by a 422)
	ackUnknown   map[string]bool   // ack sent, answer lost to a stop
	deliveries   int
	wifDelivered int
	tbDelivered  int
	redelivered  int // deliveries of an acked job
	maxWIFHeld   int
	violations   []string
	lifetimes    []*faultLifetimeState
}

// faultLifetimeState is one server process's life as the clients saw it.
type faultLifetimeState struct {
	n          int
	url        string
	start, end time.Time // start: once it served; end: when it was stopped
	enqueued   int
	acks       int
	tbQueued   int
	wifQueued  int
	wifHeld    int // while_in_flight jobs delivered and not yet acked
	tbSeen     int // time_based jobs delivered
}

func newFaultLedger() *faultLedger {
	return &faultLedger{acknowledged: map[string]string{}, acked: map[string]bool{}, ackUnknown: map[string]bool{}}
}

func (l *faultLedger) beginLifetime(url string, start time.Time) *faultLifetimeState {
	l.mu.Lock()
	defer l.mu.Unlock()
	life := &faultLifetimeState{n: len(l.lifetimes) + 1, url: url, start: start}
	l.lifetimes = append(l.lifetimes, life)
	return life
}

func (l *faultLedger) endLifetime(life *faultLifetimeState, end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	life.end = end
}

func (l *faultLedger) lifetimeActivity(life *faultLifetimeState) (enqueued, acks int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return life.enqueued, life.acks
}

func (l *faultLedger) violation(format string, args ...any) {
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
}

// enqueueQuota reserves room for one more job of queue in this lifetime.
func (l *faultLedger) enqueueQuota(life *faultLifetimeState, queue string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch queue {
	case faultTBQueue:
		if life.tbQueued >= faultTBPerLifetime {
			return false
		}
		life.tbQueued++
	case faultWIFQueue:
		if life.wifQueued >= faultWIFPerLifetime {
			return false
		}
		life.wifQueued++
	}
	return true
}

func (l *faultLedger) enqueued(life *faultLifetimeState, ids, queues []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		l.acknowledged[id] = queues[i]
	}
	life.enqueued += len(ids)
}

// delivered records a job read from a stream of life.
func (l *faultLedger) delivered(life *faultLifetimeState, id, queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries++
	if l.acked[id] {
		l.redelivered++
		l.violation("lifetime %d: job %s delivered again after its ack was answered 204", life.n, id)
	}
	switch queue {
	case faultWIFQueue:
		l.wifDelivered++
		life.wifHeld++
		l.maxWIFHeld = max(l.maxWIFHeld, life.wifHeld)
		if life.wifHeld > faultWIFAlloc {
			l.violation("lifetime %d: %d jobs of while_in_flight budget %s in flight at once (allocation %d)", life.n, life.wifHeld, faultWIFKey, faultWIFAlloc)
		}
	case faultTBQueue:
		l.tbDelivered++
		life.tbSeen++
	}
}

// released records jobs a worker stops holding: it is about to ack them,
// or its stream ended without acking them (the server requeues those).
func (l *faultLedger) released(life *faultLifetimeState, jobs []faultJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range jobs {
		if j.Queue == faultWIFQueue {
			life.wifHeld--
		}
	}
}

// ackAnswered records the answer to an ack of ids: notFound are the IDs
// the server did not ack; err is a transport error (outcome unknown).
func (l *faultLedger) ackAnswered(life *faultLifetimeState, ids, notFound []string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		switch {
		case err != nil:
			if !l.acked[id] {
				l.ackUnknown[id] = true
			}
		case !slices.Contains(notFound, id):
			l.acked[id] = true
			delete(l.ackUnknown, id)
			life.acks++
		}
	}
}

// faultSummary is a campaign's figures.
type faultSummary struct {
	acknowledged, acked, ackUnknown, deliveries int
	wifDeliveries, tbDeliveries                 int
	lost                                        int
	lostSample                                  []string
	redeliveredAfterAck                         int
	maxWIFHeld                                  int
	maxTBDispatched, minTBBound, maxTBBound     int
	violations                                  []string
}

// summary checks the ledger. Lost: acknowledged, yet neither acked nor
// acked with an unknown outcome (an ack whose answer a stop cut off may
// have been the job's last delivery). The time_based bound of a lifetime:
// its full pool plus the drip over its whole span, plus one for rounding.
func (l *faultLedger) summary() faultSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := faultSummary{acknowledged: len(l.acknowledged), acked: len(l.acked), ackUnknown: len(l.ackUnknown),
		deliveries: l.deliveries, wifDeliveries: l.wifDelivered, tbDeliveries: l.tbDelivered,
		redeliveredAfterAck: l.redelivered, maxWIFHeld: l.maxWIFHeld, violations: slices.Clone(l.violations)}
	for id := range l.acknowledged {
		if !l.acked[id] && !l.ackUnknown[id] {
			s.lost++
			if len(s.lostSample) < 5 {
				s.lostSample = append(s.lostSample, id)
			}
		}
	}
	for _, life := range l.lifetimes {
		end := life.end
		if end.IsZero() {
			end = time.Now()
		}
		span := end.Sub(life.start)
		bound := faultTBAlloc + int(float64(faultTBAlloc)*float64(span)/float64(faultTBDuration)) + 1
		if s.minTBBound == 0 || bound < s.minTBBound {
			s.minTBBound = bound
		}
		s.maxTBBound = max(s.maxTBBound, bound)
		s.maxTBDispatched = max(s.maxTBDispatched, life.tbSeen)
		if life.tbSeen > bound {
			s.violations = append(s.violations, fmt.Sprintf("lifetime %d (%s): %d time_based jobs dispatched, above the bound %d (%d per %s, pool full at start)",
				life.n, span.Round(time.Millisecond), life.tbSeen, bound, faultTBAlloc, faultTBDuration))
		}
	}
	return s
}

// faultLoad is the goroutines of one lifetime.
type faultLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (f *faultLoad) stop() {
	f.cancel()
	f.wg.Wait()
}

// startFaultLoad runs producers and workers against life until stopped.
func startFaultLoad(led *faultLedger, life *faultLifetimeState) *faultLoad {
	f := startFaultWorkers(led, life)
	ctx, cancel := context.WithCancel(context.Background())
	prev := f.cancel
	f.cancel = func() { cancel(); prev() }
	for p := range faultProducers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			faultProduce(ctx, led, life, p)
		}()
	}
	return f
}

// startFaultWorkers runs workers only.
func startFaultWorkers(led *faultLedger, life *faultLifetimeState) *faultLoad {
	ctx, cancel := context.WithCancel(context.Background())
	f := &faultLoad{cancel: cancel}
	for w := range faultWorkers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			faultWork(ctx, led, life, fmt.Sprintf("fault-worker-%d-%d", life.n, w))
		}()
	}
	return f
}

// faultProduce enqueues bulks of 8 jobs (every third request one job
// alone) spread over the three queues, and records what was acknowledged.
func faultProduce(ctx context.Context, led *faultLedger, life *faultLifetimeState, p int) {
	for i := 0; i < faultRequestsPerProducer && ctx.Err() == nil; i++ {
		n := 8
		if i%3 == 2 {
			n = 1
		}
		var jobs []map[string]any
		var queues []string
		for k := 0; k < n; k++ {
			queue := [...]string{faultPlainQueue, faultPlainQueue, faultWIFQueue, faultTBQueue}[(i+k+p)%4]
			if !led.enqueueQuota(life, queue) {
				queue = faultPlainQueue
			}
			job := map[string]any{"type": "fault", "queue": queue, "payload": map[string]any{"p": p, "i": i, "k": k}}
			switch queue {
			case faultWIFQueue:
				job["budgets"] = []map[string]any{{"key": faultWIFKey}}
			case faultTBQueue:
				job["budgets"] = []map[string]any{{"key": faultTBKey}}
			}
			jobs = append(jobs, job)
			queues = append(queues, queue)
		}
		var ids []string
		if n == 1 {
			status, body, err := faultDo(life.url, "POST", "/jobs", jobs[0])
			if err != nil || status != http.StatusCreated {
				continue // refused or cut off: not acknowledged
			}
			var v struct{ ID string }
			if json.Unmarshal(body, &v) != nil || v.ID == "" {
				continue
			}
			ids = []string{v.ID}
		} else {
			status, body, err := faultDo(life.url, "POST", "/jobs/bulk", map[string]any{"jobs": jobs})
			if err != nil || status != http.StatusCreated {
				continue
			}
			var v struct{ Jobs []struct{ ID string } }
			if json.Unmarshal(body, &v) != nil || len(v.Jobs) != n {
				continue
			}
			for _, j := range v.Jobs {
				ids = append(ids, j.ID)
			}
		}
		led.enqueued(life, ids, queues)
	}
}

// faultJob is what a worker keeps of a delivered job.
type faultJob struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
}

// faultWork takes jobs on one NDJSON stream after another (a stream ends
// when the server stops) and acks them: one alone, or a few in bulk when
// more are already buffered.
func faultWork(ctx context.Context, led *faultLedger, life *faultLifetimeState, workerID string) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/jobs/take?prefetch=%d", life.url, faultPrefetch), nil)
		if err != nil {
			return
		}
		req.Header.Set("Worker-Id", workerID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			// the server is down or stopping: this lifetime is over
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		faultReadStream(ctx, led, life, resp)
	}
}

func faultReadStream(ctx context.Context, led *faultLedger, life *faultLifetimeState, resp *http.Response) {
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var pending []faultJob
	defer func() { led.released(life, pending) }()
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue // heartbeat
		}
		var j faultJob
		if json.Unmarshal(line, &j) != nil || j.ID == "" {
			led.mu.Lock()
			led.violation("lifetime %d: undecodable frame %q", life.n, line)
			led.mu.Unlock()
			return
		}
		led.delivered(life, j.ID, j.Queue)
		pending = append(pending, j)
		if len(pending) < 3 && br.Buffered() > 0 {
			continue // more already here: ack them together
		}
		if ctx.Err() != nil {
			return
		}
		faultAck(led, life, pending)
		pending = pending[:0]
	}
}

// faultAck acks jobs alone (one job) or in bulk.
func faultAck(led *faultLedger, life *faultLifetimeState, jobs []faultJob) {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	led.released(life, jobs)
	if len(ids) == 1 {
		status, _, err := faultDo(life.url, "POST", "/jobs/"+ids[0]+"/success", nil)
		switch {
		case err != nil:
			led.ackAnswered(life, ids, nil, err)
		case status == http.StatusNoContent:
			led.ackAnswered(life, ids, nil, nil)
		default:
			led.ackAnswered(life, ids, ids, nil)
		}
		return
	}
	status, body, err := faultDo(life.url, "POST", "/jobs/success", map[string]any{"ids": ids})
	switch {
	case err != nil:
		led.ackAnswered(life, ids, nil, err)
	case status == http.StatusNoContent:
		led.ackAnswered(life, ids, nil, nil)
	case status == http.StatusUnprocessableEntity:
		var v struct {
			NotFound []string `json:"not_found"`
		}
		if json.Unmarshal(body, &v) != nil {
			v.NotFound = ids
		}
		led.ackAnswered(life, ids, v.NotFound, nil)
	default:
		led.ackAnswered(life, ids, ids, nil)
	}
}

// faultDo sends a JSON request and reads the whole answer.
func faultDo(base, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := faultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// faultCountJobs asks the server how many jobs it stores.
func faultCountJobs(base string) (uint64, error) {
	status, body, err := faultDo(base, "GET", "/jobs/count", nil)
	if err != nil {
		return 0, err
	}
	var v struct {
		Count uint64 `json:"count"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &v) != nil {
		return 0, fmt.Errorf("count: %d %s", status, body)
	}
	return v.Count, nil
}
