package main

// Core black-box tests: metadata endpoints, content negotiation, generic
// errors, enqueue (single and bulk), ack, delete, reset, transport details.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
	"github.com/vmihailenco/msgpack/v5"
)

var (
	coreSupported       = []any{"application/json", "application/msgpack"}
	coreStreamSupported = []any{"text/event-stream", "application/x-ndjson", "application/vnd.zizq.msgpack-stream"}
)

// §3.1, §1.1, §1.2, §1.5: /health, /version, /queues, 404, 405, 406.
func TestCoreMetaEndpoints(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	t.Run("health and version in both formats", func(t *testing.T) {
		for _, f := range apitest.Formats {
			r := apitest.Call(t, s.URL, f, http.MethodGet, "/health", nil)
			apitest.RequireStatus(t, r, http.StatusOK)
			require.Equal(t, f, r.Format(t))
			apitest.RequireServerHeader(t, r.Header)
			require.Equal(t, map[string]any{"status": "ok"}, r.Map(t))

			r = apitest.Call(t, s.URL, f, http.MethodGet, "/version", nil)
			apitest.RequireStatus(t, r, http.StatusOK)
			require.Equal(t, f, r.Format(t))
			apitest.RequireServerHeader(t, r.Header)
			require.Equal(t, map[string]any{"version": "0.7.0"}, r.Map(t))
		}
	})

	t.Run("queues empty is an empty list", func(t *testing.T) {
		for _, f := range apitest.Formats {
			r := apitest.Call(t, s.URL, f, http.MethodGet, "/queues", nil)
			apitest.RequireStatus(t, r, http.StatusOK)
			apitest.RequireServerHeader(t, r.Header)
			require.Equal(t, map[string]any{"queues": []any{}}, r.Map(t), "%s", r)
		}
	})

	t.Run("Accept negotiation", func(t *testing.T) {
		cases := []struct {
			accept string
			want   apitest.Format
		}{
			{"", apitest.JSON},
			{"application/json", apitest.JSON},
			{"*/*", apitest.JSON},
			{"text/html, */*;q=0.1", apitest.JSON},
			{"application/msgpack", apitest.Msgpack},
			{"application/json, application/msgpack", apitest.Msgpack}, // msgpack is checked first
			{"application/msgpack;q=0", apitest.Msgpack},               // no q-value parsing
		}
		for _, c := range cases {
			hdr := map[string]string{}
			if c.accept != "" {
				hdr["Accept"] = c.accept
			}
			r := apitest.Request(t, nil, s.URL, http.MethodGet, "/health", nil, hdr)
			apitest.RequireStatus(t, r, http.StatusOK)
			require.Equal(t, c.want, r.Format(t), "Accept %q", c.accept)
			require.Equal(t, map[string]any{"status": "ok"}, r.Map(t))
		}
		for _, accept := range []string{"text/html", "application/xml", "text/plain"} {
			r := apitest.Request(t, nil, s.URL, http.MethodGet, "/version", nil, map[string]string{"Accept": accept})
			apitest.RequireStatus(t, r, http.StatusNotAcceptable)
			require.Equal(t, apitest.JSON, r.Format(t))
			apitest.RequireServerHeader(t, r.Header)
			require.Equal(t, map[string]any{"error": "not acceptable", "supported": coreSupported}, r.Map(t))
		}
	})

	t.Run("404 not found", func(t *testing.T) {
		for _, path := range []string{"/nope", "/jobs/x/y/z", "/healthz"} {
			r := apitest.DoJSON(t, s.URL, http.MethodGet, path, nil)
			apitest.RequireError(t, r, http.StatusNotFound, "not found")
			apitest.RequireServerHeader(t, r.Header)
		}
		r := apitest.DoMsgpack(t, s.URL, http.MethodGet, "/nope", nil)
		require.Equal(t, apitest.Msgpack, r.Format(t), "404 body follows Accept (§1.5)")
		apitest.RequireError(t, r, http.StatusNotFound, "not found")
	})

	t.Run("405 method not allowed", func(t *testing.T) {
		cases := []struct{ method, path, allow string }{
			{http.MethodDelete, "/health", http.MethodGet},
			{http.MethodPost, "/version", http.MethodGet},
			{http.MethodPost, "/queues", http.MethodGet},
			{http.MethodGet, "/jobs/03fr1jkpcsipbsckqj0y6pgr7/success", http.MethodPost},
			{http.MethodPut, "/jobs/03fr1jkpcsipbsckqj0y6pgr7/failure", http.MethodPost},
			{http.MethodGet, "/reset", http.MethodPost},
		}
		for _, c := range cases {
			r := apitest.DoJSON(t, s.URL, c.method, c.path, nil)
			apitest.RequireError(t, r, http.StatusMethodNotAllowed, "method not allowed")
			apitest.RequireServerHeader(t, r.Header)
			require.Contains(t, r.Header.Get("Allow"), c.allow, "%s %s: Allow header", c.method, c.path)
		}
		r := apitest.DoMsgpack(t, s.URL, http.MethodDelete, "/health", nil)
		require.Equal(t, apitest.Msgpack, r.Format(t))
		apitest.RequireError(t, r, http.StatusMethodNotAllowed, "method not allowed")
	})
}

