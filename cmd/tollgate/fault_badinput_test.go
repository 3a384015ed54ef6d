package main

// The bad-input catalogue (issue 12): every route that reads a body or a
// query string, fed malformed, truncated, oversized, wrongly typed and
// non-UTF-8 input, numbers and keys beyond the canonical model (SPEC §1.3),
// lying Content-Lengths, in both body framings and over HTTP/1.1 and h2c.
// Each answer must carry the SPEC's status and error body, and the server's
// state (jobs, queues, budgets) must be exactly what it was before.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// badBodyRoute is a route that reads a body, with a valid body for it from
// which the bad ones are derived (the valid body itself is never sent).
type badBodyRoute struct {
	method, path string
	valid        map[string]any
}

// badWant is the expected answer: an exact error text, or (prefix set) a
// text that starts with it.
type badWant struct {
	status int
	text   string
	prefix bool
}

// badCase is one bad request.
type badCase struct {
	name        string
	contentType string
	body        []byte
	want        badWant
}

// badState is what must not change: every job, the queues and the budgets.
type badState struct{ jobs, queues, budgets string }

func badSnapshot(t *testing.T, base string) badState {
	t.Helper()
	get := func(path string) string {
		r := apitest.DoJSON(t, base, http.MethodGet, path, nil)
		apitest.RequireStatus(t, r, http.StatusOK)
		return string(r.Body)
	}
	return badState{jobs: get("/jobs?limit=1000"), queues: get("/queues"), budgets: get("/budgets")}
}

