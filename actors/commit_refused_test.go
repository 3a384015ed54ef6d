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

// TestRefusedColdJobsAreForgotten: the plain jobs of an enqueue go cold
// at its end (coldjobs.go), before the store answers; when it refuses the
// commit they must still be forgotten, though their entries are gone (the
// undo finds them by ID).
func TestRefusedColdJobsAreForgotten(t *testing.T) {
	// every waiting job compacts, and no payload stays in memory
	e, store := startFailing(t, EngineConfig{CompactFrom: 1, PayloadCacheBytes: 1})
	ctx := context.Background()
	store.FailAll(errNoSpace)
	_, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "")}, false)
	wantStorageUnavailable(t, "single enqueue", err)
	bulk := make([]*protocol.NewJob, 6)
	for i := range bulk {
		bulk[i] = refusedJob("q", "")
	}
	_, err = e.Enqueue(ctx, bulk, true)
	wantStorageUnavailable(t, "bulk enqueue", err)
	store.Heal()

	wantStored(t, e)
	views, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "")}, false)
	if err != nil {
		t.Fatal(err)
	}
	good := views[0].ID
	wantStored(t, e, good)
	if got := takeAll(t, e, 1); got[0].ID != good {
		t.Fatalf("delivered %s, want the accepted job %s", got[0].ID, good)
	}
}

// TestRefusedEnqueueIsNotDelivered: with a stream waiting, a refused
// enqueue's job is dispatched at once, before its commit's outcome is known;
// it must still never reach the worker, whether the dispatch commit is
// refused as well (the store stays down) or accepted (only the enqueue's
// commit failed), nor come back after a restart (the accepted dispatch
// wrote its record).
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
			dir := t.TempDir()
			e, store, stop := startFailingOnDir(t, dir)
			defer func() { stop() }()
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
						// nor does it come back from the store
						stop()
						e, _, stop = startFailingOnDir(t, dir)
						wantStored(t, e, good)
						return
					}
				case <-deadline:
					t.Fatalf("the accepted job %s was not delivered", good)
				}
			}
		})
	}
}

// startFailingOnDir is startFailing on a badger store in dir; stop closes
// both, so the test can start again on the same data.
func startFailingOnDir(t *testing.T, dir string) (*Engine, *storetest.Failing, func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inner, err := persistence.Open(persistence.Config{Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	store := storetest.NewFailing(inner)
	e, err := Start(Config{Store: store, Logger: log, Engine: EngineConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	return e, store, func() { e.Stop(); _ = inner.Close() }
}

// TestRefusedFinishesLeaveJobs: acks (one, and several at once), a failure,
// a delete and a patch of in-flight jobs, lone and group members, whose
// commits are refused answer 503; every job is still listed and counted,
// unchanged, and is delivered again (the store still has it in flight,
// which a restart would turn into ready). A refused ack of a group member
// must not let its siblings' acks delete the group it still lives in: after
// they are acked and the engine restarts on the same data, it is there.
func TestRefusedFinishesLeaveJobs(t *testing.T) {
	dir := t.TempDir()
	e, store, stop := startFailingOnDir(t, dir)
	defer func() { stop() }() // the stop of the last start
	ctx := context.Background()
	var all []string
	for range 3 {
		views, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "")}, false)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, views[0].ID)
	}
	group := []*protocol.NewJob{refusedJob("q", ""), refusedJob("q", ""), refusedJob("q", ""), refusedJob("q", "")}
	views, err := e.Enqueue(ctx, group, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		all = append(all, v.ID)
	}
	batches := make(chan []protocol.Job, 16)
	stream, err := e.OpenStream(ctx, &OpenStream{Prefetch: 20, Deliver: func(j []protocol.Job) { batches <- j }})
	if err != nil {
		t.Fatal(err)
	}
	take := func(n int) map[string]bool {
		t.Helper()
		got := map[string]bool{}
		deadline := time.After(10 * time.Second)
		for len(got) < n {
			select {
			case b := <-batches:
				for _, j := range b {
					got[j.ID] = true
				}
				e.StreamWritten(stream)
			case <-deadline:
				t.Fatalf("delivered %d of %d jobs", len(got), n)
			}
		}
		return got
	}
	take(len(all))
	lone, members := all[:3], all[3:]

	// Each request's commit alone is refused; the job it named comes back
	// and is dispatched again (that commit is accepted) before the next.
	refuse := func(what string, op func() error, ids ...string) {
		t.Helper()
		store.FailNext(1, errNoSpace)
		wantStorageUnavailable(t, what, op())
		again := take(len(ids))
		for _, id := range ids {
			if !again[id] {
				t.Fatalf("%s: job %s was not delivered again (got %v)", what, id, again)
			}
		}
	}
	refuse("ack", func() error { _, err := e.Ack(ctx, []string{lone[0]}); return err }, lone[0])
	refuse("bulk ack", func() error { _, err := e.Ack(ctx, []string{members[0], lone[1]}); return err }, members[0], lone[1])
	msg := "boom"
	refuse("failure", func() error {
		_, err := e.Fail(ctx, lone[2], &protocol.FailureRequest{Message: &msg})
		return err
	}, lone[2])
	refuse("delete", func() error { return e.DeleteJob(ctx, members[1]) }, members[1])
	patch, err := protocol.DecodeJobPatch(protocol.JSON, []byte(`{"queue":"moved","priority":5}`))
	if err != nil {
		t.Fatal(err)
	}
	refuse("patch", func() error { _, err := e.PatchJob(ctx, members[2], patch); return err }, members[2])

	wantStored(t, e, all...)
	for _, id := range []string{lone[2], members[2]} {
		v, err := e.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Queue != "q" || v.Attempts != 0 {
			t.Fatalf("job %s after a refused failure or patch: queue %q attempts %d, want q and 0", id, v.Queue, v.Attempts)
		}
	}
	// the siblings of members[0] finish; it stays in flight
	if nf, err := e.Ack(ctx, []string{members[1], members[2], members[3]}); err != nil || len(nf) != 0 {
		t.Fatalf("ack of the siblings: not found %v, %v", nf, err)
	}
	stop()
	e, _, stop = startFailingOnDir(t, dir)
	wantStored(t, e, lone[0], lone[1], lone[2], members[0])
	if got := takeAll(t, e, 4); len(got) != 4 {
		t.Fatalf("after restart delivered %d jobs, want 4", len(got))
	}
}

