package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Conformance checks the JobStore contract the engine relies on against
// the store open returns (a fresh, empty one per subtest): what the job
// verbs (Enqueued, Dispatched, Updated, PayloadChanged, PayloadReleased,
// Removed, EnqueueRefused) wrote is read back the same by every read
// (GetJob, ScanJobs, LoadPayloads), whatever layout the store chose; the
// Refs a scan returns work like those Enqueued returned; budgets round trip.
// Any JobStore (the badger store, the Failing wrapper) must pass it.
func Conformance(t *testing.T, open func(t *testing.T) persistence.JobStore) {
	for _, c := range []struct {
		name string
		n    int    // jobs enqueued in one request
		kept []bool // nil: every payload kept in memory
	}{
		{"one job, payload kept", 1, nil},
		{"one job, payload not kept", 1, []bool{false}},
		{"a request of six", 6, nil},
		{"a request of six, payloads not kept", 6, make([]bool, 6)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			ids := protocol.NewIDGenerator()
			jobs := make([]*protocol.Job, c.n)
			payloads := map[string]string{}
			for i := range jobs {
				jobs[i] = testJob(ids, fmt.Sprintf(`{"n":%d}`, i))
				payloads[jobs[i].ID] = string(jobs[i].Payload)
			}
			b := persistence.NewBatch(true)
			refs := b.Enqueued(jobs, c.kept, 0)
			b.PutError(jobs[0].ID, &protocol.ErrorRecord{Attempt: 1, Message: "boom"})
			mustCommit(t, s, b)
			for i, j := range jobs {
				if c.kept != nil && !c.kept[i] {
					j.Payload = nil // the caller does not keep it
				}
			}
			checkJobs(t, s, "enqueued", jobs, payloads)
			if rec, ok, err := s.GetError(jobs[0].ID, 1); err != nil || !ok || rec.Message != "boom" {
				t.Fatalf("GetError = %+v, %v, %v", rec, ok, err)
			}
			delivered := make([]protocol.Job, len(jobs))
			for i, j := range jobs {
				delivered[i] = *j
			}
			got, err := s.LoadPayloads(delivered)
			if err != nil || len(got) != len(jobs) {
				t.Fatalf("LoadPayloads = %d jobs, %v", len(got), err)
			}
			for _, j := range got {
				if string(j.Payload) != payloads[j.ID] {
					t.Fatalf("LoadPayloads: %s has %s, want %s", j.ID, j.Payload, payloads[j.ID])
				}
			}

			// the first is dispatched, the last fails and waits for a retry
			b = persistence.NewBatch(false)
			jobs[0].Status, jobs[0].DequeuedAt = protocol.StatusInFlight, jobs[0].ReadyAt+5
			b.Dispatched(jobs[0], &refs[0])
			last := len(jobs) - 1
			if last > 0 {
				b.Dispatched(jobs[last], &refs[last])
				jobs[last].Status, jobs[last].Attempts, jobs[last].ReadyAt = protocol.StatusScheduled, 1, jobs[last].ReadyAt+60_000
				b.Updated(jobs[last], &refs[last])
			}
			mustCommit(t, s, b)
			checkJobs(t, s, "dispatched and updated", jobs, payloads)

			// removing through the refs a scan returns, the first and last
			// go, then the rest
			scanned := scanRefs(t, s)
			b = persistence.NewBatch(false)
			b.Removed(jobs[0].ID, 1, scanned[jobs[0].ID])
			if last > 0 {
				b.Removed(jobs[last].ID, jobs[last].Attempts, scanned[jobs[last].ID])
			}
			mustCommit(t, s, b)
			for _, id := range []string{jobs[0].ID, jobs[last].ID} {
				if _, err := s.GetJob(id); !errors.Is(err, protocol.ErrJobNotFound) {
					t.Fatalf("GetJob of removed %s: %v, want not found", id, err)
				}
				if got, err := s.LoadPayloads([]protocol.Job{{ID: id, InGroup: jobs[0].InGroup}}); err != nil || len(got) != 0 {
					t.Fatalf("LoadPayloads of removed %s = %+v, %v", id, got, err)
				}
				if _, ok, _ := s.GetError(id, 1); ok {
					t.Fatalf("error record of removed %s is still there", id)
				}
			}
			if last > 0 {
				checkJobs(t, s, "two removed", jobs[1:last], payloads)
			}
			b = persistence.NewBatch(false)
			for i := 1; i < last; i++ {
				b.Removed(jobs[i].ID, 0, scanned[jobs[i].ID]) // one life's refs, not mixed
			}
			mustCommit(t, s, b)
			if got := scanIDs(t, s); len(got) != 0 {
				t.Fatalf("ScanJobs after removing every job = %v", got)
			}
		})
	}
	t.Run("payload released", func(t *testing.T) {
		s := open(t)
		j := testJob(protocol.NewIDGenerator(), `{"released":true}`)
		b := persistence.NewBatch(false)
		ref := b.Enqueued([]*protocol.Job{j}, nil, 0)[0]
		mustCommit(t, s, b)
		b = persistence.NewBatch(false)
		b.PayloadReleased(j, &ref)
		j.Payload = nil
		j.Priority = 7
		b.Updated(j, &ref)
		mustCommit(t, s, b)
		checkJobs(t, s, "released", []*protocol.Job{j}, map[string]string{j.ID: `{"released":true}`})
		b = persistence.NewBatch(false)
		b.Removed(j.ID, 0, ref)
		mustCommit(t, s, b)
		if got := scanIDs(t, s); len(got) != 0 {
			t.Fatalf("ScanJobs after remove = %v", got)
		}
	})
	t.Run("payload changed", func(t *testing.T) {
		for _, kept := range []bool{true, false} {
			s := open(t)
			ids := protocol.NewIDGenerator()
			// a batch's pending job among others of one request
			jobs := []*protocol.Job{testJob(ids, `1`), testJob(ids, `[1]`), testJob(ids, `3`), testJob(ids, `4`), testJob(ids, `5`)}
			jobs[1].Batch = &protocol.Batch{Key: "k"}
			b := persistence.NewBatch(false)
			refs := b.Enqueued(jobs, nil, 0)
			mustCommit(t, s, b)
			b = persistence.NewBatch(false)
			b.PayloadChanged(jobs[1], []byte(`[1,2]`), kept, &refs[1])
			jobs[1].Payload = nil
			if kept {
				jobs[1].Payload = []byte(`[1,2]`)
			}
			mustCommit(t, s, b)
			checkJobs(t, s, fmt.Sprintf("changed, kept %v", kept), jobs,
				map[string]string{jobs[0].ID: `1`, jobs[1].ID: `[1,2]`, jobs[2].ID: `3`, jobs[3].ID: `4`, jobs[4].ID: `5`})
			if !kept {
				got, err := s.LoadPayloads([]protocol.Job{*jobs[1]})
				if err != nil || len(got) != 1 || string(got[0].Payload) != `[1,2]` {
					t.Fatalf("LoadPayloads after the change = %+v, %v", got, err)
				}
			}
		}
	})
	t.Run("enqueue refused", func(t *testing.T) {
		for _, n := range []int{1, 6} {
			s := open(t)
			ids := protocol.NewIDGenerator()
			jobs := make([]*protocol.Job, n)
			for i := range jobs {
				jobs[i] = testJob(ids, `{}`)
			}
			refused := persistence.NewBatch(false)
			refs := refused.Enqueued(jobs, nil, 0)
			// never committed; the dispatch of the first is
			b := persistence.NewBatch(false)
			jobs[0].Status, jobs[0].DequeuedAt = protocol.StatusInFlight, jobs[0].ReadyAt
			b.Dispatched(jobs[0], &refs[0])
			mustCommit(t, s, b)
			b = persistence.NewBatch(false)
			b.EnqueueRefused(jobs[0], refs[0])
			mustCommit(t, s, b)
			if got := scanIDs(t, s); len(got) != 0 {
				t.Fatalf("%d jobs: ScanJobs after a refused enqueue = %v", n, got)
			}
			if _, err := s.GetJob(jobs[0].ID); !errors.Is(err, protocol.ErrJobNotFound) {
				t.Fatalf("%d jobs: GetJob after a refused enqueue: %v", n, err)
			}
		}
	})
	t.Run("budgets", func(t *testing.T) {
		s := open(t)
		b := persistence.NewBatch(false)
		b.PutBudget(&protocol.Budget{Key: "b", Allocation: 3})
		b.PutBudget(&protocol.Budget{Key: "a", Allocation: 2})
		mustCommit(t, s, b)
		got, err := s.LoadBudgets()
		if err != nil || len(got) != 2 || got[0].Key != "a" || got[1].Allocation != 3 {
			t.Fatalf("LoadBudgets = %+v, %v", got, err)
		}
		b = persistence.NewBatch(false)
		b.DeleteBudget("a")
		mustCommit(t, s, b)
		if got, _ := s.LoadBudgets(); len(got) != 1 || got[0].Key != "b" {
			t.Fatalf("LoadBudgets after delete = %+v", got)
		}
	})
	t.Run("empty batch", func(t *testing.T) {
		mustCommit(t, open(t), persistence.NewBatch(true))
	})
}

