// Package servertest starts the real tollgate binary for integration tests:
// it builds the binary once per test process, runs it on a free port with a
// root directory in a temp dir, waits until it serves, and stops it with
// SIGTERM (or SIGKILL, for crash tests). Tests then speak HTTP to it as any
// client would. A package that uses it runs its tests through Main, which
// removes the binary afterwards.
package servertest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds ./cmd/tollgate once (with -race when the tests run with it)
// and returns the path of the executable. TOLLGATE_TEST_BINARY names a
// prebuilt binary to use instead (to see a test fail on an older build).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("TOLLGATE_TEST_BINARY"); p != "" {
			buildPath = p
			return
		}
		dir, err := os.MkdirTemp("", "tollgate-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "tollgate")
		args := []string{"build", "-o", buildPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/tollgate/tollgate/cmd/tollgate")
		cmd := exec.Command("go", args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Main runs a test package's tests (call it from TestMain) and then
// removes the binary Binary built, so no run leaves one in the temp dir.
// It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if err := RemoveBinary(); err != nil {
		fmt.Fprintln(os.Stderr, "servertest:", err)
	}
	return code
}

// RemoveBinary deletes the binary Binary built, and its temp directory,
// if one was built; later calls to Binary fail.
func RemoveBinary() error {
	buildOnce.Do(func() { buildErr = errors.New("servertest: the binary was removed") })
	if buildPath == "" {
		return nil
	}
	dir := filepath.Dir(buildPath)
	buildPath, buildErr = "", errors.New("servertest: the binary was removed")
	return os.RemoveAll(dir)
}

// Server is one running tollgate process.
type Server struct {
	t       testing.TB
	RootDir string
	Args    []string
	// Wrapper, when set, is a command the binary runs under, such as
	// prlimit with its options; it must exec the binary in its own process.
	Wrapper []string
	URL     string // e.g. http://127.0.0.1:43121
	Addr    string // e.g. 127.0.0.1:43121
	// Client speaks to the server: http.DefaultClient unless StartTLS set
	// one that trusts the server's certificate (and presents the client's).
	Client *http.Client

	scheme string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs strings.Builder
	done chan struct{}
	exit error
}

// Start runs tollgate on a fresh temp root dir with extra flags and waits
// until it listens. It is stopped with SIGTERM when the test ends.
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return StartIn(t, t.TempDir(), extraArgs...)
}

// StartTLS runs tollgate with flags that make it serve HTTPS (--tls-cert,
// --tls-key, maybe --tls-client-ca); client is what the Server uses to
// check that it serves, and keeps in its Client field.
func StartTLS(t testing.TB, client *http.Client, extraArgs ...string) *Server {
	t.Helper()
	return launch(t, &Server{RootDir: t.TempDir(), Args: extraArgs, Client: client, scheme: "https"})
}

// StartIn runs tollgate on the given root dir (use it to restart on the same
// data after Stop or Kill).
func StartIn(t testing.TB, rootDir string, extraArgs ...string) *Server {
	t.Helper()
	return launch(t, &Server{RootDir: rootDir, Args: extraArgs})
}

// StartWrapped is StartIn with the binary run under a wrapper command
// (e.g. prlimit --nofile=256:256), kept for restarts.
func StartWrapped(t testing.TB, rootDir string, wrapper []string, extraArgs ...string) *Server {
	t.Helper()
	return launch(t, &Server{RootDir: rootDir, Args: extraArgs, Wrapper: wrapper})
}

// launch fills in what every Server needs (plain HTTP through the default
// client unless set), starts it, and stops it when the test ends.
func launch(t testing.TB, s *Server) *Server {
	t.Helper()
	s.t = t
	if s.Client == nil {
		s.Client = http.DefaultClient
	}
	if s.scheme == "" {
		s.scheme = "http"
	}
	s.start()
	t.Cleanup(func() { s.Stop() })
	return s
}

func (s *Server) start() {
	t := s.t
	t.Helper()
	args := []string{"serve", "--root-dir", s.RootDir, "--host", "127.0.0.1", "--port", "0",
		"--log-format", "json", "--log-level", "info"}
	args = append(args, s.Args...)
	argv := append(append(append([]string(nil), s.Wrapper...), Binary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	s.done = make(chan struct{})
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line)
			s.logs.WriteByte('\n')
			s.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
				select {
				case addrCh <- rec.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		err := cmd.Wait()
		s.mu.Lock()
		s.exit = err
		s.mu.Unlock()
		close(s.done)
	}()
	select {
	case addr := <-addrCh:
		s.Addr = addr
		s.URL = s.scheme + "://" + addr
	case <-s.done:
		t.Fatalf("tollgate exited before listening: %v\n%s", s.exit, s.Logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("tollgate did not listen within 60s\n%s", s.Logs())
	}
	s.waitHealthy()
}

func (s *Server) waitHealthy() {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := s.Client.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.done:
			s.t.Fatalf("tollgate exited: %v\n%s", s.exit, s.Logs())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.t.Fatalf("tollgate not healthy within 30s\n%s", s.Logs())
}

// Logs returns everything the process printed so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stop sends SIGTERM and waits for exit; it fails the test unless the exit
// status is 0. Calling it on a stopped server does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			s.t.Errorf("tollgate did not exit within 30s of SIGTERM\n%s", s.Logs())
		}
		s.mu.Lock()
		err := s.exit
		s.mu.Unlock()
		if err != nil {
			s.t.Errorf("tollgate exited with %v after SIGTERM\n%s", err, s.Logs())
		}
	}
	s.cmd = nil
}

// Kill sends SIGKILL (a crash) and waits for the process to be gone.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// PID is the process id of the running server (0 when stopped), for tests
// that read its resource use from /proc.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Restart starts the server again on the same root dir and flags, after Stop or Kill.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.Stop()
	}
	s.start()
}
