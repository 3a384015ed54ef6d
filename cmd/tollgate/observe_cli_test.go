package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

var obsLineStart = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  `)

// TestObserveTraceCLI runs `tollgate trace --queue Q` against a server and
// reads its lines as a person would: one line per event, no colour when
// stdout is not a terminal; SIGINT ends it with status 0.
func TestObserveTraceCLI(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	cmd := exec.Command(servertest.Binary(t), "trace", "--url", s.URL, "--queue", "cliq")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			for range lines {
			}
			_ = cmd.Wait()
		}
	})

	// The CLI prints nothing before the first event: wait until the server
	// counts its subscription.
	deadline := time.Now().Add(obsWait)
	for {
		if v, ok := obsValue(obsMetrics(t, s), "tollgate_trace_subscribers", nil); ok && v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tollgate trace did not subscribe within %v: %s", obsWait, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	obsBudget(t, s, "clib", obsWIF(1))
	ids := obsEnqueue(t, s, "cliq", "clib", 2)
	apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("cliq", 5), Accept: apitest.AcceptNDJSON, WorkerID: "cli-worker"})

	want := map[string]*regexp.Regexp{
		"granted":    regexp.MustCompile(`budget/clib +reserve_granted +job=` + ids[0] + ` queue=cliq cost=1 tokens=1→0$`),
		"dispatched": regexp.MustCompile(`queue +dispatched +job=` + ids[0] + ` queue=cliq budgets=clib worker=cli-worker stream=\d+$`),
		"parked":     regexp.MustCompile(`budget/clib +parked +job=` + ids[1] + ` queue=cliq cost=1 tokens=0 position=1$`),
	}
	var got []string
	timeout := time.After(obsWait)
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("tollgate trace ended: %s\n%s", stderr.String(), strings.Join(got, "\n"))
			}
			got = append(got, l)
			if !obsLineStart.MatchString(l) || strings.Contains(l, "\x1b[") {
				t.Fatalf("line %q: want a plain line starting with the time", l)
			}
			for k, re := range want {
				if re.MatchString(l) {
					delete(want, k)
				}
			}
		case <-timeout:
			t.Fatalf("lines not seen within %v: %v\ngot:\n%s", obsWait, want, strings.Join(got, "\n"))
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	err = cmd.Wait()
	waited = true
	if err != nil {
		t.Fatalf("tollgate trace exited with %v after SIGINT: %s", err, stderr.String())
	}
}

// TestObserveTracePrinter checks the line format, colours and the
// dropped-events line.
func TestObserveTracePrinter(t *testing.T) {
	tok := func(v float64) *float64 { return &v }
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.Local).UnixMilli()
	ev := &traceEvent{Time: at, Kind: "timer_armed", Actor: "budget/api", JobID: "j1", Queue: "q", Budget: "api", Cost: 2, Tokens: tok(0.25), DueAt: at + 1500}
	var b bytes.Buffer
	p := &tracePrinter{w: &b}
	if err := p.print(ev); err != nil {
		t.Fatal(err)
	}
	const want = "03:04:05.006  budget/api           timer_armed       job=j1 queue=q cost=2 tokens=0.25 due=03:04:06.506 (in 1.5s)\n"
	if b.String() != want {
		t.Fatalf("line\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	p.color = true
	_ = p.print(&traceEvent{Time: at, Kind: "reserve_refused", Actor: "budget/api", JobID: "j1", Budget: "api", Cost: 1, TokensBefore: tok(0.5), Tokens: tok(0.5)})
	if !strings.Contains(b.String(), ansiRed+"reserve_refused") || !strings.Contains(b.String(), "0.5→0.5") {
		t.Fatalf("coloured line %q", b.String())
	}
	b.Reset()
	p.color = false
	_ = p.print(&traceEvent{Time: at, Kind: "dropped", Actor: "tracer", Count: 42})
	if b.String() != "03:04:05.006  !! 42 events dropped: this reader was too slow\n" {
		t.Fatalf("dropped line %q", b.String())
	}
}

// TestObserveTraceCLIErrors: bad flags and a server that answers an error
// end the command with status 1 and one line on stderr.
func TestObserveTraceCLIErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid query parameters: nope"}`))
	}))
	defer srv.Close()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"trace", "--color", "pink"}, `tollgate trace: invalid --color "pink": expected auto, always or never`},
		{[]string{"trace", "--url", "ftp://x"}, `tollgate trace: invalid --url "ftp://x": expected http://host:port`},
		{[]string{"trace", "extra"}, `tollgate trace: unexpected argument "extra"`},
		{[]string{"trace", "--url", srv.URL, "--job", "x"}, `tollgate trace: ` + srv.URL + `/debug/trace?job=x: 400 invalid query parameters: nope`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != 1 || strings.TrimSpace(stderr.String()) != c.want {
			t.Fatalf("%v: exit %d, stderr %q, want 1 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"trace", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "Usage: tollgate trace") {
		t.Fatalf("--help: exit %d, %q", code, stderr.String())
	}
}
