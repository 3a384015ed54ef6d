package actors

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// TestLoadFrontierRule: a ready job comes before every job not loaded yet
// when its priority is below its queue's floor, or equal to it with an ID
// the scan has passed; a queue without a floor had no stored job; without
// complete floors nothing is known.
func TestLoadFrontierRule(t *testing.T) {
	ids := protocol.NewIDGenerator()
	keys := make([]protocol.IDKey, 6) // in ID order
	for n := range keys {
		k, ok := protocol.ParseIDKey(ids.Next(uint64(1_700_000_000_000 + n)))
		if !ok {
			t.Fatal("a minted ID does not parse")
		}
		keys[n] = k
	}
	key := func(n int) protocol.IDKey { return keys[n] }
	at := func(prio uint16, n int) readyItem { return readyItem{key: key(n), priority: prio} }
	f := newLoadFrontier(map[persistence.PriorityPair]struct{}{persistence.QueuePair("q", 10): {}, persistence.QueuePair("q", 12): {}, persistence.BudgetPair("q", 3): {}}, true)
	for _, c := range []struct {
		name  string
		queue string
		it    readyItem
		want  bool
	}{
		{"at the floor, nothing loaded", "q", at(10, 1), false},
		{"below the floor", "q", at(9, 5), true},
		{"above the floor", "q", at(11, 1), false},
		{"a queue without stored jobs", "new", at(11, 5), true},
	} {
		if got := f.first(c.queue, c.it); got != c.want {
			t.Errorf("%s: first = %v, want %v", c.name, got, c.want)
		}
	}
	f.loaded(key(1))
	f.loaded(key(3))
	for n, want := range map[int]bool{1: true, 3: true, 4: false} {
		if got := f.first("q", at(10, n)); got != want {
			t.Errorf("at the floor, job %d with the scan through job 3: first = %v, want %v", n, got, want)
		}
	}
	// the budget named q has its own floor, 3, which the queue's does not
	// touch
	for _, c := range []struct {
		key  string
		it   readyItem
		want bool
	}{
		{"q", at(9, 1), false}, {"q", at(2, 5), true}, {"q", at(3, 3), true}, {"q", at(3, 4), false}, {"other", at(9, 5), true},
	} {
		if got := f.firstOfBudget(c.key, c.it); got != c.want {
			t.Errorf("budget %s, job (%d, %d of the keys): firstOfBudget = %v, want %v", c.key, c.it.priority, slices.Index(keys, c.it.key), got, c.want)
		}
	}
	if !f.loaded(key(2)) || f.first("q", at(9, 5)) {
		t.Error("a job loaded out of ID order did not end what the frontier knows")
	}
	unknown := newLoadFrontier(nil, false)
	if unknown.first("new", at(0, 1)) {
		t.Error("without complete floors a job came first")
	}
}

