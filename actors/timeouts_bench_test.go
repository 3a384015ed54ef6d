//go:build unix

package actors

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// processCPU is the CPU time this process used so far (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkJobTimeouts measures what a deadline costs the queue core: one
// arm at dispatch and one disarm at the ack, with n other jobs in flight
// holding deadlines. The cost must not grow with n (timers, not scans).
func BenchmarkJobTimeouts(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("in_flight=%d", n), func(b *testing.B) {
			e, _ := testEngine(EngineConfig{DefaultJobTimeout: time.Minute})
			entries := make([]*entry, n+b.N)
			for i := range entries {
				entries[i] = &entry{jb: &protocol.Job{ID: testID(i), Queue: "q"}}
			}
			for i := 0; i < n; i++ {
				e.armTimeout(uint64(i), entries[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for i := 0; i < b.N; i++ {
				en := entries[n+i]
				e.armTimeout(uint64(n+i), en)
				// the ack of the job armed longest ago
				e.disarmTimeout(entries[i].full().ID)
			}
			// wall time is meaningless on a loaded machine; CPU time is not
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
