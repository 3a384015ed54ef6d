package persistence

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openTest(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testJob(i int) *protocol.Job {
	return &protocol.Job{ID: fmt.Sprintf("%025d", i), Type: "t", Queue: "q", Priority: 1, Status: protocol.StatusReady, Payload: []byte(`{"i":1}`), ReadyAt: uint64(i)}
}

// TestGroupCommitConcurrentSubmitters submits from many goroutines at once
// and checks every acknowledged write survives a reopen.
func TestGroupCommitConcurrentSubmitters(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	const writers, perWriter = 16, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				b := NewBatch(i%50 == 0)
				b.putJob(testJob(w*perWriter + i))
				if err := s.Commit(context.Background(), b); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	n := 0
	prev := ""
	if err := s.ScanJobs(func(j *protocol.Job, _ Ref) error {
		if j.ID <= prev {
			t.Fatalf("scan not in ID order: %s after %s", j.ID, prev)
		}
		prev = j.ID
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != writers*perWriter {
		t.Fatalf("reopened store holds %d jobs, want %d", n, writers*perWriter)
	}
}

func TestBatchIsAtomicAndOrdered(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	j := testJob(1)
	b := NewBatch(false)
	b.putJob(j)
	b.PutError(j.ID, &protocol.ErrorRecord{Attempt: 1, Message: "boom"})
	j2 := *j
	j2.Attempts = 1
	b.putJob(&j2) // later write in the same batch wins
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetJob(j.ID)
	if err != nil || got.Attempts != 1 {
		t.Fatalf("GetJob = %+v, %v; want attempts 1", got, err)
	}
	errs, err := s.ListErrors(j.ID)
	if err != nil || len(errs) != 1 || errs[0].Message != "boom" {
		t.Fatalf("ListErrors = %+v, %v", errs, err)
	}
	d := NewBatch(false)
	d.deleteJob(j.ID, 1, false)
	if err := s.Commit(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetJob(j.ID); err != protocol.ErrJobNotFound {
		t.Fatalf("deleted job: %v", err)
	}
	if errs, _ := s.ListErrors(j.ID); len(errs) != 0 {
		t.Fatalf("error records outlived their job: %+v", errs)
	}
}

func TestOversizedGroupSplits(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), Logger: quietLogger(), MaxGroupBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Several 3 MiB batches submitted together exceed one transaction
	// (~9.6 MiB); each must still commit on its own.
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = 'a'
	}
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		b := NewBatch(false)
		j := testJob(i)
		j.Payload = append([]byte(`"`), append(big, '"')...)
		b.putJob(j)
		wg.Add(1)
		s.Submit(b, func(err error) { errs <- err; wg.Done() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("batch failed: %v", err)
		}
	}
	for i := 0; i < 6; i++ {
		if _, err := s.GetJob(testJob(i).ID); err != nil {
			t.Fatalf("job %d missing: %v", i, err)
		}
	}
}

func TestBudgetsRoundTrip(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	b := NewBatch(true)
	b.PutBudget(&protocol.Budget{Key: "b/2", Allocation: 2, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}})
	b.PutBudget(&protocol.Budget{Key: "a", Allocation: 5, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 10, Burst: 3}})
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadBudgets()
	if err != nil || len(got) != 2 || got[0].Key != "a" || got[1].Key != "b/2" || got[0].Strategy.Burst != 3 {
		t.Fatalf("LoadBudgets = %+v, %v", got, err)
	}
	d := NewBatch(false)
	d.DeleteBudget("a")
	if err := s.Commit(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadBudgets(); len(got) != 1 {
		t.Fatalf("after delete: %+v", got)
	}
}

// TestPayloadLivesApart checks a payload stored apart: record rewrites
// without it leave it alone, GetJob and LoadPayloads join it back, ScanJobs
// leaves it out, and deleteJob removes it.
func TestPayloadLivesApart(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	j := testJob(7)
	b := NewBatch(false)
	b.putApart(j)
	inline := testJob(8)
	b.putJob(inline)
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	moved := *j
	moved.Payload = nil
	moved.Status = protocol.StatusInFlight
	b = NewBatch(false)
	b.putJob(&moved)
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetJob(j.ID)
	if err != nil || got.Status != protocol.StatusInFlight || string(got.Payload) != string(j.Payload) {
		t.Fatalf("GetJob = %+v, %v; want in_flight with payload %s", got, err, j.Payload)
	}
	if got, err := s.GetJob(inline.ID); err != nil || string(got.Payload) != string(inline.Payload) {
		t.Fatalf("GetJob of a payload kept inline = %+v, %v", got, err)
	}
	_ = s.ScanJobs(func(sj *protocol.Job, _ Ref) error {
		if (sj.Payload != nil) != (sj.ID == inline.ID) {
			t.Errorf("ScanJobs of %s returned payload %q", sj.ID, sj.Payload)
		}
		return nil
	})
	loaded, err := s.LoadPayloads([]protocol.Job{moved, {ID: "gone"}})
	if err != nil || len(loaded) != 1 || string(loaded[0].Payload) != string(j.Payload) {
		t.Fatalf("LoadPayloads = %+v, %v", loaded, err)
	}
	b = NewBatch(false)
	b.deleteJob(j.ID, 0, true)
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if loaded, err := s.LoadPayloads([]protocol.Job{moved}); err != nil || len(loaded) != 0 {
		t.Fatalf("payload outlived its job: %+v, %v", loaded, err)
	}
}

// TestSchemaVersionOneOpens opens a schema-version-1 store (every payload
// inside its record): its jobs read back unchanged and the store is marked
// with the current schema version.
func TestSchemaVersionOneOpens(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	err := s.db.Update(func(txn *badger.Txn) error {
		for i := range 3 {
			j := testJob(i)
			val, err := protocol.MarshalRecord(j)
			if err != nil {
				return err
			}
			if err := txn.Set(jobKey(j.ID), val); err != nil {
				return err
			}
		}
		return txn.Set(versionKey, []byte{1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	for i := range 3 {
		j := testJob(i)
		got, err := s.GetJob(j.ID)
		if err != nil || string(got.Payload) != string(j.Payload) {
			t.Fatalf("job %d of a version-1 store: %+v, %v", i, got, err)
		}
	}
	_ = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(versionKey)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 1 || v[0] != schemaVersion {
				t.Errorf("schema version %v after open, want %d", v, schemaVersion)
			}
			return nil
		})
	})
}

// TestLoadPayloadsMixedBatch loads a batch as a take stream gets it: jobs
// with their payload in memory, jobs whose payload is apart (in and out of
// ID order, with gaps of deleted jobs between them) and jobs deleted since.
// Every job that still exists comes back with its own payload, in order.
func TestLoadPayloadsMixedBatch(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	b := NewBatch(false)
	for i := range 60 {
		b.putApart(testJobPayload(i))
	}
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	d := NewBatch(false)
	for i := 0; i < 60; i += 7 {
		d.deleteJob(testJobPayload(i).ID, 0, true)
	}
	if err := s.Commit(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	order := []int{5, 3, 4, 6, 7, 8, 9, 10, 30, 59, 2, 1, 0, 14, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58}
	batch := make([]protocol.Job, 0, len(order)+1)
	for _, i := range order {
		j := *testJobPayload(i)
		j.Payload = nil
		batch = append(batch, j)
	}
	inline := *testJobPayload(1000) // held in memory, not in the store
	batch = append(batch, inline)
	got, err := s.LoadPayloads(batch)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, i := range order {
		if i%7 != 0 {
			want = append(want, i)
		}
	}
	want = append(want, 1000)
	if len(got) != len(want) {
		t.Fatalf("got %d jobs, want %d", len(got), len(want))
	}
	for k, i := range want {
		w := testJobPayload(i)
		if got[k].ID != w.ID || string(got[k].Payload) != string(w.Payload) {
			t.Errorf("job %d: got %s %s, want %s %s", k, got[k].ID, got[k].Payload, w.ID, w.Payload)
		}
	}
}

func testJobPayload(i int) *protocol.Job {
	j := testJob(i)
	j.Payload = fmt.Appendf(nil, `{"i":%d}`, i)
	return j
}

// TestBadBatchFailsAlone submits a batch that could not be built (its
// group's members are out of ID order) beside good ones: it fails, they
// commit, however the committer groups them.
func TestBadBatchFailsAlone(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	bad := NewBatch(false)
	bad.putGroups([]*protocol.Job{testJob(2), testJob(1)})
	errs := make(chan error, 3)
	done := func(err error) { errs <- err }
	good1, good2 := NewBatch(false), NewBatch(false)
	good1.putJob(testJob(10))
	good2.putJob(testJob(11))
	s.Submit(good1, done)
	s.Submit(bad, func(err error) {
		if err == nil {
			t.Error("a batch that failed to encode committed")
		}
		errs <- nil
	})
	s.Submit(good2, done)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("a good batch failed beside a bad one: %v", err)
		}
	}
	for _, id := range []int{10, 11} {
		if _, err := s.GetJob(testJob(id).ID); err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
	}
}

