package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ceilingServer is a trivial in-process stand-in for tollgate with the same
// HTTP shapes (enqueue, bulk enqueue, NDJSON take stream with prefetch,
// single and bulk acks) and no engine and no store: enqueued jobs go to a
// slice, take streams pop from it, acks free prefetch slots. Whatever bench
// reaches against it is the HTTP layer's limit on this machine.
type ceilingServer struct {
	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc

	mu       sync.Mutex
	nextID   uint64
	ready    []*ceilingJob
	head     int // ready[head:] are waiting
	inFlight map[string]*ceilingStream
	changed  chan struct{} // closed and replaced when jobs arrive
}

type ceilingJob struct {
	id      string
	typ     string
	queue   string
	payload json.RawMessage
	readyAt int64
}

type ceilingStream struct {
	held int
	wake chan struct{} // one-slot: an ack freed a slot
}

// startCeiling listens on 127.0.0.1:0 and serves HTTP/1.1 and h2c.
func startCeiling(log *slog.Logger) (*ceilingServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &ceilingServer{ln: ln, cancel: cancel, inFlight: map[string]*ceilingStream{}, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", c.enqueueOne)
	mux.HandleFunc("POST /jobs/bulk", c.enqueueBulk)
	mux.HandleFunc("GET /jobs/take", c.take)
	mux.HandleFunc("POST /jobs/{id}/success", c.ackOne)
	mux.HandleFunc("POST /jobs/success", c.ackBulk)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	})
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	c.srv = &http.Server{
		Handler:     mux,
		Protocols:   p,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

func (c *ceilingServer) url() string { return "http://" + c.ln.Addr().String() }

// close ends every take stream and the listener.
func (c *ceilingServer) close() {
	c.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		_ = c.srv.Close()
	}
}

// enqueueReq is the part of an enqueue body the stand-in looks at.
type enqueueReq struct {
	Type    string          `json:"type"`
	Queue   string          `json:"queue"`
	Payload json.RawMessage `json:"payload"`
}

func (c *ceilingServer) enqueueOne(w http.ResponseWriter, r *http.Request) {
	var req enqueueReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, []byte(`{"error":"invalid JSON"}`))
		return
	}
	jobs := c.store([]enqueueReq{req})
	writeJSON(w, http.StatusCreated, appendEnqueued(nil, jobs[0]))
}

func (c *ceilingServer) enqueueBulk(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Jobs []enqueueReq `json:"jobs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, []byte(`{"error":"invalid JSON"}`))
		return
	}
	jobs := c.store(req.Jobs)
	b := append(make([]byte, 0, 200*len(jobs)+16), `{"jobs":[`...)
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEnqueued(b, j)
	}
	writeJSON(w, http.StatusCreated, append(b, "]}"...))
}

// store gives the jobs fake IDs, queues them and wakes the streams.
func (c *ceilingServer) store(reqs []enqueueReq) []*ceilingJob {
	now := time.Now().UnixMilli()
	jobs := make([]*ceilingJob, len(reqs))
	c.mu.Lock()
	for i, r := range reqs {
		c.nextID++
		jobs[i] = &ceilingJob{id: fakeID(c.nextID), typ: r.Type, queue: r.Queue, payload: r.Payload, readyAt: now}
	}
	if c.head > 1024 && c.head*2 > len(c.ready) {
		c.ready = append(c.ready[:0], c.ready[c.head:]...)
		c.head = 0
	}
	c.ready = append(c.ready, jobs...)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return jobs
}

// fakeID renders n as a 25-character lowercase base-36 ID, like SCRU128.
func fakeID(n uint64) string {
	s := strconv.FormatUint(n, 36)
	return strings.Repeat("0", 25-len(s)) + s
}

// appendEnqueued appends the enqueue response object (without payload).
func appendEnqueued(b []byte, j *ceilingJob) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, j.id...)
	b = append(b, `","type":`...)
	b = strconv.AppendQuote(b, j.typ)
	b = append(b, `,"queue":`...)
	b = strconv.AppendQuote(b, j.queue)
	b = append(b, `,"priority":32768,"status":"ready","ready_at":`...)
	b = strconv.AppendInt(b, j.readyAt, 10)
	return append(b, `,"attempts":0,"duplicate":false,"folded":false}`...)
}

// appendFrame appends the take frame (job with payload) and its newline.
func appendFrame(b []byte, j *ceilingJob, now int64) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, j.id...)
	b = append(b, `","type":`...)
	b = strconv.AppendQuote(b, j.typ)
	b = append(b, `,"queue":`...)
	b = strconv.AppendQuote(b, j.queue)
	b = append(b, `,"priority":32768,"status":"in_flight","payload":`...)
	b = append(b, j.payload...)
	b = append(b, `,"ready_at":`...)
	b = strconv.AppendInt(b, j.readyAt, 10)
	b = append(b, `,"attempts":0,"dequeued_at":`...)
	b = strconv.AppendInt(b, now, 10)
	return append(b, "}\n"...)
}

