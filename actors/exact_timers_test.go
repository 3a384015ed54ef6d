package actors

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

type exactMsg struct{ n int }

// exactTimersHarness starts an actor system with one actor that reports
// each exactMsg and when it arrived.
func exactTimersHarness(t *testing.T) (*ExactTimers, *actor.PID, chan exactArrival) {
	t.Helper()
	system := quietActorSystem()
	got := make(chan exactArrival, 64)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*exactMsg); ok {
			got <- exactArrival{n: m.n, at: time.Now()}
		}
	}))
	timers := NewExactTimers(system.Root, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() {
		timers.Stop()
		system.Shutdown()
	})
	return timers, pid, got
}

type exactArrival struct {
	n  int
	at time.Time
}

func receiveExact(t *testing.T, got chan exactArrival) exactArrival {
	t.Helper()
	select {
	case a := <-got:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10 s")
		return exactArrival{}
	}
}

// TestExactTimersSendOnceAtTheirMoment: messages armed out of order arrive
// in the order of their moments, each once and never before its moment; a
// cancelled one never arrives (the message armed after it in time arrives,
// so it had its chance); on Linux a kernel timer backs them.
func TestExactTimersSendOnceAtTheirMoment(t *testing.T) {
	timers, pid, got := exactTimersHarness(t)
	start := time.Now()
	delays := []time.Duration{9, 3, 15, 6, 12} // ms; 12 is cancelled
	var cancel func()
	for i, d := range delays {
		c := timers.SendOnce(d*time.Millisecond, pid, &exactMsg{n: i})
		if d == 12 {
			cancel = c
		}
	}
	cancel()
	cancel() // twice is harmless
	if runtime.GOOS == "linux" && timers.kernel == nil {
		t.Fatal("no kernel timer on Linux")
	}
	for _, want := range []int{1, 3, 0, 2} { // by moment, 4 cancelled
		a := receiveExact(t, got)
		if a.n != want {
			t.Fatalf("message %d arrived, want %d", a.n, want)
		}
		if early := delays[a.n]*time.Millisecond - a.at.Sub(start); early > 0 {
			t.Fatalf("message %d arrived %v before its moment", a.n, early)
		}
	}
	select {
	case a := <-got:
		t.Fatalf("message %d arrived after the last one", a.n)
	default:
	}
	timers.mu.Lock()
	defer timers.mu.Unlock()
	if len(timers.pending) != 0 {
		t.Fatalf("%d messages still pending", len(timers.pending))
	}
}

// TestExactTimersSendEachOnce: a message sent by the kernel timer's pass is
// not sent again by its runtime timer, and the reverse.
func TestExactTimersSendEachOnce(t *testing.T) {
	timers, pid, got := exactTimersHarness(t)
	timers.SendOnce(time.Hour, pid, &exactMsg{n: 1})
	timers.SendOnce(time.Hour, pid, &exactMsg{n: 2})
	timers.mu.Lock()
	first, second := timers.pending[0], timers.pending[1]
	first.due = time.Now().Add(-time.Millisecond) // its moment has come
	if first.msg.(*exactMsg).n != 1 {
		first, second = second, first
		first.due = time.Now().Add(-time.Millisecond)
	}
	timers.mu.Unlock()

	timers.fireDue() // the kernel timer's pass: sends 1 only
	timers.fire(first)
	timers.fire(second) // the runtime timer of 2: sends it
	timers.fireDue()
	for _, want := range []int{1, 2} {
		if a := receiveExact(t, got); a.n != want {
			t.Fatalf("message %d arrived, want %d", a.n, want)
		}
	}
	// a message sent twice would be on its way with the others; one armed
	// now arrives after any such
	timers.SendOnce(0, pid, &exactMsg{n: 3})
	if a := receiveExact(t, got); a.n != 3 {
		t.Fatalf("message %d arrived again", a.n)
	}
}

// TestExactTimersStop: Stop cancels what is pending and later sends are
// ignored. The pending message is due in a minute, so that it cannot fall
// due before Stop on a loaded machine (with 1 ms, a test preempted
// between the two calls saw it arrive, sent before Stop).
func TestExactTimersStop(t *testing.T) {
	timers, pid, got := exactTimersHarness(t)
	timers.SendOnce(time.Minute, pid, &exactMsg{n: 1})
	timers.Stop()
	timers.SendOnce(0, pid, &exactMsg{n: 2})
	if timers.kernel != nil || len(timers.pending) != 0 {
		t.Fatal("stopped timers keep a kernel timer or pending messages")
	}
	select {
	case a := <-got:
		t.Fatalf("message %d arrived after Stop", a.n)
	case <-time.After(50 * time.Millisecond):
	}
}
