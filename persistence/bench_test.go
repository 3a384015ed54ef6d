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
