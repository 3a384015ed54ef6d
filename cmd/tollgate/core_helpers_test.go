package main

// Client helpers for the core black-box tests (core_*_test.go). They speak
// plain HTTP to a tollgate process started by servertest: JSON and msgpack
// request/response helpers, a typed view of the job object, and readers for
// the three take-stream formats (NDJSON, length-prefixed msgpack, SSE).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

const (
	coreCTJSON    = "application/json"
	coreCTMsgpack = "application/msgpack"

	coreAcceptNDJSON  = "application/x-ndjson"
	coreAcceptMsgpack = "application/vnd.zizq.msgpack-stream"
	coreAcceptSSE     = "text/event-stream"

	// coreHeartbeatFlag makes take-stream heartbeats fast enough to observe
	// and keeps idle streams visibly alive in "no job arrives" assertions.
	coreHeartbeatFlag = "--heartbeat-interval"
	coreHeartbeat     = "100ms"
)

// coreFormat is a request/response body format for non-streaming endpoints.
type coreFormat string

const (
	coreJSON    coreFormat = "json"
	coreMsgpack coreFormat = "msgpack"
)

var coreFormats = []coreFormat{coreJSON, coreMsgpack}

// coreHTTP is the HTTP/1.1 client used for every non-streaming request.
var coreHTTP = &http.Client{Transport: &http.Transport{
	MaxIdleConnsPerHost: 32,
	DisableCompression:  true,
}}

// coreResp is a fully read response.
type coreResp struct {
	Status           int
	Header           http.Header
	Body             []byte
	Proto            string
	ContentLength    int64
	TransferEncoding []string
}

// coreRequest sends one request with the given raw body and headers
// (a nil body sends no body) and reads the whole response.
func coreRequest(t testing.TB, client *http.Client, base, method, path string, body []byte, hdr map[string]string) coreResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = coreHTTP
	}
	resp, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "reading body of %s %s", method, path)
	return coreResp{
		Status: resp.StatusCode, Header: resp.Header, Body: b, Proto: resp.Proto,
		ContentLength: resp.ContentLength, TransferEncoding: resp.TransferEncoding,
	}
}

