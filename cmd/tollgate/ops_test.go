package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestOpsVersionFlag: `tollgate --version` prints the release and API level
// and exits 0, as `tollgate version` does.
func TestOpsVersionFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		if want := "tollgate " + Version + " (API 0.7.0)\n"; out.String() != want {
			t.Fatalf("%v: printed %q, want %q", args, out.String(), want)
		}
	}
}

// TestOpsJSONEndsWithNewline: JSON bodies, errors included, end with a
// newline; msgpack bodies do not get one.
func TestOpsJSONEndsWithNewline(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	for _, path := range []string{"/health", "/version", "/budgets", "/jobs/nope", "/no-such-route"} {
		b := apitest.DoJSON(t, s.URL, "GET", path, nil).Body
		if !bytes.HasSuffix(b, []byte("}\n")) || bytes.Count(b, []byte("\n")) != 1 {
			t.Errorf("GET %s: body %q does not end with one newline", path, b)
		}
	}
	b := apitest.Request(t, nil, s.URL, "GET", "/health", nil, map[string]string{"Accept": "application/msgpack"}).Body
	if want := []byte("\x81\xa6status\xa2ok"); !bytes.Equal(b, want) {
		t.Fatalf("msgpack /health = %q, want %q", b, want)
	}
}

// TestOpsShutdownClosesSilentConnections: a client that connected and
// sent nothing does not hold up shutdown (Go's server waits 5 s for those).
// Seen failing before the fix: the stop took 6.8 s.
func TestOpsShutdownClosesSilentConnections(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// a request on a later connection: the accept loop has taken the
	// silent one (connections are accepted in order)
	apitest.DoJSON(t, s.URL, "GET", "/health", nil)
	start := time.Now()
	s.Stop()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("shutdown took %v with one silent connection open, want well under the 5 s Go waits", took)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the silent connection is still open after shutdown")
	}
}

// TestOpsStartLogsAbsoluteRootDir: a relative --root-dir is logged as the
// absolute path the server uses.
func TestOpsStartLogsAbsoluteRootDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(servertest.Binary(t), "serve", "--root-dir", "./rel-root", "--port", "0", "--log-format", "json")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		for range lines {
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	}()
	want := filepath.Join(dir, "rel-root")
	timeout := time.After(obsWait)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("server exited before logging its start")
			}
			if strings.Contains(line, `"msg":"tollgate started"`) {
				if !strings.Contains(line, `"root_dir":"`+want+`"`) {
					t.Fatalf("start line %s does not name root_dir %s", line, want)
				}
				return
			}
		case <-timeout:
			t.Fatal("no start line")
		}
	}
}

// TestOpsLogsTellWhatHappened: at info the log tells a take stream opening
// and closing (worker, queues, prefetch, jobs sent and returned), each
// budget change, and a reset at warn.
func TestOpsLogsTellWhatHappened(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	apitest.EnqueueN(t, s.URL, "opsq", 2)
	tk := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("opsq", 5), Accept: apitest.AcceptNDJSON, WorkerID: "w-ops"})
	id := tk.NextJob(t, obsWait).ID
	tk.NextJob(t, obsWait)
	obsAck(t, s, id)
	tk.Close()

	open := opsWaitLog(t, s, "worker connected: take stream opened", func(l opsLine) bool { return l.str("worker_id") == "w-ops" })
	if open.str("queues") != "opsq" || open.num("prefetch") != 5 || open.str("level") != "INFO" {
		t.Errorf("stream opened line: %v", open)
	}
	closed := opsWaitLog(t, s, "worker disconnected: take stream closed", func(l opsLine) bool { return l.str("worker_id") == "w-ops" })
	if closed.num("jobs_sent") != 2 || closed.num("jobs_returned_to_ready") != 1 || closed.str("level") != "INFO" {
		t.Errorf("stream closed line: %v", closed)
	}

	apitest.DoJSON(t, s.URL, "PUT", "/budgets/ops-b", map[string]any{"allocation": 5, "strategy": map[string]any{"type": "while_in_flight"}})
	apitest.DoJSON(t, s.URL, "PUT", "/budgets/ops-b", map[string]any{"allocation": 6, "strategy": map[string]any{"type": "while_in_flight"}})
	apitest.DoJSON(t, s.URL, "PATCH", "/budgets/ops-b", map[string]any{"allocation": 100, "strategy": map[string]any{"type": "time_based", "duration_ms": 60000}})
	apitest.DoJSON(t, s.URL, "POST", "/budgets/ops-c", map[string]any{"allocation": 2, "strategy": map[string]any{"type": "time_based", "duration_ms": 1000, "burst": 4}})
	apitest.DoJSON(t, s.URL, "DELETE", "/budgets/ops-c", nil)
	for _, c := range []struct{ msg, limit string }{
		{"budget created", "5 in flight"},
		{"budget replaced", "6 in flight"},
		{"budget updated", "100 per 1m0s"},
		{"budget created", "2 per 1s (burst 4)"},
	} {
		opsWaitLog(t, s, c.msg, func(l opsLine) bool { return l.str("limit") == c.limit && l.str("level") == "INFO" })
	}
	opsWaitLog(t, s, "budget deleted", func(l opsLine) bool { return l.str("budget") == "ops-c" })

	if st := apitest.DoJSON(t, s.URL, "POST", "/reset", nil).Status; st != http.StatusNoContent {
		t.Fatalf("reset: %d", st)
	}
	opsWaitLog(t, s, "reset: every cron group, job and budget was deleted on request", func(l opsLine) bool { return l.str("level") == "WARN" })
	for _, l := range opsLines(s) {
		if l.str("component") == "access" {
			t.Fatalf("access log line without --access-log: %v", l)
		}
	}
}

