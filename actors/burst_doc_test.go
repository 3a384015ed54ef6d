package actors

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// grantsWithin counts the cost-1 dispatches a fresh budget grants from 0 to
// endMs inclusive to a worker that asks every millisecond, as many times as
// it is granted.
func grantsWithin(b *budgetCore, endMs uint64) int {
	n := 0
	for now := uint64(0); now <= endMs; now++ {
		for {
			ref := JobRef{ID: fmt.Sprintf("j%07d", n), Queue: "q", Cost: 1}
			if !b.reserve(atMs(now), ref, true).granted {
				b.unpark(atMs(now), ref.ID, ref.Priority)
				break
			}
			n++
		}
	}
	return n
}

// TestBurstFiguresInAPIDoc checks the numbers docs/API.md gives under
// "Burst, with numbers": 50/s without burst lets 100 through in its first
// second, then 50 a second; burst 1 paces one every 20 ms (51 in the first
// second, counting both ends); 6/min gives 6 at once then one per 10 s.
func TestBurstFiguresInAPIDoc(t *testing.T) {
	require.Equal(t, 100, grantsWithin(newBudgetCore("a", timeBased(50, 1000, 0), atMs(0), nil), 1000))
	require.Equal(t, 150, grantsWithin(newBudgetCore("a", timeBased(50, 1000, 0), atMs(0), nil), 2000))
	require.Equal(t, 51, grantsWithin(newBudgetCore("b", timeBased(50, 1000, 1), atMs(0), nil), 1000))
	require.Equal(t, 6, grantsWithin(newBudgetCore("c", timeBased(6, 60000, 0), atMs(0), nil), 9999))
	require.Equal(t, 7, grantsWithin(newBudgetCore("c", timeBased(6, 60000, 0), atMs(0), nil), 10000))
}
