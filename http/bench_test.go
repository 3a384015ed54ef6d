package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// benchServer serves the API of a real engine (in-memory badger store, no
// global in-flight limit) over loopback TCP.
func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	engine, err := actors.Start(actors.Config{Store: store, Logger: log, Engine: actors.EngineConfig{GlobalInFlightLimit: 0}})
	if err != nil {
		b.Fatal(err)
	}
	e, api := New(Config{Version: "bench", Logger: log}, engine)
	srv := httptest.NewServer(e)
	b.Cleanup(func() {
		api.Shutdown()
		srv.Close()
		engine.Stop()
		_ = store.Close()
	})
	return srv
}

// benchBulkBody is a POST /jobs/bulk body of n jobs with ~200-byte payloads,
// the shape of the bench harness's lifecycle scenario.
func benchBulkBody(n, seq int, budgets string) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"jobs":[`)
	pad := strings.Repeat("x", 160)
	for i := 0; i < n; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"type":"bench","queue":"q","payload":{"s":%d,"t":%d,"p":"%s"}%s}`, seq+i, time.Now().UnixNano(), pad, budgets)
	}
	buf.WriteString(`]}`)
	return buf.Bytes()
}

// BenchmarkHTTPLifecycle drives enqueue (bulk 1000) -> take (ndjson
// streams, prefetch 100) -> ack (bulk 100) end to end through the echo
// handlers; b.N is the number of jobs.
func BenchmarkHTTPLifecycle(b *testing.B) {
	benchHTTPLifecycle(b, "")
}

// BenchmarkHTTPMulti is BenchmarkHTTPLifecycle with every job on two loose
// budgets (while_in_flight and time_based).
func BenchmarkHTTPMulti(b *testing.B) {
	benchHTTPLifecycle(b, `,"budgets":[{"key":"wif","cost":1,"create_with":{"allocation":1000000,"strategy":{"type":"while_in_flight"}}},{"key":"tb","cost":1,"create_with":{"allocation":1000000,"strategy":{"type":"time_based","duration_ms":1000}}}]`)
}

func benchHTTPLifecycle(b *testing.B, budgets string) {
	const (
		batch    = 1000
		workers  = 8
		prefetch = 100
		ackBatch = 100
	)
	srv := benchServer(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	n := b.N
	bodies := make([][]byte, 0, n/batch+1)
	for i := 0; i < n; i += batch {
		bodies = append(bodies, benchBulkBody(min(batch, n-i), i, budgets))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/jobs/take?prefetch=%d", srv.URL, prefetch), nil)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 256<<10)
			ids := make([]string, 0, ackBatch)
			var frame struct {
				ID string `json:"id"`
			}
			flush := func() {
				body, _ := json.Marshal(map[string][]string{"ids": ids})
				r, err := client.Post(srv.URL+"/jobs/success", "application/json", bytes.NewReader(body))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if r.StatusCode != http.StatusNoContent {
					b.Errorf("ack: %d", r.StatusCode)
				}
				if acked.Add(int64(len(ids))) == int64(n) {
					close(done)
				}
				ids = ids[:0]
			}
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				line = line[:len(line)-1]
				if len(line) == 0 {
					if len(ids) > 0 {
						flush()
					}
					continue
				}
				if err := json.Unmarshal(line, &frame); err != nil {
					b.Errorf("frame: %v", err)
					return
				}
				ids = append(ids, frame.ID)
				// Ack when a prefetch window is complete or at a pause.
				if len(ids) >= ackBatch || br.Buffered() == 0 {
					flush()
				}
			}
		}()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var pwg sync.WaitGroup
	for p := 0; p < 2; p++ {
		pwg.Add(1)
		go func(p int) {
			defer pwg.Done()
			for i := p; i < len(bodies); i += 2 {
				r, err := client.Post(srv.URL+"/jobs/bulk", "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if r.StatusCode != http.StatusCreated {
					b.Errorf("enqueue: %d", r.StatusCode)
				}
			}
		}(p)
	}
	pwg.Wait()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("acked %d of %d", acked.Load(), n)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/el.Seconds(), "jobs/s")
	cancel()
	wg.Wait()
}

func TestBulkResponseAppendJSONMatchesEncodingJSON(t *testing.T) {
	one, two := true, false
	p := protocol.Payload(`{"a":"<b>"}`)
	for _, r := range []*bulkResponse{
		{}, {Jobs: []*protocol.JobView{}}, {Jobs: []*protocol.JobView{nil}},
		{Jobs: []*protocol.JobView{{ID: "a", Queue: "q", Type: "t", Status: protocol.StatusReady, Duplicate: &one, Folded: &two}, {ID: "b\"<", Payload: &p}}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := protocol.Encode(protocol.JSON, r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v\n got %s\nwant %s", err, got, want)
		}
	}
}