// TestRefusedBudgetWritesLeaveCatalog: a refused budget create, replace,
// patch or delete answers 503 and the catalog stays as the store has it.
func TestRefusedBudgetWritesLeaveCatalog(t *testing.T) {
	e, store := startFailing(t, EngineConfig{})
	ctx := context.Background()
	def := func(alloc uint32) protocol.Definition {
		return protocol.Definition{Allocation: alloc, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	}
	wantAllocation := func(what, key string, want uint32) {
		t.Helper()
		b, err := e.GetBudget(ctx, key)
		if err != nil || b.Allocation != want {
			t.Fatalf("%s: budget %s = %+v, %v; want allocation %d", what, key, b, err, want)
		}
	}
	store.FailAll(errNoSpace)
	_, _, err := e.CreateBudget(ctx, "new", def(3), false)
	wantStorageUnavailable(t, "create", err)
	if _, err := e.GetBudget(ctx, "new"); err == nil {
		t.Fatal("a budget whose create was refused exists")
	}
	store.Heal()
	if _, _, err := e.CreateBudget(ctx, "kept", def(3), false); err != nil {
		t.Fatal(err)
	}
	store.FailAll(errNoSpace)
	_, _, err = e.CreateBudget(ctx, "kept", def(7), true)
	wantStorageUnavailable(t, "replace", err)
	wantAllocation("refused replace", "kept", 3)
	patch, err := protocol.DecodeBudgetPatch(protocol.JSON, []byte(`{"allocation":9}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.PatchBudget(ctx, "kept", patch)
	wantStorageUnavailable(t, "patch", err)
	wantAllocation("refused patch", "kept", 3)
	err = e.DeleteBudget(ctx, "kept")
	wantStorageUnavailable(t, "delete", err)
	wantAllocation("refused delete", "kept", 3)
	store.Heal()
	// the budget still works: a job bound to it is dispatched
	if _, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "", protocol.NewBinding{Key: "kept", Cost: 1})}, false); err != nil {
		t.Fatal(err)
	}
	takeAll(t, e, 1)
}

// TestRefusedRebindLeavesJob: a refused rebinding (one job, and by filter)
// answers 503; the job keeps its bindings and the budget its create_with
// made does not exist.
func TestRefusedRebindLeavesJob(t *testing.T) {
	e, store := startFailing(t, EngineConfig{})
	ctx := context.Background()
	views, err := e.Enqueue(ctx, []*protocol.NewJob{refusedJob("q", "")}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := views[0].ID
	def := protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
	binding := protocol.NewBinding{Key: "made", Cost: 1, CreateWith: &def}
	store.FailAll(errNoSpace)
	_, err = e.RebindJob(ctx, &RebindJob{ID: id, Op: RebindAdd, Binding: binding})
	wantStorageUnavailable(t, "rebind", err)
	_, err = e.RebindJobs(ctx, &protocol.JobFilter{}, RebindAdd, binding)
	wantStorageUnavailable(t, "bulk rebind", err)
	store.Heal()
	if _, err := e.GetBudget(ctx, "made"); err == nil {
		t.Fatal("the budget a refused rebinding created exists")
	}
	v, err := e.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Budgets) != 0 {
		t.Fatalf("job bindings after refused rebindings: %+v, want none", v.Budgets)
	}
	views, _, err = e.ListJobs(ctx, &protocol.JobFilter{BudgetKeys: []string{"made"}}, "", false, 10)
	if err != nil || len(views) != 0 {
		t.Fatalf("jobs listed under the refused binding: %d, %v", len(views), err)
	}
	takeAll(t, e, 1)
}
