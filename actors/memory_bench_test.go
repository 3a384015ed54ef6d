package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// benchSize reads a size from the environment, or returns def.
func benchSize(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkParkedMemory measures the live heap of the many-budgets shape:
// TOLLGATE_BENCH_BUDGETS while_in_flight budgets of allocation 1 (default
// 1024), a stream that never acks, and TOLLGATE_BENCH_PARKED parked jobs per
// budget (default 100) with 200-byte payloads. It reports heap bytes per
// budget and per parked job (badger's memtables included). b.N is ignored.
// TOLLGATE_BENCH_HEAPPROFILE=path writes the loaded heap's profile there.
func BenchmarkParkedMemory(b *testing.B) {
	budgets := benchSize("TOLLGATE_BENCH_BUDGETS", 1024)
	parked := benchSize("TOLLGATE_BENCH_PARKED", 100)
	e := benchEngine(b)
	ctx := context.Background()
	payload := []byte(`{"s":"` + strings.Repeat("x", 190) + `"}`)

	base := heapInUse()
	def := protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	for i := range budgets {
		if _, _, err := e.CreateBudget(ctx, fmt.Sprintf("budget-%05d", i), def, false); err != nil {
			b.Fatal(err)
		}
	}
	withBudgets := heapInUse()

	delivered := make(chan int, 1024)
	stream, err := e.OpenStream(ctx, &OpenStream{Prefetch: 0, Deliver: func(j []protocol.Job) { delivered <- len(j) }})
	if err != nil {
		b.Fatal(err)
	}
	total := budgets * (parked + 1)
	batch := make([]*protocol.NewJob, 0, 1000)
	for i := range total {
		key := fmt.Sprintf("budget-%05d", i%budgets)
		batch = append(batch, &protocol.NewJob{Job: protocol.Job{Type: "bench", Queue: "q", Priority: protocol.DefaultPriority,
			Payload: append([]byte(nil), payload...), Budgets: []protocol.Binding{{Key: key, Cost: 1}}}})
		if len(batch) == cap(batch) || i == total-1 {
			if _, err := e.Enqueue(ctx, batch, true); err != nil {
				b.Fatal(err)
			}
			batch = make([]*protocol.NewJob, 0, 1000)
		}
	}
	for got := 0; got < budgets; {
		got += <-delivered // one job per budget in flight, the rest parked
		e.StreamWritten(stream)
	}
	// the refused jobs park asynchronously: wait (bounded) until all have
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, err := e.Metrics(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, q := range m.Queues {
			n += q.Parked
		}
		if n == budgets*parked {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("parked %d jobs, want %d", n, budgets*parked)
		}
		time.Sleep(250 * time.Millisecond) // a metrics scrape walks every job
	}
	loaded := heapInUse()
	if path := os.Getenv("TOLLGATE_BENCH_HEAPPROFILE"); path != "" {
		writeHeapProfile(b, path)
	}
	b.ReportMetric(float64(withBudgets-base)/float64(budgets), "B/budget")
	b.ReportMetric(float64(loaded-withBudgets)/float64(total), "B/job")
	b.ReportMetric(float64(loaded-base)/(1<<20), "heap-MiB")
}

// writeHeapProfile writes the live heap to path (go tool pprof reads it).
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQueuedMemory measures the live heap a queued job costs:
// TOLLGATE_BENCH_JOBS (default 1,000,000) unbudgeted jobs with
// TOLLGATE_BENCH_PAYLOAD-byte payloads (default 100), enqueued in bulks of 1000 into a store on disk, then the
// engine restarted on it (as a server serves a backlog). It reports the
// heap per job after the enqueue (B/job-enqueued; badger's memtables,
// which fill as it writes, included) and after the restart
// (B/job-restarted, once the background load ended), each against an
// engine started on an empty store; and the restart's time to serve
// (serve-s) and to load every job (start-s). b.N is ignored. TOLLGATE_BENCH_HEAPPROFILE=path writes the restarted
// heap's profile there.
func BenchmarkQueuedMemory(b *testing.B) {
	n := benchSize("TOLLGATE_BENCH_JOBS", 1_000_000)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(dir string) (*Engine, func()) {
		store, err := persistence.Open(persistence.Config{Dir: dir, Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		e, err := Start(Config{Store: store, Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		return e, func() { e.Stop(); _ = store.Close() }
	}
	loaded := func(e *Engine) {
		<-e.Loaded()
		if err := e.LoadErr(); err != nil {
			b.Fatal(err)
		}
	}
	_, stop := start(b.TempDir())
	base := heapInUse()
	stop()

	dir := b.TempDir()
	e, stop := start(dir)
	payload := []byte(`{"s":"` + strings.Repeat("x", max(0, benchSize("TOLLGATE_BENCH_PAYLOAD", 100)-8)) + `"}`)
	began := time.Now()
	enqueueBenchJobs(b, e, n, payload)
	enqueueTook := time.Since(began)
	enqueued := heapInUse()
	stop()

	began = time.Now()
	e, stop = start(dir)
	serveTook := time.Since(began) // the jobs load in the background
	loaded(e)
	startTook := time.Since(began)
	restarted := heapInUse()
	if path := os.Getenv("TOLLGATE_BENCH_HEAPPROFILE"); path != "" {
		writeHeapProfile(b, path)
	}
	stop()
	b.ReportMetric(float64(enqueued-base)/float64(n), "B/job-enqueued")
	b.ReportMetric(float64(restarted-base)/float64(n), "B/job-restarted")
	b.ReportMetric(enqueueTook.Seconds(), "enqueue-s")
	b.ReportMetric(serveTook.Seconds(), "serve-s")
	b.ReportMetric(startTook.Seconds(), "start-s")
}

// BenchmarkStreamMemory measures what an open take stream costs the
// engine: TOLLGATE_BENCH_STREAMS streams (default 1000), each with prefetch
// TOLLGATE_BENCH_PREFETCH (default 100) and that many jobs in flight on
// it, never acked (100-byte payloads). It reports the heap per stream with
// its jobs in flight, and per job in flight, against the same jobs queued
// before the streams opened. (The HTTP layer's buffer of frames not yet
// written, bounded by --stream-buffer-limit, is not part of it.) b.N is
// ignored.
func BenchmarkStreamMemory(b *testing.B) {
	streams := benchSize("TOLLGATE_BENCH_STREAMS", 1000)
	prefetch := benchSize("TOLLGATE_BENCH_PREFETCH", 100)
	e := benchEngine(b)
	ctx := context.Background()
	payload := []byte(`{"s":"` + strings.Repeat("x", 92) + `"}`)
	total := streams * prefetch
	enqueueBenchJobs(b, e, total, payload)
	queued := heapInUse()
	delivered := make(chan int, streams)
	for range streams {
		_, err := e.OpenStream(ctx, &OpenStream{Prefetch: prefetch, Deliver: func(j []protocol.Job) { delivered <- len(j) }})
		if err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.After(2 * time.Minute)
	for got := 0; got < total; {
		select {
		case n := <-delivered:
			got += n // the delivered copies are dropped: the writer's, not the engine's
		case <-deadline:
			b.Fatalf("delivered %d of %d jobs", got, total)
		}
	}
	open := heapInUse()
	b.ReportMetric(float64(open-queued)/float64(streams), "B/stream")
	b.ReportMetric(float64(open-queued)/float64(total), "B/job-in-flight")
}

// enqueueBenchJobs enqueues n plain jobs of queue q with the payload, in
// requests of 1,000.
func enqueueBenchJobs(b *testing.B, e *Engine, n int, payload []byte) {
	b.Helper()
	for left := n; left > 0; left -= 1000 {
		batch := make([]*protocol.NewJob, min(1000, left))
		for i := range batch {
			batch[i] = &protocol.NewJob{Job: protocol.Job{Type: "bench", Queue: "q", Priority: protocol.DefaultPriority,
				Payload: append([]byte(nil), payload...)}}
		}
		if _, err := e.Enqueue(context.Background(), batch, true); err != nil {
			b.Fatal(err)
		}
	}
}
