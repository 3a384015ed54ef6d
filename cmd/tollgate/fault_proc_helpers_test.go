package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Resource readings of a running server from /proc, for the fault tests'
// "it idles" and "memory stays bounded" checks.

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux the tests run on).
const clockTicks = 100

// faultCPUTime is the CPU time (user + system) the process has used so far.
func faultCPUTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatalf("read /proc/%d/stat: %v", pid, err)
	}
	// The command name (field 2) may hold spaces: fields count from after ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("parse /proc/%d/stat %q: %v %v", pid, s, err1, err2)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// faultRSS is the process's resident set (VmRSS) in bytes.
func faultRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("read /proc/%d/status: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse VmRSS %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// faultCPUOver measures the CPU time the process uses during window.
func faultCPUOver(t testing.TB, pid int, window time.Duration) time.Duration {
	t.Helper()
	before := faultCPUTime(t, pid)
	time.Sleep(window) // the measurement window itself, not a wait for an event
	return faultCPUTime(t, pid) - before
}
