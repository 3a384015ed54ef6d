package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverProc is a tollgate process started by the harness. It can be
// killed and started again on the same root directory (restart scenario);
// CPU time and peak RSS add up over all of its incarnations.
type serverProc struct {
	log   *slog.Logger
	bin   string
	root  string
	flags []string

	mu       sync.Mutex
	cmd      *exec.Cmd
	pid      int
	addr     string
	done     chan struct{}
	exitErr  error
	tail     []string // last lines of output, for error reports
	logLines int64    // lines of output seen over all incarnations
	starts   int
	// Of the latest incarnation: just before exec, when its "listening"
	// line was read, when GET /health first answered 200, and when its
	// "stored jobs loaded" line was read (the background load ended).
	startedAt, listeningAt, healthyAt, loadedAt time.Time
	// listenTimeout bounds the wait for the "listening" line; 0 = 60 s.
	// The backlog restart allows more: the server loads its store first.
	listenTimeout time.Duration

	// Totals of earlier incarnations (sampled just before they ended).
	pastCPU  float64
	peakRSS  int64
	lastStat procSample
}

// tailLines is how many lines of server output are kept for diagnostics.
const tailLines = 40

// buildServer compiles ./cmd/tollgate of the module bench runs in into dir.
func buildServer(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run bench from the tollgate repository or pass --server-bin")
	}
	bin := filepath.Join(dir, "tollgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tollgate")
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tollgate: %w\n%s", err, b)
	}
	return bin, nil
}

// start runs `tollgate serve` on p.root and waits until it logs
// "listening" and answers GET /health.
func (p *serverProc) start(ctx context.Context) error {
	args := []string{"serve", "--root-dir", p.root, "--host", "127.0.0.1", "--port", "0", "--log-format", "json"}
	args = append(args, p.flags...)
	cmd := exec.Command(p.bin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	startedAt := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	done := make(chan struct{})
	addrCh := make(chan string, 1)
	p.mu.Lock()
	p.cmd, p.pid, p.done, p.exitErr, p.addr = cmd, cmd.Process.Pid, done, nil, ""
	p.startedAt, p.listeningAt, p.healthyAt, p.loadedAt = startedAt, time.Time{}, time.Time{}, time.Time{}
	p.starts++
	p.mu.Unlock()
	p.log.Info("server starting", "pid", cmd.Process.Pid, "root_dir", p.root, "args", strings.Join(args, " "))

	go func() {
		err := cmd.Wait()
		_ = pw.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	go p.readOutput(pr, addrCh)

	listenTimeout := cmp.Or(p.listenTimeout, 60*time.Second)
	wait := time.NewTimer(listenTimeout)
	defer wait.Stop()
	select {
	case a := <-addrCh:
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("server logged unusable addr %q: %w", a, err)
		}
		// Whatever the server reports, bench only ever talks to loopback.
		p.mu.Lock()
		p.listeningAt = time.Now()
		p.addr = net.JoinHostPort("127.0.0.1", port)
		p.mu.Unlock()
	case <-done:
		return fmt.Errorf("server exited before listening: %v\n%s", p.exit(), p.tailText())
	case <-wait.C:
		p.kill()
		return fmt.Errorf("server did not log \"listening\" within %s\n%s", listenTimeout, p.tailText())
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
	return p.waitHealthy(ctx)
}

// readOutput scans the server's output: it looks for the first JSON line
// with "msg":"listening" and an "addr", and keeps a tail of the rest.
func (p *serverProc) readOutput(r io.Reader, addrCh chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.logLines++
		if len(p.tail) >= tailLines {
			copy(p.tail, p.tail[1:])
			p.tail = p.tail[:tailLines-1]
		}
		p.tail = append(p.tail, line)
		p.mu.Unlock()
		if strings.Contains(line, `"msg":"stored jobs loaded"`) {
			p.mu.Lock()
			p.loadedAt = time.Now()
			p.mu.Unlock()
			continue
		}
		if found || !strings.Contains(line, "listening") {
			continue
		}
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
			found = true
			addrCh <- rec.Addr
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// healthPoll is the interval of waitHealthy's GET /health: fine enough to
// time a start-up to about 10 ms.
const healthPoll = 10 * time.Millisecond

// waitHealthy polls GET /health until it answers 200, for at most 30 s.
func (p *serverProc) waitHealthy(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + p.address() + "/health"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.mu.Lock()
				p.healthyAt = time.Now()
				p.mu.Unlock()
				return nil
			}
		}
		select {
		case <-p.doneCh():
			return fmt.Errorf("server exited: %v\n%s", p.exit(), p.tailText())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(healthPoll):
		}
	}
	return fmt.Errorf("server not healthy within 30s\n%s", p.tailText())
}

// loadedAfter returns, for the latest start, the time from exec to its
// "stored jobs loaded" line, once it was seen.
func (p *serverProc) loadedAfter() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loadedAt.IsZero() {
		return 0, false
	}
	return p.loadedAt.Sub(p.startedAt), true
}

// sinceStart is the time since the latest start's exec.
func (p *serverProc) sinceStart() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.startedAt)
}

// startupTimes returns, for the latest start, the time from exec to its
// "listening" line and to its first 200 from GET /health (0 if not seen).
func (p *serverProc) startupTimes() (listening, healthy time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.listeningAt.IsZero() {
		listening = p.listeningAt.Sub(p.startedAt)
	}
	if !p.healthyAt.IsZero() {
		healthy = p.healthyAt.Sub(p.startedAt)
	}
	return listening, healthy
}

// stop sends SIGTERM and waits up to 30 s (then SIGKILL). It returns the
// process's exit error: nil means it exited with status 0, as SPEC §1.1
// requires.
func (p *serverProc) stop() error {
	p.sampleFinal()
	cmd, done := p.current()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		p.forget()
		return errors.New("did not exit within 30s of SIGTERM (killed)")
	}
	err := p.exit()
	p.forget()
	return err
}

// kill sends SIGKILL (a crash) and waits until the process is gone.
func (p *serverProc) kill() {
	p.sampleFinal()
	cmd, done := p.current()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
	p.forget()
}

func (p *serverProc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// forget folds the ended incarnation's CPU time into the totals.
func (p *serverProc) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pastCPU += p.lastStat.cpuSeconds
	p.lastStat = procSample{}
	p.cmd = nil
}

func (p *serverProc) doneCh() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *serverProc) exit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

func (p *serverProc) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *serverProc) currentPID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

func (p *serverProc) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

func (p *serverProc) lineCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logLines
}

func (p *serverProc) tailText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// sample reads the live process's CPU and memory. It remembers the last
// reading so that a killed incarnation's CPU time still counts.
func (p *serverProc) sample() (procSample, bool) {
	p.mu.Lock()
	pid, running := p.pid, p.cmd != nil
	p.mu.Unlock()
	if !running {
		return procSample{}, false
	}
	s, err := readProc(pid)
	if err != nil {
		return procSample{}, false
	}
	p.mu.Lock()
	p.lastStat = s
	p.peakRSS = max(p.peakRSS, s.peakRSS)
	p.mu.Unlock()
	return s, true
}

func (p *serverProc) sampleFinal() { p.sample() }

// totals returns CPU seconds and peak RSS over all incarnations so far.
func (p *serverProc) totals() (cpu float64, peakRSS int64) {
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pastCPU + p.lastStat.cpuSeconds, p.peakRSS
}
