package main

// The msgpack poison of issue 12 (defect 3): a value JSON can carry but
// msgpack cannot (1e400, an integer beyond 64 bits, a lone surrogate,
// invalid UTF-8, a repeated key) used to be stored with 201, after which a
// msgpack GET and a msgpack listing answered 500 and a msgpack take stream
// with prefetch 1 stalled on it forever. SPEC §1.3's canonical limits
// refuse such values at the door, so every stored value reads back the
// same in both formats.

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

func TestFaultPoisonValuesRefused(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	const q = "poison"

	// the poison, in every way it could come in
	for _, c := range []struct {
		path, body, want string
	}{
		{"/jobs", `{"type":"t","queue":"poison","payload":{"x":1e400}}`, "invalid JSON: number 1e400 out of range"},
		{"/jobs", `{"type":"t","queue":"poison","payload":[-1e999]}`, "invalid JSON: number -1e999 out of range"},
		{"/jobs", `{"type":"t","queue":"poison","payload":{"n":18446744073709551616}}`, "invalid JSON: number 18446744073709551616 out of range"},
		{"/jobs", `{"type":"t","queue":"poison","payload":{"n":-9223372036854775809}}`, "invalid JSON: number -9223372036854775809 out of range"},
		{"/jobs", `{"type":"t","queue":"poison","payload":{"s":"\ud800"}}`, "invalid JSON: invalid UTF-8 in payload.s"},
		{"/jobs", "{\"type\":\"t\",\"queue\":\"poison\",\"payload\":{\"s\":\"\xff\"}}", "invalid JSON: invalid UTF-8 in payload.s"},
		{"/jobs", `{"type":"t","queue":"poison","payload":{"a":1,"a":2}}`, `invalid JSON: duplicate key "a" in payload`},
		{"/jobs/bulk", `{"jobs":[{"type":"t","queue":"poison","payload":1},{"type":"t","queue":"poison","payload":{"x":1e400}}]}`,
			"invalid JSON: number 1e400 out of range"},
		{"/jobs/bulk", `{"jobs":[{"type":"t","queue":"poison","payload":1},{"type":"t","queue":"poison","payload":["\udc00"]}]}`,
			"invalid JSON: invalid UTF-8 in jobs[1].payload[0]"},
		// a cron template is a job body too
		{"/crons/poison", `{"entries":[{"name":"e","expression":"0 0 * * *","job":{"type":"t","queue":"poison","payload":{"x":1e400}}}]}`,
			"invalid JSON: number 1e400 out of range"},
		{"/crons/poison/entries", `{"name":"e","expression":"0 0 * * *","job":{"type":"t","queue":"poison","payload":"\udfff"}}`,
			"invalid JSON: invalid UTF-8 in job.payload"},
	} {
		method := http.MethodPost
		if c.path == "/crons/poison" {
			method = http.MethodPut
		}
		r := apitest.Request(t, nil, s.URL, method, c.path, []byte(c.body), map[string]string{"Content-Type": apitest.CTJSON})
		apitest.RequireError(t, r, http.StatusBadRequest, c.want)
	}
	bad, err := msgpack.Marshal(map[string]any{"type": "t", "queue": q, "payload": map[string]any{"s": "\xff\xfe"}})
	require.NoError(t, err)
	r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs", bad, map[string]string{"Content-Type": apitest.CTMsgpack, "Accept": apitest.CTMsgpack})
	apitest.RequireError(t, r, http.StatusBadRequest, "invalid MessagePack: invalid UTF-8 in payload.s")
	require.EqualValues(t, 0, queryCount(t, s.URL, ""), "a refused value was stored")
	require.Equal(t, map[string]any{"crons": []any{}}, apitest.DoJSON(t, s.URL, http.MethodGet, "/crons", nil).Map(t), "a refused template was stored")

	// a fold whose result leaves the model fails the enqueue, which writes nothing
	batched := func(n int) map[string]any {
		return map[string]any{"type": "t", "queue": "poison-fold", "payload": map[string]any{"n": n},
			"batch": map[string]any{"key": "poison", "when": "true", "fold": "$existing | .n = 1e400"}}
	}
	apitest.RequireStatus(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs", batched(1)), http.StatusCreated)
	r = apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs", batched(2))
	apitest.RequireErrorPrefix(t, r, http.StatusUnprocessableEntity, "batch fold failed: ")
	require.EqualValues(t, 1, queryCount(t, s.URL, ""), "a failed fold wrote a job")
	apitest.RequireStatus(t, apitest.DoJSON(t, s.URL, http.MethodDelete, "/jobs?queue=poison-fold", nil), http.StatusOK)

	// values at the edges of the model are stored and read back alike
	edge := []byte(`{"type":"t","queue":"poison","payload":{"max":18446744073709551615,"min":-9223372036854775808,` +
		`"big":1.7976931348623157e308,"tiny":5e-324,"neg":-0.5,"e":"\ud83d\ude00 \u00e9","nested":[{"a":[]},{}]}}`)
	r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs", edge, map[string]string{"Content-Type": apitest.CTJSON})
	apitest.RequireStatus(t, r, http.StatusCreated)
	first := r.Job(t)
	second := apitest.Enqueue(t, s.URL, apitest.SimpleJob(q, map[string]any{"healthy": true}))

	readBack := map[string]any{} // canonical payloads, by job id
	for _, id := range []string{first.ID, second.ID} {
		js := apitest.DoJSON(t, s.URL, http.MethodGet, "/jobs/"+id, nil)
		mp := apitest.DoMsgpack(t, s.URL, http.MethodGet, "/jobs/"+id, nil)
		apitest.RequireStatus(t, js, http.StatusOK)
		apitest.RequireStatus(t, mp, http.StatusOK)
		readBack[id] = apitest.Canon(t, js.Job(t).Payload)
		require.NotNil(t, readBack[id])
		require.Equal(t, readBack[id], apitest.Canon(t, mp.Job(t).Payload), "job %s reads back differently", id)
	}
	for _, f := range apitest.Formats {
		r := apitest.Call(t, s.URL, f, http.MethodGet, "/jobs?queue="+q, nil)
		apitest.RequireStatus(t, r, http.StatusOK)
	}

	// a msgpack worker with prefetch 1 gets both jobs, in order
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=" + q + "&prefetch=1", Accept: apitest.AcceptMsgpack})
	got := st.NextJob(t, 10*time.Second)
	require.Equal(t, first.ID, got.ID)
	require.Equal(t, readBack[first.ID], apitest.Canon(t, got.Payload), "the stream frame differs from the JSON read-back")
	apitest.Ack(t, s.URL, got.ID)
	require.Equal(t, second.ID, st.NextJob(t, 10*time.Second).ID, "the healthy job behind it was not delivered")
}