// take streams queued jobs as NDJSON, at most prefetch unacked at once,
// with a heartbeat after 3 s of silence, until the client goes away.
func (c *ceilingServer) take(w http.ResponseWriter, r *http.Request) {
	prefetch := 1
	if v := r.URL.Query().Get("prefetch"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, []byte(`{"error":"invalid query parameters: prefetch"}`))
			return
		}
		prefetch = n
	}
	st := &ceilingStream{wake: make(chan struct{}, 1)}
	fl := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	_ = fl.Flush()
	bw := bufio.NewWriterSize(w, 64<<10)
	heartbeat := time.NewTimer(3 * time.Second)
	defer heartbeat.Stop()
	defer c.dropStream(st)
	var frame []byte
	for {
		c.mu.Lock()
		room := len(c.ready) - c.head
		if prefetch > 0 {
			room = min(room, prefetch-st.held)
		}
		var batch []*ceilingJob
		if room > 0 {
			// Copy: store may compact c.ready once the lock is released.
			batch = append(batch, c.ready[c.head:c.head+room]...)
			clear(c.ready[c.head : c.head+room])
			c.head += room
			st.held += room
			for _, j := range batch {
				c.inFlight[j.id] = st
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if len(batch) > 0 {
			now := time.Now().UnixMilli()
			for _, j := range batch {
				frame = appendFrame(frame[:0], j, now)
				if _, err := bw.Write(frame); err != nil {
					return
				}
			}
			if bw.Flush() != nil || fl.Flush() != nil {
				return
			}
			heartbeat.Reset(3 * time.Second)
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-st.wake:
		case <-heartbeat.C:
			if _, err := bw.WriteString("\n"); err != nil || bw.Flush() != nil || fl.Flush() != nil {
				return
			}
			heartbeat.Reset(3 * time.Second)
		}
	}
}

// dropStream forgets a closed stream's jobs (the real server would requeue
// them; the stand-in has nobody left to give them to).
func (c *ceilingServer) dropStream(st *ceilingStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range c.inFlight {
		if s == st {
			delete(c.inFlight, id)
		}
	}
}

// ack frees the slots of the given IDs and returns those not in flight.
func (c *ceilingServer) ack(ids []string) (notFound []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		st, ok := c.inFlight[id]
		if !ok {
			notFound = append(notFound, id)
			continue
		}
		delete(c.inFlight, id)
		st.held--
		select {
		case st.wake <- struct{}{}:
		default:
		}
	}
	return notFound
}

func (c *ceilingServer) ackOne(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if nf := c.ack([]string{r.PathValue("id")}); len(nf) > 0 {
		writeJSON(w, http.StatusNotFound, []byte(`{"error":"job not found in in-flight set"}`))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *ceilingServer) ackBulk(w http.ResponseWriter, r *http.Request) {
	var req struct {
		IDs []string `json:"ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.IDs) == 0 {
		writeJSON(w, http.StatusBadRequest, []byte(`{"error":"ids must not be empty"}`))
		return
	}
	if nf := c.ack(req.IDs); len(nf) > 0 {
		b, err := json.Marshal(map[string][]string{"not_found": nf})
		if err != nil {
			b = []byte(`{"not_found":[]}`)
		}
		writeJSON(w, http.StatusUnprocessableEntity, b)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
