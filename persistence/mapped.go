package persistence

import (
	"path/filepath"
	"time"
)

// Mapped tables. badger writes every table a flush or a compaction makes
// through a shared mapping of its file, and reads tables through such
// mappings; a table's pages stay mapped, and count in the process's
// resident set, until the table is deleted. They are the kernel's page
// cache (clean, reclaimable), but with a large backlog they made most of
// the server's resident set: at 10 million queued jobs, 639 MiB of mapped
// tables while it loaded and drained after a restart, beside 706 MiB of
// heap. So every mappedCheckInterval the store counts the pages of its
// tables' mappings present in its page tables, and once they pass
// Config.MappedTableBytes it asks the kernel to page them out (madvise
// MADV_PAGEOUT: clean pages are dropped, dirty ones left; a later read
// faults them in from the file). MADV_PAGEOUT never destroys data, so a range badger unmapped and
// something else mapped between the two steps is at worst paged out too
// (MADV_DONTNEED would zero it). Linux only; elsewhere nothing is done.

// mappedCheckInterval is how often the resident pages of the mapped tables
// are measured (at 10M queued jobs loading and draining, the peak held
// 450 MiB of mapped files with checks every 5 s, 226 MiB with checks
// every second: 100 of tables, 126 of write-ahead logs).
const mappedCheckInterval = time.Second

// mappedTableBytes is Config.MappedTableBytes's default.
const mappedTableBytes = 64 << 20

// mappedSpan is the address range of one mapping.
type mappedSpan struct{ start, end uintptr }

// tableDir is the directory whose .sst mappings are the store's tables, as
// the kernel names it (absolute, symbolic links resolved).
func tableDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// mappedLoop pages the tables out whenever their resident pages pass the
// bound, until the store stops.
func (s *Store) mappedLoop() {
	dir := tableDir(s.cfg.Dir)
	s.every(mappedCheckInterval, func() { s.pageOutTablesOver(dir, int64(s.cfg.MappedTableBytes)) })
}

// pageOutTablesOver pages out the tables mapped from dir if their resident
// pages pass limit bytes; it reports whether it did.
func (s *Store) pageOutTablesOver(dir string, limit int64) bool {
	resident, spans, err := residentTables(dir)
	if err != nil || resident <= limit {
		return false
	}
	paged := pageOut(spans)
	s.log.Debug("mapped tables paged out", "resident_bytes", resident, "mappings", paged)
	return paged > 0
}
