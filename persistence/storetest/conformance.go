package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Conformance checks the JobStore contract the engine relies on against
// the store open returns (a fresh, empty one per subtest): what a commit
// wrote is read back by every read, a delete removes it, and groups read
// like lone jobs. The storage refactor runs it against each backend.
func Conformance(t *testing.T, open func(t *testing.T) persistence.JobStore) {
	t.Run("lone job round trip", func(t *testing.T) {
		s := open(t)
		ids := protocol.NewIDGenerator()
		j := testJob(ids, `{"n":1}`)
		b := persistence.NewBatch(true)
		b.PutJob(j)
		b.PutError(j.ID, &protocol.ErrorRecord{Attempt: 1, Message: "boom"})
		mustCommit(t, s, b)
		got, err := s.GetJob(j.ID)
		if err != nil || string(got.Payload) != `{"n":1}` || got.Queue != j.Queue {
			t.Fatalf("GetJob = %+v, %v; want the job with its payload", got, err)
		}
		if rec, ok, err := s.GetError(j.ID, 1); err != nil || !ok || rec.Message != "boom" {
			t.Fatalf("GetError = %+v, %v, %v", rec, ok, err)
		}
		if scanned := scanIDs(t, s); !slices.Equal(scanned, []string{j.ID}) {
			t.Fatalf("ScanJobs = %v, want [%s]", scanned, j.ID)
		}
		b = persistence.NewBatch(false)
		b.DeleteJob(j.ID, 1, false)
		mustCommit(t, s, b)
		if _, err := s.GetJob(j.ID); !errors.Is(err, protocol.ErrJobNotFound) {
			t.Fatalf("GetJob after delete: %v, want not found", err)
		}
		if scanned := scanIDs(t, s); len(scanned) != 0 {
			t.Fatalf("ScanJobs after delete = %v", scanned)
		}
	})
	t.Run("payload apart", func(t *testing.T) {
		s := open(t)
		j := testJob(protocol.NewIDGenerator(), `{"apart":true}`)
		b := persistence.NewBatch(false)
		b.PutJobPayloadApart(j)
		mustCommit(t, s, b)
		jobs, err := s.LoadPayloads([]protocol.Job{{ID: j.ID, Queue: j.Queue}})
		if err != nil || len(jobs) != 1 || string(jobs[0].Payload) != `{"apart":true}` {
			t.Fatalf("LoadPayloads = %+v, %v", jobs, err)
		}
	})
	t.Run("group", func(t *testing.T) {
		s := open(t)
		ids := protocol.NewIDGenerator()
		jobs := []*protocol.Job{testJob(ids, `1`), testJob(ids, `2`), testJob(ids, `3`)}
		b := persistence.NewBatch(false)
		groups := b.PutGroups(jobs)
		mustCommit(t, s, b)
		if got := scanIDs(t, s); len(got) != 3 {
			t.Fatalf("ScanJobs after a group of 3 = %v", got)
		}
		b = persistence.NewBatch(false)
		b.DeleteMember(groups[1], jobs[1].ID, 0, false)
		mustCommit(t, s, b)
		if got := scanIDs(t, s); !slices.Equal(got, []string{jobs[0].ID, jobs[2].ID}) {
			t.Fatalf("ScanJobs after deleting the middle member = %v", got)
		}
		if got, err := s.GetJob(jobs[2].ID); err != nil || string(got.Payload) != `3` {
			t.Fatalf("GetJob of a member = %+v, %v", got, err)
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

func scanIDs(t *testing.T, s persistence.JobStore) []string {
	t.Helper()
	var ids []string
	if err := s.ScanJobs(func(j *protocol.Job, _ persistence.Member) error {
		ids = append(ids, j.ID)
		return nil
	}); err != nil {
		t.Fatalf("ScanJobs: %v", err)
	}
	return ids
}
