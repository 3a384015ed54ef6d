package main

// Edge answers of issue 12 (defect 10), against the real binary: TLS
// material checked before the server says it listens, cross-origin writes
// refused, --log-dir rotation.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// edgeWriteCert writes a self-signed certificate for 127.0.0.1 and its key
// as PEM files in dir and returns their paths and the parsed certificate.
func edgeWriteCert(t *testing.T, dir, name string) (certPath, keyPath string, cert *x509.Certificate) {
	t.Helper()
	c := uiIssue(t, &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "tollgate test"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, nil)
	certPath, keyPath = c.writePEM(t, dir, name)
	return certPath, keyPath, c.cert
}

// TestEdgeBadTLSRefusedBeforeListening: a certificate or key that cannot
// be loaded is a start-up error (exit 1, one line on stderr) and the server
// never logs "listening"; a good pair serves HTTPS with HTTP/2 by ALPN.
func TestEdgeBadTLSRefusedBeforeListening(t *testing.T) {
	t.Parallel()
	bin := servertest.Binary(t)
	dir := t.TempDir()
	certA, keyA, cert := edgeWriteCert(t, dir, "a")
	_, keyB, _ := edgeWriteCert(t, dir, "b")
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not a certificate\n"), 0o600))

	for name, flags := range map[string][]string{
		"garbage certificate": {"--tls-cert", garbage, "--tls-key", keyA},
		"garbage key":         {"--tls-cert", certA, "--tls-key", garbage},
		"key of another cert": {"--tls-cert", certA, "--tls-key", keyB},
		"missing certificate": {"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", keyA},
		"bad client CA":       {"--tls-cert", certA, "--tls-key", keyA, "--tls-client-ca", garbage},
	} {
		args := append([]string{"serve", "--root-dir", t.TempDir(), "--host", "127.0.0.1", "--port", "0", "--log-format", "json"}, flags...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s: must fail (stdout %q)", name, stdout.String())
		require.Equal(t, 1, ee.ExitCode(), "%s: exit status", name)
		msg := strings.TrimRight(stderr.String(), "\n")
		require.NotEmpty(t, msg, "%s: message on stderr", name)
		require.NotContains(t, msg, "\n", "%s: one-line message, got %q", name, stderr.String())
		require.NotContains(t, stdout.String(), `"listening"`, "%s: reported after listening was logged", name)
	}

	// the good pair: HTTPS, HTTP/2 negotiated by ALPN
	cmd := exec.Command(bin, "serve", "--root-dir", t.TempDir(), "--host", "127.0.0.1", "--port", "0",
		"--log-format", "json", "--tls-cert", certA, "--tls-key", keyA)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, `"msg":"listening"`) {
				i := strings.Index(line, `"addr":"`) + len(`"addr":"`)
				addr <- line[i : i+strings.IndexByte(line[i:], '"')]
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var base string
	select {
	case a := <-addr:
		base = "https://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("no listening line within 60s")
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	r := apitest.Request(t, client, base, http.MethodGet, "/health", nil, nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, "HTTP/2.0", r.Proto)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "exit after SIGTERM")
}

// TestEdgeCrossOriginWritesRefused: a state-changing request carrying a
// foreign Origin is 403 and changes nothing (SPEC §1.5); the server's own
// origin, --allow-origin entries and requests without Origin work, and
// reads are never refused.
func TestEdgeCrossOriginWritesRefused(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, "--allow-origin", "https://ui.example")
	apitest.Enqueue(t, s.URL, apitest.SimpleJob("xo", 1))
	send := func(method, path, origin string, body any) apitest.Response {
		hdr := map[string]string{"Content-Type": apitest.CTJSON}
		if origin != "" {
			hdr["Origin"] = origin
		}
		var raw []byte
		if body != nil {
			raw = apitest.Encode(t, apitest.JSON, body)
		}
		return apitest.Request(t, nil, s.URL, method, path, raw, hdr)
	}
	for _, origin := range []string{"https://evil.example", "null", "http://localhost:1", "https://ui.example.evil"} {
		apitest.RequireError(t, send(http.MethodPost, "/reset", origin, nil), http.StatusForbidden, "cross-origin request refused")
		apitest.RequireError(t, send(http.MethodPost, "/jobs", origin, apitest.SimpleJob("xo", 2)), http.StatusForbidden, "cross-origin request refused")
		apitest.RequireError(t, send(http.MethodPut, "/budgets/xo", origin, map[string]any{"allocation": 1}), http.StatusForbidden, "cross-origin request refused")
		apitest.RequireError(t, send(http.MethodDelete, "/jobs", origin, nil), http.StatusForbidden, "cross-origin request refused")
		apitest.RequireStatus(t, send(http.MethodGet, "/jobs/count", origin, nil), http.StatusOK)
	}
	require.EqualValues(t, 1, queryCount(t, s.URL, ""), "a refused request changed the jobs")
	apitest.RequireStatus(t, send(http.MethodGet, "/budgets/xo", "", nil), http.StatusNotFound)

	apitest.RequireStatus(t, send(http.MethodPost, "/jobs", s.URL, apitest.SimpleJob("xo", 3)), http.StatusCreated)
	apitest.RequireStatus(t, send(http.MethodPost, "/jobs", "https://ui.example", apitest.SimpleJob("xo", 4)), http.StatusCreated)
	apitest.RequireStatus(t, send(http.MethodPost, "/jobs", "", apitest.SimpleJob("xo", 5)), http.StatusCreated)
	require.EqualValues(t, 4, queryCount(t, s.URL, ""))
	apitest.RequireNoContent(t, send(http.MethodPost, "/reset", s.URL, nil))
	require.EqualValues(t, 0, queryCount(t, s.URL, ""))
}

// TestEdgeLogDirRotates: with --log-dir the log file is rotated at
// --log-max-size and at most --log-max-files old files are kept.
func TestEdgeLogDirRotates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := &serveConfig{LogDir: dir, LogLevel: "info", LogFormat: "json", LogMaxSizeMiB: 1, LogMaxFiles: 2}
	log, closer, err := newLogger(cfg, io.Discard)
	require.NoError(t, err)
	line := strings.Repeat("x", 1000)
	for i := 0; i < 5*1024; i++ { // about 5 MiB
		log.Info("filler", "i", i, "text", line)
	}
	require.NotNil(t, closer)
	require.NoError(t, closer.Close())

	// old files are removed by a background goroutine: poll
	deadline := time.Now().Add(20 * time.Second)
	for {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var total int64
		names := []string{}
		for _, e := range entries {
			info, err := e.Info()
			require.NoError(t, err)
			total += info.Size()
			names = append(names, e.Name())
			require.LessOrEqual(t, info.Size(), int64(1<<20), "%s exceeds --log-max-size", e.Name())
		}
		if len(entries) == 3 {
			require.Contains(t, names, "tollgate.log")
			require.Less(t, total, int64(3<<20)+1)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log dir holds %v (%d bytes), want tollgate.log and 2 rotated files", names, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