// TestEmptyBatchAnsweredInOrder: the answer to an empty batch comes after
// every batch submitted before it is committed, as any batch's does. The
// start-up load relies on it: its last batch, often empty, opens the gate
// for reads, which must then see the recovery writes of the chunks before.
// (Answered at once, it let a read see a recovered job still in flight.)
func TestEmptyBatchAnsweredInOrder(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	// hold the committer: a snapshot request nobody reads yet
	hold := make(chan *jobScan)
	s.queue <- &commit{scan: hold}

	var mu sync.Mutex
	var order []string
	note := func(name string) func(error) {
		return func(err error) {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		}
	}
	write := NewBatch(false)
	write.Enqueued([]*protocol.Job{{ID: protocol.NewIDGenerator().Next(1_700_000_000_000), Type: "t", Queue: "q",
		Status: protocol.StatusReady, ReadyAt: 1}}, nil, 0)
	s.Submit(write, note("write"))
	empty := make(chan struct{})
	s.Submit(NewBatch(false), func(err error) { note("empty")(err); close(empty) })
	mu.Lock()
	early := slices.Clone(order)
	mu.Unlock()
	(<-hold).Close()
	<-empty
	if len(early) != 0 {
		t.Fatalf("answered %v while the committer was held", early)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"write", "empty"}) {
		t.Fatalf("answered in order %v, want the write first", order)
	}
}