// coreEncode encodes v in the given format. A []byte is sent verbatim.
func coreEncode(t testing.TB, f coreFormat, v any) []byte {
	t.Helper()
	if b, ok := v.([]byte); ok {
		return b
	}
	if f == coreMsgpack {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return b
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// coreCall sends body (nil = no body) encoded in format f, with Accept and
// Content-Type set to f, and returns the response.
func coreCall(t testing.TB, base string, f coreFormat, method, path string, body any) coreResp {
	t.Helper()
	ct := coreCTJSON
	if f == coreMsgpack {
		ct = coreCTMsgpack
	}
	hdr := map[string]string{"Accept": ct}
	var raw []byte
	if body != nil {
		raw = coreEncode(t, f, body)
		hdr["Content-Type"] = ct
	}
	return coreRequest(t, nil, base, method, path, raw, hdr)
}

// coreDoJSON is coreCall in JSON.
func coreDoJSON(t testing.TB, base, method, path string, body any) coreResp {
	t.Helper()
	return coreCall(t, base, coreJSON, method, path, body)
}

// coreDoMsgpack is coreCall in msgpack.
func coreDoMsgpack(t testing.TB, base, method, path string, body any) coreResp {
	t.Helper()
	return coreCall(t, base, coreMsgpack, method, path, body)
}

// coreDecodeBytes decodes b as JSON (numbers as json.Number) or msgpack.
func coreDecodeBytes(t testing.TB, f coreFormat, b []byte, v any) {
	t.Helper()
	if f == coreMsgpack {
		require.NoError(t, msgpack.Unmarshal(b, v), "msgpack body %x", b)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(v), "JSON body %q", b)
	_, err := dec.Token()
	require.ErrorIs(t, err, io.EOF, "trailing data after JSON body %q", b)
}

// Format returns the body format from the exact response Content-Type
// (§1.2: exactly application/json or application/msgpack).
func (r coreResp) Format(t testing.TB) coreFormat {
	t.Helper()
	switch ct := r.Header.Get("Content-Type"); ct {
	case coreCTJSON:
		return coreJSON
	case coreCTMsgpack:
		return coreMsgpack
	default:
		require.Failf(t, "unexpected Content-Type", "%q (status %d, body %q)", ct, r.Status, r.Body)
		return ""
	}
}

// Decode decodes the body according to the response Content-Type.
func (r coreResp) Decode(t testing.TB, v any) {
	t.Helper()
	coreDecodeBytes(t, r.Format(t), r.Body, v)
}

// Map decodes the body into a generic map.
func (r coreResp) Map(t testing.TB) map[string]any {
	t.Helper()
	m := map[string]any{}
	r.Decode(t, &m)
	return m
}

// Job decodes the body as a job object.
func (r coreResp) Job(t testing.TB) coreJob {
	t.Helper()
	return coreJobFrom(t, r.Format(t), r.Body)
}

// String is for failure messages.
func (r coreResp) String() string {
	return fmt.Sprintf("status %d, Content-Type %q, body %q", r.Status, r.Header.Get("Content-Type"), r.Body)
}

// coreRequireStatus fails unless the status matches.
func coreRequireStatus(t testing.TB, r coreResp, want int) {
	t.Helper()
	require.Equal(t, want, r.Status, "unexpected status: %s", r)
}

// coreRequireError checks status, format and the exact §1.5 error body
// {"error": text}.
func coreRequireError(t testing.TB, r coreResp, status int, text string) {
	t.Helper()
	coreRequireStatus(t, r, status)
	m := r.Map(t)
	require.Equal(t, map[string]any{"error": text}, m, "error body: %s", r)
}

// coreRequireErrorPrefix checks status and that the body is exactly one
// `error` field whose text starts with prefix.
func coreRequireErrorPrefix(t testing.TB, r coreResp, status int, prefix string) {
	t.Helper()
	coreRequireStatus(t, r, status)
	m := r.Map(t)
	require.Len(t, m, 1, "error body must have exactly one field: %s", r)
	msg, ok := m["error"].(string)
	require.True(t, ok, "error field missing or not a string: %s", r)
	require.True(t, strings.HasPrefix(msg, prefix), "error %q does not start with %q", msg, prefix)
	require.Greater(t, len(msg), len(prefix), "error %q has no detail after %q", msg, prefix)
}

// coreRequireServerHeader checks `Server: tollgate/<version>` (§1.1).
func coreRequireServerHeader(t testing.TB, h http.Header) {
	t.Helper()
	v := h.Get("Server")
	require.True(t, strings.HasPrefix(v, "tollgate/") && len(v) > len("tollgate/"),
		"Server header %q does not match tollgate/<version>", v)
}

// coreRequireNoContent checks a 204 with no body and no body framing.
func coreRequireNoContent(t testing.TB, r coreResp) {
	t.Helper()
	coreRequireStatus(t, r, http.StatusNoContent)
	require.Empty(t, r.Body, "204 must have no body")
	require.Empty(t, r.TransferEncoding, "204 must have no Transfer-Encoding")
	require.Empty(t, r.Header.Get("Content-Length"), "204 must have no Content-Length header")
	coreRequireServerHeader(t, r.Header)
}

// ---------------------------------------------------------------------------
// The job object (§2.6).

type coreBackoff struct {
	Exponent float64 `json:"exponent" msgpack:"exponent"`
	BaseMS   uint32  `json:"base_ms" msgpack:"base_ms"`
	JitterMS uint32  `json:"jitter_ms" msgpack:"jitter_ms"`
}

type coreRetention struct {
	CompletedMS *uint64 `json:"completed_ms" msgpack:"completed_ms"`
	DeadMS      *uint64 `json:"dead_ms" msgpack:"dead_ms"`
}

type coreJob struct {
	ID          string         `json:"id" msgpack:"id"`
	Type        string         `json:"type" msgpack:"type"`
	Queue       string         `json:"queue" msgpack:"queue"`
	Priority    uint16         `json:"priority" msgpack:"priority"`
	Status      string         `json:"status" msgpack:"status"`
	Payload     any            `json:"payload" msgpack:"payload"`
	ReadyAt     uint64         `json:"ready_at" msgpack:"ready_at"`
	Attempts    uint32         `json:"attempts" msgpack:"attempts"`
	RetryLimit  *uint32        `json:"retry_limit" msgpack:"retry_limit"`
	Backoff     *coreBackoff   `json:"backoff" msgpack:"backoff"`
	Retention   *coreRetention `json:"retention" msgpack:"retention"`
	DequeuedAt  *uint64        `json:"dequeued_at" msgpack:"dequeued_at"`
	FailedAt    *uint64        `json:"failed_at" msgpack:"failed_at"`
	CompletedAt *uint64        `json:"completed_at" msgpack:"completed_at"`
	PurgeAt     *uint64        `json:"purge_at" msgpack:"purge_at"`
	Duplicate   *bool          `json:"duplicate" msgpack:"duplicate"`
	Folded      *bool          `json:"folded" msgpack:"folded"`

	// Raw is the same object decoded generically, to check which keys are present.
	Raw map[string]any `json:"-" msgpack:"-"`
}

// Has reports whether the key was present in the wire object.
func (j coreJob) Has(key string) bool {
	_, ok := j.Raw[key]
	return ok
}

func coreJobFrom(t testing.TB, f coreFormat, b []byte) coreJob {
	t.Helper()
	var j coreJob
	coreDecodeBytes(t, f, b, &j)
	coreDecodeBytes(t, f, b, &j.Raw)
	for k, v := range j.Raw {
		if k != "payload" {
			require.NotNil(t, v, "field %q sent as null (optional fields are omitted, §2.6): %q", k, b)
		}
	}
	for _, k := range []string{"id", "type", "queue", "priority", "status", "ready_at", "attempts"} {
		require.True(t, j.Has(k), "job object lacks required field %q: %q", k, b)
	}
	coreRequireJobID(t, j.ID)
	return j
}

var coreIDRe = regexp.MustCompile(`^[0-9a-z]{25}$`)

// coreRequireJobID checks the SCRU128 text form (§2.1).
func coreRequireJobID(t testing.TB, id string) {
	t.Helper()
	require.Regexp(t, coreIDRe, id, "job id must be 25 chars of [0-9a-z]")
}

func coreU64(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// ---------------------------------------------------------------------------
// Job endpoint shortcuts (JSON).

// coreEnqueue posts one job and requires 201.
func coreEnqueue(t testing.TB, base string, body map[string]any) coreJob {
	t.Helper()
	r := coreDoJSON(t, base, http.MethodPost, "/jobs", body)
	coreRequireStatus(t, r, http.StatusCreated)
	return r.Job(t)
}

// coreSimpleJob is a minimal enqueue body.
func coreSimpleJob(queue string, payload any) map[string]any {
	return map[string]any{"type": "test", "queue": queue, "payload": payload}
}

// coreEnqueueN bulk-enqueues n simple jobs (payload {"n": i}) on queue and requires 201.
func coreEnqueueN(t testing.TB, base, queue string, n int) []coreJob {
	t.Helper()
	jobs := make([]map[string]any, n)
	for i := range jobs {
		jobs[i] = coreSimpleJob(queue, map[string]any{"n": i})
	}
	return coreBulk(t, base, jobs)
}

// coreBulk posts /jobs/bulk and requires 201.
func coreBulk(t testing.TB, base string, jobs []map[string]any) []coreJob {
	t.Helper()
	r := coreDoJSON(t, base, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": jobs})
	coreRequireStatus(t, r, http.StatusCreated)
	return coreBulkJobs(t, r)
}

// coreBulkJobs decodes a {"jobs":[...]} body.
func coreBulkJobs(t testing.TB, r coreResp) []coreJob {
	t.Helper()
	f := r.Format(t)
	var raw map[string]any
	coreDecodeBytes(t, f, r.Body, &raw)
	require.Len(t, raw, 1, "bulk response must be exactly {\"jobs\":[...]}: %s", r)
	list, ok := raw["jobs"].([]any)
	require.True(t, ok, "bulk response jobs is not a list: %s", r)
	out := make([]coreJob, len(list))
	for i, item := range list {
		out[i] = coreJobFrom(t, f, coreEncode(t, f, item))
	}
	return out
}

// coreGet fetches GET /jobs/{id}: the job and true on 200, false on 404.
func coreGet(t testing.TB, base, id string) (coreJob, bool) {
	t.Helper()
	r := coreDoJSON(t, base, http.MethodGet, "/jobs/"+id, nil)
	if r.Status == http.StatusNotFound {
		coreRequireError(t, r, http.StatusNotFound, "job not found")
		return coreJob{}, false
	}
	coreRequireStatus(t, r, http.StatusOK)
	return r.Job(t), true
}

// coreMustGet fetches a job that must exist.
func coreMustGet(t testing.TB, base, id string) coreJob {
	t.Helper()
	j, ok := coreGet(t, base, id)
	require.True(t, ok, "job %s not found", id)
	return j
}

// coreAck acks one job and requires 204.
func coreAck(t testing.TB, base, id string) {
	t.Helper()
	r := coreRequest(t, nil, base, http.MethodPost, "/jobs/"+id+"/success", nil, nil)
	coreRequireNoContent(t, r)
}

// coreFail reports a failure (JSON) and returns the response.
func coreFail(t testing.TB, base, id string, body map[string]any) coreResp {
	t.Helper()
	return coreDoJSON(t, base, http.MethodPost, "/jobs/"+id+"/failure", body)
}

// coreQueues returns GET /queues.
func coreQueues(t testing.TB, base string) []string {
	t.Helper()
	r := coreDoJSON(t, base, http.MethodGet, "/queues", nil)
	coreRequireStatus(t, r, http.StatusOK)
	var body struct {
		Queues []string `json:"queues"`
	}
	r.Decode(t, &body)
	return body.Queues
}

// coreWaitStatus polls GET /jobs/{id} until the job has the given status
// (bounded: 10 s, 10 ms apart) and returns it.
func coreWaitStatus(t testing.TB, base, id, status string) coreJob {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last coreJob
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		j, ok := coreGet(t, base, id)
		if ok && j.Status == status {
			return j
		}
		last = j
		time.Sleep(10 * time.Millisecond)
	}
	require.Failf(t, "job status not reached", "job %s: want status %q, last seen %q", id, status, last.Status)
	return last
}

// coreNowMS is the local wall clock in ms (same machine as the server).
func coreNowMS() uint64 { return uint64(time.Now().UnixMilli()) }

// coreWaitUntilMS blocks until the local clock has reached ms (bounded to 60 s).
func coreWaitUntilMS(t testing.TB, ms uint64) {
	t.Helper()
	now := coreNowMS()
	require.Less(t, int64(ms)-int64(now), int64(60_000), "refusing to wait more than 60 s")
	if ms > now {
		time.Sleep(time.Duration(ms-now) * time.Millisecond)
	}
	for coreNowMS() < ms {
		time.Sleep(time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Payload canonical form, for comparing payloads across formats (§1.3).

// coreCanon maps a decoded JSON (json.Number) or msgpack value to a
// canonical form: maps with string keys, lists, strings, bools, nil, and
// numbers as "i:<decimal>" or "f:<shortest float>".
func coreCanon(t testing.TB, v any) any {
	t.Helper()
	switch x := v.(type) {
	case nil, bool, string:
		return x
	case json.Number:
		if i, ok := new(big.Int).SetString(string(x), 10); ok {
			return "i:" + i.String()
		}
		f, err := x.Float64()
		require.NoError(t, err)
		return coreCanonFloat(f)
	case float64:
		return coreCanonFloat(x)
	case float32:
		return coreCanonFloat(float64(x))
	case int8, int16, int32, int64, int:
		return "i:" + fmt.Sprint(x)
	case uint8, uint16, uint32, uint64, uint:
		return "i:" + fmt.Sprint(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = coreCanon(t, x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = coreCanon(t, val)
		}
		return out
	default:
		require.Failf(t, "unexpected payload value type", "%T %v", v, v)
		return nil
	}
}

func coreCanonFloat(f float64) any {
	if f == float64(int64(f)) && f >= -1e15 && f <= 1e15 {
		return "i:" + strconv.FormatInt(int64(f), 10)
	}
	return "f:" + strconv.FormatFloat(f, 'g', -1, 64)
}

// ---------------------------------------------------------------------------
// Take streams (§1.4, §3.4).

// coreFrame is one message read from a take stream.
type coreFrame struct {
	Job       *coreJob
	Heartbeat bool
	Raw       []byte // the frame bytes (job JSON/msgpack, or the heartbeat text)
	At        time.Time
	Err       error // set on the last frame when the stream ended
}

// coreStream is an open GET /jobs/take.
type coreStream struct {
	t      testing.TB
	Resp   *http.Response
	Opened time.Time // just before the request was sent
	cancel context.CancelFunc
	frames chan coreFrame
	stop   chan struct{}
	once   sync.Once
	done   chan struct{}
	ended  bool
}

// coreTakeOpts configures coreOpenTake.
type coreTakeOpts struct {
	Query    string // e.g. "queue=a&prefetch=2" (without '?')
	Accept   string // "" = no Accept header
	Client   *http.Client
	WorkerID string
}

// coreOpenTake opens a take stream, requires 200 and the expected stream
// Content-Type for the Accept header, and starts reading frames.
func coreOpenTake(t testing.TB, base string, o coreTakeOpts) *coreStream {
	t.Helper()
	s, resp := coreTryTake(t, base, o)
	if s == nil {
		require.Failf(t, "take stream not opened", "%s", resp)
	}
	return s
}

// coreTakeFormat is the stream format §1.4 assigns to an Accept value ("" when 406).
func coreTakeFormat(accept string) string {
	switch {
	case accept == "":
		return coreAcceptNDJSON
	case strings.Contains(accept, "text/event-stream"):
		return coreAcceptSSE
	case strings.Contains(accept, "application/vnd.zizq.msgpack-stream"), strings.Contains(accept, "application/msgpack"):
		return coreAcceptMsgpack
	case strings.Contains(accept, "application/x-ndjson"), strings.Contains(accept, "application/json"), strings.Contains(accept, "*/*"):
		return coreAcceptNDJSON
	}
	return ""
}

// coreTryTake opens a take stream; on a non-200 answer it returns nil and
// the fully read response.
func coreTryTake(t testing.TB, base string, o coreTakeOpts) (*coreStream, coreResp) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := base + "/jobs/take"
	if o.Query != "" {
		url += "?" + o.Query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if o.Accept != "" {
		req.Header.Set("Accept", o.Accept)
	}
	if o.WorkerID != "" {
		req.Header.Set("Worker-Id", o.WorkerID)
	}
	client := o.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{DisableCompression: true}}
	}
	opened := time.Now()
	// The status and headers must come at once, even on an idle stream (§3.4 step 1).
	timer := time.AfterFunc(15*time.Second, cancel)
	resp, err := client.Do(req)
	stopped := timer.Stop()
	if err != nil {
		cancel()
		require.NoError(t, err, "take request (headers must arrive immediately, within 15s)")
	}
	require.True(t, stopped, "take response headers did not arrive within 15s")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, coreResp{Status: resp.StatusCode, Header: resp.Header, Body: b, Proto: resp.Proto}
	}
	coreRequireServerHeader(t, resp.Header)
	ct := resp.Header.Get("Content-Type")
	want := coreTakeFormat(o.Accept)
	require.Equal(t, want, ct, "take stream Content-Type for Accept %q", o.Accept)
	s := &coreStream{
		t: t, Resp: resp, Opened: opened, cancel: cancel,
		frames: make(chan coreFrame, 4096), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go s.read(ct)
	t.Cleanup(s.Close)
	return s, coreResp{Status: resp.StatusCode, Header: resp.Header}
}

func (s *coreStream) push(f coreFrame) bool {
	f.At = time.Now()
	select {
	case s.frames <- f:
		return true
	case <-s.stop:
		return false
	}
}

func (s *coreStream) read(ct string) {
	defer close(s.done)
	defer close(s.frames)
	br := bufio.NewReaderSize(s.Resp.Body, 1<<16)
	var err error
	switch ct {
	case coreAcceptNDJSON:
		err = s.readNDJSON(br)
	case coreAcceptMsgpack:
		err = s.readMsgpack(br)
	case coreAcceptSSE:
		err = s.readSSE(br)
	default:
		err = fmt.Errorf("unknown stream content type %q", ct)
	}
	if err == nil {
		err = io.EOF
	}
	s.push(coreFrame{Err: err})
}

func (s *coreStream) readNDJSON(br *bufio.Reader) error {
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if len(line) > 0 {
				return fmt.Errorf("partial NDJSON line %q: %w", line, err)
			}
			return err
		}
		if len(line) == 1 {
			if !s.push(coreFrame{Heartbeat: true, Raw: line}) {
				return nil
			}
			continue
		}
		body := line[:len(line)-1]
		j, derr := coreDecodeStreamJob(coreJSON, body)
		if derr != nil {
			return derr
		}
		if !s.push(coreFrame{Job: &j, Raw: body}) {
			return nil
		}
	}
}

func (s *coreStream) readMsgpack(br *bufio.Reader) error {
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			if !s.push(coreFrame{Heartbeat: true, Raw: hdr[:]}) {
				return nil
			}
			continue
		}
		if n > 64<<20 {
			return fmt.Errorf("msgpack frame length %d too large", n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("short msgpack frame: %w", err)
		}
		j, derr := coreDecodeStreamJob(coreMsgpack, body)
		if derr != nil {
			return derr
		}
		if !s.push(coreFrame{Job: &j, Raw: body}) {
			return nil
		}
	}
}

func (s *coreStream) readSSE(br *bufio.Reader) error {
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if line != "" {
				return fmt.Errorf("partial SSE line %q: %w", line, err)
			}
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		if line != "" {
			lines = append(lines, line)
			continue
		}
		if len(lines) == 0 {
			continue
		}
		ev := lines
		lines = nil
		var data []string
		var comments []string
		for _, l := range ev {
			switch {
			case strings.HasPrefix(l, ":"):
				comments = append(comments, l)
			case strings.HasPrefix(l, "data: "):
				data = append(data, strings.TrimPrefix(l, "data: "))
			default:
				return fmt.Errorf("unexpected SSE line %q", l)
			}
		}
		if len(data) == 0 {
			if !s.push(coreFrame{Heartbeat: true, Raw: []byte(strings.Join(comments, "\n"))}) {
				return nil
			}
			continue
		}
		if len(comments) > 0 || len(data) != 1 {
			return fmt.Errorf("unexpected SSE event %q", ev)
		}
		j, derr := coreDecodeStreamJob(coreJSON, []byte(data[0]))
		if derr != nil {
			return derr
		}
		if !s.push(coreFrame{Job: &j, Raw: []byte(data[0])}) {
			return nil
		}
	}
}

// coreDecodeStreamJob decodes a frame without a testing.TB (reader goroutine).
func coreDecodeStreamJob(f coreFormat, b []byte) (coreJob, error) {
	var j coreJob
	decode := func(v any) error {
		if f == coreMsgpack {
			return msgpack.Unmarshal(b, v)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		return dec.Decode(v)
	}
	if err := decode(&j); err != nil {
		return j, fmt.Errorf("bad job frame %q: %w", b, err)
	}
	if err := decode(&j.Raw); err != nil {
		return j, fmt.Errorf("bad job frame %q: %w", b, err)
	}
	if !coreIDRe.MatchString(j.ID) {
		return j, fmt.Errorf("job frame with bad id %q: %q", j.ID, b)
	}
	for k, v := range j.Raw {
		if v == nil && k != "payload" {
			return j, fmt.Errorf("job frame has field %q as null (optional fields are omitted, §2.6): %q", k, b)
		}
	}
	return j, nil
}

// Next returns the next frame, or false if none arrived within d.
// A frame with Err set means the stream ended.
func (s *coreStream) Next(d time.Duration) (coreFrame, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case f, ok := <-s.frames:
		if !ok {
			return coreFrame{Err: io.EOF}, true
		}
		if f.Err != nil {
			s.ended = true
		}
		return f, true
	case <-timer.C:
		return coreFrame{}, false
	}
}

// NextJobFrame skips heartbeats and returns the next job frame within d.
func (s *coreStream) NextJobFrame(t testing.TB, d time.Duration) coreFrame {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			require.FailNow(t, "no job on take stream", "within %v", d)
		}
		f, ok := s.Next(left)
		if !ok {
			require.FailNow(t, "no job on take stream", "within %v", d)
		}
		require.NoError(t, f.Err, "take stream ended while waiting for a job")
		if f.Job != nil {
			return f
		}
	}
}

