package persistence

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// lockedBuffer is a log sink the committer goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// steppingClock advances by step on every reading, so each commit it times
// takes exactly step.
func steppingClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

// TestSlowCommitIsLogged: a commit slower than the threshold is one warn
// line with its duration and size; a fast one logs nothing.
func TestSlowCommitIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name string
		step time.Duration
		want bool
	}{
		{"slow", 1500 * time.Millisecond, true},
		{"fast", time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			s, err := Open(Config{InMemory: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
				SlowCommit: time.Second, Now: steppingClock(tc.step)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			b := NewBatch(false)
			b.PutBudget(&protocol.Budget{Key: "k", Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}})
			if err := s.Commit(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			got := logs.String()
			if has := strings.Contains(got, `"msg":"slow commit`); has != tc.want {
				t.Fatalf("slow commit logged = %v, want %v; logs:\n%s", has, tc.want, got)
			}
			if tc.want && (!strings.Contains(got, `"level":"WARN"`) || !strings.Contains(got, `"took_ms":1500`) || !strings.Contains(got, `"writes":1`)) {
				t.Fatalf("slow commit line lacks level, duration or size:\n%s", got)
			}
		})
	}
}

// TestBadgerQuietAtInfo: badger's own chatter (tables opened, replay, ...)
// stays out of an info log and shows at debug.
func TestBadgerQuietAtInfo(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		var logs lockedBuffer
		dir := t.TempDir()
		for range 2 { // the second open replays and reports what it found
			s, err := Open(Config{Dir: dir, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: tc.level}))})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if has := strings.Contains(logs.String(), `"component":"badger"`); has != tc.want {
			t.Fatalf("at %v: badger lines present = %v, want %v:\n%s", tc.level, has, tc.want, logs.String())
		}
	}
}