// testJob is a ready job with a fresh ID and the given payload.
func testJob(ids *protocol.IDGenerator, payload string) *protocol.Job {
	now := uint64(time.Now().UnixMilli())
	return &protocol.Job{ID: ids.Next(now), Queue: "q", Type: "t", Status: protocol.StatusReady, ReadyAt: now, Payload: []byte(payload)}
}

func mustCommit(t *testing.T, s persistence.JobStore, b *persistence.Batch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Commit(ctx, b); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// checkJobs reads every job of want back through GetJob and ScanJobs and
// compares what the engine relies on (status, attempts, ready_at,
// dequeued_at, priority, payload).
func checkJobs(t *testing.T, s persistence.JobStore, stage string, want []*protocol.Job, payloads map[string]string) {
	t.Helper()
	scanned := map[string]*protocol.Job{}
	if err := s.ScanJobs(func(j *protocol.Job, _ persistence.Ref) error {
		scanned[j.ID] = j
		return nil
	}); err != nil {
		t.Fatalf("%s: ScanJobs: %v", stage, err)
	}
	if len(scanned) != len(want) {
		t.Fatalf("%s: ScanJobs found %d jobs, want %d", stage, len(scanned), len(want))
	}
	for _, w := range want {
		got, err := s.GetJob(w.ID)
		if err != nil {
			t.Fatalf("%s: GetJob %s: %v", stage, w.ID, err)
		}
		for _, g := range []*protocol.Job{got, scanned[w.ID]} {
			if g == nil || g.Status != w.Status || g.Attempts != w.Attempts || g.ReadyAt != w.ReadyAt ||
				g.DequeuedAt != w.DequeuedAt || g.Priority != w.Priority || g.Queue != w.Queue {
				t.Fatalf("%s: job %s reads %+v, want %+v", stage, w.ID, g, w)
			}
		}
		if string(got.Payload) != payloads[w.ID] {
			t.Fatalf("%s: GetJob %s payload %s, want %s", stage, w.ID, got.Payload, payloads[w.ID])
		}
	}
}

func scanRefs(t *testing.T, s persistence.JobStore) map[string]persistence.Ref {
	t.Helper()
	refs := map[string]persistence.Ref{}
	if err := s.ScanJobs(func(j *protocol.Job, r persistence.Ref) error {
		refs[j.ID] = r
		return nil
	}); err != nil {
		t.Fatalf("ScanJobs: %v", err)
	}
	return refs
}

func scanIDs(t *testing.T, s persistence.JobStore) []string {
	t.Helper()
	var ids []string
	if err := s.ScanJobs(func(j *protocol.Job, _ persistence.Ref) error {
		ids = append(ids, j.ID)
		return nil
	}); err != nil {
		t.Fatalf("ScanJobs: %v", err)
	}
	return ids
}