// TestOpsAccessLog: --access-log writes one line per request with method,
// path, status and size.
func TestOpsAccessLog(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, "--access-log")
	apitest.DoJSON(t, s.URL, "GET", "/jobs/missing?x=1", nil)
	l := opsWaitLog(t, s, "request", func(l opsLine) bool { return l.str("path") == "/jobs/missing?x=1" })
	if l.str("method") != "GET" || l.num("status") != 404 || l.num("bytes") == 0 || l.str("component") != "access" {
		t.Fatalf("access line: %v", l)
	}
}

// TestOpsTraceOverMutualTLS: `tollgate trace --ca --cert --key` follows a
// server that requires client certificates; without --cert it fails.
func TestOpsTraceOverMutualTLS(t *testing.T) {
	t.Parallel()
	pki := opsNewPKI(t)
	client := pki.Client()
	s := servertest.StartTLS(t, client, "--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey, "--tls-client-ca", pki.CA)

	var stderr bytes.Buffer
	refused := exec.Command(servertest.Binary(t), "trace", "--url", s.URL, "--ca", pki.CA)
	refused.Stderr = &stderr
	if err := refused.Run(); err == nil {
		t.Fatal("trace without a client certificate succeeded against an mTLS server")
	}

	cmd := exec.Command(servertest.Binary(t), "trace", "--url", s.URL, "--queue", "tlsq",
		"--ca", pki.CA, "--cert", pki.ClientCert, "--key", pki.ClientKey)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		for range lines {
		}
		_ = cmd.Wait()
	}()
	deadline := time.Now().Add(obsWait)
	for {
		resp, err := client.Get(s.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(b, []byte("\ntollgate_trace_subscribers 1\n")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace never subscribed; stderr: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := client.Post(s.URL+"/jobs", "application/json", strings.NewReader(`{"type":"t","queue":"tlsq","payload":1}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("enqueue over mTLS: %v %v", err, resp)
	}
	resp.Body.Close()
	select {
	case line := <-lines:
		if !strings.Contains(line, "ready") || !strings.Contains(line, "queue=tlsq") {
			t.Fatalf("first trace line %q, want the job's ready step", line)
		}
	case <-time.After(obsWait):
		t.Fatalf("no trace line; stderr: %s", stderr.String())
	}
}

// TestOpsRecoveryLogged: after a crash with a job in flight, the start
// says how many jobs recovery put back to ready.
func TestOpsRecoveryLogged(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	apitest.EnqueueN(t, s.URL, "recq", 1)
	tk := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("recq", 1), Accept: apitest.AcceptNDJSON, WorkerID: "w-rec"})
	tk.NextJob(t, obsWait)
	s.Kill()
	tk.Close()
	s.Restart()
	l := opsWaitLog(t, s, "recovery: jobs that were in flight when the server stopped are ready again", nil)
	if l.num("jobs") != 1 || l.str("level") != "INFO" {
		t.Fatalf("recovery line: %v", l)
	}
}
