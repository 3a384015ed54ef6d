package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procSample is one reading of a process's resource use from /proc.
type procSample struct {
	cpuSeconds float64 // user + system time
	rss        int64   // resident set size now, bytes (VmRSS)
	peakRSS    int64   // peak resident set size, bytes (VmHWM)
	// rssAnon and rssFile split rss: anonymous memory (the Go heap and
	// runtime) and file-mapped pages (the binary and badger's mmapped
	// tables and write-ahead log); RssShmem, the rest, is ~0 here.
	rssAnon, rssFile int64
}

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports (the kernel fixes it for
// userspace), which spares a cgo call to sysconf(_SC_CLK_TCK).
const clockTicks = 100

// readProc reads /proc/<pid>/stat and /proc/<pid>/status. pid 0 means self.
func readProc(pid int) (procSample, error) {
	dir := "/proc/self"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	var s procSample
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return s, err
	}
	// The command name (field 2) is in parentheses and may contain spaces;
	// fields after the last ')' start at field 3 (state).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("%s/stat: no ')'", dir)
	}
	f := strings.Fields(string(stat[i+1:]))
	// utime is field 14 and stime field 15, i.e. f[11] and f[12].
	if len(f) < 13 {
		return s, fmt.Errorf("%s/stat: %d fields", dir, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("%s/stat: bad utime/stime %q %q", dir, f[11], f[12])
	}
	s.cpuSeconds = float64(ut+st) / clockTicks

	status, err := os.Open(dir + "/status")
	if err != nil {
		return s, err
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			s.rss = parseKB(line)
		case strings.HasPrefix(line, "VmHWM:"):
			s.peakRSS = parseKB(line)
		case strings.HasPrefix(line, "RssAnon:"):
			s.rssAnon = parseKB(line)
		case strings.HasPrefix(line, "RssFile:"):
			s.rssFile = parseKB(line)
		}
	}
	return s, sc.Err()
}

// parseKB parses a status line such as "VmHWM:	  123456 kB" into bytes.
func parseKB(line string) int64 {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n * 1024
}

// diskUsage is the space the files under dir take on disk (allocated
// blocks, so a preallocated but unwritten log counts only what it holds).
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}
