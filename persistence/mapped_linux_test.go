package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// TestMappedTablesPagedOut: after a flush writes a table, its pages are
// resident in the store's mapping of it; pageOut takes them back, and the
// table still reads the same afterwards.
func TestMappedTablesPagedOut(t *testing.T) {
	// the loop stays off (a negative bound): the test pages out itself
	s, err := Open(Config{Dir: t.TempDir(), Logger: quietLogger(), MappedTableBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	value := bytes.Repeat([]byte("v"), 1024)
	for i := 0; i < 8000; i += 500 {
		err := s.db.Update(func(txn *badger.Txn) error {
			for k := i; k < i+500; k++ {
				if err := txn.Set([]byte(fmt.Sprintf("test/%06d", k)), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if ran, err := s.FlushMemtableIfIdle(0); err != nil || !ran {
		t.Fatalf("flush: ran %v, %v", ran, err)
	}
	dir := tableDir(s.cfg.Dir)
	before, spans, err := residentTables(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) == 0 || before < 1<<20 {
		t.Fatalf("after the flush: %d table mappings, %d bytes resident; want a table of ~8 MiB", len(spans), before)
	}
	if !pageOutSupported(t) {
		t.Skip("this kernel has no MADV_PAGEOUT")
	}
	if s.pageOutTablesOver(dir, 1<<40) {
		t.Fatal("paged out with the resident pages under the bound")
	}
	if !s.pageOutTablesOver(dir, 0) {
		t.Fatal("not paged out with the resident pages past the bound")
	}
	after, _, err := residentTables(dir)
	if err != nil {
		t.Fatal(err)
	}
	if after > before/4 {
		t.Fatalf("resident table pages %d bytes before, %d after paging out", before, after)
	}
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("test/004321"))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if !bytes.Equal(v, value) {
				return fmt.Errorf("value changed")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("reading the table after paging out: %v", err)
	}
}

// BenchmarkResidentTables measures one check of the mapped tables' pages
// (the store's mappedLoop runs one every mappedCheckInterval).
func BenchmarkResidentTables(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), Logger: quietLogger(), MappedTableBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	dir := tableDir(s.cfg.Dir)
	for b.Loop() {
		if _, _, err := residentTables(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// pageOutSupported tries MADV_PAGEOUT on a page of its own.
func pageOutSupported(t *testing.T) bool {
	b, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(b) }()
	return !errors.Is(unix.Madvise(b, unix.MADV_PAGEOUT), unix.EINVAL)
}

// TestMappingHeader parses lines of /proc/self/maps, a path with runs of
// spaces included.
func TestMappingHeader(t *testing.T) {
	for _, c := range []struct {
		line, path string
		start, end uintptr
	}{
		{"7f00a000-7f00c000 r--s 00000000 fd:01 1234   /data/my  queue/000001.sst", "/data/my  queue/000001.sst", 0x7f00a000, 0x7f00c000},
		{"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon", "/usr/bin/dbus-daemon", 0x400000, 0x452000},
		{"7ffd0000-7ffd1000 rw-p 00000000 00:00 0", "", 0x7ffd0000, 0x7ffd1000},
	} {
		sp, path, ok := mappingHeader(c.line)
		if !ok || path != c.path || sp.start != c.start || sp.end != c.end {
			t.Errorf("%q: %x-%x %q %v, want %x-%x %q", c.line, sp.start, sp.end, path, ok, c.start, c.end, c.path)
		}
	}
}