// §1.2: the order of checks is 406, then 415, then body decoding (400),
// then endpoint validation.
func TestCoreContentNegotiationOrder(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	good := []byte(`{"type":"t","queue":"neg","payload":{"a":1}}`)

	req := func(accept, ct string, body []byte) apitest.Response {
		hdr := map[string]string{}
		if accept != "" {
			hdr["Accept"] = accept
		}
		if ct != "" {
			hdr["Content-Type"] = ct
		}
		return apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs", body, hdr)
	}

	// 406 wins over 415 and over a broken body.
	r := req("text/plain", "text/plain", []byte("garbage"))
	apitest.RequireStatus(t, r, http.StatusNotAcceptable)
	require.Equal(t, map[string]any{"error": "not acceptable", "supported": coreSupported}, r.Map(t))

	// 415 wins over a broken body; body in the response format.
	r = req(apitest.CTJSON, "text/plain", []byte("garbage"))
	apitest.RequireStatus(t, r, http.StatusUnsupportedMediaType)
	require.Equal(t, apitest.JSON, r.Format(t))
	require.Equal(t, map[string]any{"error": "unsupported media type", "supported": coreSupported}, r.Map(t))
	apitest.RequireServerHeader(t, r.Header)

	r = req(apitest.CTMsgpack, "application/xml", good)
	apitest.RequireStatus(t, r, http.StatusUnsupportedMediaType)
	require.Equal(t, apitest.Msgpack, r.Format(t))
	require.Equal(t, map[string]any{"error": "unsupported media type", "supported": coreSupported}, r.Map(t))

	// Decoding (400) before validation.
	r = req(apitest.CTJSON, apitest.CTJSON, []byte(`{"type":"","queue":"q"}`))
	apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")
	r = req(apitest.CTJSON, apitest.CTMsgpack, good) // JSON bytes declared as msgpack
	apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid MessagePack: ")
	mp, err := msgpack.Marshal(map[string]any{"type": "t", "queue": "q", "payload": 1})
	require.NoError(t, err)
	r = req(apitest.CTJSON, apitest.CTJSON, mp) // msgpack bytes declared as JSON
	apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")

	// Accepted request content types.
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "application/merge-patch+json"} {
		r = req("", ct, good)
		apitest.RequireStatus(t, r, http.StatusCreated)
		require.Equal(t, apitest.JSON, r.Format(t), "Content-Type %q", ct)
		require.Equal(t, "neg", r.Job(t).Queue)
	}
	r = req(apitest.CTJSON, "application/msgpack", mp)
	apitest.RequireStatus(t, r, http.StatusCreated)
	require.Equal(t, apitest.JSON, r.Format(t), "response format follows Accept, not Content-Type")
	r = req(apitest.CTMsgpack, apitest.CTJSON, good)
	apitest.RequireStatus(t, r, http.StatusCreated)
	require.Equal(t, apitest.Msgpack, r.Format(t), "response format follows Accept, not Content-Type")

	// Every endpoint that reads a body: 406 first, then 415.
	const unknown = "03fr1jkpcsipbsckqj0y6pgr7"
	for _, path := range []string{"/jobs/bulk", "/jobs/success", "/jobs/" + unknown + "/failure"} {
		r := apitest.Request(t, nil, s.URL, http.MethodPost, path, []byte("garbage"), map[string]string{"Accept": "text/plain", "Content-Type": "text/plain"})
		apitest.RequireStatus(t, r, http.StatusNotAcceptable)
		require.Equal(t, map[string]any{"error": "not acceptable", "supported": coreSupported}, r.Map(t), "POST %s", path)
		r = apitest.Request(t, nil, s.URL, http.MethodPost, path, []byte("garbage"), map[string]string{"Content-Type": "text/plain"})
		apitest.RequireStatus(t, r, http.StatusUnsupportedMediaType)
		require.Equal(t, map[string]any{"error": "unsupported media type", "supported": coreSupported}, r.Map(t), "POST %s", path)
	}
	// Endpoints that read no body do not look at Content-Type.
	r = apitest.Request(t, nil, s.URL, http.MethodGet, "/health", nil, map[string]string{"Content-Type": "text/plain"})
	apitest.RequireStatus(t, r, http.StatusOK)
	r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+unknown+"/success", []byte("x"), map[string]string{"Content-Type": "text/plain"})
	apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
	r = apitest.Request(t, nil, s.URL, http.MethodDelete, "/jobs/"+unknown, nil, map[string]string{"Content-Type": "text/plain"})
	apitest.RequireError(t, r, http.StatusNotFound, "job not found")
	// ...but they do negotiate the response format.
	r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+unknown+"/success", nil, map[string]string{"Accept": "text/plain"})
	apitest.RequireStatus(t, r, http.StatusNotAcceptable)
	r = apitest.Request(t, nil, s.URL, http.MethodGet, "/jobs/"+unknown, nil, map[string]string{"Accept": "text/plain"})
	apitest.RequireStatus(t, r, http.StatusNotAcceptable)
}

