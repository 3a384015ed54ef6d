package actors

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// benchEngine starts a real engine (actors, group committer) on an
// in-memory badger store.
func benchEngine(b *testing.B) *Engine { return benchEngineWith(b, EngineConfig{}) }

// benchEngineWith is benchEngine with the given engine config.
func benchEngineWith(b *testing.B, cfg EngineConfig) *Engine {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	e, err := Start(Config{Store: store, Logger: log, Engine: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Stop(); _ = store.Close() })
	return e
}

func benchJobs(n int, budgets []protocol.Binding) []*protocol.NewJob {
	jobs := make([]*protocol.NewJob, n)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "bench", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`{"n":1}`), Budgets: budgets}}
	}
	return jobs
}

// consume takes batches from a stream, reports them written and acks them
// in bulk, until n jobs were delivered.
func consume(b *testing.B, e *Engine, id uint64, batches chan []protocol.Job, n int) {
	b.Helper()
	ctx := context.Background()
	got := 0
	deadline := time.After(2 * time.Minute)
	for got < n {
		select {
		case jobs := <-batches:
			got += len(jobs)
			e.StreamWritten(id)
			ids := make([]string, len(jobs))
			for i := range jobs {
				ids[i] = jobs[i].ID
			}
			if nf, err := e.Ack(ctx, ids); err != nil || len(nf) > 0 {
				b.Fatalf("ack: %v %v", err, nf)
			}
		case <-deadline:
			b.Fatalf("only %d of %d jobs delivered", got, n)
		}
	}
}

// BenchmarkDispatch measures dispatch throughput through the real actors
// (enqueue in bulks of 1000 first, then one stream with prefetch 100 that
// acks each batch): unbudgeted jobs vs jobs on one budget vs on two, and on
// two with durable pool levels (SPEC §10.4).
func BenchmarkDispatch(b *testing.B) {
	loose := protocol.Definition{Allocation: protocol.MaxAllocation, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	rate := protocol.Definition{Allocation: protocol.MaxAllocation, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 1}}
	cases := []struct {
		name     string
		budgets  map[string]protocol.Definition
		bindings []protocol.Binding
		durable  bool
	}{
		{"unbudgeted", nil, nil, false},
		{"one_budget", map[string]protocol.Definition{"a": loose}, []protocol.Binding{{Key: "a", Cost: 1}}, false},
		{"two_budgets", map[string]protocol.Definition{"a": loose, "b": rate}, []protocol.Binding{{Key: "a", Cost: 1}, {Key: "b", Cost: 1}}, false},
		{"two_budgets_durable", map[string]protocol.Definition{"a": loose, "b": rate}, []protocol.Binding{{Key: "a", Cost: 1}, {Key: "b", Cost: 1}}, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := benchEngineWith(b, EngineConfig{DurablePools: c.durable})
			ctx := context.Background()
			for k, d := range c.budgets {
				if _, _, err := e.CreateBudget(ctx, k, d, false); err != nil {
					b.Fatal(err)
				}
			}
			n := b.N
			for left := n; left > 0; left -= 1000 {
				if _, err := e.Enqueue(ctx, benchJobs(min(left, 1000), c.bindings), true); err != nil {
					b.Fatal(err)
				}
			}
			batches := make(chan []protocol.Job, 1)
			b.ResetTimer()
			id, err := e.OpenStream(ctx, &OpenStream{Prefetch: 100, Deliver: func(j []protocol.Job) { batches <- j }})
			if err != nil {
				b.Fatal(err)
			}
			consume(b, e, id, batches, n)
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkTokenToDelivery measures the delay from a while_in_flight token
// coming back (the ack that frees it) to the parked job that was waiting for
// it being handed to its stream: release, wake, reserve, commit, persist,
// deliver. It reports p50 and p99.
func BenchmarkTokenToDelivery(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	def := protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	if _, _, err := e.CreateBudget(ctx, "one", def, false); err != nil {
		b.Fatal(err)
	}
	n := b.N + 1
	for left := n; left > 0; left -= 1000 {
		if _, err := e.Enqueue(ctx, benchJobs(min(left, 1000), []protocol.Binding{{Key: "one", Cost: 1}}), true); err != nil {
			b.Fatal(err)
		}
	}
	type delivery struct {
		at   time.Time
		jobs []protocol.Job
	}
	deliveries := make(chan delivery, 1)
	id, err := e.OpenStream(ctx, &OpenStream{Prefetch: 10, Deliver: func(j []protocol.Job) { deliveries <- delivery{time.Now(), j} }})
	if err != nil {
		b.Fatal(err)
	}
	first := <-deliveries
	e.StreamWritten(id)
	current := first.jobs[0].ID
	delays := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := e.Ack(ctx, []string{current}); err != nil {
			b.Fatal(err)
		}
		d := <-deliveries
		delays = append(delays, d.at.Sub(start))
		e.StreamWritten(id)
		if len(d.jobs) != 1 {
			b.Fatalf("budget of 1 delivered %d jobs at once", len(d.jobs))
		}
		current = d.jobs[0].ID
	}
	b.StopTimer()
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds()), "p99-µs")
}
