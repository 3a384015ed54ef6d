// Package apitest is the one HTTP client of cmd/tollgate's black-box tests.
// It speaks plain HTTP to a tollgate process started by servertest: JSON and
// msgpack requests (Request, Call, DoJSON, DoMsgpack) and checks of their
// responses (RequireStatus, RequireError, Object, ...), a typed view of the
// job object, job endpoint shortcuts, and readers for the three take-stream
// formats (NDJSON, length-prefixed msgpack, SSE). The per-area helper files
// of the tests build domain shortcuts on it; none has a client of its own,
// except the fault load's, which runs outside the test goroutine and
// reports errors instead of failing the test.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/protocol/prototest"
	"github.com/vmihailenco/msgpack/v5"
)

const (
	CTJSON    = "application/json"
	CTMsgpack = "application/msgpack"

	AcceptNDJSON  = "application/x-ndjson"
	AcceptMsgpack = "application/vnd.zizq.msgpack-stream"
	AcceptSSE     = "text/event-stream"

	// HeartbeatFlag makes take-stream heartbeats fast enough to observe
	// and keeps idle streams visibly alive in "no job arrives" assertions.
	HeartbeatFlag = "--heartbeat-interval"
	Heartbeat     = "100ms"
)

// Format is a request/response body format for non-streaming endpoints.
type Format string

const (
	JSON    Format = "json"
	Msgpack Format = "msgpack"
)

var Formats = []Format{JSON, Msgpack}

// HTTP is the HTTP/1.1 client used for every non-streaming request.
var HTTP = &http.Client{Transport: &http.Transport{
	MaxIdleConnsPerHost: 32,
	DisableCompression:  true,
}}

// Response is a fully read response.
type Response struct {
	Method, Path     string // of the request
	Status           int
	Header           http.Header
	Body             []byte
	Proto            string
	ContentLength    int64
	TransferEncoding []string
}

// Request sends one request with the given raw body and headers
// (a nil body sends no body) and reads the whole response.
func Request(t testing.TB, client *http.Client, base, method, path string, body []byte, hdr map[string]string) Response {
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
		client = HTTP
	}
	resp, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "reading body of %s %s", method, path)
	return Response{
		Method: method, Path: path, Status: resp.StatusCode, Header: resp.Header, Body: b, Proto: resp.Proto,
		ContentLength: resp.ContentLength, TransferEncoding: resp.TransferEncoding,
	}
}

