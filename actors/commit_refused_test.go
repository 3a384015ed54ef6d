package actors

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/persistence/storetest"
	"github.com/tollgate/tollgate/protocol"
)

// Defect 11 of issue 12: nothing the store refused may be listed, counted
// or delivered. These tests run the real actors on a badger store wrapped
// in storetest.Failing, which refuses commits on demand.

var errNoSpace = errors.New("no space left on device")

// startFailing starts an engine on a Failing wrapper around an in-memory
// badger store.
func startFailing(t *testing.T, cfg EngineConfig) (*Engine, *storetest.Failing) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inner, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	store := storetest.NewFailing(inner)
	e, err := Start(Config{Store: store, Logger: log, Engine: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(); _ = inner.Close() })
	return e, store
}

func refusedJob(queue, uniqueKey string, bindings ...protocol.NewBinding) *protocol.NewJob {
	j := protocol.Job{Type: "t", Queue: queue, Priority: protocol.DefaultPriority, Payload: []byte(`{"refused":true}`)}
	if uniqueKey != "" {
		j.UniqueKey, j.UniqueWhile = uniqueKey, protocol.UniqueQueued
	}
	for _, b := range bindings {
		j.Budgets = append(j.Budgets, protocol.Binding{Key: b.Key, Cost: b.Cost})
	}
	return &protocol.NewJob{Job: j, Bindings: bindings}
}

// wantStorageUnavailable checks err is the SPEC §1.5 503.
func wantStorageUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnavailable || !strings.HasPrefix(pe.Message, "storage unavailable: ") || !strings.Contains(pe.Message, errNoSpace.Error()) {
		t.Fatalf("%s: error %v, want 503 storage unavailable naming the reason", what, err)
	}
}

// wantStored checks what the queries see: the count of jobs and the IDs
// listed.
func wantStored(t *testing.T, e *Engine, want ...string) {
	t.Helper()
	ctx := context.Background()
	n, err := e.CountJobs(ctx, &protocol.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	views, _, err := e.ListJobs(ctx, &protocol.JobFilter{}, "", false, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range views {
		ids = append(ids, v.ID)
	}
	if n != uint64(len(want)) || strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("count %d, listed %v; want %d: %v", n, ids, len(want), want)
	}
}

// TestRefusedEnqueueIsInvisible: a single enqueue and a bulk (stored as a
// group) whose commits are refused answer 503, and afterwards their jobs are
// neither listed, counted nor delivered, their unique key is free and the
// budget their create_with made does not exist.
func TestRefusedEnqueueIsInvisible(t *testing.T) {
	e, store := startFailing(t, EngineConfig{})
	ctx := context.Background()
	def := protocol.Definition{Allocation: 5, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}

	store.FailAll(errNoSpace)
	_, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "u1")}, false)
	wantStorageUnavailable(t, "single enqueue", err)
	bulk := make([]*protocol.NewJob, 6)
	for i := range bulk {
		bulk[i] = refusedJob("q", "", protocol.NewBinding{Key: "made", Cost: 1, CreateWith: &def})
	}
	_, err = e.Enqueue(ctx, bulk, true)
	wantStorageUnavailable(t, "bulk enqueue", err)
	store.Heal()

	wantStored(t, e)
	if _, err := e.GetBudget(ctx, "made"); err == nil {
		t.Fatal("the budget a refused create_with made exists")
	}
	// the unique key is free: the same key enqueues a new job
	views, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "u1")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := views[0].Duplicate; d != nil && *d {
		t.Fatal("a refused job still holds its unique key")
	}
	good := views[0].ID
	wantStored(t, e, good)
	// the only job delivered is the accepted one, though every refused job
	// has a lower ID
	if got := takeAll(t, e, 1); got[0].ID != good {
		t.Fatalf("delivered %s, want the accepted job %s", got[0].ID, good)
	}
}

// TestRefusedEnqueueIsNotDelivered: with a stream waiting, a refused
// enqueue's job is dispatched at once, before its commit's outcome is known;
// it must still never reach the worker, whether the dispatch commit is
// refused as well (the store stays down) or accepted (only the enqueue's
// commit failed).
func TestRefusedEnqueueIsNotDelivered(t *testing.T) {
	for _, c := range []struct {
		name            string
		fail            func(*storetest.Failing)
		dispatchRefused bool
	}{
		{"store down", func(f *storetest.Failing) { f.FailAll(errNoSpace) }, true},
		{"one commit refused", func(f *storetest.Failing) { f.FailNext(1, errNoSpace) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, store := startFailing(t, EngineConfig{})
			ctx := context.Background()
			batches := make(chan []protocol.Job, 16)
			open := func() uint64 {
				id, err := e.OpenStream(ctx, &OpenStream{Prefetch: 10, Deliver: func(j []protocol.Job) { batches <- j }})
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			id := open()
			c.fail(store)
			_, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "")}, false)
			wantStorageUnavailable(t, "enqueue", err)
			store.Heal()
			views, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "")}, false)
			if err != nil {
				t.Fatal(err)
			}
			good := views[0].ID
			deadline := time.After(10 * time.Second)
			ended := 0
			for {
				select {
				case b := <-batches:
					if b == nil {
						// the server ended the stream: a worker reconnects
						ended++
						id = open()
						continue
					}
					for _, j := range b {
						if j.ID != good {
							t.Fatalf("delivered %s, whose enqueue was refused", j.ID)
						}
					}
					e.StreamWritten(id)
					if len(b) > 0 && b[len(b)-1].ID == good {
						wantStored(t, e, good)
						if c.dispatchRefused && ended != 1 {
							t.Fatalf("the stream was ended %d times, want once (its dispatch commit was refused)", ended)
						}
						return
					}
				case <-deadline:
					t.Fatalf("the accepted job %s was not delivered", good)
				}
			}
		})
	}
}