// badJSONObject writes the valid body's fields in key order, then extra
// raw members (`"zz":1e400`), as a JSON object.
func badJSONObject(t *testing.T, valid map[string]any, extra ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteByte('{')
	keys := make([]string, 0, len(valid))
	for k := range valid {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		v, err := json.Marshal(valid[k])
		require.NoError(t, err)
		fmt.Fprintf(&b, "%q:%s", k, v)
	}
	for i, e := range extra {
		if i > 0 || len(keys) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// badMsgpackObject is badJSONObject in msgpack; each extra member is a key
// and a function that encodes its value.
type badMsgpackMember struct {
	key   string
	value func(e *msgpack.Encoder) error
}

func badMsgpackObject(t *testing.T, valid map[string]any, extra ...badMsgpackMember) []byte {
	t.Helper()
	var b bytes.Buffer
	e := msgpack.NewEncoder(&b)
	keys := make([]string, 0, len(valid))
	for k := range valid {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.NoError(t, e.EncodeMapLen(len(keys)+len(extra)))
	for _, k := range keys {
		require.NoError(t, e.EncodeString(k))
		require.NoError(t, e.Encode(valid[k]))
	}
	for _, m := range extra {
		require.NoError(t, e.EncodeString(m.key))
		require.NoError(t, m.value(e))
	}
	return b.Bytes()
}

func badJSONCases(t *testing.T, r badBodyRoute, oversized bool) []badCase {
	valid := badJSONObject(t, r.valid)
	invalid := func(prefix string) badWant { return badWant{http.StatusBadRequest, "invalid JSON: " + prefix, true} }
	exact := func(text string) badWant { return badWant{http.StatusBadRequest, text, false} }
	deep := `"zz":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	cases := []badCase{
		{"empty", apitest.CTJSON, []byte{}, invalid("")},
		{"malformed", apitest.CTJSON, []byte(`{"type":`), invalid("")},
		{"truncated", apitest.CTJSON, valid[:len(valid)/2], invalid("")},
		{"not an object", apitest.CTJSON, []byte(`[1,2]`), invalid("")},
		{"a string", apitest.CTJSON, []byte(`"x"`), invalid("")},
		{"trailing brace", apitest.CTJSON, append(append([]byte{}, valid...), '}'), exact("invalid JSON: trailing characters")},
		{"trailing bracket and garbage", apitest.CTJSON, append(append([]byte{}, valid...), "]x"...), exact("invalid JSON: trailing characters")},
		{"second value", apitest.CTJSON, append(append([]byte{}, valid...), valid...), exact("invalid JSON: trailing characters")},
		{"invalid UTF-8", apitest.CTJSON, badJSONObject(t, r.valid, "\"zz\":\"a\xff\xfeb\""), exact("invalid JSON: invalid UTF-8 in zz")},
		{"invalid UTF-8 in a key", apitest.CTJSON, badJSONObject(t, r.valid, "\"z\xc3\":1"), exact("invalid JSON: invalid UTF-8 in body")},
		{"lone surrogate", apitest.CTJSON, badJSONObject(t, r.valid, `"zz":["\ud800"]`), exact("invalid JSON: invalid UTF-8 in zz[0]")},
		{"number too large", apitest.CTJSON, badJSONObject(t, r.valid, `"zz":{"x":1e400}`), exact("invalid JSON: number 1e400 out of range")},
		{"integer too large", apitest.CTJSON, badJSONObject(t, r.valid, `"zz":18446744073709551616`), exact("invalid JSON: number 18446744073709551616 out of range")},
		{"duplicate key", apitest.CTJSON, badJSONObject(t, r.valid, `"zz":1`, `"zz":2`), exact(`invalid JSON: duplicate key "zz" in body`)},
		{"nested too deep", apitest.CTJSON, badJSONObject(t, r.valid, deep), invalid("")},
		{"unsupported media type", "text/plain", valid, badWant{http.StatusUnsupportedMediaType, "unsupported media type", false}},
	}
	if oversized {
		big := append(append([]byte{}, valid[:len(valid)-1]...), `,"zz":"`...)
		big = append(big, bytes.Repeat([]byte{'x'}, 8<<20)...)
		big = append(big, `"}`...)
		cases = append(cases, badCase{"oversized", apitest.CTJSON, big, badWant{http.StatusRequestEntityTooLarge, "request body too large", false}})
	}
	return cases
}

func badMsgpackCases(t *testing.T, r badBodyRoute) []badCase {
	valid := badMsgpackObject(t, r.valid)
	invalid := func(prefix string) badWant {
		return badWant{http.StatusBadRequest, "invalid MessagePack: " + prefix, true}
	}
	exact := func(text string) badWant { return badWant{http.StatusBadRequest, text, false} }
	str := func(s string) func(e *msgpack.Encoder) error {
		return func(e *msgpack.Encoder) error { return e.EncodeString(s) }
	}
	arr, _ := msgpack.Marshal([]int{1, 2})
	return []badCase{
		{"msgpack empty", apitest.CTMsgpack, []byte{}, invalid("")},
		{"msgpack never-used code", apitest.CTMsgpack, []byte{0xc1}, invalid("")},
		{"msgpack truncated", apitest.CTMsgpack, valid[:len(valid)-1], invalid("")},
		{"msgpack not a map", apitest.CTMsgpack, arr, invalid("")},
		{"msgpack trailing bytes", apitest.CTMsgpack, append(append([]byte{}, valid...), 0xc0), exact("invalid MessagePack: trailing bytes after the value")},
		{"msgpack invalid UTF-8", apitest.CTMsgpack, badMsgpackObject(t, r.valid, badMsgpackMember{"zz", str("a\xffb")}), exact("invalid MessagePack: invalid UTF-8 in zz")},
		{"msgpack invalid UTF-8 key", apitest.CTMsgpack, badMsgpackObject(t, r.valid, badMsgpackMember{"\xfe", str("a")}), exact("invalid MessagePack: invalid UTF-8 in body")},
		{"msgpack duplicate key", apitest.CTMsgpack, badMsgpackObject(t, r.valid, badMsgpackMember{"zz", str("a")}, badMsgpackMember{"zz", str("b")}),
			exact(`invalid MessagePack: duplicate key "zz" in body`)},
		{"msgpack bin", apitest.CTMsgpack, badMsgpackObject(t, r.valid, badMsgpackMember{"zz", func(e *msgpack.Encoder) error { return e.EncodeBytes([]byte{1}) }}),
			exact("invalid MessagePack: binary values cannot be represented")},
		{"msgpack NaN", apitest.CTMsgpack, badMsgpackObject(t, r.valid, badMsgpackMember{"zz", func(e *msgpack.Encoder) error { return e.EncodeFloat64(nan()) }}),
			exact("invalid MessagePack: NaN and infinite floats cannot be represented")},
	}
}

func nan() float64 { z := 0.0; return z / z }

// badCheck sends one case and checks the answer and that nothing changed.
func badCheck(t *testing.T, client *http.Client, base string, method, path string, c badCase, before badState) {
	t.Helper()
	accept := apitest.CTJSON
	if c.contentType == apitest.CTMsgpack {
		accept = apitest.CTMsgpack
	}
	hdr := map[string]string{"Accept": accept}
	if c.contentType != "" {
		hdr["Content-Type"] = c.contentType
	}
	r := apitest.Request(t, client, base, method, path, c.body, hdr)
	badRequireAnswer(t, r, c.want, fmt.Sprintf("%s %s: %s", method, path, c.name))
	require.Equal(t, before, badSnapshot(t, base), "%s %s: %s changed the server's state", method, path, c.name)
}

func badRequireAnswer(t *testing.T, r apitest.Response, want badWant, what string) {
	t.Helper()
	require.Equal(t, want.status, r.Status, "%s: %s", what, r)
	m := r.Map(t)
	msg, _ := m["error"].(string)
	if want.prefix {
		require.True(t, strings.HasPrefix(msg, want.text), "%s: error %q, want it to start with %q", what, msg, want.text)
		require.Greater(t, len(msg), len(want.text), "%s: error %q has no detail", what, msg)
	} else {
		require.Equal(t, want.text, msg, "%s: %s", what, r)
	}
	if want.status != http.StatusUnsupportedMediaType {
		require.Len(t, m, 1, "%s: error body has one field: %s", what, r)
	}
}

// TestFaultBadInputCatalogue is the catalogue; see the file comment.
func TestFaultBadInputCatalogue(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budget := map[string]any{"allocation": 5, "strategy": map[string]any{"type": "while_in_flight"}}
	apitest.RequireStatus(t, apitest.DoJSON(t, s.URL, http.MethodPost, "/budgets/cat-b", budget), http.StatusCreated)
	seed := apitest.Enqueue(t, s.URL, map[string]any{"type": "t", "queue": "cat", "payload": map[string]any{"n": 1}, "budgets": []any{map[string]any{"key": "cat-b"}}})
	apitest.Enqueue(t, s.URL, apitest.SimpleJob("cat2", "two"))
	before := badSnapshot(t, s.URL)

	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	clients := map[string]*http.Client{"http1": nil, "h2c": {Transport: &http.Transport{Protocols: &protos}}}

	cost := map[string]any{"cost": 1}
	bodyRoutes := []badBodyRoute{
		{http.MethodPost, "/jobs", map[string]any{"type": "t", "queue": "cat", "payload": map[string]any{"a": 1}}},
		{http.MethodPost, "/jobs/bulk", map[string]any{"jobs": []any{map[string]any{"type": "t", "queue": "cat", "payload": 1}}}},
		{http.MethodPost, "/jobs/success", map[string]any{"ids": []string{seed.ID}}},
		{http.MethodPost, "/jobs/" + seed.ID + "/failure", map[string]any{"message": "m"}},
		{http.MethodPatch, "/jobs/" + seed.ID, map[string]any{"priority": 7}},
		{http.MethodPatch, "/jobs?queue=cat", map[string]any{"priority": 7}},
		{http.MethodPost, "/budgets/cat-new", budget},
		{http.MethodPut, "/budgets/cat-b", map[string]any{"allocation": 9, "strategy": map[string]any{"type": "while_in_flight"}}},
		{http.MethodPatch, "/budgets/cat-b", map[string]any{"allocation": 2}},
		{http.MethodPost, "/jobs/" + seed.ID + "/budgets/cat-c", cost},
		{http.MethodPut, "/jobs/" + seed.ID + "/budgets/cat-b", map[string]any{"cost": 3}},
		{http.MethodPatch, "/jobs/" + seed.ID + "/budgets/cat-b", map[string]any{"cost": 3}},
		{http.MethodPut, "/jobs/" + seed.ID + "/budgets", map[string]any{"budgets": []any{}}},
		{http.MethodPost, "/jobs/budgets/cat-c?queue=cat", cost},
		{http.MethodPut, "/jobs/budgets/cat-b?queue=cat", map[string]any{"cost": 3}},
		{http.MethodPatch, "/jobs/budgets/cat-b?queue=cat", map[string]any{"cost": 3}},
	}
	for proto, client := range clients {
		for _, r := range bodyRoutes {
			cases := append(badJSONCases(t, r, true), badMsgpackCases(t, r)...)
			for _, c := range cases {
				badCheck(t, client, s.URL, r.method, r.path, c, before)
			}
			t.Logf("%s %s %s: %d bad bodies refused, nothing changed", proto, r.method, r.path, len(cases))
		}
	}

	// names and keys: the field named, the status of an invalid value of it
	for proto, client := range clients {
		for _, c := range []struct {
			method, path string
			body         []byte
			want         badWant
		}{
			{http.MethodPost, "/jobs", []byte("{\"type\":\"t\",\"queue\":\"c\xffat\",\"payload\":1}"), badWant{400, "invalid JSON: invalid UTF-8 in queue", false}},
			{http.MethodPost, "/jobs", []byte(`{"type":"t\udc00","queue":"cat","payload":1}`), badWant{400, "invalid JSON: invalid UTF-8 in type", false}},
			{http.MethodPost, "/jobs/bulk", []byte("{\"jobs\":[{\"type\":\"t\",\"queue\":\"cat\",\"payload\":1},{\"type\":\"t\",\"queue\":\"\xff\",\"payload\":1}]}"),
				badWant{400, "invalid JSON: invalid UTF-8 in jobs[1].queue", false}},
			{http.MethodPost, "/jobs", []byte("{\"type\":\"t\",\"queue\":\"cat\",\"payload\":{\"s\":\"\xed\xa0\x80\"}}"), badWant{400, "invalid JSON: invalid UTF-8 in payload.s", false}},
			{http.MethodPatch, "/jobs/" + seed.ID, []byte("{\"queue\":\"\xff\"}"), badWant{400, "invalid JSON: invalid UTF-8 in queue", false}},
			{http.MethodPut, "/budgets/%ff%fe", []byte(`{"allocation":1,"strategy":{"type":"while_in_flight"}}`),
				badWant{422, "invalid budget key '\uFFFD': must be valid UTF-8", false}},
			{http.MethodPost, "/budgets/a%c3", []byte(`{"allocation":1,"strategy":{"type":"while_in_flight"}}`),
				badWant{422, "invalid budget key 'a\uFFFD': must be valid UTF-8", false}},
			{http.MethodPut, "/jobs/" + seed.ID + "/budgets/%ff", []byte(`{}`), badWant{422, "invalid budget key '\uFFFD': must be valid UTF-8", false}},
			{http.MethodPost, "/jobs", []byte(`{"type":"t","queue":"cat","payload":1,"budgets":[{"key":"\udfff"}]}`),
				badWant{400, "invalid JSON: invalid UTF-8 in budgets[0].key", false}},
		} {
			r := apitest.Request(t, client, s.URL, c.method, c.path, c.body, map[string]string{"Content-Type": apitest.CTJSON})
			badRequireAnswer(t, r, c.want, proto+" "+c.method+" "+c.path)
			require.Equal(t, before, badSnapshot(t, s.URL), "%s %s %s changed the server's state", proto, c.method, c.path)
		}
		r := apitest.Request(t, client, s.URL, http.MethodGet, "/budgets/%ff%fe", nil, nil)
		apitest.RequireStatus(t, r, http.StatusNotFound)
	}

	// query strings, on every route that reads one
	queryRoutes := []struct {
		method, path, repeated, badUTF8 string
		body                            []byte
	}{
		{http.MethodGet, "/jobs", "queue=cat&queue=cat", "queue=%ff", nil},
		{http.MethodGet, "/jobs/count", "queue=cat&queue=cat", "type=%ff", nil},
		{http.MethodDelete, "/jobs", "queue=cat&queue=cat", "queue=%ff", nil},
		{http.MethodPatch, "/jobs", "queue=cat&queue=cat", "queue=%ff", []byte(`{"priority":7}`)},
		{http.MethodGet, "/jobs/" + seed.ID + "/errors", "order=asc&order=asc", "order=%ff", nil},
		{http.MethodGet, "/jobs/take", "queue=cat&queue=cat", "queue=%ff", nil},
		{http.MethodPost, "/jobs/budgets/cat-c", "queue=cat&queue=cat", "queue=%ff", []byte(`{"cost":1}`)},
		{http.MethodPut, "/jobs/budgets/cat-b", "queue=cat&queue=cat", "queue=%ff", []byte(`{"cost":3}`)},
		{http.MethodPatch, "/jobs/budgets/cat-b", "queue=cat&queue=cat", "queue=%ff", []byte(`{"cost":3}`)},
		{http.MethodDelete, "/jobs/budgets/cat-b", "queue=cat&queue=cat", "queue=%ff", nil},
		{http.MethodDelete, "/jobs/budgets", "queue=cat&queue=cat", "queue=%ff", nil},
		{http.MethodGet, "/debug/trace", "queue=cat&queue=cat", "queue=%ff", nil},
	}
	for proto, client := range clients {
		for _, q := range queryRoutes {
			name := strings.SplitN(q.repeated, "=", 2)[0]
			for _, c := range []struct {
				query string
				want  badWant
			}{
				{"%zz=1", badWant{400, `invalid query parameters: invalid URL escape "%zz"`, false}},
				{"queue=cat&x=%", badWant{400, `invalid query parameters: invalid URL escape "%"`, false}},
				{"queue=cat;queue=x", badWant{400, "invalid query parameters: invalid semicolon separator in query", false}},
				{q.repeated, badWant{400, "invalid query parameters: `" + name + "` given 2 times", false}},
				{q.badUTF8, badWant{400, "invalid query parameters: invalid UTF-8 in `" + strings.SplitN(q.badUTF8, "=", 2)[0] + "`", false}},
				{"bogus=1", badWant{400, "invalid query parameters: ", true}},
			} {
				hdr := map[string]string{}
				if q.body != nil {
					hdr["Content-Type"] = apitest.CTJSON
				}
				r := apitest.Request(t, client, s.URL, q.method, q.path+"?"+c.query, q.body, hdr)
				badRequireAnswer(t, r, c.want, fmt.Sprintf("%s %s %s?%s", proto, q.method, q.path, c.query))
				require.Equal(t, before, badSnapshot(t, s.URL), "%s %s %s?%s changed the server's state", proto, q.method, q.path, c.query)
			}
		}
	}

	// lying Content-Length (HTTP/1.1 only: an HTTP/2 client cannot send
	// one): more declared than sent, then the client stops sending; and
	// less declared than sent, which cuts the body short
	for _, r := range bodyRoutes {
		valid := badJSONObject(t, r.valid)
		conn := apitest.DialRaw(t, s.Addr)
		head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", r.method, r.path, s.Addr, len(valid)+100)
		_, err := io.WriteString(conn, head+string(valid))
		require.NoError(t, err)
		require.NoError(t, conn.Conn.(*net.TCPConn).CloseWrite())
		resp, body := badReadResponse(t, conn)
		badRequireRaw(t, resp, body, badWant{400, "failed to read body: unexpected EOF", false}, "longer Content-Length "+r.method+" "+r.path)
		require.Equal(t, before, badSnapshot(t, s.URL))

		conn = apitest.DialRaw(t, s.Addr)
		head = fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", r.method, r.path, s.Addr, len(valid)-3)
		_, err = io.WriteString(conn, head+string(valid))
		require.NoError(t, err)
		resp, body = badReadResponse(t, conn)
		badRequireRaw(t, resp, body, badWant{400, "invalid JSON: ", true}, "shorter Content-Length "+r.method+" "+r.path)
		require.Equal(t, before, badSnapshot(t, s.URL))
	}
}

func badReadResponse(t *testing.T, c *apitest.RawConn) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(c.Reader, nil)
	require.NoError(t, err, "reading raw response")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, b
}

func badRequireRaw(t *testing.T, resp *http.Response, body []byte, want badWant, what string) {
	t.Helper()
	r := apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body, Proto: resp.Proto, ContentLength: resp.ContentLength}
	badRequireAnswer(t, r, want, what+" (Content-Length "+strconv.FormatInt(resp.ContentLength, 10)+")")
}