// §3.2, §2.6, §2.1: enqueue one job; response shape and defaults.
func TestCoreEnqueue(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	t.Run("defaults", func(t *testing.T) {
		for _, f := range apitest.Formats {
			before := apitest.NowMS()
			r := apitest.Call(t, s.URL, f, http.MethodPost, "/jobs", map[string]any{"type": "hello_world", "queue": "example", "payload": map[string]any{"n": 1}})
			after := apitest.NowMS()
			apitest.RequireStatus(t, r, http.StatusCreated)
			require.Equal(t, f, r.Format(t))
			apitest.RequireServerHeader(t, r.Header)
			j := r.Job(t)
			require.Equal(t, "hello_world", j.Type)
			require.Equal(t, "example", j.Queue)
			require.Equal(t, uint16(32768), j.Priority)
			require.Equal(t, "ready", j.Status)
			require.Equal(t, uint32(0), j.Attempts)
			require.GreaterOrEqual(t, j.ReadyAt, before)
			require.LessOrEqual(t, j.ReadyAt, after)
			require.NotNil(t, j.Duplicate)
			require.False(t, *j.Duplicate)
			require.NotNil(t, j.Folded)
			require.False(t, *j.Folded)
			keys := make([]string, 0, len(j.Raw))
			for k := range j.Raw {
				keys = append(keys, k)
			}
			require.ElementsMatch(t, []string{"id", "type", "queue", "priority", "status", "ready_at", "attempts", "duplicate", "folded"}, keys,
				"enqueue response without optional settings has exactly these fields (no payload)")

			g := apitest.MustGet(t, s.URL, j.ID)
			require.Equal(t, j.ID, g.ID)
			require.Equal(t, "ready", g.Status)
			require.Equal(t, j.ReadyAt, g.ReadyAt)
			require.True(t, g.Has("payload"))
			require.False(t, g.Has("duplicate"), "duplicate only appears in enqueue responses")
			require.False(t, g.Has("folded"), "folded only appears in enqueue responses")
			require.Equal(t, map[string]any{"n": "i:1"}, apitest.Canon(t, g.Payload))
		}
	})

	t.Run("ids are 25 lowercase base36 chars and strictly increasing", func(t *testing.T) {
		prev := ""
		for i := 0; i < 30; i++ {
			j := apitest.Enqueue(t, s.URL, apitest.SimpleJob("ids", i))
			apitest.RequireJobID(t, j.ID)
			require.Greater(t, j.ID, prev, "ids must increase")
			prev = j.ID
		}
	})

	t.Run("explicit settings are echoed", func(t *testing.T) {
		past := apitest.NowMS() - 60_000
		body := map[string]any{
			"type": "t", "queue": "settings", "payload": nil, "priority": 0, "ready_at": past,
			"retry_limit": 0,
			"backoff":     map[string]any{"exponent": 1.5, "base_ms": 300, "jitter_ms": 0},
			"retention":   map[string]any{"completed_ms": 0},
		}
		for _, f := range apitest.Formats {
			r := apitest.Call(t, s.URL, f, http.MethodPost, "/jobs", body)
			apitest.RequireStatus(t, r, http.StatusCreated)
			j := r.Job(t)
			require.Equal(t, uint16(0), j.Priority)
			require.Equal(t, "ready", j.Status, "ready_at in the past is ready")
			require.Equal(t, past, j.ReadyAt, "ready_at kept as given")
			require.NotNil(t, j.RetryLimit, "retry_limit set on the job is echoed, even 0")
			require.Equal(t, uint32(0), *j.RetryLimit)
			require.Equal(t, &apitest.Backoff{Exponent: 1.5, BaseMS: 300, JitterMS: 0}, j.Backoff)
			require.Equal(t, map[string]any{"completed_ms": "i:0"}, apitest.Canon(t, j.Raw["retention"]), "unset inner retention fields are omitted")
			require.False(t, j.Has("payload"))

			g := apitest.MustGet(t, s.URL, j.ID)
			require.True(t, g.Has("payload"))
			require.Nil(t, g.Payload, "payload null round-trips")
			require.Equal(t, j.Backoff, g.Backoff)
			require.Equal(t, j.RetryLimit, g.RetryLimit)
		}
		r := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "settings", "payload": 1, "priority": 65535,
			"retention": map[string]any{"dead_ms": 5}})
		apitest.RequireStatus(t, r, http.StatusCreated)
		j := r.Job(t)
		require.Equal(t, uint16(65535), j.Priority)
		require.Equal(t, map[string]any{"dead_ms": "i:5"}, apitest.Canon(t, j.Raw["retention"]))
		require.False(t, j.Has("retry_limit"), "server default retry limit is not echoed")
		require.False(t, j.Has("backoff"), "server default backoff is not echoed")
	})

	t.Run("ready_at 0 is kept as given", func(t *testing.T) {
		j := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "zero", "payload": 1, "ready_at": 0})
		require.Equal(t, "ready", j.Status)
		require.Equal(t, uint64(0), j.ReadyAt, "ready_at <= now is kept as given, even 0")
		require.Equal(t, uint64(0), apitest.MustGet(t, s.URL, j.ID).ReadyAt)
	})

	t.Run("future ready_at is scheduled", func(t *testing.T) {
		future := apitest.NowMS() + 3_600_000
		j := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "future", "payload": 1, "ready_at": future})
		require.Equal(t, "scheduled", j.Status)
		require.Equal(t, future, j.ReadyAt)
		g := apitest.MustGet(t, s.URL, j.ID)
		require.Equal(t, "scheduled", g.Status)
		require.Equal(t, future, g.ReadyAt)
	})

	t.Run("unknown body fields are ignored", func(t *testing.T) {
		r := apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "unk", "payload": 1, "zzz": []int{1}, "Status": "dead"})
		apitest.RequireStatus(t, r, http.StatusCreated)
		require.Equal(t, "ready", r.Job(t).Status)
	})

	t.Run("payloads read back identically across formats", func(t *testing.T) {
		payloads := []string{
			`{"a":1,"b":[true,false,null,"x",1.5,-2],"c":{"d":{"e":[]}},"f":{}}`,
			`[1,"two",3.25,null]`,
			`"just a string ünïcødé ✓"`,
			`42`,
			`-9007199254740993`,
			`18446744073709551615`,
			`{"big":9007199254740993,"neg":-123456789012345678}`,
			`0.1`,
			`true`,
			`null`,
		}
		for _, p := range payloads {
			var want any
			dec := json.NewDecoder(strings.NewReader(p))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&want))
			canon := apitest.Canon(t, want)

			body := []byte(`{"type":"t","queue":"payloads","payload":` + p + `}`)
			r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs", body, map[string]string{"Content-Type": apitest.CTJSON})
			apitest.RequireStatus(t, r, http.StatusCreated)
			id := r.Job(t).ID
			for _, f := range apitest.Formats {
				g := apitest.Call(t, s.URL, f, http.MethodGet, "/jobs/"+id, nil)
				apitest.RequireStatus(t, g, http.StatusOK)
				require.Equal(t, canon, apitest.Canon(t, g.Job(t).Payload), "JSON-enqueued payload %s read as %s", p, f)
			}

			// Enqueue the same value in msgpack (from the msgpack reading of it).
			mg := apitest.Call(t, s.URL, apitest.Msgpack, http.MethodGet, "/jobs/"+id, nil)
			mj := mg.Job(t)
			r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "payloads", "payload": mj.Payload})
			apitest.RequireStatus(t, r, http.StatusCreated)
			id2 := r.Job(t).ID
			for _, f := range apitest.Formats {
				g := apitest.Call(t, s.URL, f, http.MethodGet, "/jobs/"+id2, nil)
				apitest.RequireStatus(t, g, http.StatusOK)
				require.Equal(t, canon, apitest.Canon(t, g.Job(t).Payload), "msgpack-enqueued payload %s read as %s", p, f)
			}
		}
	})

	t.Run("msgpack wire details", func(t *testing.T) {
		// Wide integer encodings on input (uint64/int64 codes) are accepted.
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		require.NoError(t, enc.EncodeMapLen(5))
		require.NoError(t, enc.EncodeString("type"))
		require.NoError(t, enc.EncodeString("t"))
		require.NoError(t, enc.EncodeString("queue"))
		require.NoError(t, enc.EncodeString("mp"))
		require.NoError(t, enc.EncodeString("payload"))
		require.NoError(t, enc.EncodeInt64(7))
		require.NoError(t, enc.EncodeString("priority"))
		require.NoError(t, enc.EncodeUint64(5))
		require.NoError(t, enc.EncodeString("backoff"))
		require.NoError(t, enc.EncodeMapLen(3))
		require.NoError(t, enc.EncodeString("exponent"))
		require.NoError(t, enc.EncodeUint64(2)) // an int where a float is expected
		require.NoError(t, enc.EncodeString("base_ms"))
		require.NoError(t, enc.EncodeUint32(10))
		require.NoError(t, enc.EncodeString("jitter_ms"))
		require.NoError(t, enc.EncodeInt64(0))
		r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs", buf.Bytes(), map[string]string{"Content-Type": apitest.CTMsgpack, "Accept": apitest.CTMsgpack})
		apitest.RequireStatus(t, r, http.StatusCreated)
		j := r.Job(t)
		require.Equal(t, uint16(5), j.Priority)
		require.Equal(t, &apitest.Backoff{Exponent: 2, BaseMS: 10, JitterMS: 0}, j.Backoff)

		codes := coreMsgpackCodes(t, r.Body)
		require.Equal(t, byte(0x05), codes["priority"], "integers use the smallest encoding (positive fixint)")
		require.Equal(t, byte(0x00), codes["attempts"], "integers use the smallest encoding (positive fixint)")
		require.Contains(t, []byte{0xca, 0xcb}, codes["backoff.exponent"], "backoff.exponent is emitted as float32/float64")
		require.Equal(t, byte(0x0a), codes["backoff.base_ms"])
		require.Contains(t, []byte{0xc2, 0xc3}, codes["duplicate"], "bool")

		// bin and ext values cannot be represented.
		for name, raw := range map[string]msgpack.RawMessage{
			"bin": {0xc4, 0x02, 0x01, 0x02},
			"ext": {0xd4, 0x01, 0x00},
		} {
			var b bytes.Buffer
			e := msgpack.NewEncoder(&b)
			require.NoError(t, e.EncodeMapLen(3))
			require.NoError(t, e.EncodeString("type"))
			require.NoError(t, e.EncodeString("t"))
			require.NoError(t, e.EncodeString("queue"))
			require.NoError(t, e.EncodeString("mpbad"))
			require.NoError(t, e.EncodeString("payload"))
			require.NoError(t, e.Encode(map[string]any{"x": raw}))
			r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs", b.Bytes(), map[string]string{"Content-Type": apitest.CTMsgpack})
			apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid MessagePack: ")
			require.Equal(t, apitest.JSON, r.Format(t), "%s: no Accept means a JSON error body", name)
		}
		require.NotContains(t, apitest.Queues(t, s.URL), "mpbad")
	})

	t.Run("validation catalogue", func(t *testing.T) {
		cases := []struct {
			name   string
			body   string
			exact  string // exact error text
			prefix string // or a prefix
		}{
			{"empty body", ``, "", "invalid JSON: "},
			{"syntax", `{"type":`, "", "invalid JSON: "},
			{"empty object", `{}`, "", "invalid JSON: "},
			{"missing payload", `{"type":"t","queue":"q"}`, "", "invalid JSON: "},
			{"missing type", `{"queue":"q","payload":1}`, "", "invalid JSON: "},
			{"missing queue", `{"type":"t","payload":1}`, "", "invalid JSON: "},
			{"decode before names", `{"type":"","queue":"","priority":-1,"payload":1}`, "", "invalid JSON: "},
			{"type not a string", `{"type":5,"queue":"q","payload":1}`, "", "invalid JSON: "},
			{"priority too big", `{"type":"t","queue":"q","payload":1,"priority":65536}`, "", "invalid JSON: "},
			{"priority negative", `{"type":"t","queue":"q","payload":1,"priority":-1}`, "", "invalid JSON: "},
			{"priority fractional", `{"type":"t","queue":"q","payload":1,"priority":1.5}`, "", "invalid JSON: "},
			{"ready_at negative", `{"type":"t","queue":"q","payload":1,"ready_at":-5}`, "", "invalid JSON: "},
			{"retry_limit overflow", `{"type":"t","queue":"q","payload":1,"retry_limit":4294967296}`, "", "invalid JSON: "},
			{"backoff incomplete", `{"type":"t","queue":"q","payload":1,"backoff":{"exponent":1,"base_ms":1}}`, "", "invalid JSON: "},
			{"backoff negative base", `{"type":"t","queue":"q","payload":1,"backoff":{"exponent":1,"base_ms":-1,"jitter_ms":0}}`, "", "invalid JSON: "},
			{"type empty", `{"type":"","queue":"q","payload":1}`, "type must not be empty", ""},
			{"type comma", `{"type":"a,b","queue":"q","payload":1}`, "type must not contain ','", ""},
			{"type nul", `{"type":"a\u0000b","queue":"q","payload":1}`, "type must not contain null bytes", ""},
			{"type reserved", `{"type":"a*b","queue":"q","payload":1}`, "type must not contain '*' (reserved)", ""},
			{"type before queue", `{"type":"","queue":"a,b","payload":1}`, "type must not be empty", ""},
			{"queue empty", `{"type":"t","queue":"","payload":1}`, "queue must not be empty", ""},
			{"queue comma before reserved", `{"type":"t","queue":"a*,b","payload":1}`, "queue must not contain ','", ""},
			{"queue nul before reserved", `{"type":"t","queue":"a?\u0000","payload":1}`, "queue must not contain null bytes", ""},
			{"queue first reserved char", `{"type":"t","queue":"x?y[z","payload":1}`, "queue must not contain '?' (reserved)", ""},
			{"queue backslash", `{"type":"t","queue":"a\\b","payload":1}`, "queue must not contain '\\' (reserved)", ""},
			{"queue brace", `{"type":"t","queue":"a}b{","payload":1}`, "queue must not contain '}' (reserved)", ""},
			{"queue bracket", `{"type":"t","queue":"]","payload":1}`, "queue must not contain ']' (reserved)", ""},
			{"unique_while without key", `{"type":"t","queue":"q","payload":1,"unique_while":"active"}`, "unique_while requires unique_key", ""},
			{"unique_while bad", `{"type":"t","queue":"q","payload":1,"unique_key":"k","unique_while":"bogus"}`,
				`invalid unique_while: "bogus" (expected "queued", "active", or "exists")`, ""},
			{"negative exponent", `{"type":"t","queue":"q","payload":1,"backoff":{"exponent":-0.5,"base_ms":1,"jitter_ms":0}}`,
				"backoff.exponent must be a finite number >= 0", ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs", []byte(c.body), map[string]string{"Content-Type": apitest.CTJSON})
				if c.exact != "" {
					apitest.RequireError(t, r, http.StatusBadRequest, c.exact)
				} else {
					apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, c.prefix)
				}
				apitest.RequireServerHeader(t, r.Header)
			})
		}
		// The same name checks in msgpack.
		r := apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "a{b", "payload": 1})
		require.Equal(t, apitest.Msgpack, r.Format(t))
		apitest.RequireError(t, r, http.StatusBadRequest, "queue must not contain '{' (reserved)")
		r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "q"})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid MessagePack: ")
		r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "q", "payload": 1, "priority": 70000})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid MessagePack: ")
		for _, q := range apitest.Queues(t, s.URL) {
			require.NotContains(t, []string{"q", "a{b", "mpbad", ""}, q, "a rejected enqueue wrote a job")
		}
	})
}

