package http

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// benchQueryJobs is the store size of the query benchmarks:
// TOLLGATE_BENCH_JOBS (default 20000, so `-benchtime=1x` runs stay quick;
// the figures in docs/PERFORMANCE.md use 1000000).
func benchQueryJobs(b *testing.B) int {
	n := 20000
	if v := os.Getenv("TOLLGATE_BENCH_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 {
			b.Fatalf("TOLLGATE_BENCH_JOBS=%q: want an integer >= 10", v)
		}
	}
	return n
}

// queryBenchServer writes n job records straight into an on-disk badger
// store in b.TempDir() (10 queues q, q1..q9; every other job ready, the
// others scheduled an hour ahead; ~40-byte payloads), starts the engine on
// it (the normal startup load) and returns the echo handler.
func queryBenchServer(b *testing.B, n int) *echo.Echo {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{Dir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	now := uint64(start.UnixMilli())
	ids := protocol.NewIDGenerator()
	const chunk = 10000
	for i := 0; i < n; i += chunk {
		batch := persistence.NewBatch(false)
		for k := i; k < min(i+chunk, n); k++ {
			j := &protocol.Job{ID: ids.Next(now), Type: "t" + strconv.Itoa(k%3), Queue: "q", Priority: uint16(k % 5),
				Status: protocol.StatusReady, ReadyAt: now, Payload: fmt.Appendf(nil, `{"n":%d,"p":"0123456789abcdef"}`, k)}
			if k%10 != 0 {
				j.Queue = "q" + strconv.Itoa(k%10)
			}
			if k%2 == 1 {
				j.Status, j.ReadyAt = protocol.StatusScheduled, now+uint64(time.Hour/time.Millisecond)
			}
			batch.Enqueued([]*protocol.Job{j}, nil, 0)
		}
		if err := store.Commit(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	wrote := time.Since(start)
	engine, err := actors.Start(actors.Config{Store: store, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	// the engine loads its jobs in the background: the first query would
	// wait for the whole load, and its time count as the query's
	<-engine.Loaded()
	if err := engine.LoadErr(); err != nil {
		b.Fatal(err)
	}
	// the engine hands the load's garbage back to the OS just after it
	// (a full collection, off its actor): let that be over, so that the
	// first sub-benchmark times queries, not the collection
	debug.FreeOSMemory()
	b.Logf("%d jobs: written in %v, engine loaded in %v", n, wrote.Round(time.Millisecond), (time.Since(start) - wrote).Round(time.Millisecond))
	e, api := New(Config{Version: "bench", Logger: log}, engine)
	b.Cleanup(func() {
		api.Shutdown()
		engine.Stop()
		_ = store.Close()
	})
	return e
}

// BenchmarkQuery times GET /jobs?status=ready&limit=50, the first pages
// of a type's and a queue's jobs, GET /jobs/count?type=t1,
// GET /jobs/count?queue=q, GET /metrics and GET /jobs/count?status=ready on a store of TOLLGATE_BENCH_JOBS jobs (default
// 20000). The 1M figures: TOLLGATE_BENCH_JOBS=1000000 go test -run='^$'
// -bench=BenchmarkQuery -benchtime=2s -count=3 ./http/
func BenchmarkQuery(b *testing.B) {
	n := benchQueryJobs(b)
	e := queryBenchServer(b, n)
	get := func(b *testing.B, path, want string) string {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		if want != "" && strings.TrimSpace(rec.Body.String()) != want {
			b.Fatalf("%s: got %s, want %s", path, rec.Body.String(), want)
		}
		return rec.Body.String()
	}
	b.Run("list_ready_50", func(b *testing.B) {
		for b.Loop() {
			body := get(b, "/jobs?status=ready&limit=50", "")
			if c := strings.Count(body, `"status":"ready"`); c != 50 {
				b.Fatalf("page has %d ready jobs, want 50", c)
			}
		}
	})
	// the jobs of a type, and of a queue, in ID order: a merge of the
	// indexes of each (queue, type) pair (actors/idwalk.go)
	b.Run("list_type_50", func(b *testing.B) {
		for b.Loop() {
			body := get(b, "/jobs?type=t1&limit=50", "")
			if c := strings.Count(body, `"type":"t1"`); c != 50 {
				b.Fatalf("page has %d jobs of type t1, want 50", c)
			}
		}
	})
	b.Run("list_queue_50", func(b *testing.B) {
		for b.Loop() {
			body := get(b, "/jobs?queue=q3&limit=50", "")
			if c := strings.Count(body, `"queue":"q3"`); c != 50 {
				b.Fatalf("page has %d jobs of queue q3, want 50", c)
			}
		}
	})
	b.Run("count_type", func(b *testing.B) {
		want := fmt.Sprintf(`{"count":%d}`, (n+1)/3)
		for b.Loop() {
			get(b, "/jobs/count?type=t1", want)
		}
	})
	b.Run("count_queue", func(b *testing.B) {
		want := fmt.Sprintf(`{"count":%d}`, (n+9)/10)
		for b.Loop() {
			get(b, "/jobs/count?queue=q", want)
		}
	})
	// the queue actor walks every unfinished job per scrape (observe.go)
	b.Run("metrics", func(b *testing.B) {
		for b.Loop() {
			get(b, "/metrics", "")
		}
	})
	// No counter answers this one: the queue actor walks every job's
	// in-memory record, selectScan jobs per message.
	b.Run("count_status_ready", func(b *testing.B) {
		want := fmt.Sprintf(`{"count":%d}`, (n+1)/2)
		for b.Loop() {
			get(b, "/jobs/count?status=ready", want)
		}
	})
}
