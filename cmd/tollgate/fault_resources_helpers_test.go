package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// resProcKiB reads one "<field>: <n> kB" line of /proc/<pid>/status
// (VmRSS, VmHWM).
func resProcKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err, line)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resOpenFDs counts the descriptors a process holds.
func resOpenFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return len(ents)
}

// resDial opens a raw TCP connection to the server.
func resDial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// resReadResponse reads one response from a raw connection (nil when the
// server closed it without one).
func resReadResponse(c net.Conn, d time.Duration) (*http.Response, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	return resp, nil
}

// resSettle polls f every 50 ms until it changes by less than eps over one
// second, or d passes, and returns its last value.
func resSettle(d time.Duration, eps int64, f func() int64) int64 {
	deadline := time.Now().Add(d)
	last, since := f(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		v := f()
		if v-last > eps || last-v > eps {
			last, since = v, time.Now()
			continue
		}
		if time.Since(since) >= time.Second {
			return v
		}
	}
	return f()
}

// resSetupOrSkip fails the test under CI=true when a fault's setup is not
// possible here (CI machines run as root and must be able to set it up);
// elsewhere it skips with the reason.
func resSetupOrSkip(t testing.TB, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot set up %s (required under CI=true): %v", what, err)
	}
	t.Skipf("cannot set up %s here: %v (run as root; CI=true makes this a failure)", what, err)
}

// resGet sends a keep-alive GET on a raw connection and reads the answer.
func resGet(c net.Conn, br *bufio.Reader, path string, d time.Duration) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp, nil
}

// resMountTmpfs mounts a tmpfs of the given size on a fresh directory and
// unmounts it when the test ends (after servers started later are
// stopped). Mounting needs root: under CI=true failing to mount fails the
// test, elsewhere it skips.
func resMountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	require.NoError(t, os.Mkdir(dir, 0o755))
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("mount -t tmpfs -o size=%s: %w: %s", size, err, bytes.TrimSpace(out))
	}
	resSetupOrSkip(t, err, "a small tmpfs")
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// resFillDisk writes a file in dir until the filesystem is full and
// returns its path.
func resFillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return path
		}
	}
}

// resWriteFile writes a file of n zero bytes.
func resWriteFile(t *testing.T, path string, n int) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, make([]byte, n), 0o600))
}