// coreMsgpackCodes returns the first byte (format code) of each value in a
// msgpack map, nested maps flattened as "outer.inner".
func coreMsgpackCodes(t testing.TB, b []byte) map[string]byte {
	t.Helper()
	out := map[string]byte{}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	var walk func(prefix string)
	walk = func(prefix string) {
		n, err := dec.DecodeMapLen()
		require.NoError(t, err, "msgpack object must be a map")
		for i := 0; i < n; i++ {
			k, err := dec.DecodeString()
			require.NoError(t, err, "msgpack map keys must be strings")
			c, err := dec.PeekCode()
			require.NoError(t, err)
			out[prefix+k] = c
			if (c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf {
				walk(prefix + k + ".")
				continue
			}
			require.NoError(t, dec.Skip())
		}
	}
	walk("")
	return out
}

// §3.3: bulk enqueue, order, status, atomicity and prefixed errors.
func TestCoreBulkEnqueue(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	for _, f := range apitest.Formats {
		t.Run("ok "+string(f), func(t *testing.T) {
			q := "bulk-" + string(f)
			jobs := []map[string]any{
				{"type": "t0", "queue": q, "payload": 0},
				{"type": "t1", "queue": q, "payload": []any{1}, "priority": 3},
				{"type": "t2", "queue": q + "-other", "payload": map[string]any{"x": 2}, "retry_limit": 4},
			}
			r := apitest.Call(t, s.URL, f, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": jobs})
			apitest.RequireStatus(t, r, http.StatusCreated)
			require.Equal(t, f, r.Format(t))
			got := apitest.BulkJobs(t, r)
			require.Len(t, got, 3)
			prev := ""
			for i, j := range got {
				require.Equal(t, fmt.Sprintf("t%d", i), j.Type, "request order")
				require.Equal(t, "ready", j.Status)
				require.NotNil(t, j.Duplicate)
				require.False(t, *j.Duplicate)
				require.NotNil(t, j.Folded)
				require.False(t, *j.Folded)
				require.False(t, j.Has("payload"))
				require.Greater(t, j.ID, prev, "ids strictly increase within a bulk")
				prev = j.ID
			}
			require.Equal(t, uint16(3), got[1].Priority)
			require.Equal(t, q+"-other", got[2].Queue)
			require.NotNil(t, got[2].RetryLimit)
			require.Equal(t, uint32(4), *got[2].RetryLimit)
			g := apitest.MustGet(t, s.URL, got[2].ID)
			require.Equal(t, map[string]any{"x": "i:2"}, apitest.Canon(t, g.Payload))
		})
	}

	t.Run("empty list", func(t *testing.T) {
		for _, f := range apitest.Formats {
			r := apitest.Call(t, s.URL, f, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": []any{}})
			apitest.RequireStatus(t, r, http.StatusCreated)
			require.Equal(t, map[string]any{"jobs": []any{}}, r.Map(t))
		}
	})

	t.Run("atomic with prefixed errors", func(t *testing.T) {
		ok := func(q string) map[string]any { return map[string]any{"type": "t", "queue": q, "payload": 1} }
		cases := []struct {
			name string
			jobs []map[string]any
			want string
		}{
			{"queue comma", []map[string]any{ok("atomic-a"), ok("atomic-b"), {"type": "t", "queue": "a,b", "payload": 1}},
				"jobs[2]: queue must not contain ','"},
			{"type empty", []map[string]any{ok("atomic-c"), {"type": "", "queue": "q", "payload": 1}, ok("atomic-d")},
				"jobs[1]: type must not be empty"},
			{"unique_while", []map[string]any{{"type": "t", "queue": "atomic-e", "payload": 1, "unique_while": "exists"}, ok("atomic-f")},
				"jobs[0]: unique_while requires unique_key"},
			{"unique_while value", []map[string]any{ok("atomic-g"), {"type": "t", "queue": "q", "payload": 1, "unique_key": "k", "unique_while": "never"}},
				`jobs[1]: invalid unique_while: "never" (expected "queued", "active", or "exists")`},
			{"reserved char", []map[string]any{ok("atomic-h"), ok("atomic-i"), ok("atomic-j"), {"type": "t", "queue": "x[", "payload": 1}},
				"jobs[3]: queue must not contain '[' (reserved)"},
		}
		for _, c := range cases {
			for _, f := range apitest.Formats {
				r := apitest.Call(t, s.URL, f, http.MethodPost, "/jobs/bulk", map[string]any{"jobs": c.jobs})
				apitest.RequireError(t, r, http.StatusBadRequest, c.want)
				require.Equal(t, f, r.Format(t))
			}
		}
		// Decode errors are not prefixed and write nothing either.
		r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/bulk",
			[]byte(`{"jobs":[{"type":"t","queue":"atomic-k","payload":1},{"type":"t","queue":"atomic-l","payload":1,"priority":70000}]}`),
			map[string]string{"Content-Type": apitest.CTJSON})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")
		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/bulk",
			[]byte(`{"jobs":[{"type":"t","queue":"atomic-m","payload":1},{"type":"t","queue":"atomic-n"}]}`),
			map[string]string{"Content-Type": apitest.CTJSON})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")
		r = apitest.DoJSON(t, s.URL, http.MethodPost, "/jobs/bulk", map[string]any{})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")
		r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs/bulk", map[string]any{"nojobs": 1})
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid MessagePack: ")

		for _, q := range apitest.Queues(t, s.URL) {
			require.False(t, strings.HasPrefix(q, "atomic-"), "a failed bulk wrote a job on queue %q", q)
		}
	})
}

// §3.5, §3.6: ack one and ack many; 204 without body; 404/422/400.
func TestCoreAck(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	const notInFlight = "job not found in in-flight set"

	t.Run("single", func(t *testing.T) {
		jobs := apitest.EnqueueN(t, s.URL, "ack1", 2)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=ack1"})
		got := st.NextJob(t, 10*time.Second)
		require.Equal(t, jobs[0].ID, got.ID)

		// A ready job (not in flight) cannot be acked.
		r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+jobs[1].ID+"/success", nil, nil)
		apitest.RequireError(t, r, http.StatusNotFound, notInFlight)
		require.Equal(t, "ready", apitest.MustGet(t, s.URL, jobs[1].ID).Status)

		// The body is ignored.
		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+got.ID+"/success", []byte("not json at all"), nil)
		apitest.RequireNoContent(t, r)
		_, found := apitest.Get(t, s.URL, got.ID)
		require.False(t, found, "completed job with retention 0 is deleted at once")

		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+got.ID+"/success", nil, nil)
		apitest.RequireError(t, r, http.StatusNotFound, notInFlight)
		apitest.RequireServerHeader(t, r.Header)
		r = apitest.DoMsgpack(t, s.URL, http.MethodPost, "/jobs/03fr1jkpcsipbsckqj0y6pgr7/success", nil)
		require.Equal(t, apitest.Msgpack, r.Format(t))
		apitest.RequireError(t, r, http.StatusNotFound, notInFlight)
		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/not-an-id/success", nil, nil)
		apitest.RequireError(t, r, http.StatusNotFound, notInFlight)

		// The freed slot delivers the next job.
		require.Equal(t, jobs[1].ID, st.NextJob(t, 10*time.Second).ID)
		require.Contains(t, apitest.Queues(t, s.URL), "ack1")
		apitest.Ack(t, s.URL, jobs[1].ID)
		require.NotContains(t, apitest.Queues(t, s.URL), "ack1", "a queue disappears when its last job is gone")
	})

	t.Run("204 has no body on the wire", func(t *testing.T) {
		jobs := apitest.EnqueueN(t, s.URL, "ackraw", 1)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=ackraw"})
		require.Equal(t, jobs[0].ID, st.NextJob(t, 10*time.Second).ID)
		c := apitest.DialRaw(t, s.Addr)
		resp, body := c.RoundTrip(t, "POST /jobs/"+jobs[0].ID+"/success HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		require.Empty(t, body)
		require.Empty(t, resp.Header.Values("Content-Length"), "204 carries no Content-Length")
		require.Empty(t, resp.Header.Values("Transfer-Encoding"), "204 carries no Transfer-Encoding")
		require.Empty(t, resp.TransferEncoding)
		apitest.RequireServerHeader(t, resp.Header)
		// Any stray body bytes after the 204 would corrupt this next response.
		resp, body = c.RoundTrip(t, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.JSONEq(t, `{"status":"ok"}`, string(body))
	})

	t.Run("retained completed job", func(t *testing.T) {
		j := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "ackret", "payload": "p", "retention": map[string]any{"completed_ms": 600_000}})
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=ackret"})
		fr := st.NextJob(t, 10*time.Second)
		before := apitest.NowMS()
		apitest.Ack(t, s.URL, j.ID)
		after := apitest.NowMS()
		g := apitest.MustGet(t, s.URL, j.ID)
		require.Equal(t, "completed", g.Status)
		require.NotNil(t, g.CompletedAt)
		require.GreaterOrEqual(t, *g.CompletedAt, before)
		require.LessOrEqual(t, *g.CompletedAt, after)
		require.NotNil(t, g.PurgeAt)
		require.Equal(t, *g.CompletedAt+600_000, *g.PurgeAt, "purge_at = completed_at + retention")
		require.Equal(t, fr.DequeuedAt, g.DequeuedAt, "dequeued_at kept")
		require.Equal(t, "p", g.Payload)
		r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+j.ID+"/success", nil, nil)
		apitest.RequireError(t, r, http.StatusNotFound, notInFlight)
		r = apitest.Fail(t, s.URL, j.ID, map[string]any{"message": "late"})
		apitest.RequireError(t, r, http.StatusNotFound, notInFlight)
		require.Equal(t, "completed", apitest.MustGet(t, s.URL, j.ID).Status, "completed is terminal")
	})

	for _, f := range apitest.Formats {
		t.Run("bulk "+string(f), func(t *testing.T) {
			q := "ackbulk-" + string(f)
			jobs := apitest.EnqueueN(t, s.URL, q, 4)
			st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=" + q + "&prefetch=3"})
			got := st.Jobs(t, 3, 10*time.Second)
			require.Equal(t, apitest.IDs(jobs[:3]), apitest.IDs(got))

			r := apitest.Call(t, s.URL, f, http.MethodPost, "/jobs/success", map[string]any{"ids": []string{got[0].ID, got[1].ID, got[0].ID}})
			apitest.RequireNoContent(t, r)
			for _, j := range got[:2] {
				_, found := apitest.Get(t, s.URL, j.ID)
				require.False(t, found)
			}

			// 4th arrives in a freed slot; it stays in flight for the 422 case.
			require.Equal(t, jobs[3].ID, st.NextJob(t, 10*time.Second).ID)
			unknown := "03fr1jkpcsipbsckqj0y6pgr7"
			r = apitest.Call(t, s.URL, f, http.MethodPost, "/jobs/success", map[string]any{"ids": []string{got[2].ID, unknown, got[0].ID, jobs[3].ID}})
			apitest.RequireStatus(t, r, http.StatusUnprocessableEntity)
			require.Equal(t, f, r.Format(t))
			var nf map[string][]string
			r.Decode(t, &nf)
			require.Len(t, nf, 1, "422 body is {\"not_found\":[...]} without error field: %s", r)
			require.ElementsMatch(t, []string{unknown, got[0].ID}, nf["not_found"])
			for _, id := range []string{got[2].ID, jobs[3].ID} {
				_, found := apitest.Get(t, s.URL, id)
				require.False(t, found, "ids that were in flight are acked despite the 422")
				r := apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+id+"/success", nil, nil)
				apitest.RequireError(t, r, http.StatusNotFound, notInFlight)
			}

			r = apitest.Call(t, s.URL, f, http.MethodPost, "/jobs/success", map[string]any{"ids": []string{}})
			apitest.RequireError(t, r, http.StatusBadRequest, "ids must not be empty")
			r = apitest.Call(t, s.URL, f, http.MethodPost, "/jobs/success", map[string]any{"id": []string{"x"}})
			prefix := "invalid JSON: "
			if f == apitest.Msgpack {
				prefix = "invalid MessagePack: "
			}
			apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, prefix)
		})
	}
}