// Encode encodes v in the given format. A []byte or a string is sent
// verbatim.
func Encode(t testing.TB, f Format, v any) []byte {
	t.Helper()
	switch b := v.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	}
	if f == Msgpack {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return b
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// Call sends body (nil = no body) encoded in format f, with Accept and
// Content-Type set to f, and returns the response.
func Call(t testing.TB, base string, f Format, method, path string, body any) Response {
	t.Helper()
	ct := CTJSON
	if f == Msgpack {
		ct = CTMsgpack
	}
	hdr := map[string]string{"Accept": ct}
	var raw []byte
	if body != nil {
		raw = Encode(t, f, body)
		hdr["Content-Type"] = ct
	}
	return Request(t, nil, base, method, path, raw, hdr)
}

// DoJSON is Call in JSON.
func DoJSON(t testing.TB, base, method, path string, body any) Response {
	t.Helper()
	return Call(t, base, JSON, method, path, body)
}

// DoMsgpack is Call in msgpack.
func DoMsgpack(t testing.TB, base, method, path string, body any) Response {
	t.Helper()
	return Call(t, base, Msgpack, method, path, body)
}

// DecodeBytes decodes b as JSON (numbers as json.Number) or msgpack.
func DecodeBytes(t testing.TB, f Format, b []byte, v any) {
	t.Helper()
	if f == Msgpack {
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
func (r Response) Format(t testing.TB) Format {
	t.Helper()
	switch ct := r.Header.Get("Content-Type"); ct {
	case CTJSON:
		return JSON
	case CTMsgpack:
		return Msgpack
	default:
		require.Failf(t, "unexpected Content-Type", "%q (status %d, body %q)", ct, r.Status, r.Body)
		return ""
	}
}

// Decode decodes the body according to the response Content-Type.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	DecodeBytes(t, r.Format(t), r.Body, v)
}

// Map decodes the body into a generic map.
func (r Response) Map(t testing.TB) map[string]any {
	t.Helper()
	m := map[string]any{}
	r.Decode(t, &m)
	return m
}

// Job decodes the body as a job object.
func (r Response) Job(t testing.TB) Job {
	t.Helper()
	return JobFrom(t, r.Format(t), r.Body)
}

// String is for failure messages.
func (r Response) String() string {
	return fmt.Sprintf("%s %s -> status %d, Content-Type %q, body %q", r.Method, r.Path, r.Status, r.Header.Get("Content-Type"), r.Body)
}

// RequireStatus fails unless the status matches.
func RequireStatus(t testing.TB, r Response, want int) {
	t.Helper()
	require.Equal(t, want, r.Status, "unexpected status: %s", r)
}

// RequireError checks status, format and the exact §1.5 error body
// {"error": text}.
func RequireError(t testing.TB, r Response, status int, text string) {
	t.Helper()
	RequireStatus(t, r, status)
	m := r.Map(t)
	require.Equal(t, map[string]any{"error": text}, m, "error body: %s", r)
}

// RequireErrorPrefix checks status and that the body is exactly one
// `error` field whose text starts with prefix and goes on; it returns the
// text.
func RequireErrorPrefix(t testing.TB, r Response, status int, prefix string) string {
	t.Helper()
	RequireStatus(t, r, status)
	m := r.Map(t)
	require.Len(t, m, 1, "error body must have exactly one field: %s", r)
	msg, ok := m["error"].(string)
	require.True(t, ok, "error field missing or not a string: %s", r)
	require.True(t, strings.HasPrefix(msg, prefix), "error %q does not start with %q", msg, prefix)
	require.Greater(t, len(msg), len(prefix), "error %q has no detail after %q", msg, prefix)
	return msg
}

// Generic decodes a JSON or msgpack body (chosen by its exact
// Content-Type, which must be one of the two) into a generic value whose
// numbers are json.Number, so both formats compare the same way.
func Generic(t testing.TB, r Response) any {
	t.Helper()
	data := r.Body
	if r.Format(t) == Msgpack {
		var v any
		if err := msgpack.Unmarshal(r.Body, &v); err != nil {
			t.Fatalf("%v: invalid msgpack response: %v", r, err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%v: msgpack response not representable as JSON (maps must have string keys): %v", r, err)
		}
		data = j
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v: invalid JSON response: %v", r, err)
	}
	return v
}

// Object checks the status and decodes an object body as Generic does.
func Object(t testing.TB, r Response, status int) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%v: status %d, want %d", r, r.Status, status)
	}
	m, ok := Generic(t, r).(map[string]any)
	if !ok {
		t.Fatalf("%v: body is not an object", r)
	}
	return m
}

// RequireServerHeader checks `Server: tollgate/<version>` (§1.1).
func RequireServerHeader(t testing.TB, h http.Header) {
	t.Helper()
	v := h.Get("Server")
	require.True(t, strings.HasPrefix(v, "tollgate/") && len(v) > len("tollgate/"),
		"Server header %q does not match tollgate/<version>", v)
}

// RequireNoContent checks a 204 with no body and no body framing.
func RequireNoContent(t testing.TB, r Response) {
	t.Helper()
	RequireStatus(t, r, http.StatusNoContent)
	require.Empty(t, r.Body, "204 must have no body")
	require.Empty(t, r.TransferEncoding, "204 must have no Transfer-Encoding")
	require.Empty(t, r.Header.Get("Content-Length"), "204 must have no Content-Length header")
	RequireServerHeader(t, r.Header)
}

// ---------------------------------------------------------------------------
// The job object (§2.6).

// Backoff is a job's backoff object.
type Backoff struct {
	Exponent float64 `json:"exponent" msgpack:"exponent"`
	BaseMS   uint32  `json:"base_ms" msgpack:"base_ms"`
	JitterMS uint32  `json:"jitter_ms" msgpack:"jitter_ms"`
}

// Retention is a job's retention object.
type Retention struct {
	CompletedMS *uint64 `json:"completed_ms" msgpack:"completed_ms"`
	DeadMS      *uint64 `json:"dead_ms" msgpack:"dead_ms"`
}

// Job is the job object as a client reads it.
type Job struct {
	ID          string     `json:"id" msgpack:"id"`
	Type        string     `json:"type" msgpack:"type"`
	Queue       string     `json:"queue" msgpack:"queue"`
	Priority    uint16     `json:"priority" msgpack:"priority"`
	Status      string     `json:"status" msgpack:"status"`
	Payload     any        `json:"payload" msgpack:"payload"`
	ReadyAt     uint64     `json:"ready_at" msgpack:"ready_at"`
	Attempts    uint32     `json:"attempts" msgpack:"attempts"`
	RetryLimit  *uint32    `json:"retry_limit" msgpack:"retry_limit"`
	Backoff     *Backoff   `json:"backoff" msgpack:"backoff"`
	Retention   *Retention `json:"retention" msgpack:"retention"`
	DequeuedAt  *uint64    `json:"dequeued_at" msgpack:"dequeued_at"`
	FailedAt    *uint64    `json:"failed_at" msgpack:"failed_at"`
	CompletedAt *uint64    `json:"completed_at" msgpack:"completed_at"`
	PurgeAt     *uint64    `json:"purge_at" msgpack:"purge_at"`
	Duplicate   *bool      `json:"duplicate" msgpack:"duplicate"`
	Folded      *bool      `json:"folded" msgpack:"folded"`

	// Raw is the same object decoded generically, to check which keys are present.
	Raw map[string]any `json:"-" msgpack:"-"`
}

// Has reports whether the key was present in the wire object.
func (j Job) Has(key string) bool {
	_, ok := j.Raw[key]
	return ok
}

// JobFrom decodes b in format f as a job object and checks its required
// fields and that no field is sent as null.
func JobFrom(t testing.TB, f Format, b []byte) Job {
	t.Helper()
	var j Job
	DecodeBytes(t, f, b, &j)
	DecodeBytes(t, f, b, &j.Raw)
	for k, v := range j.Raw {
		if k != "payload" {
			require.NotNil(t, v, "field %q sent as null (optional fields are omitted, §2.6): %q", k, b)
		}
	}
	for _, k := range []string{"id", "type", "queue", "priority", "status", "ready_at", "attempts"} {
		require.True(t, j.Has(k), "job object lacks required field %q: %q", k, b)
	}
	RequireJobID(t, j.ID)
	return j
}

var idRe = regexp.MustCompile(`^[0-9a-z]{25}$`)

// RequireJobID checks the SCRU128 text form (§2.1).
func RequireJobID(t testing.TB, id string) {
	t.Helper()
	require.Regexp(t, idRe, id, "job id must be 25 chars of [0-9a-z]")
}

// U64 is *p, or 0 for nil.
func U64(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// ---------------------------------------------------------------------------
// Job endpoint shortcuts (JSON).

// Enqueue posts one job and requires 201.
func Enqueue(t testing.TB, base string, body map[string]any) Job {
	t.Helper()
	r := DoJSON(t, base, http.MethodPost, "/jobs", body)
	RequireStatus(t, r, http.StatusCreated)
	return r.Job(t)
}

// SimpleJob is a minimal enqueue body.
func SimpleJob(queue string, payload any) map[string]any {
	return map[string]any{"type": "test", "queue": queue, "payload": payload}
}

// EnqueueN bulk-enqueues n simple jobs (payload {"n": i}) on queue and requires 201.
func EnqueueN(t testing.TB, base, queue string, n int) []Job {
	t.Helper()
	jobs := make([]map[string]any, n)
	for i := range jobs {
		jobs[i] = SimpleJob(queue, map[string]any{"n": i})
	}
	return Bulk(t, base, jobs)
}

// Bulk posts /jobs/bulk and requires 201.
func Bulk(t testing.TB, base string, jobs []map[string]any) []Job {
	t.Helper()
	r := DoJSON(t, base, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": jobs})
	RequireStatus(t, r, http.StatusCreated)
	return BulkJobs(t, r)
}

// BulkJobs decodes a {"jobs":[...]} body.
func BulkJobs(t testing.TB, r Response) []Job {
	t.Helper()
	f := r.Format(t)
	var raw map[string]any
	DecodeBytes(t, f, r.Body, &raw)
	require.Len(t, raw, 1, "bulk response must be exactly {\"jobs\":[...]}: %s", r)
	list, ok := raw["jobs"].([]any)
	require.True(t, ok, "bulk response jobs is not a list: %s", r)
	out := make([]Job, len(list))
	for i, item := range list {
		out[i] = JobFrom(t, f, Encode(t, f, item))
	}
	return out
}

// Get fetches GET /jobs/{id}: the job and true on 200, false on 404.
func Get(t testing.TB, base, id string) (Job, bool) {
	t.Helper()
	r := DoJSON(t, base, http.MethodGet, "/jobs/"+id, nil)
	if r.Status == http.StatusNotFound {
		RequireError(t, r, http.StatusNotFound, "job not found")
		return Job{}, false
	}
	RequireStatus(t, r, http.StatusOK)
	return r.Job(t), true
}

// MustGet fetches a job that must exist.
func MustGet(t testing.TB, base, id string) Job {
	t.Helper()
	j, ok := Get(t, base, id)
	require.True(t, ok, "job %s not found", id)
	return j
}

// Ack acks one job and requires 204.
func Ack(t testing.TB, base, id string) {
	t.Helper()
	r := Request(t, nil, base, http.MethodPost, "/jobs/"+id+"/success", nil, nil)
	RequireNoContent(t, r)
}

// Fail reports a failure (JSON) and returns the response.
func Fail(t testing.TB, base, id string, body map[string]any) Response {
	t.Helper()
	return DoJSON(t, base, http.MethodPost, "/jobs/"+id+"/failure", body)
}

// Queues returns GET /queues.
func Queues(t testing.TB, base string) []string {
	t.Helper()
	r := DoJSON(t, base, http.MethodGet, "/queues", nil)
	RequireStatus(t, r, http.StatusOK)
	var body struct {
		Queues []string `json:"queues"`
	}
	r.Decode(t, &body)
	return body.Queues
}

// WaitStatus polls GET /jobs/{id} until the job has the given status
// (bounded: 10 s, 10 ms apart) and returns it.
func WaitStatus(t testing.TB, base, id, status string) Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last Job
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		j, ok := Get(t, base, id)
		if ok && j.Status == status {
			return j
		}
		last = j
		time.Sleep(10 * time.Millisecond)
	}
	require.Failf(t, "job status not reached", "job %s: want status %q, last seen %q", id, status, last.Status)
	return last
}

// NowMS is the local wall clock in ms (same machine as the server).
func NowMS() uint64 { return uint64(time.Now().UnixMilli()) }

// WaitUntilMS blocks until the local clock has reached ms (bounded to 60 s).
func WaitUntilMS(t testing.TB, ms uint64) {
	t.Helper()
	now := NowMS()
	require.Less(t, int64(ms)-int64(now), int64(60_000), "refusing to wait more than 60 s")
	if ms > now {
		time.Sleep(time.Duration(ms-now) * time.Millisecond)
	}
	for NowMS() < ms {
		time.Sleep(time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Payload canonical form, for comparing payloads across formats (§1.3).

// Canon maps a decoded JSON (json.Number) or msgpack value to a
// canonical form: maps with string keys, lists, strings, bools, nil, and
// numbers as "i:<decimal>" or "f:<shortest float>".
func Canon(t testing.TB, v any) any {
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
		return canonFloat(f)
	case float64:
		return canonFloat(x)
	case float32:
		return canonFloat(float64(x))
	case int8, int16, int32, int64, int:
		return "i:" + fmt.Sprint(x)
	case uint8, uint16, uint32, uint64, uint:
		return "i:" + fmt.Sprint(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = Canon(t, x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = Canon(t, val)
		}
		return out
	default:
		require.Failf(t, "unexpected payload value type", "%T %v", v, v)
		return nil
	}
}

func canonFloat(f float64) any {
	if f == float64(int64(f)) && f >= -1e15 && f <= 1e15 {
		return "i:" + strconv.FormatInt(int64(f), 10)
	}
	return "f:" + strconv.FormatFloat(f, 'g', -1, 64)
}

// ---------------------------------------------------------------------------
// Take streams (§1.4, §3.4).

// Frame is one message read from a take stream.
type Frame struct {
	Job       *Job
	Heartbeat bool
	Raw       []byte // the frame bytes (job JSON/msgpack, or the heartbeat text)
	At        time.Time
	Err       error // set on the last frame when the stream ended
}

// Stream is an open GET /jobs/take.
type Stream struct {
	t      testing.TB
	Resp   *http.Response
	Opened time.Time // just before the request was sent
	cancel context.CancelFunc
	frames chan Frame
	stop   chan struct{}
	once   sync.Once
	done   chan struct{}
	ended  bool
}

// TakeOpts configures OpenTake.
type TakeOpts struct {
	Query    string // e.g. "queue=a&prefetch=2" (without '?')
	Accept   string // "" = no Accept header
	Client   *http.Client
	WorkerID string
}

// TakeQuery is the query string of a take stream on queue with prefetch.
func TakeQuery(queue string, prefetch int) string {
	return fmt.Sprintf("queue=%s&prefetch=%d", url.QueryEscape(queue), prefetch)
}

// OpenTake opens a take stream, requires 200 and the expected stream
// Content-Type for the Accept header, and starts reading frames.
func OpenTake(t testing.TB, base string, o TakeOpts) *Stream {
	t.Helper()
	s, resp := TryTake(t, base, o)
	if s == nil {
		require.Failf(t, "take stream not opened", "%s", resp)
	}
	return s
}

// TakeFormat is the stream format §1.4 assigns to an Accept value ("" when 406).
func TakeFormat(accept string) string {
	switch {
	case accept == "":
		return AcceptNDJSON
	case strings.Contains(accept, "text/event-stream"):
		return AcceptSSE
	case strings.Contains(accept, "application/vnd.zizq.msgpack-stream"), strings.Contains(accept, "application/msgpack"):
		return AcceptMsgpack
	case strings.Contains(accept, "application/x-ndjson"), strings.Contains(accept, "application/json"), strings.Contains(accept, "*/*"):
		return AcceptNDJSON
	}
	return ""
}

// TryTake opens a take stream; on a non-200 answer it returns nil and
// the fully read response.
func TryTake(t testing.TB, base string, o TakeOpts) (*Stream, Response) {
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
		return nil, Response{Status: resp.StatusCode, Header: resp.Header, Body: b, Proto: resp.Proto}
	}
	RequireServerHeader(t, resp.Header)
	ct := resp.Header.Get("Content-Type")
	want := TakeFormat(o.Accept)
	require.Equal(t, want, ct, "take stream Content-Type for Accept %q", o.Accept)
	s := &Stream{
		t: t, Resp: resp, Opened: opened, cancel: cancel,
		frames: make(chan Frame, 4096), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go s.read(ct)
	t.Cleanup(s.Close)
	return s, Response{Status: resp.StatusCode, Header: resp.Header}
}

func (s *Stream) push(f Frame) bool {
	f.At = time.Now()
	select {
	case s.frames <- f:
		return true
	case <-s.stop:
		return false
	}
}

func (s *Stream) read(ct string) {
	defer close(s.done)
	defer close(s.frames)
	br := bufio.NewReaderSize(s.Resp.Body, 1<<16)
	var err error
	switch ct {
	case AcceptNDJSON:
		err = s.readNDJSON(br)
	case AcceptMsgpack:
		err = s.readMsgpack(br)
	case AcceptSSE:
		err = s.readSSE(br)
	default:
		err = fmt.Errorf("unknown stream content type %q", ct)
	}
	if err == nil {
		err = io.EOF
	}
	s.push(Frame{Err: err})
}

func (s *Stream) readNDJSON(br *bufio.Reader) error {
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if len(line) > 0 {
				return fmt.Errorf("partial NDJSON line %q: %w", line, err)
			}
			return err
		}
		if len(line) == 1 {
			if !s.push(Frame{Heartbeat: true, Raw: line}) {
				return nil
			}
			continue
		}
		body := line[:len(line)-1]
		if more, err := s.pushJob(JSON, body); !more {
			return err
		}
	}
}

func (s *Stream) readMsgpack(br *bufio.Reader) error {
	for {
		body, err := prototest.ReadMsgpackFrame(br)
		if err != nil {
			return fmt.Errorf("msgpack frame: %w", err)
		}
		if len(body) == 0 {
			if !s.push(Frame{Heartbeat: true, Raw: []byte{0, 0, 0, 0}}) {
				return nil
			}
			continue
		}
		if more, err := s.pushJob(Msgpack, body); !more {
			return err
		}
	}
}

func (s *Stream) readSSE(br *bufio.Reader) error {
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
			if !s.push(Frame{Heartbeat: true, Raw: []byte(strings.Join(comments, "\n"))}) {
				return nil
			}
			continue
		}
		if len(comments) > 0 || len(data) != 1 {
			return fmt.Errorf("unexpected SSE event %q", ev)
		}
		if more, err := s.pushJob(JSON, []byte(data[0])); !more {
			return err
		}
	}
}

