package persistence

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// BenchmarkStoreBatchWrite commits batches of 1000 job records (~200-byte
// payloads, the harness's lifecycle shape) through the group committer of
// an in-memory store; b.N is the number of records.
func BenchmarkStoreBatchWrite(b *testing.B) {
	s, err := Open(Config{InMemory: true, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := []byte(`{"s":1,"t":1700000000000000000,"p":"` + strings.Repeat("x", 160) + `"}`)
	jobs := make([]protocol.Job, 1000)
	for i := range jobs {
		jobs[i] = protocol.Job{Type: "bench", Queue: "q", Priority: protocol.DefaultPriority, Status: protocol.StatusReady, Payload: payload, ReadyAt: 1700000000000}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	bytes := 0
	for n := 0; n < b.N; {
		batch := NewBatch(false)
		for i := range jobs {
			if n == b.N {
				break
			}
			jobs[i].ID = fmt.Sprintf("%020d", n)
			batch.putJob(&jobs[i])
			n++
		}
		bytes += batch.size
		if err := s.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/record")
}

// BenchmarkBudgetDeletes deletes budgets that each had a job bound to
// them, one transaction of 1,000 or 10,000 deletes at a time (as a wave of
// collected tenants reaches the committer), on a disk store; b.N is the
// number of budgets, so ns/op is the cost of one delete. It must not grow
// with the transaction: each delete looks up its pairs among the
// committed keys, not in the transaction's own writes.
func BenchmarkBudgetDeletes(b *testing.B) {
	for _, per := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("per_txn=%d", per), func(b *testing.B) {
			s, err := Open(Config{Dir: b.TempDir(), Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			for n := 0; n < b.N; n += per {
				b.StopTimer()
				batch := NewBatch(false)
				keys := make([]string, 0, per)
				for i := n; i < n+per && i < b.N; i++ {
					j := protocol.Job{ID: fmt.Sprintf("%020d", i), Type: "t", Queue: "q", Status: protocol.StatusReady, Payload: []byte("{}")}
					key := fmt.Sprintf("tenant-%d", i)
					j.Budgets = []protocol.Binding{{Key: key, Cost: 1}}
					batch.putJob(&j)
					batch.notePriority(&j)
					keys = append(keys, key)
				}
				if err := s.Commit(ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = NewBatch(false)
				for _, key := range keys {
					batch.DeleteBudget(key)
				}
				b.StartTimer()
				if err := s.Commit(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
