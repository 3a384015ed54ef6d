package actors

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// TestStartWaitsForTheLoad: loading a backlog may take longer than one
// request may (RequestTimeout); the engine must still start. (At 41dffdc a
// 1M-job backlog on a busy machine took more than the 60 s default and the
// server exited with "startupStatsRequest: future: timeout"; here the
// request timeout is shrunk below the load of 5,000 jobs instead.)
func TestStartWaitsForTheLoad(t *testing.T) {
	dir := t.TempDir()
	e, stop := startOnDir(t, dir, 0)
	for range 5 {
		jobs := make([]*protocol.NewJob, 1000)
		for i := range jobs {
			jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`{}`)}}
		}
		if _, err := e.Enqueue(context.Background(), jobs, true); err != nil {
			t.Fatal(err)
		}
	}
	stop()

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e, err = Start(Config{Store: store, Logger: log, RequestTimeout: time.Microsecond})
	if err != nil {
		t.Fatalf("start on 5,000 jobs with a 1 µs request timeout: %v", err)
	}
	defer e.Stop()
	if got := e.Stats().Ready; got != 5000 {
		t.Fatalf("loaded %d ready jobs, want 5000", got)
	}
}