// TestDispatchWhileLoading: with the scan held after its first chunk, a
// stream of queue a gets that chunk's jobs of a at once, in order from the
// first (the job left in flight, ready again), and none the scan has not
// passed; queue b, whose urgent job is at the end of the store, gives
// nothing while the scan is held. What was acknowledged while loading
// stays gone once the load ends and the engine starts again (the recovery
// write of the job that was in flight is stored before its dispatch, not
// after its ack), and the urgent job comes first.
func TestDispatchWhileLoading(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []string // in ID order, as stored
	func() {
		e, stop := startOnDir(t, dir, 0)
		defer stop()
		enqueue := func(queue string, n int, prio uint16) {
			jobs := make([]*protocol.NewJob, n)
			for i := range jobs {
				jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: queue, Priority: prio, Payload: []byte(`{}`)}}
			}
			views, err := e.Enqueue(ctx, jobs, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range views {
				ids = append(ids, v.ID)
			}
		}
		enqueue("a", 1, protocol.DefaultPriority)
		if got := takeAll(t, e, 1); got[0].ID != ids[0] {
			t.Fatalf("took %s, want %s", got[0].ID, ids[0])
		}
		enqueue("b", 10, protocol.DefaultPriority)
		for range 4 {
			enqueue("a", 1000, protocol.DefaultPriority)
		}
		enqueue("b", 1, urgentPrio)
	}()
	total := len(ids)
	firstChunk := ids[:loadChunkJobs]

	inner := quietStore(t, dir)
	store := newPausedScan(inner, 3000)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := Start(Config{Store: store, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	<-store.paused
	aJobs, bJobs := make(chan []protocol.Job, 64), make(chan []protocol.Job, 64)
	aStream, err := e.OpenStream(ctx, &OpenStream{Queues: []string{"a"}, Prefetch: 10_000, Deliver: func(j []protocol.Job) { aJobs <- j }})
	if err != nil {
		t.Fatal(err)
	}
	bStream, err := e.OpenStream(ctx, &OpenStream{Queues: []string{"b"}, Prefetch: 100, Deliver: func(j []protocol.Job) { bJobs <- j }})
	if err != nil {
		t.Fatal(err)
	}
	var wantA []string // the chunk's jobs of a, in order
	for _, id := range firstChunk {
		if id == ids[0] || id > ids[10] {
			wantA = append(wantA, id)
		}
	}
	var gotA []string
	for len(gotA) < len(wantA) {
		select {
		case b := <-aJobs:
			gotA = append(gotA, idsOf(b)...)
			e.StreamWritten(aStream)
		case <-ctx.Done():
			t.Fatalf("while loading, queue a delivered %d of the %d jobs loaded", len(gotA), len(wantA))
		}
	}
	if !slices.Equal(gotA, wantA) {
		t.Fatalf("while loading, queue a delivered %d jobs (first %s), want the %d loaded in ID order from %s", len(gotA), gotA[0], len(wantA), wantA[0])
	}
	if _, err := e.Ack(ctx, gotA); err != nil {
		t.Fatal(err)
	}
	// An enqueue's answer comes after every earlier commit's outcome was
	// handled by the queue actor, deliveries included.
	if _, err := e.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "c", Priority: protocol.DefaultPriority, Payload: []byte(`{}`)}}}, false); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-aJobs:
		t.Fatalf("queue a delivered %s, which the scan has not passed", b[0].ID)
	case b := <-bJobs:
		t.Fatalf("queue b delivered %s before its urgent job was loaded", b[0].ID)
	default:
	}

	// the streams end, the load ends, and the engine starts again
	for _, id := range []uint64{aStream, bStream} {
		if _, err := e.CloseStream(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	close(store.release)
	<-e.Loaded()
	if err := e.LoadErr(); err != nil {
		t.Fatal(err)
	}
	e.Stop()
	if err := inner.Close(); err != nil {
		t.Fatal(err)
	}
	e, stop := startOnDir(t, dir, 0)
	defer stop()
	left := total - len(wantA) + 1 // the job of c
	if st := e.Stats(); st.Ready != left || st.Recovered != 0 {
		t.Fatalf("after acknowledging %d jobs while loading: %+v, want %d ready, none recovered", len(wantA), st, left)
	}
	got := takeAll(t, e, left)
	if got[0].ID != ids[total-1] {
		t.Fatalf("first job after the restart: %s, want the urgent %s", got[0].ID, ids[total-1])
	}
}

// TestBoundJobsWhileLoading: while the scan is held after its first chunk,
// jobs bound to a budget are dispatched through it when they come before
// every job bound to it not yet loaded (queue d, bound to free), and not
// when an earlier job bound to the same budget is still unread (queue a,
// bound to api, whose urgent job in queue c is stored last): that job must
// find the budget's one slot free once it is loaded, and be the next job
// delivered.
func TestBoundJobsWhileLoading(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var dIDs []string
	var urgent string
	func() {
		e, stop := startOnDir(t, dir, 0)
		defer stop()
		for key, n := range map[string]uint32{"free": 5000, "api": 1} {
			if _, _, err := e.CreateBudget(ctx, key, protocol.Definition{Allocation: n, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}, false); err != nil {
				t.Fatal(err)
			}
		}
		enqueue := func(queue, budget string, n int, prio uint16) []string {
			jobs := make([]*protocol.NewJob, n)
			for i := range jobs {
				jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: queue, Priority: prio, Payload: []byte(`{}`),
					Budgets: []protocol.Binding{{Key: budget, Cost: 1}}}}
			}
			views, err := e.Enqueue(ctx, jobs, true)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, len(views))
			for i, v := range views {
				ids[i] = v.ID
			}
			return ids
		}
		dIDs = enqueue("d", "free", 500, protocol.DefaultPriority)
		enqueue("a", "api", 3000, protocol.DefaultPriority)
		urgent = enqueue("c", "api", 1, urgentPrio)[0]
	}()

	inner := quietStore(t, dir)
	defer inner.Close()
	store := newPausedScan(inner, 3000)
	e, err := Start(Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	<-store.paused
	jobs := make(chan []protocol.Job, 64)
	sid, err := e.OpenStream(ctx, &OpenStream{Prefetch: 1000, Deliver: func(j []protocol.Job) { jobs <- j }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	next := func() []protocol.Job {
		select {
		case b := <-jobs:
			e.StreamWritten(sid)
			return b
		case <-ctx.Done():
			t.Fatalf("%d jobs delivered, then none", len(got))
			return nil
		}
	}
	for len(got) < len(dIDs) {
		got = append(got, idsOf(next())...)
	}
	if !slices.Equal(got, dIDs) {
		t.Fatalf("while loading, %d jobs delivered from %s, want queue d's %d in ID order", len(got), got[0], len(dIDs))
	}
	close(store.release)
	<-e.Loaded()
	if err := e.LoadErr(); err != nil {
		t.Fatal(err)
	}
	if b := next(); b[0].ID != urgent {
		t.Fatalf("after the load, %s delivered (queue %s), want the urgent job %s: api's slot was taken while it was unread", b[0].ID, b[0].Queue, urgent)
	}
}

// TestReloadAfterAPanic: the queue actor restarted after a panic reloads
// the jobs from a snapshot after its earlier writes and prunes the stored
// pairs at the end, as a start does; then it serves every job.
func TestReloadAfterAPanic(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, stop := startOnDir(t, dir, 0)
	<-e.Loaded()
	jobs := make([]*protocol.NewJob, 10)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`{}`)}}
	}
	if _, err := e.Enqueue(ctx, jobs, true); err != nil {
		t.Fatal(err)
	}
	e.system.Root.Send(e.queue, &commitDone{then: func(uint64, error) { panic("a panic for the test") }})
	got := takeAll(t, e, len(jobs))
	if len(got) != len(jobs) {
		t.Fatalf("after the restart, %d of %d jobs delivered", len(got), len(jobs))
	}
	stop()
	checkPrioritiesComplete(t, dir)
}

// TestReservationEndingWhileLoadingIsDelivered: a bound job's reservation
// starts while loading, then the frontier stops vouching for anything (a
// job read out of ID order); the grant that comes back still dispatches
// the job, and the pump, which may choose nothing now, must still persist
// and deliver it rather than leave it in the stream's outbox until the end
// of the load.
func TestReservationEndingWhileLoadingIsDelivered(t *testing.T) {
	e, out := keyedEngine()
	e.enqueue(0, &EnqueueJobs{Jobs: []*protocol.NewJob{newJobOnB()}}, noReply)
	e.loading = true
	e.frontier = newLoadFrontier(nil, true) // no stored jobs: every job comes first
	delivered := openCountingStream(e)
	asks := out.take()
	if len(asks) == 0 {
		t.Fatal("no reservation started while loading")
	}
	e.frontier.complete = false
	answer(e, deliver(newInFlightBudget(e.epoch), asks))
	if e.inFlightTotal != 1 || *delivered != 1 {
		t.Fatalf("after the grant: %d in flight, %d delivered; want the job in flight and delivered", e.inFlightTotal, *delivered)
	}
}
