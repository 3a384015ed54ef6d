package actors

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// BenchmarkIdleBudgetMemory measures the live heap of an idle budget: the
// catalog entry, the budget actor and its core, nothing bound. It makes
// TOLLGATE_BENCH_BUDGETS (default 10000) time_based budgets the way a
// tenant's create_with does, reports heap bytes per budget, then deletes
// them all and reports what stays (per budget made). b.N is ignored.
// TOLLGATE_BENCH_HEAPPROFILE=path writes the loaded heap's profile there.
func BenchmarkIdleBudgetMemory(b *testing.B) {
	budgets := benchSize("TOLLGATE_BENCH_BUDGETS", 10000)
	e := benchEngine(b)
	ctx := context.Background()
	def := protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 1000}}
	base := heapInUse()
	for i := range budgets {
		if _, _, err := e.CreateBudget(ctx, fmt.Sprintf("tenant-%06d", i), def, false); err != nil {
			b.Fatal(err)
		}
	}
	// every actor has started (its Started message handled): ask one state
	// per budget would take long; the last one made answers after its start
	if _, err := e.BudgetState(ctx, fmt.Sprintf("tenant-%06d", budgets-1)); err != nil {
		b.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	loaded := heapInUse()
	if path := os.Getenv("TOLLGATE_BENCH_HEAPPROFILE"); path != "" {
		writeHeapProfile(b, path)
	}
	for i := range budgets {
		if err := e.DeleteBudget(ctx, fmt.Sprintf("tenant-%06d", i)); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	after := heapInUse()
	if path := os.Getenv("TOLLGATE_BENCH_HEAPPROFILE_AFTER"); path != "" {
		writeHeapProfile(b, path)
	}
	b.ReportMetric(float64(loaded-base)/float64(budgets), "B/budget")
	b.ReportMetric(float64(int64(after)-int64(base))/float64(budgets), "B/deleted-budget")
}