// §6.7 (DELETE /jobs/{id}), §3.1 (/queues), §6.8 (POST /reset).
func TestCoreDeleteQueuesReset(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)

	t.Run("queues sorted by bytes, any status", func(t *testing.T) {
		apitest.Enqueue(t, s.URL, apitest.SimpleJob("b", 1))
		apitest.Enqueue(t, s.URL, apitest.SimpleJob("é", 1))
		apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "a", "payload": 1, "ready_at": apitest.NowMS() + 3_600_000})
		apitest.Enqueue(t, s.URL, apitest.SimpleJob("Z", 1))
		apitest.Enqueue(t, s.URL, apitest.SimpleJob("billing.payments", 1))
		apitest.Enqueue(t, s.URL, apitest.SimpleJob("b", 2))
		require.Equal(t, []string{"Z", "a", "b", "billing.payments", "é"}, apitest.Queues(t, s.URL))
		r := apitest.DoMsgpack(t, s.URL, http.MethodGet, "/queues", nil)
		require.Equal(t, apitest.Msgpack, r.Format(t))
		require.Equal(t, map[string]any{"queues": []any{"Z", "a", "b", "billing.payments", "é"}}, r.Map(t))
	})

	t.Run("delete", func(t *testing.T) {
		ready := apitest.Enqueue(t, s.URL, apitest.SimpleJob("del", 1))
		sched := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "del", "payload": 1, "ready_at": apitest.NowMS() + 3_600_000})
		for _, id := range []string{ready.ID, sched.ID} {
			r := apitest.Request(t, nil, s.URL, http.MethodDelete, "/jobs/"+id, nil, nil)
			apitest.RequireNoContent(t, r)
			_, found := apitest.Get(t, s.URL, id)
			require.False(t, found)
			r = apitest.DoJSON(t, s.URL, http.MethodDelete, "/jobs/"+id, nil)
			apitest.RequireError(t, r, http.StatusNotFound, "job not found")
		}
		require.NotContains(t, apitest.Queues(t, s.URL), "del", "a queue disappears with its last job")
		r := apitest.DoMsgpack(t, s.URL, http.MethodDelete, "/jobs/03fr1jkpcsipbsckqj0y6pgr7", nil)
		require.Equal(t, apitest.Msgpack, r.Format(t))
		apitest.RequireError(t, r, http.StatusNotFound, "job not found")
		r = apitest.DoMsgpack(t, s.URL, http.MethodGet, "/jobs/03fr1jkpcsipbsckqj0y6pgr7", nil)
		require.Equal(t, apitest.Msgpack, r.Format(t))
		apitest.RequireError(t, r, http.StatusNotFound, "job not found")
	})

	t.Run("delete in flight frees the slot", func(t *testing.T) {
		jobs := apitest.EnqueueN(t, s.URL, "delfl", 2)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=delfl"})
		require.Equal(t, jobs[0].ID, st.NextJob(t, 10*time.Second).ID)
		st.NoJobFor(t, 300*time.Millisecond, true)
		r := apitest.Request(t, nil, s.URL, http.MethodDelete, "/jobs/"+jobs[0].ID, nil, nil)
		apitest.RequireNoContent(t, r)
		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+jobs[0].ID+"/success", nil, nil)
		apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")
		require.Equal(t, jobs[1].ID, st.NextJob(t, 10*time.Second).ID, "deleting an in-flight job frees its stream slot")
		apitest.Ack(t, s.URL, jobs[1].ID)
	})

	t.Run("reset", func(t *testing.T) {
		jobs := apitest.EnqueueN(t, s.URL, "reset", 3)
		st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=reset"})
		require.Equal(t, jobs[0].ID, st.NextJob(t, 10*time.Second).ID)

		r := apitest.DoMsgpack(t, s.URL, http.MethodPost, "/reset", nil)
		apitest.RequireNoContent(t, r)
		require.Empty(t, apitest.Queues(t, s.URL), "reset deletes every job")
		for _, j := range jobs {
			_, found := apitest.Get(t, s.URL, j.ID)
			require.False(t, found)
		}
		r = apitest.Request(t, nil, s.URL, http.MethodPost, "/jobs/"+jobs[0].ID+"/success", nil, nil)
		apitest.RequireError(t, r, http.StatusNotFound, "job not found in in-flight set")

		// The stream stays open and its slot is free again.
		st.NoJobFor(t, 300*time.Millisecond, true)
		n := apitest.Enqueue(t, s.URL, apitest.SimpleJob("reset", "after"))
		got := st.NextJob(t, 10*time.Second)
		require.Equal(t, n.ID, got.ID)
		require.Equal(t, "after", got.Payload)
		apitest.Ack(t, s.URL, n.ID)
	})
}

