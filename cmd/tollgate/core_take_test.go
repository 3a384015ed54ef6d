package main

// Core black-box tests of GET /jobs/take: stream formats, heartbeats, query
// and Accept errors, dispatch order, prefetch flow control, disconnect
// requeue and the server-wide in-flight cap.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// §1.4, §3.4: the three stream formats, their framing and heartbeats.
func TestCoreTakeStreamFormats(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	accepts := []string{
		"", // NDJSON
		"application/x-ndjson",
		"application/json",
		"*/*",
		"application/vnd.zizq.msgpack-stream",
		"application/msgpack",
		"text/event-stream",
		"application/x-ndjson, text/event-stream", // SSE is checked first
		"application/json, application/msgpack",   // msgpack stream before NDJSON
	}
	for i, accept := range accepts {
		t.Run(fmt.Sprintf("Accept %q", accept), func(t *testing.T) {
			q := fmt.Sprintf("fmt%d", i)
			st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=" + q, Accept: accept, WorkerID: "w-" + q})
			ct := st.Resp.Header.Get("Content-Type")
			if st.Resp.ProtoMajor == 1 {
				require.Equal(t, []string{"chunked"}, st.Resp.TransferEncoding, "HTTP/1.1 streams use chunked encoding")
			}

			// Idle: heartbeats only, the first one no earlier than the interval.
			f, ok := st.Next(5 * time.Second)
			require.True(t, ok, "heartbeat within 5s with --heartbeat-interval 100ms")
			require.NoError(t, f.Err)
			require.True(t, f.Heartbeat, "idle stream sends heartbeats")
			require.GreaterOrEqual(t, f.At.Sub(st.Opened), 100*time.Millisecond, "first heartbeat after the interval")
			switch ct {
			case apitest.AcceptNDJSON:
				require.Equal(t, []byte("\n"), f.Raw, "NDJSON heartbeat is a lone newline")
			case apitest.AcceptMsgpack:
				require.Equal(t, []byte{0, 0, 0, 0}, f.Raw, "msgpack heartbeat is a zero length")
			case apitest.AcceptSSE:
				require.Equal(t, ":heartbeat", string(f.Raw), "SSE heartbeat is the comment :heartbeat")
			}

			before := apitest.NowMS()
			j := apitest.Enqueue(t, s.URL, map[string]any{"type": "fmt", "queue": q, "priority": 7,
				"payload": map[string]any{"k": []any{1, "x", nil, 2.5}}})
			fr := st.NextJobFrame(t, 10*time.Second)
			after := apitest.NowMS()
			got := *fr.Job
			require.Equal(t, j.ID, got.ID)
			require.Equal(t, "fmt", got.Type)
			require.Equal(t, q, got.Queue)
			require.Equal(t, uint16(7), got.Priority)
			require.Equal(t, "in_flight", got.Status)
			require.Equal(t, j.ReadyAt, got.ReadyAt)
			require.Equal(t, uint32(0), got.Attempts)
			require.True(t, got.Has("payload"), "take frames carry the payload")
			require.Equal(t, map[string]any{"k": []any{"i:1", "x", nil, "f:2.5"}}, apitest.Canon(t, got.Payload))
			require.NotNil(t, got.DequeuedAt)
			require.GreaterOrEqual(t, *got.DequeuedAt, before)
			require.LessOrEqual(t, *got.DequeuedAt, after)
			require.False(t, got.Has("duplicate"))
			require.False(t, got.Has("folded"))
			require.False(t, got.Has("failed_at"))
			if ct != apitest.AcceptMsgpack {
				var compact bytes.Buffer
				require.NoError(t, json.Compact(&compact, fr.Raw))
				require.Equal(t, compact.String(), string(fr.Raw), "job frames are compact JSON")
			}
			g := apitest.MustGet(t, s.URL, j.ID)
			require.Equal(t, "in_flight", g.Status)
			require.Equal(t, got.DequeuedAt, g.DequeuedAt)

			apitest.Ack(t, s.URL, j.ID)
			// Heartbeats continue after jobs.
			beats := 0
			deadline := time.Now().Add(5 * time.Second)
			for beats < 2 && time.Now().Before(deadline) {
				f, ok := st.Next(time.Until(deadline))
				if !ok {
					break
				}
				require.NoError(t, f.Err)
				require.Nil(t, f.Job, "no other job expected")
				beats++
			}
			require.Equal(t, 2, beats, "heartbeats keep coming on an idle stream")
		})
	}

	t.Run("heartbeat cadence", func(t *testing.T) {
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=cadence"})
		window := time.Now().Add(time.Second)
		beats := 0
		for time.Now().Before(window) {
			f, ok := st.Next(time.Until(window))
			if !ok {
				break
			}
			require.NoError(t, f.Err)
			require.True(t, f.Heartbeat)
			beats++
		}
		// One heartbeat per 100 ms of idleness: at most ~10 in a second
		// (12 allows for delivery jitter), and clearly more than one.
		require.LessOrEqual(t, beats, 12, "heartbeats are not sent faster than --heartbeat-interval")
		require.GreaterOrEqual(t, beats, 3, "heartbeats every 100 ms")
	})
}

