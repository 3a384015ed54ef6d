package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// Disk space. badger writes its write-ahead log, value log and new tables
// through memory-mapped files: when the filesystem has no room for a page
// it touches, the kernel sends SIGBUS and the process dies (and died again
// at every start while the disk stayed full). So the store never lets
// badger get near a full disk:
//
//   - Writes that add data (enqueues, budget writes; the actors facade asks
//     Admit first) are refused with 503 "storage unavailable: ..." once free
//     space falls under the headroom. Reads, acks, failures and deletes go
//     on, so an operator can drain the queue: they are small, and what they
//     need (a log record, a table flush, a compaction) fits in the headroom.
//   - A reserve file of reserved space sits beside the store. When free space
//     falls to half the headroom (something else filled the disk, or a long
//     drain), the reserve is deleted to give badger room; at start it is
//     deleted first when the disk is that full, so the store can open.
//   - Once free space is back above the headroom plus the reserve, the
//     reserve is made again and writes are admitted: no restart needed.
//
//   - While writes are refused, what drains free (acks, deletes) is only
//     given back once badger has flushed its memtable and compacted the
//     deletions against the data, which it does by itself only as the
//     memtable fills with new writes. So every reclaimInterval, if anything
//     was committed since, the store flushes the memtable and compacts the
//     tree into one level (reclaim): with the deletions applied the space
//     comes back, and writes are admitted again.
//
// The sizes follow the filesystem: memtables are a sixteenth of it (4 MiB
// on a 64 MiB disk, badger's 64 MiB from a 1 GiB one up), the headroom
// eight memtables and the reserve two.

// reserveName is the reserve file, in the store's directory.
const reserveName = "tollgate-reserve"

// spacePlan is the store's sizes for a filesystem of a given size.
type spacePlan struct {
	memTable int64 // badger memtable size
	headroom int64 // free space below which data-adding writes are refused
	reserve  int64 // size of the reserve file
}

// planSpace sizes the memtables, the headroom and the reserve for a
// filesystem of total bytes.
func planSpace(total int64) spacePlan {
	mt := int64(64 << 20)
	for mt > 4<<20 && mt*16 > total {
		mt /= 2
	}
	return spacePlan{memTable: mt, headroom: 8 * mt, reserve: 2 * mt}
}

// spaceGuard watches the free space of the store's filesystem and keeps
// the reserve file (see the comment above).
type spaceGuard struct {
	plan    spacePlan
	dir     string
	reserve string
	log     *slog.Logger

	mu  sync.Mutex // one check at a time
	low atomic.Pointer[protocol.Error]
}

func newSpaceGuard(dir string, plan spacePlan, log *slog.Logger) *spaceGuard {
	return &spaceGuard{plan: plan, dir: dir, reserve: filepath.Join(dir, reserveName), log: log}
}

// Admit returns nil when a write that adds data may go ahead, else the 503
// to answer with.
func (g *spaceGuard) admit() error {
	if e := g.low.Load(); e != nil {
		return e
	}
	return nil
}

// check measures free space and moves between the states: refusing writes
// below the headroom, deleting the reserve below half of it, making the
// reserve again and admitting writes once there is room for both.
func (g *spaceGuard) check() {
	g.mu.Lock()
	defer g.mu.Unlock()
	free, _, err := fsSpace(g.dir)
	if err != nil {
		g.log.Warn("disk space check failed", "err", err)
		return
	}
	hasReserve := g.hasReserve()
	if free < g.plan.headroom/2 && hasReserve {
		if err := os.Remove(g.reserve); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.log.Error("cannot delete the reserve file", "err", err)
		} else {
			g.log.Warn("disk nearly full: reserve file deleted to keep the store writable",
				"free_mib", free>>20, "released_mib", g.plan.reserve>>20)
			hasReserve = false
			if f, _, err := fsSpace(g.dir); err == nil {
				free = f
			}
		}
	}
	if !hasReserve && free >= g.plan.headroom+g.plan.reserve {
		if err := makeReserve(g.reserve, g.plan.reserve); err != nil {
			g.log.Warn("cannot make the reserve file", "err", err)
		} else {
			hasReserve = true
			free -= g.plan.reserve
		}
	}
	if free < g.plan.headroom || !hasReserve {
		g.refuse(free)
		return
	}
	if g.low.Swap(nil) != nil {
		g.log.Info("disk space back: writes admitted again", "free_mib", free>>20)
	}
}

func (g *spaceGuard) refuse(free int64) {
	e := protocol.Errorf(protocol.CodeUnavailable,
		"storage unavailable: disk space low (%d MiB free; writes that add data need %d MiB free)",
		free>>20, g.plan.headroom>>20)
	if g.low.Swap(e) == nil {
		g.log.Warn("disk space low: refusing writes that add data; reads, acks, failures and deletes go on",
			"free_mib", free>>20, "headroom_mib", g.plan.headroom>>20)
	}
}

func (g *spaceGuard) hasReserve() bool {
	fi, err := os.Stat(g.reserve)
	return err == nil && fi.Size() >= g.plan.reserve
}

// makeReserve creates the reserve file with its blocks allocated.
func makeReserve(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("reserve file: %w", err)
	}
	if err := allocate(f, size); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("reserve file: %w", err)
	}
	return f.Close()
}

// writeZeros allocates size bytes of f by writing them.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return fmt.Errorf("reserve file: %w", err)
		}
		size -= n
	}
	return nil
}

// reclaimInterval spaces out reclaims while the disk is nearly full.
const reclaimInterval = 2 * time.Second

// reclaim gives back the space of deleted data: the committer flushes
// badger's memtable (flushMemtable), then Flatten compacts every level into
// one, which applies the deletions. Flatten runs beside commits; the flush
// does not (badger refuses writes while it flushes).
func (s *Store) reclaim() {
	start := time.Now()
	done := make(chan error, 1)
	select {
	case s.flushReq <- done:
	case <-s.stop:
		return
	}
	if err := <-done; err != nil {
		s.log.Warn("reclaim: flush", "err", err)
		return
	}
	if err := s.db.Flatten(1); err != nil {
		s.log.Warn("reclaim: compact", "err", err)
		return
	}
	s.log.Info("disk space low: reclaimed deleted data", "took", time.Since(start).Round(time.Millisecond).String())
}

// flushMemtable makes badger write its memtable to a table: a key written
// and dropped again does it (DropPrefix flushes before it drops). Only the
// committer calls it, between commits.
func (s *Store) flushMemtable() error {
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(reclaimKey, nil) }); err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	return s.db.DropPrefix(reclaimKey)
}
