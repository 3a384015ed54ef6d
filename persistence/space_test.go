package persistence

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanSpace: memtables are a sixteenth of the filesystem between 4 and
// 64 MiB; the headroom is eight of them and the reserve two, so a 64 MiB
// disk keeps 32 MiB free and every size leaves room for data.
func TestPlanSpace(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		total, memTable int64
	}{
		{64 * mib, 4 * mib},
		{128 * mib, 8 * mib},
		{512 * mib, 32 * mib},
		{1024 * mib, 64 * mib},
		{1 << 40, 64 * mib},
	} {
		p := planSpace(c.total)
		require.Equal(t, c.memTable, p.memTable, "total %d MiB", c.total/mib)
		require.Equal(t, 8*p.memTable, p.headroom)
		require.Equal(t, 2*p.memTable, p.reserve)
		require.Less(t, p.headroom+p.reserve, c.total, "no room left for data at %d MiB", c.total/mib)
	}
}