// §1.4, §3.4, §5: 406 for an unsupported Accept, 400 for bad query strings.
func TestCoreTakeErrors(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	for _, accept := range []string{"text/html", "application/xml", "text/plain"} {
		st, r := apitest.TryTake(t, s.URL, apitest.TakeOpts{Query: "queue=x", Accept: accept})
		require.Nil(t, st, "Accept %q must be refused", accept)
		apitest.RequireStatus(t, r, http.StatusNotAcceptable)
		require.Equal(t, apitest.JSON, r.Format(t))
		apitest.RequireServerHeader(t, r.Header)
		require.Equal(t, map[string]any{"error": "not acceptable", "supported": coreStreamSupported}, r.Map(t))
	}

	for _, q := range []string{"foo=1", "queue=a&limit=5", "prefetch=-1", "prefetch=abc", "prefetch=1.5", "prefetch=99999999999999999999999"} {
		st, r := apitest.TryTake(t, s.URL, apitest.TakeOpts{Query: q})
		require.Nil(t, st, "query %q must be refused", q)
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid query parameters: ")
		require.Equal(t, apitest.JSON, r.Format(t))
		apitest.RequireServerHeader(t, r.Header)
	}
	// A bad query with a streaming Accept still gets the JSON error body.
	st, r := apitest.TryTake(t, s.URL, apitest.TakeOpts{Query: "bogus=1", Accept: apitest.AcceptSSE})
	require.Nil(t, st)
	apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid query parameters: ")

	// Valid queries: empty queue value = no filter, comma lists with empty items.
	jA := apitest.Enqueue(t, s.URL, apitest.SimpleJob("qa", 1))
	st = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=&prefetch=0"})
	got := st.NextJob(t, 10*time.Second)
	require.Equal(t, jA.ID, got.ID, "queue= means no filter")
	apitest.Ack(t, s.URL, jA.ID)
	st.Close()

	st = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=,qb,,qc,&prefetch=5"})
	jB := apitest.Enqueue(t, s.URL, apitest.SimpleJob("qb", 1))
	jC := apitest.Enqueue(t, s.URL, apitest.SimpleJob("qc", 1))
	require.Equal(t, []string{jB.ID, jC.ID}, apitest.IDs(st.Jobs(t, 2, 10*time.Second)))
	apitest.Ack(t, s.URL, jB.ID)
	apitest.Ack(t, s.URL, jC.ID)
}

