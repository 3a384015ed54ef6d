package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// apiClient speaks tollgate's HTTP API over one shared transport. The base
// URL can change (the restart scenario's server comes back on a new port).
type apiClient struct {
	hc         *http.Client
	tr         *http.Transport
	base       atomic.Pointer[string]
	reqTimeout time.Duration
	errs       *errorLog
}

// newAPIClient returns a client for HTTP/1.1 keep-alive or, with h2,
// HTTP/2 cleartext with prior knowledge (one multiplexed connection).
func newAPIClient(base string, h2 bool, reqTimeout time.Duration, conns int, errs *errorLog) *apiClient {
	tr := &http.Transport{
		Proxy:               nil, // loopback only: never go through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	p := new(http.Protocols)
	if h2 {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	tr.Protocols = p
	c := &apiClient{hc: &http.Client{Transport: tr}, tr: tr, reqTimeout: reqTimeout, errs: errs}
	c.setBase(base)
	return c
}

func (c *apiClient) setBase(base string) {
	c.base.Store(&base)
	c.tr.CloseIdleConnections()
}

func (c *apiClient) url(path string) string { return *c.base.Load() + path }

// response is a finished non-streaming exchange.
type response struct {
	status int
	body   []byte
}

// maxResponse bounds what is read of one response body.
const maxResponse = 64 << 20

// do sends one request with a body (nil for none) and reads the whole
// response, bounded by the request timeout.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return response{status: resp.StatusCode}, fmt.Errorf("read %s %s response: %w", method, path, err)
	}
	return response{status: resp.StatusCode, body: b}, nil
}

// openTake opens GET /jobs/take as an NDJSON stream. The caller closes the
// body; cancelling ctx ends the stream.
func (c *apiClient) openTake(ctx context.Context, queue string, prefetch int, workerID string) (*http.Response, error) {
	path := fmt.Sprintf("/jobs/take?prefetch=%d&queue=%s", prefetch, url.QueryEscape(queue))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(path), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	req.Header.Set("Worker-Id", workerID)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		c.errs.add("take", "GET", path, nil, resp.StatusCode, b, nil)
		return nil, fmt.Errorf("GET %s: status %d: %s", path, resp.StatusCode, clip(b, 200))
	}
	return resp, nil
}

// errorSample is one failed or surprising exchange, kept verbatim for the
// report so that a server bug can be filed with its request and response.
type errorSample struct {
	Op       string `json:"op"`
	Request  string `json:"request"`
	Status   int    `json:"status,omitempty"`
	Response string `json:"response,omitempty"`
	Err      string `json:"error,omitempty"`
	Count    int64  `json:"count"`
}

// errorLog keeps the first samples of each kind of error and counts all.
type errorLog struct {
	mu      sync.Mutex
	samples []*errorSample
	byKey   map[string]*errorSample
	total   int64
}

// maxErrorSamples bounds the distinct error kinds kept.
const maxErrorSamples = 20

func newErrorLog() *errorLog { return &errorLog{byKey: map[string]*errorSample{}} }

// add records an error. Samples are grouped by operation and status (or
// error text) so that a storm of identical failures shows up once with a
// count.
func (l *errorLog) add(op, method, path string, reqBody []byte, status int, respBody []byte, err error) {
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	key := fmt.Sprintf("%s|%d|%s", op, status, clip([]byte(errText), 60))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if s, ok := l.byKey[key]; ok {
		s.Count++
		return
	}
	if len(l.samples) >= maxErrorSamples {
		return
	}
	req := method + " " + path
	if len(reqBody) > 0 {
		req += " " + clip(reqBody, 400)
	}
	s := &errorSample{Op: op, Request: req, Status: status, Response: clip(respBody, 600), Err: errText, Count: 1}
	l.samples = append(l.samples, s)
	l.byKey[key] = s
}

func (l *errorLog) snapshot() ([]errorSample, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]errorSample, len(l.samples))
	for i, s := range l.samples {
		out[i] = *s
	}
	return out, l.total
}

// clip returns b as a string of at most n bytes, marking a cut.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + fmt.Sprintf("...(%d bytes)", len(b))
}
