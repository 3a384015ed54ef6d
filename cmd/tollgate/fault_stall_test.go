package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// stalledClient is a worker that opens a take stream and never reads it:
// its socket's receive buffer is small (so the server's frames back up
// instead of filling a large kernel buffer) and, over HTTP/2, so is its
// stream's flow-control window.
func stalledClient(h2 bool) *http.Client {
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DialContext: dialer.DialContext, DisableCompression: true, Protocols: new(http.Protocols)}
	if h2 {
		tr.Protocols.SetUnencryptedHTTP2(true)
		tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10}
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: tr}
}

// TestFaultStalledStreamReleasesItsJobs (issue 12, defect 7): a prefetch=0
// take stream whose client stops reading holds the server-wide in-flight
// slots until the stalled-stream rule closes it, as if the client had
// disconnected; its jobs go back to ready and a healthy worker receives
// every job. Over HTTP/1.1 and h2c, by each of the two triggers, with the
// closing logged with the worker id.
func TestFaultStalledStreamReleasesItsJobs(t *testing.T) {
	for _, tt := range []struct {
		name   string
		h2     bool
		flags  []string
		reason string
	}{
		{"http1 stall timeout", false, []string{"--stream-stall-timeout", "1s", "--stream-buffer-limit", "64MiB"}, "frames unwritten for the stall timeout"},
		{"http1 buffer limit", false, []string{"--stream-stall-timeout", "0", "--stream-buffer-limit", "8KiB"}, "unwritten frames over the buffer limit"},
		{"h2c stall timeout", true, []string{"--stream-stall-timeout", "1s", "--stream-buffer-limit", "64MiB"}, "frames unwritten for the stall timeout"},
		{"h2c buffer limit", true, []string{"--stream-stall-timeout", "0", "--stream-buffer-limit", "1KiB"}, "unwritten frames over the buffer limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := servertest.Start(t, append([]string{"--global-in-flight-limit", "100"}, tt.flags...)...)
			const n = 200
			pad := strings.Repeat("x", 2000)
			jobs := make([]map[string]any, n)
			for i := range jobs {
				jobs[i] = map[string]any{"type": "t", "queue": "q", "payload": map[string]any{"i": i, "pad": pad}}
			}
			ids := budEnqueueBulk(t, s, jobs...)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/jobs/take?queue=q&prefetch=0", nil)
			require.NoError(t, err)
			req.Header.Set("Worker-Id", "stalled-worker")
			resp, err := stalledClient(tt.h2).Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			if tt.h2 {
				require.Equal(t, 2, resp.ProtoMajor)
			}
			// The stalled stream takes jobs until its frames back up.
			waitInFlight(t, s)

			// A healthy worker receives and acks every job: those the
			// stalled stream held come back when it is closed. Within
			// 20 s: less than the 30 s write timeout that, before the
			// stalled-stream rule, ended a stream only once a write blocked
			// that long (and never when the frames fit in the buffers).
			// The healthy worker speaks h2c with a large window: its
			// writes never block, so the tiny buffer limits of these cases
			// cannot close it too (over HTTP/1.1 a batch waiting for its
			// ACK in the send queue could exceed 1 KiB at a check).
			h2c := &http.Transport{Protocols: new(http.Protocols)}
			h2c.Protocols.SetUnencryptedHTTP2(true)
			healthy := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=q&prefetch=10", Client: &http.Client{Transport: h2c}, WorkerID: "healthy"})
			got := map[string]bool{}
			deadline := time.Now().Add(20 * time.Second)
			for len(got) < n && time.Now().Before(deadline) {
				j := healthy.NextJob(t, time.Until(deadline))
				got[j.ID] = true
				budAck(t, s, j.ID)
			}
			require.Len(t, got, n)
			for _, id := range ids {
				require.True(t, got[id], "job %s never reached the healthy worker", id)
			}
			logs := s.Logs()
			require.Contains(t, logs, `"msg":"take stream closed: the client stopped reading"`)
			require.Contains(t, logs, `"worker_id":"stalled-worker","reason":"`+tt.reason+`"`)
			t.Logf("%s", grepLines(logs, "stopped reading"))
		})
	}
}

// waitInFlight waits until some job is in flight.
func waitInFlight(t *testing.T, s *servertest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/count?status=in_flight", nil)
		if budInt(t, apitest.Object(t, r, http.StatusOK), "count") > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalled stream took no job within 10s")
		}
		time.Sleep(20 * time.Millisecond) // polling the API, bounded
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
