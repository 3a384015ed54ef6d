package main

import (
	"runtime"
	"testing"
	"time"
)

func TestGCTunerPercent(t *testing.T) {
	tu := newGCTuner(256 << 20)
	cases := []struct {
		live uint64
		want int
	}{
		{0, 100},
		{100 << 20, 100}, // small heap: Go's default
		{256 << 20, 100}, // growth of 256 MiB is 100 %
		{512 << 20, 50},  // 256 MiB of 512 MiB
		{1 << 30, 25},    // 256 MiB of 1 GiB
		{4 << 30, 20},    // floor
		{1000 << 30, 20}, // floor
	}
	for _, c := range cases {
		if got := tu.percent(c.live); got != c.want {
			t.Errorf("percent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// TestGCTunerFollowsCollections checks the tuner re-arms itself: after a
// few collections it has run adjust each time and set a percent for a heap
// whose headroom of 1 byte makes any live heap "large".
func TestGCTunerFollowsCollections(t *testing.T) {
	tu := newGCTuner(1)
	tu.start()
	defer tu.stop()
	deadline := time.Now().Add(10 * time.Second)
	for tu.current.Load() != int64(tu.minPercent) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after collections, want %d", tu.current.Load(), tu.minPercent)
		}
		runtime.GC()
		runtime.Gosched()
	}
}
