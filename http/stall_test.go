package http

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStreamWatchRules drives the stalled-stream rule with an injected
// clock and send queue: a frame unwritten for the stall timeout, or
// unwritten bytes over the buffer limit, stall the stream; a reader that
// keeps up, however slowly each write goes, does not.
func TestStreamWatchRules(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var queued int64
	newWatch := func(stall time.Duration, limit int64) *streamWatch {
		queued = 0
		return &streamWatch{stallTimeout: stall, bufferLimit: limit, sendQueue: func() (int64, bool) { return queued, true }}
	}

	t.Run("unwritten in the send queue for the timeout", func(t *testing.T) {
		w := newWatch(time.Second, 1<<20)
		w.begin(100, t0)
		w.end()
		queued = 100
		reason, n := w.check(t0.Add(999 * time.Millisecond))
		require.Empty(t, reason)
		require.Equal(t, int64(100), n)
		reason, _ = w.check(t0.Add(time.Second))
		require.Equal(t, stallTimedOut, reason)
	})
	t.Run("a reader that keeps up", func(t *testing.T) {
		w := newWatch(time.Second, 1<<20)
		for i := range 10 {
			at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
			w.begin(100, at)
			w.end()
			queued = 100 // only the newest write waits
			reason, _ := w.check(at.Add(400 * time.Millisecond))
			require.Empty(t, reason, "write %d", i)
		}
		queued = 0
		reason, n := w.check(t0.Add(time.Hour))
		require.Empty(t, reason)
		require.Zero(t, n)
		require.Empty(t, w.pending)
	})
	t.Run("a write that does not return (HTTP/2 flow control)", func(t *testing.T) {
		w := &streamWatch{stallTimeout: time.Second, bufferLimit: 1 << 20}
		w.begin(100, t0)
		reason, n := w.check(t0.Add(500 * time.Millisecond))
		require.Empty(t, reason)
		require.Equal(t, int64(100), n)
		reason, _ = w.check(t0.Add(1500 * time.Millisecond))
		require.Equal(t, stallTimedOut, reason)
	})
	t.Run("over the buffer limit", func(t *testing.T) {
		w := newWatch(0, 1000)
		for i := range 11 {
			w.begin(100, t0)
			w.end()
			queued = int64(100 * (i + 1))
		}
		// over the limit at one check: the bytes may be in transit
		reason, n := w.check(t0)
		require.Empty(t, reason)
		require.Equal(t, int64(1100), n)
		// still unwritten at the next check: stalled
		reason, n = w.check(t0.Add(time.Second))
		require.Equal(t, stallBufferFull, reason)
		require.Equal(t, int64(1100), n)
	})
	t.Run("a large write in transit at one check only", func(t *testing.T) {
		// a healthy HTTP/2 reader: each batch is over the limit while it
		// is written, and every check happens to fall inside a write
		w := &streamWatch{bufferLimit: 1000}
		for i := range 10 {
			at := t0.Add(time.Duration(i) * time.Second)
			w.begin(5000, at)
			reason, n := w.check(at)
			require.Empty(t, reason, "write %d", i)
			require.Equal(t, int64(5000), n)
			w.end()
		}
	})
	t.Run("only bytes still unwritten count, not those written since", func(t *testing.T) {
		w := newWatch(0, 1000)
		w.begin(1500, t0)
		w.end()
		queued = 1500
		reason, _ := w.check(t0)
		require.Empty(t, reason)
		queued = 900 // the reader took 600 bytes: 900 < 1000 left
		w.begin(1500, t0)
		w.end()
		queued += 1500
		reason, _ = w.check(t0.Add(time.Second))
		require.Empty(t, reason)
		reason, _ = w.check(t0.Add(2 * time.Second)) // now 2400 unwritten since the last check
		require.Equal(t, stallBufferFull, reason)
	})
	t.Run("stall timeout 0 never closes", func(t *testing.T) {
		w := newWatch(0, 1<<20)
		w.begin(100, t0)
		queued = 100
		reason, _ := w.check(t0.Add(24 * time.Hour))
		require.Empty(t, reason)
	})
	t.Run("the send queue holds more than the stream handed", func(t *testing.T) {
		w := newWatch(time.Second, 150)
		w.begin(100, t0)
		w.end()
		queued = 400 // response headers and chunk framing count too
		reason, n := w.check(t0)
		require.Empty(t, reason)
		require.Equal(t, int64(100), n)
	})
	require.Equal(t, 10*time.Millisecond, watchInterval(20*time.Millisecond))
	require.Equal(t, 250*time.Millisecond, watchInterval(time.Second))
	require.Equal(t, time.Second, watchInterval(time.Minute))
	require.Equal(t, time.Second, watchInterval(0))
}
