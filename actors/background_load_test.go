package actors

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// pausedScan is a store whose scan of the stored jobs stops before its
// job number after (0: before the scan reads anything) until release is
// closed, so a test can act while the engine is loading.
type pausedScan struct {
	persistence.JobStore
	after   int
	paused  chan struct{} // closed when the scan reached its pause
	release chan struct{}
	failAt  error // when set, the scan ends with it at the pause instead
}

func newPausedScan(inner persistence.JobStore, after int) *pausedScan {
	return &pausedScan{JobStore: inner, after: after, paused: make(chan struct{}), release: make(chan struct{})}
}

func (p *pausedScan) pause() error {
	close(p.paused)
	<-p.release
	return p.failAt
}

func (p *pausedScan) NewJobScan() persistence.JobScan {
	return &pausingScan{JobScan: p.JobStore.NewJobScan(), p: p}
}

// pausingScan is a scan of a pausedScan's snapshot.
type pausingScan struct {
	persistence.JobScan
	p *pausedScan
}

func (s *pausingScan) Run(fn func(*protocol.Job, persistence.Ref) error) error {
	p := s.p
	if p.after == 0 {
		if err := p.pause(); err != nil {
			s.Close()
			return err
		}
	}
	n := 0
	return s.JobScan.Run(func(j *protocol.Job, ref persistence.Ref) error {
		n++
		if n == p.after {
			if err := p.pause(); err != nil {
				return err
			}
		}
		return fn(j, ref)
	})
}

const (
	loadTestJobs = 5002 // 1 left in flight, 4 bulks of 1250, 1 urgent
	urgentPrio   = 7    // lower than DefaultPriority: taken first
)

// storeBacklog writes loadTestJobs jobs of queue q to a store in dir: all
// at the default priority but the last, which is urgent, and the first is
// left in flight (the engine stops with it unacknowledged); and the budget
// b. It returns the urgent job's ID.
func storeBacklog(t *testing.T, dir string) (urgent string) {
	t.Helper()
	e, stop := startOnDir(t, dir, 0)
	defer stop()
	if _, _, err := e.CreateBudget(context.Background(), "b", protocol.Definition{Allocation: 1000, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}, false); err != nil {
		t.Fatal(err)
	}
	enqueue := func(n int, prio uint16) []*protocol.JobView {
		jobs := make([]*protocol.NewJob, n)
		for i := range jobs {
			jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: prio, Payload: []byte(`{}`)}}
		}
		views, err := e.Enqueue(context.Background(), jobs, true)
		if err != nil {
			t.Fatal(err)
		}
		return views
	}
	enqueue(1, protocol.DefaultPriority)
	if got := takeAll(t, e, 1); got[0].Status != protocol.StatusInFlight {
		t.Fatalf("the first job is %s, want in_flight", got[0].Status)
	}
	for range 4 {
		enqueue(1250, protocol.DefaultPriority)
	}
	return enqueue(1, urgentPrio)[0].ID
}