// pushJob decodes one job frame in format f and pushes it; more is false
// when the reader must stop: on a decoding error (err) or once the stream
// is closed (err nil).
func (s *Stream) pushJob(f Format, body []byte) (more bool, err error) {
	j, err := decodeStreamJob(f, body)
	if err != nil {
		return false, err
	}
	return s.push(Frame{Job: &j, Raw: body}), nil
}

// decodeStreamJob decodes a frame without a testing.TB (reader goroutine).
func decodeStreamJob(f Format, b []byte) (Job, error) {
	var j Job
	decode := func(v any) error {
		if f == Msgpack {
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
	if !idRe.MatchString(j.ID) {
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
func (s *Stream) Next(d time.Duration) (Frame, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case f, ok := <-s.frames:
		if !ok {
			return Frame{Err: io.EOF}, true
		}
		if f.Err != nil {
			s.ended = true
		}
		return f, true
	case <-timer.C:
		return Frame{}, false
	}
}

// NextJobFrame skips heartbeats and returns the next job frame within d.
func (s *Stream) NextJobFrame(t testing.TB, d time.Duration) Frame {
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
func (s *Stream) NextJob(t testing.TB, d time.Duration) Job {
	t.Helper()
	return *s.NextJobFrame(t, d).Job
}

// Jobs reads exactly n jobs, waiting at most d in total.
func (s *Stream) Jobs(t testing.TB, n int, d time.Duration) []Job {
	t.Helper()
	deadline := time.Now().Add(d)
	out := make([]Job, 0, n)
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

// C delivers every frame as it is read: jobs, heartbeats, and, when the
// stream ends, one frame with Err set before C is closed.
func (s *Stream) C() <-chan Frame { return s.frames }

// Frames reads exactly n job frames, each within d of the one before.
func (s *Stream) Frames(t testing.TB, n int, d time.Duration) []Frame {
	t.Helper()
	out := make([]Frame, 0, n)
	for len(out) < n {
		out = append(out, s.NextJobFrame(t, d))
	}
	return out
}

// FrameIDs returns the ids of the jobs of frames.
func FrameIDs(frames []Frame) []string {
	ids := make([]string, len(frames))
	for i, f := range frames {
		ids[i] = f.Job.ID
	}
	return ids
}

// NoJobFor asserts that no job frame arrives within d (heartbeats are fine,
// and at least one must arrive when requireHeartbeat is set, proving the
// stream is alive); why, with any arguments, says why none may come.
func (s *Stream) NoJobFor(t testing.TB, d time.Duration, requireHeartbeat bool, why ...any) {
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
		require.NoError(t, f.Err, "take stream ended; %s", fmt.Sprint(why...))
		if f.Job != nil {
			require.FailNow(t, "unexpected job on take stream", "job %s (queue %q) arrived %v into a %v quiet period: %q; %s",
				f.Job.ID, f.Job.Queue, d-time.Until(f.At), d, f.Raw, fmt.Sprint(why...))
		}
		beats++
	}
	if requireHeartbeat {
		require.Positive(t, beats, "no heartbeat within %v on an idle stream", d)
	}
}

// WaitEnd waits (at most d) for the server to end the stream.
func (s *Stream) WaitEnd(t testing.TB, d time.Duration) {
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
func (s *Stream) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.cancel()
		s.Resp.Body.Close()
		<-s.done
	})
}

// IDs returns the ids of jobs.
func IDs(jobs []Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// Sorted returns a sorted copy.
func Sorted(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------------------
// Raw HTTP/1.1 over TCP, to see exactly what the server writes.

// RawConn is a plain TCP connection for hand-written HTTP/1.1.
type RawConn struct {
	net.Conn
	Reader *bufio.Reader // reads what the server sends on the connection
}

// DialRaw connects to addr; the connection closes with the test.
func DialRaw(t testing.TB, addr string) *RawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	t.Cleanup(func() { c.Close() })
	return &RawConn{Conn: c, Reader: bufio.NewReader(c)}
}

// RoundTrip writes a raw request and reads one response with its body
// (http.ReadResponse knows 204 has no body: any stray bytes after a 204
// corrupt the next response on the connection).
func (c *RawConn) RoundTrip(t testing.TB, raw string) (*http.Response, []byte) {
	t.Helper()
	_, err := io.WriteString(c, raw)
	require.NoError(t, err)
	resp, err := http.ReadResponse(c.Reader, nil)
	require.NoError(t, err, "reading raw response")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, b
}
