package persistence

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// TestFlushMemtableIfIdle checks that the memtable is flushed to a table
// only once no commit ran for the idle time, and that what it held is still
// read afterwards.
func TestFlushMemtableIfIdle(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	s, err := Open(Config{Dir: t.TempDir(), Logger: quietLogger(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := NewBatch(true)
	b.PutBudget(&protocol.Budget{Key: "tenant-1", Allocation: 1})
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(time.Second))
	if flushed, err := s.FlushMemtableIfIdle(2 * time.Second); err != nil || flushed {
		t.Fatalf("flushed %v (err %v) a second after a commit, idle 2 s", flushed, err)
	}
	if n := len(s.db.Tables()); n != 0 {
		t.Fatalf("%d tables before any flush", n)
	}
	now.Add(int64(2 * time.Second))
	if flushed, err := s.FlushMemtableIfIdle(2 * time.Second); err != nil || !flushed {
		t.Fatalf("not flushed (err %v) three seconds after the last commit", err)
	}
	if n := len(s.db.Tables()); n == 0 {
		t.Fatal("no table after the flush")
	}
	budgets, err := s.LoadBudgets()
	if err != nil || len(budgets) != 1 || budgets[0].Key != "tenant-1" {
		t.Fatalf("after the flush: budgets %v, err %v", budgets, err)
	}
}
