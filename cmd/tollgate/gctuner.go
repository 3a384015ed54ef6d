package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// gcTuner bounds how far the heap may grow past its live size between two
// collections. Go's default (GOGC=100) lets it double: fine for a small
// heap, but a server holding a million queued jobs in 1 GiB of live heap
// would then use 2 GiB. After each collection the tuner sets GOGC so that
// the growth allowed is at most headroom bytes, between minPercent and 100:
// small heaps keep Go's default, large ones collect more often.
//
// It runs off a finalizer that re-arms itself after every collection, so
// it costs nothing between collections and never polls.
type gcTuner struct {
	headroom   uint64
	minPercent int
	current    atomic.Int64

	mu      sync.Mutex // orders adjust against stop
	stopped bool
	sample  []metrics.Sample
}

// newGCTuner returns a tuner for headroom bytes (0 disables it).
func newGCTuner(headroom uint64) *gcTuner {
	return &gcTuner{headroom: headroom, minPercent: 20,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

// percent is the GOGC that allows headroom bytes of growth over live.
func (t *gcTuner) percent(live uint64) int {
	if live == 0 {
		return 100
	}
	p := int(t.headroom * 100 / live)
	return max(t.minPercent, min(100, p))
}

// start arms the tuner; stop disarms it and restores GOGC=100.
func (t *gcTuner) start() {
	t.current.Store(100)
	t.arm()
}

func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetGCPercent(100)
}

// sentinel is garbage from birth: its finalizer runs after the next
// collection.
type sentinel struct{ _ [16]byte }

func (t *gcTuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.adjust() {
			t.arm()
		}
	})
}

// adjust sets GOGC from the live heap the last collection measured; it
// reports false once the tuner is stopped.
func (t *gcTuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return true
	}
	p := t.percent(t.sample[0].Value.Uint64())
	if int64(p) != t.current.Load() {
		t.current.Store(int64(p))
		debug.SetGCPercent(p)
	}
	return true
}
