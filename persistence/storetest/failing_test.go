package storetest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

func openBadger(t *testing.T, inMemory bool) *persistence.Store {
	t.Helper()
	cfg := persistence.Config{InMemory: inMemory, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if !inMemory {
		cfg.Dir = t.TempDir()
	}
	s, err := persistence.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformanceBadgerOnDisk(t *testing.T) {
	Conformance(t, func(t *testing.T) persistence.JobStore { return openBadger(t, false) })
}

func TestConformanceBadgerInMemory(t *testing.T) {
	Conformance(t, func(t *testing.T) persistence.JobStore { return openBadger(t, true) })
}

// A Failing store that refuses nothing is the store it wraps.
func TestConformanceFailingPassThrough(t *testing.T) {
	Conformance(t, func(t *testing.T) persistence.JobStore { return NewFailing(openBadger(t, true)) })
}

var errDiskFull = errors.New("no space left on device")

// TestFailingRefusesCommits: a refused commit reports its error and stores
// nothing; FailNext refuses exactly n commits; after Heal commits land.
func TestFailingRefusesCommits(t *testing.T) {
	f := NewFailing(openBadger(t, true))
	ids := protocol.NewIDGenerator()
	put := func(j *protocol.Job) error {
		b := persistence.NewBatch(false)
		b.Enqueued([]*protocol.Job{j}, nil, 0)
		return f.Commit(context.Background(), b)
	}
	f.FailAll(errDiskFull)
	refusedJob := testJob(ids, `{}`)
	if err := put(refusedJob); !errors.Is(err, errDiskFull) {
		t.Fatalf("commit while failing: %v, want %v", err, errDiskFull)
	}
	if _, err := f.GetJob(refusedJob.ID); !errors.Is(err, protocol.ErrJobNotFound) {
		t.Fatalf("refused job is readable: %v", err)
	}
	if err := f.Commit(context.Background(), persistence.NewBatch(false)); err != nil {
		t.Fatalf("an empty batch is refused: %v", err)
	}
	f.Heal()
	f.FailNext(2, errDiskFull)
	var errs []error
	for range 3 {
		errs = append(errs, put(testJob(ids, `{}`)))
	}
	if !errors.Is(errs[0], errDiskFull) || !errors.Is(errs[1], errDiskFull) || errs[2] != nil {
		t.Fatalf("FailNext(2) then a commit: %v", errs)
	}
	if got := scanIDs(t, f); len(got) != 1 {
		t.Fatalf("stored %d jobs, want only the one accepted", len(got))
	}
	if f.Refused() != 3 || f.Accepted() != 1 {
		t.Fatalf("refused %d accepted %d, want 3 and 1", f.Refused(), f.Accepted())
	}
}
