package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestFaultDescriptorLimitIdleConnections runs the server with 256
// descriptors and opens 400 keep-alive connections that each make one
// request and then sit idle. The server keeps descriptors for its store
// (the connection cap is the limit minus a reserve) and, at the cap, closes
// an idle connection to take a new one: every connection is answered, the
// process stays up, a new client is served at once and the stored jobs
// survive a restart. Before, the idle connections took every descriptor,
// new clients waited in the accept queue forever and badger's next file
// (a memtable rotation) failed and exited the process.
func TestFaultDescriptorLimitIdleConnections(t *testing.T) {
	const (
		nofile = 256
		conns  = 400
	)
	prlimit, err := exec.LookPath("prlimit")
	resSetupOrSkip(t, err, "a lowered descriptor limit (prlimit)")
	wrapper := []string{prlimit, fmt.Sprintf("--nofile=%d:%d", nofile, nofile)}
	srv := servertest.StartWrapped(t, t.TempDir(), wrapper)
	pid := srv.PID()

	ids := apitest.IDs(apitest.EnqueueN(t, srv.URL, "fd", 50))

	answered := 0
	for i := range conns {
		c := resDial(t, srv.Addr)
		resp, err := resGet(c, bufio.NewReader(c), "/health", 10*time.Second)
		require.NoError(t, err, "connection %d was not answered", i)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		answered++
	}
	fds := resOpenFDs(t, pid)
	t.Logf("%d of %d idle keep-alive connections answered; the server holds %d of %d descriptors", answered, conns, fds, nofile)
	require.Less(t, fds, nofile, "the server must keep descriptors for its store")

	// a new client is served at once, and writes still commit
	more := apitest.IDs(apitest.EnqueueN(t, srv.URL, "fd", 50))
	ids = append(ids, more...)
	srv.Restart()
	for _, id := range ids {
		apitest.MustGet(t, srv.URL, id)
	}
}

// TestFaultIdleAndBodyTimeouts: a keep-alive connection with no request is
// closed after --idle-timeout, and a body that stops arriving is given up
// after --body-read-timeout with 400 (before, both were held forever).
func TestFaultIdleAndBodyTimeouts(t *testing.T) {
	srv := servertest.Start(t, "--idle-timeout", "500ms", "--body-read-timeout", "500ms")

	idle := resDial(t, srv.Addr)
	br := bufio.NewReader(idle)
	resp, err := resGet(idle, br, "/health", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	start := time.Now()
	_ = idle.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the server must close an idle connection")
	t.Logf("idle connection closed after %v", time.Since(start))

	slow := resDial(t, srv.Addr)
	_, err = fmt.Fprintf(slow, "POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"type\":")
	require.NoError(t, err)
	start = time.Now()
	resp, err = resReadResponse(slow, 15*time.Second)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "no answer to a stalled body within 15s")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	t.Logf("stalled body answered %d after %v", resp.StatusCode, time.Since(start))
}