// NextJob is NextJobFrame returning the job.
func (s *coreStream) NextJob(t testing.TB, d time.Duration) coreJob {
	t.Helper()
	return *s.NextJobFrame(t, d).Job
}

// Jobs reads exactly n jobs, waiting at most d in total.
func (s *coreStream) Jobs(t testing.TB, n int, d time.Duration) []coreJob {
	t.Helper()
	deadline := time.Now().Add(d)
	out := make([]coreJob, 0, n)
	for len(out) < n {
		left := time.Until(deadline)
		if left <= 0 {
			require.FailNow(t, "too few jobs on take stream", "got %d of %d within %v", len(out), n, d)
		}
		f, ok := s.Next(left)
		if !ok {
			require.FailNow(t, "too few jobs on take stream", "got %d of %d within %v", len(out), n, d)
		}
		require.NoError(t, f.Err, "take stream ended after %d of %d jobs", len(out), n)
		if f.Job != nil {
			out = append(out, *f.Job)
		}
	}
	return out
}

// NoJobFor asserts that no job frame arrives within d (heartbeats are fine,
// and at least one must arrive when requireHeartbeat is set, proving the
// stream is alive).
func (s *coreStream) NoJobFor(t testing.TB, d time.Duration, requireHeartbeat bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	beats := 0
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		f, ok := s.Next(left)
		if !ok {
			break
		}
		require.NoError(t, f.Err, "take stream ended")
		if f.Job != nil {
			require.FailNow(t, "unexpected job on take stream", "job %s (queue %q) arrived %v into a %v quiet period: %q",
				f.Job.ID, f.Job.Queue, d-time.Until(f.At), d, f.Raw)
		}
		beats++
	}
	if requireHeartbeat {
		require.Positive(t, beats, "no heartbeat within %v on an idle stream", d)
	}
}

