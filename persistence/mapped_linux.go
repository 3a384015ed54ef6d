package persistence

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentTables finds the mappings of .sst files in dir in
// /proc/self/maps and counts their pages in memory with mincore (which
// reads only those mappings' page tables, where /proc/self/smaps would
// walk the whole process's: ~10 ms a read with a 1M backlog). It returns
// the bytes and the mappings' ranges.
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
	page := uintptr(os.Getpagesize())
	var resident int64
	var vec []byte
	for _, sp := range spans {
		n := int((sp.end - sp.start + page - 1) / page)
		if cap(vec) < n {
			vec = make([]byte, n)
		}
		vec = vec[:n]
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, sp.start, sp.end-sp.start, uintptr(unsafe.Pointer(&vec[0])))
		if errno != 0 {
			continue // unmapped since maps was read
		}
		for _, b := range vec {
			resident += int64(b & 1)
		}
	}
	return resident * int64(page), spans, nil
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
	path := ""
	if len(f) >= 6 {
		path = strings.Join(f[5:], " ")
	}
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