// §1.1: HTTP/2 over cleartext with prior knowledge (h2c), multiplexed acks.
func TestCoreHTTP2Cleartext(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Transport: &http.Transport{Protocols: &protos}}

	r := apitest.Request(t, h2, s.URL, http.MethodGet, "/health", nil, nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	require.Equal(t, "HTTP/2.0", r.Proto)
	apitest.RequireServerHeader(t, r.Header)
	require.Equal(t, map[string]any{"status": "ok"}, r.Map(t))

	const n = 20
	jobs := apitest.EnqueueN(t, s.URL, "h2", n)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=h2&prefetch=0", Client: h2})
	require.Equal(t, "HTTP/2.0", st.Resp.Proto)
	got := st.Jobs(t, n, 20*time.Second)
	require.Equal(t, apitest.IDs(jobs), apitest.IDs(got))

	// Ack everything concurrently over the same HTTP/2 connection.
	errs := make(chan error, n)
	for _, j := range got {
		go func(id string) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/jobs/"+id+"/success", nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := h2.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			switch {
			case err != nil:
				errs <- fmt.Errorf("ack %s: reading body: %w", id, err)
			case resp.Proto != "HTTP/2.0" || resp.StatusCode != http.StatusNoContent || len(b) != 0:
				errs <- fmt.Errorf("ack %s: %s %d body %q", id, resp.Proto, resp.StatusCode, b)
			default:
				errs <- nil
			}
		}(j.ID)
	}
	for range got {
		require.NoError(t, <-errs)
	}
	for _, j := range got {
		_, found := apitest.Get(t, s.URL, j.ID)
		require.False(t, found)
	}
	// The stream is still alive over HTTP/2.
	st.NoJobFor(t, 300*time.Millisecond, true)

	// Cancelling an HTTP/2 take stream (RST_STREAM, the connection stays up)
	// returns its job to ready.
	j := apitest.Enqueue(t, s.URL, apitest.SimpleJob("h2b", 1))
	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=h2b", Client: h2, Accept: apitest.AcceptMsgpack})
	require.Equal(t, j.ID, st2.NextJob(t, 10*time.Second).ID)
	st2.Close()
	g := apitest.WaitStatus(t, s.URL, j.ID, "ready")
	require.Equal(t, uint32(0), g.Attempts)
	st.NoJobFor(t, 200*time.Millisecond, true) // the other stream on the same connection lives on
}

