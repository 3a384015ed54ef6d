package persistence

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// residentTables finds the mappings of .sst files in dir in
// /proc/self/maps and counts their pages present in the process's page
// tables from /proc/self/pagemap (bit 63 of each page's entry), reading
// only those ranges' entries: /proc/self/smaps would walk the whole
// process's page tables (~10 ms a read with a 1M backlog), and mincore
// would count the files' pages in the page cache, read-ahead the process
// never mapped included, which paging out cannot lower. It returns the
// bytes and the mappings' ranges.
func residentTables(dir string) (int64, []mappedSpan, error) {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, nil, err
	}
	var spans []mappedSpan
	prefix := dir + string(os.PathSeparator)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if span, path, ok := mappingHeader(sc.Text()); ok && strings.HasPrefix(path, prefix) && strings.HasSuffix(path, ".sst") {
			spans = append(spans, span)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, nil, err
	}
	if len(spans) == 0 {
		return 0, nil, nil
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, nil, err
	}
	defer pm.Close()
	page := uintptr(os.Getpagesize())
	var present int64
	var buf []byte
	for _, sp := range spans {
		n := int((sp.end - sp.start) / page)
		if cap(buf) < 8*n {
			buf = make([]byte, 8*n)
		}
		buf = buf[:8*n]
		got, err := pm.ReadAt(buf, int64(sp.start/page)*8)
		if err != nil && got < len(buf) {
			continue // unmapped since maps was read
		}
		for i := 0; i+8 <= got; i += 8 {
			present += int64(buf[i+7] >> 7) // bit 63, little-endian
		}
	}
	return present * int64(page), spans, nil
}

// mappingHeader parses a line of /proc/self/maps ("start-end perms offset
// dev inode path").
func mappingHeader(line string) (mappedSpan, string, bool) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return mappedSpan{}, "", false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return mappedSpan{}, "", false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mappedSpan{}, "", false
	}
	// the path is the rest of the line after the five fields, as the
	// kernel wrote it (it may hold runs of spaces)
	rest := line
	for range 5 {
		rest = strings.TrimLeft(rest, " ")
		if i := strings.IndexByte(rest, ' '); i >= 0 {
			rest = rest[i:]
		} else {
			rest = ""
		}
	}
	path := strings.TrimLeft(rest, " ")
	return mappedSpan{start: uintptr(start), end: uintptr(end)}, path, true
}

// pageOut asks the kernel to page out each span; it returns how many it
// took (a span unmapped since it was read is skipped).
func pageOut(spans []mappedSpan) int {
	n := 0
	for _, sp := range spans {
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, sp.start, sp.end-sp.start, unix.MADV_PAGEOUT)
		if errno == 0 {
			n++
		}
	}
	return n
}
