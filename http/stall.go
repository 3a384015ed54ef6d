package http

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Stalled take streams (SPEC §1.4, Decision): a worker that stops reading
// keeps its jobs in flight, and with prefetch 0 it can hold every global
// in-flight slot. A stream is closed, exactly as if the client had
// disconnected, when a frame handed to the connection stays unwritten for
// the stall timeout, or when its unwritten frames exceed the buffer limit
// (and are still unwritten at the next check).
//
// "Unwritten" is what the server can see: the bytes of a write that has not
// returned yet (an HTTP/2 stream whose flow-control window the client does
// not reopen, or a full socket) plus, over HTTP/1.x, the bytes still in the
// socket's send queue (SIOCOUTQ: not yet acknowledged by the peer's kernel).
// Bytes the client's kernel has accepted count as written: a client that
// stops reading is noticed once its receive buffer is full.

type connKey struct{}

// ConnContext is the http.Server ConnContext hook that lets take streams
// find their connection's socket. The server must set it.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// socketOf returns the syscall view of the request's connection (nil when
// ConnContext was not installed or the connection has no socket).
func socketOf(ctx context.Context) syscall.RawConn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	for {
		if u, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
			c = u.NetConn()
			continue
		}
		break
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// streamWatch tracks what one take stream handed to its connection and
// decides when the stream has stalled. Its methods are safe for concurrent
// use: the handler writes, a watcher goroutine checks.
type streamWatch struct {
	stallTimeout time.Duration // 0: never
	bufferLimit  int64
	// sendQueue reports the bytes in the socket's send queue; nil when the
	// stream does not own its connection (HTTP/2) or cannot see it.
	sendQueue func() (int64, bool)

	mu      sync.Mutex
	handed  int64         // bytes handed to the connection so far
	writing int64         // bytes of the write in progress
	pending []handedWrite // writes not known to be written, oldest first
	// handedAtCheck is handed as it was at the previous check: only bytes
	// handed before it count toward the buffer limit, so that a healthy
	// reader's batch, in transit at the moment of a check, does not.
	handedAtCheck int64
}

type handedWrite struct {
	end int64 // handed once this write is written
	at  time.Time
}

// Stall reasons, as logged.
const (
	stallTimedOut   = "frames unwritten for the stall timeout"
	stallBufferFull = "unwritten frames over the buffer limit"
)

// begin records a write of n bytes handed to the connection at now.
func (w *streamWatch) begin(n int, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handed += int64(n)
	w.writing = int64(n)
	w.pending = append(w.pending, handedWrite{end: w.handed, at: now})
}

// end records that the write in progress returned.
func (w *streamWatch) end() {
	w.mu.Lock()
	w.writing = 0
	w.mu.Unlock()
}

// check returns why the stream has stalled at now ("" when it has not) and
// how many bytes are unwritten. The buffer limit counts the bytes that were
// handed before the previous check and are still unwritten: bytes in
// transit for less than one check interval are not a stall.
func (w *streamWatch) check(now time.Time) (string, int64) {
	var queued int64
	if w.sendQueue != nil {
		queued, _ = w.sendQueue()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	unwritten := min(w.writing+queued, w.handed)
	written := w.handed - unwritten
	i := 0
	for i < len(w.pending) && w.pending[i].end <= written {
		i++
	}
	w.pending = w.pending[i:]
	stuck := max(0, w.handedAtCheck-written) // unwritten since the previous check
	w.handedAtCheck = w.handed
	switch {
	case stuck > w.bufferLimit:
		return stallBufferFull, unwritten
	case w.stallTimeout > 0 && len(w.pending) > 0 && now.Sub(w.pending[0].at) >= w.stallTimeout:
		return stallTimedOut, unwritten
	}
	return "", unwritten
}

// watchInterval is how often a stream is checked: a quarter of the stall
// timeout, between 10 ms and 1 s.
func watchInterval(stall time.Duration) time.Duration {
	if stall <= 0 {
		return time.Second
	}
	return min(max(stall/4, 10*time.Millisecond), time.Second)
}

// newStreamWatch makes the watch of a take stream on request r.
func (a *API) newStreamWatch(r *http.Request) *streamWatch {
	w := &streamWatch{stallTimeout: a.cfg.StreamStallTimeout, bufferLimit: a.cfg.StreamBufferLimit}
	if r.ProtoMajor == 1 {
		if raw := socketOf(r.Context()); raw != nil {
			w.sendQueue = sendQueueOf(raw)
		}
	}
	return w
}

// stallWatcher is the goroutine that checks a stream's watch.
type stallWatcher struct {
	done  chan struct{} // closed when the stream has stalled
	quit  chan struct{}
	once  sync.Once
	isSet atomic.Bool
}

func (s *stallWatcher) closed() bool { return s.isSet.Load() }

func (s *stallWatcher) stop() { s.once.Do(func() { close(s.quit) }) }

// watchStream checks the watch periodically; when the stream has stalled
// it logs why, closes done and cuts the write deadline, so a write blocked
// on the stalled connection returns and the handler ends the stream.
func (a *API) watchStream(w *streamWatch, rc *http.ResponseController, log *slog.Logger) *stallWatcher {
	s := &stallWatcher{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		tick := time.NewTicker(watchInterval(w.stallTimeout))
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				return
			case now := <-tick.C:
				reason, unwritten := w.check(now)
				if reason == "" {
					continue
				}
				log.Warn("take stream closed: the client stopped reading", "reason", reason, "unwritten_bytes", unwritten,
					"stall_timeout", w.stallTimeout, "buffer_limit", w.bufferLimit)
				s.isSet.Store(true)
				close(s.done)
				_ = rc.SetWriteDeadline(time.Now())
				return
			}
		}
	}()
	return s
}