// §2.3, §3.4: dispatch in ascending (priority, id) over the requested queues.
func TestCoreTakeDispatchOrder(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	spec := []struct {
		queue    string
		priority any
	}{
		{"oa", 5}, {"ob", 1}, {"oc", 0}, {"oa", 5}, {"ob", 0}, {"oa", 65535}, {"ob", nil}, {"oa", 1}, {"oc", 1}, {"ob", 5}, {"oa", nil},
	}
	var bodies []map[string]any
	for i, sp := range spec {
		b := map[string]any{"type": "t", "queue": sp.queue, "payload": i}
		if sp.priority != nil {
			b["priority"] = sp.priority
		}
		bodies = append(bodies, b)
	}
	jobs := apitest.Bulk(t, s.URL, bodies)

	// Expected: jobs of oa and ob, sorted by (priority, id); ids follow request order.
	var want []string
	for _, p := range []uint16{0, 1, 5, 32768, 65535} {
		for _, j := range jobs {
			if j.Priority == p && (j.Queue == "oa" || j.Queue == "ob") {
				want = append(want, j.ID)
			}
		}
	}
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=oa,ob&prefetch=0"})
	got := st.Jobs(t, len(want), 20*time.Second)
	require.Equal(t, want, apitest.IDs(got), "dispatch order is (priority, id) across the requested queues")
	st.NoJobFor(t, 300*time.Millisecond, true) // nothing from oc

	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=oc&prefetch=0"})
	got2 := st2.Jobs(t, 2, 10*time.Second)
	require.Equal(t, []string{jobs[2].ID, jobs[8].ID}, apitest.IDs(got2))

	// A retried (older) job keeps its id and goes ahead of younger ready jobs.
	more := apitest.EnqueueN(t, s.URL, "od", 3)
	st3 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=od"})
	require.Equal(t, more[0].ID, st3.NextJob(t, 10*time.Second).ID)
	r := apitest.Fail(t, s.URL, more[0].ID, map[string]any{"message": "again", "retry_at": apitest.NowMS() - 1000})
	apitest.RequireStatus(t, r, http.StatusOK)
	next := st3.NextJob(t, 10*time.Second)
	if next.ID != more[0].ID {
		// more[1] was taken before more[0] was promoted; once more[0] is
		// ready again it must come before the younger more[2].
		require.Equal(t, more[1].ID, next.ID)
		apitest.WaitStatus(t, s.URL, more[0].ID, "ready")
		apitest.Ack(t, s.URL, more[1].ID)
		require.Equal(t, more[0].ID, st3.NextJob(t, 10*time.Second).ID, "the retried job keeps its id and its place")
	}
}

// §3.4 steps 2-5: prefetch flow control; acks, failures, deletions free slots.
func TestCoreTakePrefetch(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	jobs := apitest.EnqueueN(t, s.URL, "pf", 7)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=pf&prefetch=2"})
	require.Equal(t, apitest.IDs(jobs[:2]), apitest.IDs(st.Jobs(t, 2, 10*time.Second)))
	st.NoJobFor(t, 600*time.Millisecond, true)

	apitest.Ack(t, s.URL, jobs[0].ID)
	require.Equal(t, jobs[2].ID, st.NextJob(t, 10*time.Second).ID, "an ack frees one slot")
	st.NoJobFor(t, 300*time.Millisecond, true)

	r := apitest.Fail(t, s.URL, jobs[1].ID, map[string]any{"message": "x", "retry_at": apitest.NowMS() + 3_600_000})
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, jobs[3].ID, st.NextJob(t, 10*time.Second).ID, "a failure frees one slot")
	st.NoJobFor(t, 300*time.Millisecond, true)

	apitest.RequireNoContent(t, apitest.Request(t, nil, s.URL, http.MethodDelete, "/jobs/"+jobs[2].ID, nil, nil))
	require.Equal(t, jobs[4].ID, st.NextJob(t, 10*time.Second).ID, "a deletion frees one slot")
	st.NoJobFor(t, 300*time.Millisecond, true)

	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/success", map[string]any{"ids": []string{jobs[3].ID, jobs[4].ID}}))
	require.Equal(t, apitest.IDs(jobs[5:7]), apitest.IDs(st.Jobs(t, 2, 10*time.Second)), "a bulk ack frees both slots")
	st.NoJobFor(t, 300*time.Millisecond, true)
	for _, j := range jobs[5:7] {
		g := apitest.MustGet(t, s.URL, j.ID)
		require.Equal(t, "in_flight", g.Status)
	}

	// Default prefetch is 1.
	more := apitest.EnqueueN(t, s.URL, "pf1", 2)
	st1 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=pf1"})
	require.Equal(t, more[0].ID, st1.NextJob(t, 10*time.Second).ID)
	st1.NoJobFor(t, 500*time.Millisecond, true)
	require.Equal(t, "ready", apitest.MustGet(t, s.URL, more[1].ID).Status, "a job is only taken when the stream has room")

	// Prefetch 0 is unlimited.
	many := apitest.EnqueueN(t, s.URL, "pf0", 30)
	st0 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=pf0&prefetch=0"})
	require.Equal(t, apitest.IDs(many), apitest.IDs(st0.Jobs(t, 30, 20*time.Second)))
}

