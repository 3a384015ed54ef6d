package persistence

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// FlushMemtableIfIdle writes badger's memtable out to a table and starts
// a new, empty one, unless a commit ran within the last idle. The
// memtable's arena (about 80 MiB with 64 MiB memtables) and the pages of
// its write-ahead log stay resident once written, even when every key in
// them was deleted since: a server left idle after a burst (tens of
// thousands of tenants made and collected) gives them back this way. On a
// busy store it does nothing: the flush blocks commits and memtable reads
// while it runs, and badger flushes a memtable that fills on its own. It
// waits for the flush and reports whether it ran. In memory
// (Config.InMemory) it does nothing.
func (s *Store) FlushMemtableIfIdle(idle time.Duration) (bool, error) {
	if s.cfg.InMemory {
		return false, nil
	}
	if last := s.lastCommit.Load(); last != 0 && s.cfg.Now().UnixNano()-last < idle.Nanoseconds() {
		return false, nil
	}
	done := make(chan error, 1)
	select {
	case s.flushReq <- done:
	case <-s.stop:
		return false, fmt.Errorf("flush memtable: %w", protocol.ErrShuttingDown)
	}
	if err := <-done; err != nil {
		return false, fmt.Errorf("flush memtable: %w", err)
	}
	return true, nil
}
