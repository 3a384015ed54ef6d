package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// startOnDir starts an engine on the badger store in dir with the given
// payload cache bound; stop closes both.
func startOnDir(t *testing.T, dir string, cacheBytes int) (e *Engine, stop func()) {
	return startOnDirWith(t, dir, EngineConfig{PayloadCacheBytes: cacheBytes})
}

// startOnDirWith is startOnDir with a whole engine configuration.
func startOnDirWith(t *testing.T, dir string, cfg EngineConfig) (e *Engine, stop func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	e, err = Start(Config{Store: store, Logger: log, Engine: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return e, func() { e.Stop(); _ = store.Close() }
}

// takeAll opens a stream and returns the first n jobs delivered, as the
// delivery hands them over (before LoadPayloads).
func takeAll(t *testing.T, e *Engine, n int) []protocol.Job {
	t.Helper()
	batches := make(chan []protocol.Job, 1)
	id, err := e.OpenStream(context.Background(), &OpenStream{Prefetch: n, Deliver: func(j []protocol.Job) { batches <- j }})
	if err != nil {
		t.Fatal(err)
	}
	var got []protocol.Job
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case b := <-batches:
			got = append(got, b...)
			e.StreamWritten(id)
		case <-timeout:
			t.Fatalf("delivered %d of %d jobs", len(got), n)
		}
	}
	return got
}

func payloadOf(i int) []byte { return fmt.Appendf(nil, `{"i":%03d}`, i) }

// TestPayloadCacheBoundAndRestart enqueues 10 jobs in one bulk with a cache
// of 4 payloads: the first 4 keep theirs in memory, the other 6 are
// delivered without and read from the store by LoadPayloads. It then
// restarts with a cache of 2 and once more with a large cache, and every
// job always arrives with its own payload. Stored alone, the loaded inline
// payloads beyond the cache move apart at the second start and stay there;
// stored as a group, every payload stays in the group, so the large cache
// holds them all again.
func TestPayloadCacheBoundAndRestart(t *testing.T) {
	t.Run("alone", func(t *testing.T) { testPayloadCacheBoundAndRestart(t, 1000, 2) })
	t.Run("group", func(t *testing.T) { testPayloadCacheBoundAndRestart(t, 0, 10) })
}

func testPayloadCacheBoundAndRestart(t *testing.T, groupMinJobs, lastInMemory int) {
	dir := t.TempDir()
	size := payloadCost(payloadOf(0)) // what one kept payload costs the cache
	start := func(cacheBytes int) (*Engine, func()) {
		return startOnDirWith(t, dir, EngineConfig{PayloadCacheBytes: cacheBytes, GroupMinJobs: groupMinJobs})
	}
	e, stop := start(4 * size)
	jobs := make([]*protocol.NewJob, 10)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: payloadOf(i)}}
	}
	views, err := e.Enqueue(context.Background(), jobs, true)
	if err != nil {
		t.Fatal(err)
	}
	index := make(map[string]int)
	for i, v := range views {
		index[v.ID] = i
	}
	check := func(stage string, got []protocol.Job, wantInMemory int) {
		t.Helper()
		inMemory := 0
		for _, j := range got {
			if j.Payload != nil {
				inMemory++
			}
		}
		if inMemory != wantInMemory {
			t.Errorf("%s: %d jobs delivered with their payload from memory, want %d", stage, inMemory, wantInMemory)
		}
		loaded, err := e.LoadPayloads(got)
		if err != nil || len(loaded) != len(got) {
			t.Fatalf("%s: LoadPayloads: %d of %d, %v", stage, len(loaded), len(got), err)
		}
		for _, j := range loaded {
			if want := payloadOf(index[j.ID]); string(j.Payload) != string(want) {
				t.Errorf("%s: job %s has payload %s, want %s", stage, j.ID, j.Payload, want)
			}
		}
	}
	check("first run", takeAll(t, e, 10), 4)
	stop()

	e, stop = start(2 * size)
	check("restart with a smaller cache", takeAll(t, e, 10), 2)
	stop()

	e, stop = start(1 << 20)
	check("restart with a large cache", takeAll(t, e, 10), lastInMemory)
	for id := range index {
		v, err := e.GetJob(context.Background(), id)
		if err != nil || v.Payload == nil || string(*v.Payload) != string(payloadOf(index[id])) {
			t.Errorf("GetJob %s: %+v, %v", id, v, err)
		}
	}
	stop()
}

// TestRestartMovesManyPayloadsApart restarts a store holding 20 MiB of
// inline payloads with a cache of 1 KiB: moving them apart is more than
// badger takes in one transaction, so the load must commit it in chunks.
// Every job must come back with its payload.
func TestRestartMovesManyPayloadsApart(t *testing.T) {
	dir := t.TempDir()
	e, stop := startOnDir(t, dir, 64<<20)
	pad := strings.Repeat("x", 1000)
	const n = 20000
	var ids []string
	for left := n; left > 0; left -= 1000 {
		jobs := make([]*protocol.NewJob, 1000)
		for i := range jobs {
			jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority,
				Payload: fmt.Appendf(nil, `{"n":%d,"p":"%s"}`, n-left+i, pad)}}
		}
		views, err := e.Enqueue(context.Background(), jobs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			ids = append(ids, v.ID)
		}
	}
	stop()

	e, stop = startOnDir(t, dir, 1024)
	defer stop()
	for _, k := range []int{0, 1, n / 2, n - 1} {
		v, err := e.GetJob(context.Background(), ids[k])
		want := fmt.Sprintf(`{"n":%d,"p":"%s"}`, k, pad)
		if err != nil || v.Payload == nil || string(*v.Payload) != want {
			t.Fatalf("job %d after the restart: %v", k, err)
		}
	}
	if got := len(takeAll(t, e, n)); got != n {
		t.Fatalf("%d jobs delivered after the restart, want %d", got, n)
	}
}
