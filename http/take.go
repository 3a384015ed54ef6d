package http

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

var streamFormats = []string{"text/event-stream", "application/x-ndjson", "application/vnd.zizq.msgpack-stream"}

// takeStreamFormat picks the stream framing from Accept (SPEC §1.4).
func takeStreamFormat(accept string) (protocol.StreamFormat, error) {
	switch {
	case accept == "":
		return protocol.StreamNDJSON, nil
	case strings.Contains(accept, "text/event-stream"):
		return protocol.StreamSSE, nil
	case strings.Contains(accept, "application/vnd.zizq.msgpack-stream"), strings.Contains(accept, "application/msgpack"):
		return protocol.StreamMsgpack, nil
	case strings.Contains(accept, "application/x-ndjson"), strings.Contains(accept, "application/json"), strings.Contains(accept, "*/*"):
		return protocol.StreamNDJSON, nil
	}
	return 0, &negotiationError{status: http.StatusNotAcceptable, message: "not acceptable", supported: streamFormats}
}

// takeParams are the query parameters of GET /jobs/take.
type takeParams struct {
	queues   []string
	prefetch int
}

func parseTakeParams(c echo.Context) (takeParams, error) {
	p := takeParams{prefetch: 1}
	q, err := protocol.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return p, err
	}
	for name, values := range q {
		v := values[0]
		switch name {
		case "queue":
			p.queues = splitList(v)
		case "prefetch":
			n, err := strconv.ParseUint(v, 10, 31)
			if err != nil {
				return p, protocol.Invalid("invalid query parameters: prefetch: expected a non-negative integer, got %q", v)
			}
			p.prefetch = int(n)
		default:
			return p, protocol.Invalid("invalid query parameters: unknown field `%s`, expected `queue` or `prefetch`", name)
		}
	}
	return p, nil
}

// splitList splits a comma list and drops empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func randomWorkerID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// take streams jobs to a worker (SPEC §3.4). The stream asks the queue
// actor for jobs only when its previous batch is written, so a slow reader
// never has jobs marked in flight that it was not sent.
func (a *API) take(c echo.Context) error {
	sf, err := takeStreamFormat(c.Request().Header.Get("Accept"))
	if err != nil {
		return err
	}
	params, err := parseTakeParams(c)
	if err != nil {
		return err
	}
	workerID := c.Request().Header.Get("Worker-Id")
	if workerID == "" {
		workerID = randomWorkerID()
	}
	w := c.Response()
	w.Header().Set("Content-Type", sf.ContentType())
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.Flush()

	batches := make(chan []protocol.Job, 1)
	ended := make(chan struct{}) // closed when the engine ends the stream
	ctx := c.Request().Context()
	id, err := a.engine.OpenStream(ctx, &actors.OpenStream{
		Queues:   params.queues,
		Prefetch: params.prefetch,
		WorkerID: workerID,
		Deliver: func(jobs []protocol.Job) {
			if jobs == nil {
				close(ended)
				return
			}
			select {
			case batches <- jobs:
			default:
				a.log.Error("take stream: batch delivered while the previous one is unwritten", "worker_id", workerID)
			}
		},
	})
	if err != nil {
		a.log.Warn("take stream: open failed", "err", err, "worker_id", workerID)
		return nil
	}
	log := a.log.With("worker_id", workerID)
	queues := "all"
	if len(params.queues) > 0 {
		queues = strings.Join(params.queues, ",")
	}
	log.Info("worker connected: take stream opened", "queues", queues, "prefetch", params.prefetch,
		"remote_addr", c.Request().RemoteAddr)
	opened := time.Now()
	sent := 0
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		requeued, err := a.engine.CloseStream(cctx, id)
		if err != nil {
			log.Error("take stream: close failed", "err", err)
		}
		log.Info("worker disconnected: take stream closed", "queues", queues, "jobs_sent", sent,
			"jobs_returned_to_ready", requeued, "open_for", time.Since(opened).Round(time.Millisecond).String())
	}()

	rc := http.NewResponseController(w.Writer)
	watch := a.newStreamWatch(c.Request())
	stalled := a.watchStream(watch, rc, log)
	defer stalled.stop()
	write := func(b []byte) bool {
		if stalled.closed() {
			return false
		}
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.WriteTimeout))
		if stalled.closed() { // the watcher may have cut the deadline meanwhile
			return false
		}
		watch.begin(len(b), time.Now())
		defer watch.end()
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	heartbeat := time.NewTimer(a.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	var buf []byte
	view, payload := new(protocol.JobView), new(protocol.Payload)
	for {
		select {
		case jobs := <-batches:
			delivered := len(jobs)
			jobs, err = a.engine.LoadPayloads(jobs)
			if err != nil {
				// closing the stream puts its jobs back in the queue
				log.Error("take stream: read payloads", "err", err)
				return nil
			}
			if len(jobs) < delivered {
				// deleted since dispatch, or never stored (a failed enqueue commit)
				log.Warn("take stream: jobs without a stored payload were not written", "jobs", delivered-len(jobs))
			}
			buf = buf[:0]
			now := uint64(time.Now().UnixMilli())
			for i := range jobs {
				jobs[i].FillView(view, payload, now, true)
				if buf, err = sf.AppendFrame(buf, view); err != nil {
					log.Error("take stream: encode job", "err", err, "job_id", jobs[i].ID)
				}
			}
			if !write(buf) {
				return nil
			}
			sent += len(jobs)
			a.engine.StreamWritten(id)
			heartbeat.Reset(a.cfg.HeartbeatInterval)
		case <-heartbeat.C:
			if !write(sf.Heartbeat()) {
				return nil
			}
			heartbeat.Reset(a.cfg.HeartbeatInterval)
		case <-ended:
			log.Warn("take stream ended by the server: the store refused to record a dispatch")
			return nil
		case <-ctx.Done():
			return nil
		case <-stalled.done:
			return nil
		case <-a.shutdown:
			return nil
		}
	}
}