// Request bodies over the server's limit are refused with 413 and the JSON
// error body, with or without Content-Length; an unreadable body is a 400
// (§1.5 "failed to read body: <detail>").
func TestCoreRequestBodyLimits(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	const size = 64 << 20
	prefix := `{"type":"t","queue":"big","payload":"`
	suffix := `"}`

	check413 := func(t *testing.T, c *apitest.RawConn) {
		t.Helper()
		resp, err := http.ReadResponse(c.Reader, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "body %q", body)
		apitest.RequireServerHeader(t, resp.Header)
		r := apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
		m := r.Map(t)
		require.Len(t, m, 1, "413 body is {\"error\": ...}")
		require.NotEmpty(t, m["error"])
	}

	t.Run("Content-Length", func(t *testing.T) {
		c := apitest.DialRaw(t, s.Addr)
		_, err := fmt.Fprintf(c, "POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			len(prefix)+size+len(suffix), prefix)
		require.NoError(t, err)
		go func() { // the rest is written while the response is read; write errors are expected
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for i := 0; i < size/len(chunk); i++ {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(c, suffix)
		}()
		check413(t, c)
	})

	t.Run("chunked", func(t *testing.T) {
		c := apitest.DialRaw(t, s.Addr)
		_, err := fmt.Fprintf(c, "POST /jobs/bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n",
			len(`{"jobs":[`+prefix), `{"jobs":[`+prefix)
		require.NoError(t, err)
		go func() {
			chunk := bytes.Repeat([]byte("y"), 1<<20)
			for i := 0; i < size/len(chunk); i++ {
				if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
					return
				}
			}
			_, _ = fmt.Fprintf(c, "%x\r\n%s]}\r\n0\r\n\r\n", len(suffix)+2, suffix)
		}()
		check413(t, c)
	})

	t.Run("unreadable body", func(t *testing.T) {
		c := apitest.DialRaw(t, s.Addr)
		resp, body := c.RoundTrip(t, "POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
		r := apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
		apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "failed to read body: ")
	})

	require.NotContains(t, apitest.Queues(t, s.URL), "big")
}

// §9: bad command lines exit 1 with a one-line message on stderr.
func TestCoreBadFlags(t *testing.T) {
	t.Parallel()
	bin := servertest.Binary(t)
	cases := [][]string{
		{"serve", "--no-such-flag"},
		{"serve", "--heartbeat-interval", "soon"},
		{"serve", "--default-retry-limit", "-3"},
		{"serve", "--tls-cert", "/nonexistent/cert.pem"},
		{"serve", "--tls-key", "/nonexistent/key.pem"},
	}
	for _, args := range cases {
		args = append(args, "--root-dir", t.TempDir(), "--port", "0")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout = &stdout
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v must fail (stdout %q)", args, stdout.String())
		require.Equal(t, 1, ee.ExitCode(), "%v: exit status", args)
		msg := strings.TrimRight(stderr.String(), "\n")
		require.NotEmpty(t, msg, "%v: message on stderr", args)
		require.NotContains(t, msg, "\n", "%v: one-line message, got %q", args, stderr.String())
	}
}

// §9: every flag has an environment variable, and the flag wins over it.
// Not parallel: it sets the environment the server inherits.
func TestCoreEnvironmentVariables(t *testing.T) {
	t.Setenv("TOLLGATE_HEARTBEAT_INTERVAL", "100ms")

	s := servertest.Start(t)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{})
	f, ok := st.Next(2 * time.Second)
	require.True(t, ok, "TOLLGATE_HEARTBEAT_INTERVAL=100ms: a heartbeat within 2s (default is 3s)")
	require.NoError(t, f.Err)
	require.True(t, f.Heartbeat)
	st.Close()
	s.Stop()

	s2 := servertest.Start(t, "--heartbeat-interval", "10s")
	st2 := apitest.OpenTake(t, s2.URL, apitest.TakeOpts{})
	f, ok = st2.Next(1500 * time.Millisecond)
	require.False(t, ok, "the flag (10s) wins over the environment (100ms); got a frame %q", f.Raw)
}