// WaitEnd waits (at most d) for the server to end the stream.
func (s *coreStream) WaitEnd(t testing.TB, d time.Duration) {
	t.Helper()
	if s.ended {
		return
	}
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			require.FailNow(t, "take stream did not end", "within %v", d)
		}
		f, ok := s.Next(left)
		if !ok {
			require.FailNow(t, "take stream did not end", "within %v", d)
		}
		if f.Err != nil {
			return
		}
	}
}

// Close closes the stream from the client side (a disconnect).
func (s *coreStream) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.cancel()
		s.Resp.Body.Close()
		<-s.done
	})
}

// coreIDs returns the ids of jobs.
func coreIDs(jobs []coreJob) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// coreSorted returns a sorted copy.
func coreSorted(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------------------
// Raw HTTP/1.1 over TCP, to see exactly what the server writes.

// coreRawConn is a plain TCP connection for hand-written HTTP/1.1.
type coreRawConn struct {
	net.Conn
	br *bufio.Reader
}

func coreDialRaw(t testing.TB, addr string) *coreRawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	t.Cleanup(func() { c.Close() })
	return &coreRawConn{Conn: c, br: bufio.NewReader(c)}
}

// RoundTrip writes a raw request and reads one response with its body
// (http.ReadResponse knows 204 has no body: any stray bytes after a 204
// corrupt the next response on the connection).
func (c *coreRawConn) RoundTrip(t testing.TB, raw string) (*http.Response, []byte) {
	t.Helper()
	_, err := io.WriteString(c, raw)
	require.NoError(t, err)
	resp, err := http.ReadResponse(c.br, nil)
	require.NoError(t, err, "reading raw response")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, b
}