// §3.4 step 6, §2.5: closing a stream returns its jobs to ready with
// attempts unchanged and dequeued_at kept; other streams get them again.
func TestCoreTakeDisconnectRequeue(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	t.Run("requeued jobs keep attempts and dequeued_at", func(t *testing.T) {
		jobs := apitest.EnqueueN(t, s.URL, "rq", 4)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=rq&prefetch=2", Accept: apitest.AcceptMsgpack})
		held := st.Jobs(t, 2, 10*time.Second)
		require.Equal(t, apitest.IDs(jobs[:2]), apitest.IDs(held))
		st.Close()

		for _, h := range held {
			g := apitest.WaitStatus(t, s.URL, h.ID, "ready")
			require.Equal(t, uint32(0), g.Attempts, "requeue does not change attempts")
			require.NotNil(t, g.DequeuedAt)
			require.Equal(t, *h.DequeuedAt, *g.DequeuedAt, "dequeued_at kept after requeue")
			require.False(t, g.Has("failed_at"))
			r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+h.ID+"/success", nil, nil)
			apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
		}

		st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=rq&prefetch=0", Accept: apitest.AcceptSSE})
		again := st2.Jobs(t, 4, 10*time.Second)
		require.Equal(t, apitest.IDs(jobs), apitest.IDs(again), "requeued jobs go ahead of younger jobs")
		for i, j := range again[:2] {
			require.Equal(t, uint32(0), j.Attempts)
			require.NotNil(t, j.DequeuedAt)
			require.GreaterOrEqual(t, *j.DequeuedAt, *held[i].DequeuedAt, "dequeued_at is set on each dispatch")
		}
		r := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/success", map[string]any{"ids": apitest.IDs(again)})
		apitest.RequireNoContent(t, r)
	})

	t.Run("an idle stream is woken by the requeue", func(t *testing.T) {
		jobs := apitest.EnqueueN(t, s.URL, "rqw", 2)
		st1 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=rqw&prefetch=2"})
		require.Equal(t, apitest.IDs(jobs), apitest.IDs(st1.Jobs(t, 2, 10*time.Second)))
		st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=rqw&prefetch=2"})
		st2.NoJobFor(t, 300*time.Millisecond, true)
		st1.Close()
		require.Equal(t, apitest.IDs(jobs), apitest.IDs(st2.Jobs(t, 2, 10*time.Second)))
		for _, j := range jobs {
			apitest.Ack(t, s.URL, j.ID)
		}
	})
}

// §3.10: --global-in-flight-limit (-l) caps in-flight jobs across streams.
func TestCoreGlobalInFlightLimit(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat, "-l", "2")
	jobs := apitest.EnqueueN(t, s.URL, "gl", 5)
	a := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=gl&prefetch=0"})
	b := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=gl&prefetch=0"})

	// Collect from both streams until two jobs arrived, then nothing more.
	collect := func(want int, quiet time.Duration) []apitest.Job {
		var got []apitest.Job
		deadline := time.Now().Add(10 * time.Second)
		for len(got) < want && time.Now().Before(deadline) {
			for _, st := range []*apitest.Stream{a, b} {
				if f, ok := st.Next(20 * time.Millisecond); ok {
					require.NoError(t, f.Err)
					if f.Job != nil {
						got = append(got, *f.Job)
					}
				}
			}
		}
		require.Len(t, got, want, "jobs delivered across both streams")
		quietEnd := time.Now().Add(quiet)
		for time.Now().Before(quietEnd) {
			for _, st := range []*apitest.Stream{a, b} {
				if f, ok := st.Next(20 * time.Millisecond); ok {
					require.NoError(t, f.Err)
					require.Nil(t, f.Job, "global in-flight limit 2 exceeded: %q", f.Raw)
				}
			}
		}
		return got
	}
	first := collect(2, 600*time.Millisecond)
	require.ElementsMatch(t, apitest.IDs(jobs[:2]), apitest.IDs(first))
	require.Equal(t, "ready", apitest.MustGet(t, s.URL, jobs[2].ID).Status)

	apitest.Ack(t, s.URL, first[0].ID)
	second := collect(1, 400*time.Millisecond)
	require.Equal(t, jobs[2].ID, second[0].ID)
}