func quietStore(t *testing.T, dir string) *persistence.Store {
	t.Helper()
	store, err := persistence.Open(persistence.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestServeWhileLoading: the engine serves while its stored jobs load
// (SPEC §3.9). With the scan held before it reads anything and again
// mid-way: a plain enqueue, an ack and a stream open are answered at once;
// a count and a unique-key enqueue wait for the load; no job is dispatched.
// Once the load ends the stream gets every job once, in (priority, id)
// order from the first, the job enqueued meanwhile included (once only:
// the scan reads a snapshot taken before the engine served, and a job
// added twice would count twice against its budget), and the job left in
// flight is ready again.
func TestServeWhileLoading(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after int
	}{{"before the scan", 0}, {"mid-scan", 3000}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			urgent := storeBacklog(t, dir)
			inner := quietStore(t, dir)
			defer inner.Close()
			store := newPausedScan(inner, tc.after)
			e, err := Start(Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(store.release) }) }
			defer e.Stop()
			defer release()
			<-store.paused

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			late, err := e.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: []byte(`{}`),
				Budgets: []protocol.Binding{{Key: "b", Cost: 1}}}}}, false)
			if err != nil {
				t.Fatalf("plain enqueue while loading: %v", err)
			}
			missing, err := e.Ack(ctx, []string{urgent})
			if err != nil || !slices.Equal(missing, []string{urgent}) {
				t.Fatalf("ack of a stored ready job while loading = %v, %v; want it not found in flight", missing, err)
			}
			batches := make(chan []protocol.Job, 64)
			sid, err := e.OpenStream(ctx, &OpenStream{Queues: []string{"q"}, Prefetch: 100, Deliver: func(j []protocol.Job) { batches <- j }})
			if err != nil {
				t.Fatalf("open a stream while loading: %v", err)
			}
			for _, wait := range []struct {
				what string
				call func(ctx context.Context) error
			}{
				{"count", func(ctx context.Context) error { _, err := e.CountJobs(ctx, &protocol.JobFilter{}); return err }},
				{"unique enqueue", func(ctx context.Context) error {
					_, err := e.Enqueue(ctx, []*protocol.NewJob{{Job: protocol.Job{Type: "t", Queue: "other", UniqueKey: "k", Priority: protocol.DefaultPriority, Payload: []byte(`{}`)}}}, false)
					return err
				}},
			} {
				short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
				err := wait.call(short)
				stop()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s while loading answered (%v); it must wait for the load", wait.what, err)
				}
			}
			select {
			case <-e.Loaded():
				t.Fatal("the load ended while the scan was held")
			default:
			}
			// a last round trip through the queue actor: a dispatch would
			// have been handed over by now had the pump run
			if _, err := e.Ack(ctx, []string{late[0].ID}); err != nil {
				t.Fatal(err)
			}
			select {
			case b := <-batches:
				t.Fatalf("%d jobs dispatched while loading", len(b))
			default:
			}

			release()
			<-e.Loaded()
			if err := e.LoadErr(); err != nil {
				t.Fatal(err)
			}
			st := e.Stats()
			if st.Recovered != 1 || st.Ready != loadTestJobs+1 {
				t.Fatalf("stats %+v: want 1 recovered and %d ready", st, loadTestJobs+1)
			}
			n, err := e.CountJobs(ctx, &protocol.JobFilter{})
			if err != nil || n != loadTestJobs+1 {
				t.Fatalf("count after the load = %d, %v; want %d", n, err, loadTestJobs+1)
			}
			var got []protocol.Job
			deadline := time.After(30 * time.Second)
			for len(got) < loadTestJobs+1 {
				select {
				case b := <-batches:
					got = append(got, b...)
					e.StreamWritten(sid)
					if _, err := e.Ack(ctx, idsOf(b)); err != nil {
						t.Fatal(err)
					}
				case <-deadline:
					t.Fatalf("delivered %d of %d jobs", len(got), loadTestJobs+1)
				}
			}
			if got[0].ID != urgent {
				t.Fatalf("first job delivered %s (priority %d), want the urgent %s", got[0].ID, got[0].Priority, urgent)
			}
			if got[len(got)-1].ID != late[0].ID {
				t.Fatalf("last job delivered %s, want the one enqueued while loading (%s)", got[len(got)-1].ID, late[0].ID)
			}
			// the budget of the job enqueued while loading is free once it
			// is acknowledged: the job was bound once, not again by the scan
			if err := e.DeleteBudget(ctx, "b"); err != nil {
				t.Fatalf("delete the budget once its jobs are done: %v", err)
			}
			seen := make(map[string]bool, len(got))
			for i, j := range got {
				if seen[j.ID] {
					t.Fatalf("job %s delivered twice", j.ID)
				}
				seen[j.ID] = true
				if i > 0 && (got[i-1].Priority > j.Priority || got[i-1].Priority == j.Priority && got[i-1].ID > j.ID) {
					t.Fatalf("delivery %d (%d, %s) after (%d, %s): not in (priority, id) order", i, j.Priority, j.ID, got[i-1].Priority, got[i-1].ID)
				}
			}
		})
	}
}

func idsOf(jobs []protocol.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// TestStopWhileLoading: an engine stopped in the middle of its load stops
// (the scanner ends before the store may close), a request that waited for
// the load is answered that the server shuts down (it would otherwise hold
// the server's shutdown until its connections time out), and the next
// start loads every job.
func TestStopWhileLoading(t *testing.T) {
	dir := t.TempDir()
	storeBacklog(t, dir)
	inner := quietStore(t, dir)
	store := newPausedScan(inner, 3000)
	e, err := Start(Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	<-store.paused
	waited := make(chan error, 1)
	go func() {
		_, err := e.CountJobs(context.Background(), &protocol.JobFilter{})
		waited <- err
	}()
	stopped := make(chan struct{})
	go func() { e.Stop(); close(stopped) }()
	close(store.release)
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return while the engine was loading")
	}
	select {
	case err := <-waited:
		if !errors.Is(err, protocol.ErrShuttingDown) {
			t.Fatalf("a count waiting for the load got %v, want %v", err, protocol.ErrShuttingDown)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a count waiting for the load was not answered when the engine stopped")
	}
	if err := inner.Close(); err != nil {
		t.Fatal(err)
	}

	// the job left in flight was in the first chunk: what its recovery
	// wrote was committed before the stop
	e, stop := startOnDir(t, dir, 0)
	defer stop()
	if st := e.Stats(); st.Ready != loadTestJobs || st.Recovered != 0 {
		t.Fatalf("after a stop mid-load: %+v, want %d ready, none recovered", st, loadTestJobs)
	}
}

// TestLoadFailureReported: a scan that fails mid-way fails the load: Loaded
// closes with the error, and requests that wait for the load get it.
func TestLoadFailureReported(t *testing.T) {
	dir := t.TempDir()
	storeBacklog(t, dir)
	inner := quietStore(t, dir)
	defer inner.Close()
	store := newPausedScan(inner, 3000)
	broken := errors.New("disk read error")
	store.failAt = broken
	e, err := Start(Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	<-store.paused
	close(store.release)
	<-e.Loaded()
	if err := e.LoadErr(); !errors.Is(err, broken) {
		t.Fatalf("LoadErr = %v, want the scan's error", err)
	}
	if _, err := e.CountJobs(context.Background(), &protocol.JobFilter{}); !errors.Is(err, broken) {
		t.Fatalf("count after a failed load = %v, want the scan's error", err)
	}
}