// §3.4 step 3: a job is only taken when the stream can accept another frame;
// a reader that does not read never has every job marked in flight.
func TestCoreTakeBackPressure(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	const n = 40
	big := strings.Repeat("z", 256<<10) // 40 x 256 KiB = 10 MiB, more than the socket buffers hold
	var jobs []apitest.Job
	for i := 0; i < n; i += 10 {
		var bodies []map[string]any
		for k := i; k < i+10; k++ {
			bodies = append(bodies, map[string]any{"type": "t", "queue": "bp", "payload": map[string]any{"i": k, "pad": big}})
		}
		jobs = append(jobs, apitest.Bulk(t, s.URL, bodies)...)
	}

	// Open the stream but read nothing: a raw connection whose receive side is left alone.
	c := apitest.DialRaw(t, s.Addr)
	_, err := io.WriteString(c, "GET /jobs/take?queue=bp&prefetch=0 HTTP/1.1\r\nHost: x\r\nAccept: application/x-ndjson\r\n\r\n")
	require.NoError(t, err)

	// Watch the last job for 1.5 s: it must stay ready while nobody reads
	// (a server that marks jobs in flight before writing them would have
	// taken all n at once).
	deadline := time.Now().Add(1500 * time.Millisecond)
	lastStatus := ""
	for time.Now().Before(deadline) {
		lastStatus = apitest.MustGet(t, s.URL, jobs[n-1].ID).Status
		require.Equal(t, "ready", lastStatus, "the last of %d large jobs went in flight although the reader read nothing", n)
		time.Sleep(100 * time.Millisecond)
	}
	// Once the client reads, everything arrives in order.
	resp, err := http.ReadResponse(c.Reader, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	var got []string
	for len(got) < n {
		line, err := br.ReadBytes('\n')
		require.NoError(t, err, "after %d jobs", len(got))
		if len(line) == 1 {
			continue
		}
		var j struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(line, &j))
		got = append(got, j.ID)

	}
	require.Equal(t, apitest.IDs(jobs), got)
	// Closing resp.Body would drain the endless stream; drop the connection instead.
	require.NoError(t, c.Close())
}

// §1.4: the heartbeat timer is re-armed after every batch of jobs written, so
// a stream that keeps receiving jobs sends no heartbeats.
func TestCoreTakeHeartbeatRearm(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, "1s")
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=rearm&prefetch=0"})
	beats, jobs := 0, 0
	var last time.Time
	end := time.Now().Add(3500 * time.Millisecond)
	for i := 0; i < 10_000 && time.Now().Before(end); i++ {
		j := apitest.Enqueue(t, s.URL, apitest.SimpleJob("rearm", i))
		for {
			f, ok := st.Next(10 * time.Second)
			require.True(t, ok, "job %d not delivered within 10s", i)
			require.NoError(t, f.Err)
			if f.Heartbeat {
				beats++
				continue
			}
			require.Equal(t, j.ID, f.Job.ID)
			last = f.At
			jobs++
			break
		}
		apitest.Ack(t, s.URL, j.ID)
	}
	require.Greater(t, jobs, 10)
	// A fixed 1 s ticker would have sent 3; one is tolerated for a stall.
	require.LessOrEqual(t, beats, 1, "heartbeats sent although jobs were written continuously (%d jobs in 3.5s)", jobs)

	// Once idle, heartbeats resume, the first no earlier than 1 s after the last job.
	f, ok := st.Next(5 * time.Second)
	require.True(t, ok)
	require.True(t, f.Heartbeat)
	require.GreaterOrEqual(t, f.At.Sub(last), 800*time.Millisecond, "heartbeat timer restarts after the last batch (1s; 200ms allowed for delivery delay)")
}
