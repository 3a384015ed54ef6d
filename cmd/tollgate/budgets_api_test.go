package main

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
	"github.com/vmihailenco/msgpack/v5"
)

// TestBudgetsMsgpackCRUD: all budget endpoints speak msgpack both ways
// (seed note, SPEC §1.2, §1.3, §4.11).
func TestBudgetsMsgpackCRUD(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	const tbs = `{"burst":2,"duration_ms":60000,"type":"time_based"}`
	before := budNowMs()
	r := apitest.DoMsgpack(t, s.URL, "POST", "/budgets/mp", map[string]any{
		"allocation": 5,
		"strategy":   map[string]any{"type": "time_based", "duration_ms": 60000, "burst": 2},
	})
	after := budNowMs()
	if ct := r.Header.Get("Content-Type"); ct != apitest.CTMsgpack {
		t.Fatalf("%v: Content-Type %q, want %q", r, ct, apitest.CTMsgpack)
	}
	m := apitest.Object(t, r, http.StatusCreated)
	created, updated := budCheckBudget(t, m, "mp", 5, tbs)
	if created != updated || created < before || created > after {
		t.Fatalf("created_at %d updated_at %d not equal/within [%d, %d]", created, updated, before, after)
	}

	// Compact msgpack ints (any width is accepted on input, §1.3).
	var buf strings.Builder
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(map[string]any{"allocation": 3, "strategy": map[string]any{"type": "while_in_flight"}}); err != nil {
		t.Fatal(err)
	}
	m = apitest.Object(t, apitest.DoMsgpack(t, s.URL, "POST", "/budgets/mp-compact", []byte(buf.String())), http.StatusCreated)
	budCheckBudget(t, m, "mp-compact", 3, `{"type":"while_in_flight"}`)

	// Duplicate: 409 with a msgpack error body.
	apitest.RequireError(t, apitest.DoMsgpack(t, s.URL, "POST", "/budgets/mp", map[string]any{
		"allocation": 9, "strategy": map[string]any{"type": "while_in_flight"},
	}), http.StatusConflict, "budget 'mp' already exists")

	// GET in msgpack; the same budget read as JSON is identical.
	m = apitest.Object(t, apitest.DoMsgpack(t, s.URL, "GET", "/budgets/mp", nil), http.StatusOK)
	mj := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/mp", nil), http.StatusOK)
	if budCanon(t, m) != budCanon(t, mj) {
		t.Fatalf("msgpack %s != json %s", budCanon(t, m), budCanon(t, mj))
	}

	// JSON request, msgpack response; and msgpack request, JSON response.
	r = apitest.Request(t, nil, s.URL, "PUT", "/budgets/mp", []byte(`{"allocation":6,"strategy":{"type":"time_based","duration_ms":60000,"burst":2}}`),
		map[string]string{"Content-Type": apitest.CTJSON, "Accept": apitest.CTMsgpack})
	if r.Header.Get("Content-Type") != apitest.CTMsgpack {
		t.Fatalf("%v: want msgpack response", r)
	}
	m = apitest.Object(t, r, http.StatusOK)
	c, _ := budCheckBudget(t, m, "mp", 6, tbs)
	if c != created {
		t.Fatalf("PUT replace changed created_at")
	}
	raw, _ := msgpack.Marshal(map[string]any{"allocation": 7, "strategy": map[string]any{"type": "time_based", "duration_ms": 60000, "burst": 2}})
	r = apitest.Request(t, nil, s.URL, "PUT", "/budgets/mp", raw, map[string]string{"Content-Type": apitest.CTMsgpack})
	m = apitest.Object(t, r, http.StatusOK) // Accept absent -> JSON
	budCheckBudget(t, m, "mp", 7, tbs)

	// PATCH with a msgpack nil clears the burst.
	m = apitest.Object(t, apitest.DoMsgpack(t, s.URL, "PATCH", "/budgets/mp", map[string]any{
		"strategy": map[string]any{"burst": nil},
	}), http.StatusOK)
	c, _ = budCheckBudget(t, m, "mp", 7, `{"duration_ms":60000,"type":"time_based"}`)
	if c != created {
		t.Fatalf("PATCH changed created_at")
	}

	// Validation errors come back in msgpack too.
	apitest.RequireError(t, apitest.DoMsgpack(t, s.URL, "POST", "/budgets/mp-bad", map[string]any{
		"allocation": 0, "strategy": map[string]any{"type": "while_in_flight"},
	}), http.StatusUnprocessableEntity, "allocation must be at least 1")
	apitest.RequireErrorPrefix(t, apitest.DoMsgpack(t, s.URL, "POST", "/budgets/mp-bad", map[string]any{
		"allocation": "ten", "strategy": map[string]any{"type": "while_in_flight"},
	}), http.StatusBadRequest, "invalid MessagePack: ")
	apitest.RequireErrorPrefix(t, apitest.DoMsgpack(t, s.URL, "POST", "/budgets/mp-bad", []byte{0xc1}), http.StatusBadRequest, "invalid MessagePack: ")
	apitest.RequireError(t, apitest.DoMsgpack(t, s.URL, "GET", "/budgets/mp-bad", nil), http.StatusNotFound, "budget 'mp-bad' not found")

	// List in msgpack.
	l := apitest.Object(t, apitest.DoMsgpack(t, s.URL, "GET", "/budgets", nil), http.StatusOK)
	items, _ := l["budgets"].([]any)
	if len(items) != 2 || budStr(t, items[0].(map[string]any), "key") != "mp" || budStr(t, items[1].(map[string]any), "key") != "mp-compact" {
		t.Fatalf("msgpack list %s", budCanon(t, l))
	}

	// Enqueue with bindings in msgpack; the response carries them.
	j := apitest.Object(t, apitest.DoMsgpack(t, s.URL, "POST", "/jobs", map[string]any{
		"type": "t", "queue": "mpq", "payload": map[string]any{"a": 1},
		"budgets": []any{map[string]any{"key": "mp-compact", "cost": 2}, map[string]any{"key": "mp-new",
			"create_with": map[string]any{"allocation": 4, "strategy": map[string]any{"type": "while_in_flight"}}}},
	}), http.StatusCreated)
	if b := budCanon(t, j["budgets"]); b != `[{"cost":2,"key":"mp-compact"},{"cost":1,"key":"mp-new"}]` {
		t.Fatalf("msgpack enqueue budgets %s", b)
	}
	gj := apitest.Object(t, apitest.DoMsgpack(t, s.URL, "GET", "/jobs/"+budStr(t, j, "id"), nil), http.StatusOK)
	if b := budCanon(t, gj["budgets"]); b != `[{"cost":2,"key":"mp-compact"},{"cost":1,"key":"mp-new"}]` {
		t.Fatalf("msgpack GET job budgets %s", b)
	}
	m = apitest.Object(t, apitest.DoMsgpack(t, s.URL, "GET", "/budgets/mp-new", nil), http.StatusOK)
	budCheckBudget(t, m, "mp-new", 4, `{"type":"while_in_flight"}`)
	apitest.RequireError(t, apitest.DoMsgpack(t, s.URL, "DELETE", "/budgets/mp-new", nil), http.StatusConflict,
		"budget 'mp-new' is referenced by 1 unfinished job. Delete them or wait for them to finish before deleting it.")

	// DELETE with Accept msgpack: 204, no body.
	apitest.RequireNoContent(t, apitest.DoMsgpack(t, s.URL, "DELETE", "/budgets/mp", nil))
	apitest.RequireError(t, apitest.DoMsgpack(t, s.URL, "DELETE", "/budgets/mp", nil), http.StatusNotFound, "budget 'mp' not found")
}

// budDefCase is one row of the §4.10 definition table.
type budDefCase struct {
	name   string
	body   string
	status int
	text   string // exact text; for 400 a prefix
}

// TestBudgetsDefinitionValidation: every row of the first §4.10 table on
// POST and PUT, plus §1.2 negotiation on the budget routes and Decision 19.
func TestBudgetsDefinitionValidation(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	cases := []budDefCase{
		{"empty body", ``, 400, "invalid JSON: "},
		{"not json", `{"allocation":`, 400, "invalid JSON: "},
		{"missing allocation", `{"strategy":{"type":"while_in_flight"}}`, 400, "invalid JSON: "},
		{"missing strategy", `{"allocation":5}`, 400, "invalid JSON: "},
		{"missing strategy.type", `{"allocation":5,"strategy":{"duration_ms":100}}`, 400, "invalid JSON: "},
		{"allocation wrong type", `{"allocation":"5","strategy":{"type":"while_in_flight"}}`, 400, "invalid JSON: "},
		{"allocation fractional", `{"allocation":1.5,"strategy":{"type":"while_in_flight"}}`, 400, "invalid JSON: "},
		{"allocation out of int range", `{"allocation":100000000000000000000,"strategy":{"type":"while_in_flight"}}`, 400, "invalid JSON: "},
		{"strategy wrong type", `{"allocation":5,"strategy":"while_in_flight"}`, 400, "invalid JSON: "},
		{"type wrong type", `{"allocation":5,"strategy":{"type":1}}`, 400, "invalid JSON: "},
		{"duration wrong type", `{"allocation":5,"strategy":{"type":"time_based","duration_ms":"1s"}}`, 400, "invalid JSON: "},
		{"allocation 0", `{"allocation":0,"strategy":{"type":"while_in_flight"}}`, 422, "allocation must be at least 1"},
		{"allocation too big", `{"allocation":1000001,"strategy":{"type":"while_in_flight"}}`, 422, "allocation must be at most 1000000"},
		{"unknown type", `{"allocation":5,"strategy":{"type":"leaky"}}`, 422, "unknown budget strategy 'leaky' (expected 'while_in_flight' or 'time_based')"},
		{"time_based without duration", `{"allocation":5,"strategy":{"type":"time_based"}}`, 422, "time_based strategy requires duration_ms"},
		{"time_based without duration with burst", `{"allocation":5,"strategy":{"type":"time_based","burst":3}}`, 422, "time_based strategy requires duration_ms"},
		{"duration 0", `{"allocation":5,"strategy":{"type":"time_based","duration_ms":0}}`, 422, "duration_ms must be at least 1"},
		{"burst 0", `{"allocation":5,"strategy":{"type":"time_based","duration_ms":1000,"burst":0}}`, 422, "burst must be at least 1"},
		{"burst too big", `{"allocation":5,"strategy":{"type":"time_based","duration_ms":1000,"burst":1000001}}`, 422, "burst must be at most 1000000"},
		{"while_in_flight with duration", `{"allocation":5,"strategy":{"type":"while_in_flight","duration_ms":1000}}`, 422, "while_in_flight strategy does not accept duration_ms"},
		{"while_in_flight with burst", `{"allocation":5,"strategy":{"type":"while_in_flight","burst":2}}`, 422, "while_in_flight strategy does not accept burst"},
	}
	for _, method := range []string{"POST", "PUT"} {
		for _, c := range cases {
			key := "v-" + strings.ReplaceAll(c.name, " ", "-")
			r := apitest.DoJSON(t, s.URL, method, budPath(key), c.body)
			if c.status == 400 {
				apitest.RequireErrorPrefix(t, r, 400, c.text)
			} else {
				apitest.RequireError(t, r, c.status, c.text)
			}
			apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", budPath(key), nil), http.StatusNotFound, "budget '"+key+"' not found")
		}
	}

	// Boundaries that are valid.
	valid := []struct{ key, body, strategy string }{
		{"max-alloc", `{"allocation":1000000,"strategy":{"type":"while_in_flight"}}`, `{"type":"while_in_flight"}`},
		{"min-alloc", `{"allocation":1,"strategy":{"type":"time_based","duration_ms":1}}`, `{"duration_ms":1,"type":"time_based"}`},
		{"max-burst", `{"allocation":1,"strategy":{"type":"time_based","duration_ms":1000,"burst":1000000}}`, `{"burst":1000000,"duration_ms":1000,"type":"time_based"}`},
		{"burst-above-alloc", `{"allocation":10,"strategy":{"type":"time_based","duration_ms":1000,"burst":20}}`, `{"burst":20,"duration_ms":1000,"type":"time_based"}`},
		{"long-duration", `{"allocation":10,"strategy":{"type":"time_based","duration_ms":86400000000}}`, `{"duration_ms":86400000000,"type":"time_based"}`},
	}
	for _, v := range valid {
		m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", budPath(v.key), v.body), http.StatusCreated)
		budCheckBudget(t, m, v.key, budInt(t, m, "allocation"), v.strategy)
	}

	// Decision 19: key, created_at, updated_at in a body are ignored.
	before := budNowMs()
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/ignored-fields",
		`{"key":"other","created_at":1,"updated_at":2,"allocation":3,"strategy":{"type":"while_in_flight","extra":true},"extra":1}`), http.StatusCreated)
	c, _ := budCheckBudget(t, m, "ignored-fields", 3, `{"type":"while_in_flight"}`)
	if c < before {
		t.Fatalf("created_at %d taken from the body", c)
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/other", nil), http.StatusNotFound, "budget 'other' not found")

	// An invalid body for an existing key is never a 409 from PUT; PUT
	// replacing an existing budget with an invalid definition is 422 and
	// leaves it untouched.
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/min-alloc", `{"allocation":0,"strategy":{"type":"while_in_flight"}}`),
		http.StatusUnprocessableEntity, "allocation must be at least 1")
	m = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/min-alloc", nil), http.StatusOK)
	budCheckBudget(t, m, "min-alloc", 1, `{"duration_ms":1,"type":"time_based"}`)

	// §1.2: 406 and 415 on the budget routes.
	r := apitest.Request(t, nil, s.URL, "GET", "/budgets", nil, map[string]string{"Accept": "text/plain"})
	m = apitest.Object(t, r, http.StatusNotAcceptable)
	if budCanon(t, m) != `{"error":"not acceptable","supported":["application/json","application/msgpack"]}` {
		t.Fatalf("406 body %s", budCanon(t, m))
	}
	r = apitest.Request(t, nil, s.URL, "POST", "/budgets/ct", []byte(`{"allocation":1,"strategy":{"type":"while_in_flight"}}`),
		map[string]string{"Content-Type": "text/plain"})
	m = apitest.Object(t, r, http.StatusUnsupportedMediaType)
	if budCanon(t, m) != `{"error":"unsupported media type","supported":["application/json","application/msgpack"]}` {
		t.Fatalf("415 body %s", budCanon(t, m))
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/ct", nil), http.StatusNotFound, "budget 'ct' not found")
}

// TestBudgetsKeys: §4.3 key rules, '/' via %2F, the 255-byte limit,
// case-sensitivity, and 404 for invalid keys on GET/PATCH/DELETE
// (Decision 29); the list is sorted by key in byte order.
func TestBudgetsKeys(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	def := `{"allocation":2,"strategy":{"type":"while_in_flight"}}`

	bad := []struct{ key, reason string }{
		{"a,b", "must not contain ','"},
		{"a\x00b", "must not contain null bytes"},
		{"a*b", "must not contain '*' (reserved)"},
		{"a?b", "must not contain '?' (reserved)"},
		{"a[b", "must not contain '[' (reserved)"},
		{"a]b", "must not contain ']' (reserved)"},
		{"a{b", "must not contain '{' (reserved)"},
		{"a}b", "must not contain '}' (reserved)"},
		{"a\\b", "must not contain '\\' (reserved)"},
		{"x?y*", "must not contain '?' (reserved)"}, // first offending char
		{"x*,y", "must not contain ','"},            // ',' rule before reserved
		{"x*\x00y", "must not contain null bytes"},  // NUL rule before reserved
		{strings.Repeat("k", 256), "must be at most 255 bytes"},
		{strings.Repeat("k", 254) + "é", "must be at most 255 bytes"}, // 256 bytes, 255 runes
	}
	for _, b := range bad {
		want := "invalid budget key '" + b.key + "': " + b.reason
		apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", budPath(b.key), def), http.StatusUnprocessableEntity, want)
		apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", budPath(b.key), def), http.StatusUnprocessableEntity, want)
		nf := "budget '" + b.key + "' not found"
		apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", budPath(b.key), nil), http.StatusNotFound, nf)
		apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", budPath(b.key), `{"allocation":3}`), http.StatusNotFound, nf)
		apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", budPath(b.key), nil), http.StatusNotFound, nf)
	}

	good := []string{
		"a/b",                          // sent as a%2Fb
		strings.Repeat("k", 255),       // exactly 255 bytes
		strings.Repeat("k", 253) + "é", // 255 bytes
		"Case", "case",                 // case-sensitive
		"bücher.über-ÿ", // UTF-8
		"with space",    // nothing forbids it
		"a:b;c=d@e+f",   // sub-delims
	}
	for _, k := range good {
		m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", budPath(k), def), http.StatusCreated)
		budCheckBudget(t, m, k, 2, `{"type":"while_in_flight"}`)
		m = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", budPath(k), nil), http.StatusOK)
		budCheckBudget(t, m, k, 2, `{"type":"while_in_flight"}`)
	}
	if p := budPath("a/b"); p != "/budgets/a%2Fb" {
		t.Fatalf("test bug: path %q", p)
	}
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/a%2Fb", `{"allocation":4}`), http.StatusOK)
	budCheckBudget(t, m, "a/b", 4, `{"type":"while_in_flight"}`)
	// A binding can name the slash key too.
	j := budEnqueue(t, s, budJob("keys", budBind("a/b", 3)))
	if b := budCanon(t, j["budgets"]); b != `[{"cost":3,"key":"a/b"}]` {
		t.Fatalf("budgets %s", b)
	}

	l := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets", nil), http.StatusOK)
	items, _ := l["budgets"].([]any)
	var keys []string
	for _, it := range items {
		keys = append(keys, budStr(t, it.(map[string]any), "key"))
	}
	if !sort.StringsAreSorted(keys) {
		t.Fatalf("list not sorted by key (byte order): %q", keys)
	}
	if !budSameSet(keys, good) {
		t.Fatalf("listed keys %q, want %q", keys, good)
	}

	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/a%2Fb", nil), http.StatusConflict,
		"budget 'a/b' is referenced by 1 unfinished job. Delete them or wait for them to finish before deleting it.")
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/case", nil))
	apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/Case", nil), http.StatusOK)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/case", nil), http.StatusNotFound, "budget 'case' not found")
}

// TestBudgetsPatch: §4.11 merge-patch semantics, allowed and forbidden nulls,
// type switches, created_at kept, 404 without creating.
func TestBudgetsPatch(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/nope", `{"allocation":3}`), http.StatusNotFound, "budget 'nope' not found")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/nope", `{"allocation":3,"strategy":{"type":"while_in_flight"}}`), http.StatusNotFound, "budget 'nope' not found")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/nope", nil), http.StatusNotFound, "budget 'nope' not found")

	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/p", `{"allocation":10,"strategy":{"type":"time_based","duration_ms":1000}}`), http.StatusCreated)
	created, updated := budCheckBudget(t, m, "p", 10, `{"duration_ms":1000,"type":"time_based"}`)

	step := func(body string, alloc int64, strategy string) {
		t.Helper()
		before := budNowMs()
		r := apitest.Request(t, nil, s.URL, "PATCH", "/budgets/p", []byte(body), map[string]string{"Content-Type": "application/merge-patch+json"})
		after := budNowMs()
		m := apitest.Object(t, r, http.StatusOK)
		c, u := budCheckBudget(t, m, "p", alloc, strategy)
		if c != created {
			t.Fatalf("PATCH %s changed created_at %d -> %d", body, created, c)
		}
		if u < before || u > after || u < updated {
			t.Fatalf("PATCH %s: updated_at %d not now within [%d, %d]", body, u, before, after)
		}
		updated = u
		g := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/p", nil), http.StatusOK)
		if budCanon(t, g) != budCanon(t, m) {
			t.Fatalf("GET after PATCH %s = %s, PATCH answered %s", body, budCanon(t, g), budCanon(t, m))
		}
	}
	reject := func(body string, status int, text string) {
		t.Helper()
		g0 := budCanon(t, apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/p", nil), http.StatusOK))
		r := apitest.DoJSON(t, s.URL, "PATCH", "/budgets/p", body)
		if status == 400 {
			apitest.RequireErrorPrefix(t, r, status, text)
		} else {
			apitest.RequireError(t, r, status, text)
		}
		if g1 := budCanon(t, apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/p", nil), http.StatusOK)); g1 != g0 {
			t.Fatalf("rejected PATCH %s changed the budget: %s -> %s", body, g0, g1)
		}
	}

	step(`{}`, 10, `{"duration_ms":1000,"type":"time_based"}`)
	step(`{"allocation":20}`, 20, `{"duration_ms":1000,"type":"time_based"}`)
	step(`{"strategy":{"burst":5}}`, 20, `{"burst":5,"duration_ms":1000,"type":"time_based"}`)
	step(`{"strategy":{"duration_ms":2000}}`, 20, `{"burst":5,"duration_ms":2000,"type":"time_based"}`)
	step(`{"allocation":30,"strategy":{"burst":7}}`, 30, `{"burst":7,"duration_ms":2000,"type":"time_based"}`)
	step(`{"key":"zzz","created_at":5,"updated_at":6}`, 30, `{"burst":7,"duration_ms":2000,"type":"time_based"}`)
	step(`{"strategy":{"burst":null}}`, 30, `{"duration_ms":2000,"type":"time_based"}`)
	step(`{"strategy":{"burst":null}}`, 30, `{"duration_ms":2000,"type":"time_based"}`) // clearing an unset burst
	step(`{"strategy":{"burst":9}}`, 30, `{"burst":9,"duration_ms":2000,"type":"time_based"}`)

	reject(`{"allocation":null}`, 422, "allocation cannot be null")
	reject(`{"strategy":null}`, 422, "strategy cannot be null")
	reject(`{"strategy":{"type":null}}`, 422, "strategy.type cannot be null")
	reject(`{"strategy":{"duration_ms":null}}`, 422, "time_based strategy requires duration_ms")
	reject(`{"allocation":0}`, 422, "allocation must be at least 1")
	reject(`{"allocation":1000001}`, 422, "allocation must be at most 1000000")
	reject(`{"strategy":{"burst":0}}`, 422, "burst must be at least 1")
	reject(`{"strategy":{"burst":1000001}}`, 422, "burst must be at most 1000000")
	reject(`{"strategy":{"duration_ms":0}}`, 422, "duration_ms must be at least 1")
	reject(`{"strategy":{"type":"leaky"}}`, 422, "unknown budget strategy 'leaky' (expected 'while_in_flight' or 'time_based')")
	// Switching to while_in_flight without clearing the time_based fields.
	// Both duration_ms and burst are set here; §4.10 does not order the two
	// checks, so either text is accepted.
	{
		r := apitest.DoJSON(t, s.URL, "PATCH", "/budgets/p", `{"strategy":{"type":"while_in_flight"}}`)
		m := apitest.Object(t, r, 422)
		if e := m["error"]; e != "while_in_flight strategy does not accept duration_ms" && e != "while_in_flight strategy does not accept burst" {
			t.Fatalf("%v: want a 'does not accept' error", r)
		}
	}
	reject(`{"strategy":{"type":"while_in_flight","duration_ms":null}}`, 422, "while_in_flight strategy does not accept burst")
	reject(`{"strategy":{"type":"while_in_flight","burst":null}}`, 422, "while_in_flight strategy does not accept duration_ms")
	reject(`{"allocation":"x"}`, 400, "invalid JSON: ")
	reject(`{"strategy":{"burst":"x"}}`, 400, "invalid JSON: ")
	reject(`{"strategy":"time_based"}`, 400, "invalid JSON: ")
	reject(`[1]`, 400, "invalid JSON: ")
	reject(``, 400, "invalid JSON: ")

	// Switch type both ways.
	step(`{"strategy":{"type":"while_in_flight","duration_ms":null,"burst":null}}`, 30, `{"type":"while_in_flight"}`)
	reject(`{"strategy":{"burst":3}}`, 422, "while_in_flight strategy does not accept burst")
	reject(`{"strategy":{"type":"time_based"}}`, 422, "time_based strategy requires duration_ms")
	step(`{"strategy":{"type":"time_based","duration_ms":500}}`, 30, `{"duration_ms":500,"type":"time_based"}`)

	// PUT keeps created_at too.
	before := budNowMs()
	m = budMustPut(t, s, "p", budWIF(4))
	c, u := budCheckBudget(t, m, "p", 4, `{"type":"while_in_flight"}`)
	if c != created || u < before {
		t.Fatalf("PUT replace: created_at %d (want %d), updated_at %d (want >= %d)", c, created, u, before)
	}
}

// TestBudgetsCostGuards: §4.10 shrink and delete guards against unfinished
// (scheduled, ready, in-flight) bound jobs, the n/c wording, and that
// finished jobs do not block deletion (§4.11 DELETE).
func TestBudgetsCostGuards(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "g", budWIF(10))
	future := budNowMs() + 3600_000

	j5 := budEnqueue(t, s, budJob("guards", budBind("g", 5)))
	sched := budJob("guards", budBind("g", 4))
	sched["ready_at"] = future
	j4 := budEnqueue(t, s, sched)
	if st := budStr(t, j4, "status"); st != "scheduled" {
		t.Fatalf("future job status %q", st)
	}
	budEnqueue(t, s, budJob("guards", budBind("g", 2)))

	tail := " Raise the allocation, delete them, or wait for them to drain."
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/g", `{"allocation":3}`), 422,
		"budget 'g' cannot allocate 3: 2 unfinished jobs draw up to 5 from it."+tail)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/g", `{"allocation":4}`), 422,
		"budget 'g' cannot allocate 4: 1 unfinished job draw up to 5 from it."+tail)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/g", budWIF(1)), 422,
		"budget 'g' cannot allocate 1: 3 unfinished jobs draw up to 5 from it."+tail)
	// Switching type is checked the same way.
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/g", budTB(4, 1000, 0)), 422,
		"budget 'g' cannot allocate 4: 1 unfinished job draw up to 5 from it."+tail)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/g", nil), 409,
		"budget 'g' is referenced by 3 unfinished jobs. Delete them or wait for them to finish before deleting it.")
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/g", `{"allocation":5}`), http.StatusOK)
	budCheckBudget(t, m, "g", 5, `{"type":"while_in_flight"}`)

	// Deleting the cost-5 job lowers the ceiling it imposed and the count.
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/jobs/"+budStr(t, j5, "id"), nil))
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/g", `{"allocation":4}`), http.StatusOK)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/g", nil), 409,
		"budget 'g' is referenced by 2 unfinished jobs. Delete them or wait for them to finish before deleting it.")

	// Burst guard (checked after the allocation).
	budMustPut(t, s, "gb", budTB(10, 1000, 0))
	holdQ := "guards-burst" // nobody takes this queue
	budEnqueue(t, s, budJob(holdQ, budBind("gb", 6)))
	budEnqueue(t, s, budJob(holdQ, budBind("gb", 3)))
	btail := " Raise the burst, delete them, or wait for them to drain."
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/gb", `{"strategy":{"burst":5}}`), 422,
		"budget 'gb' cannot burst 5: 1 unfinished job draw up to 6 from it."+btail)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/gb", `{"strategy":{"burst":2}}`), 422,
		"budget 'gb' cannot burst 2: 2 unfinished jobs draw up to 6 from it."+btail)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/gb", budTB(5, 1000, 2)), 422,
		"budget 'gb' cannot allocate 5: 1 unfinished job draw up to 6 from it."+tail)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/gb", budTB(100, 1000, 4)), 422,
		"budget 'gb' cannot burst 4: 1 unfinished job draw up to 6 from it."+btail)
	m = apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/gb", `{"strategy":{"burst":6}}`), http.StatusOK)
	budCheckBudget(t, m, "gb", 10, `{"burst":6,"duration_ms":1000,"type":"time_based"}`)
	// Enqueue-side ceiling is min(allocation, burst) (Decision 6).
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", budJob(holdQ, budBind("gb", 7))), 422,
		"budget 'gb' cannot accept a job costing 7: its burst is 6. Lower the cost or raise the burst.")

	// In-flight jobs count as unfinished; a dead (finished) job does not block
	// deletion and keeps showing its binding.
	budMustPut(t, s, "fin", budWIF(3))
	jf := budEnqueue(t, s, budJob("guards-fin", budBind("fin", 3)))
	id := budStr(t, jf, "id")
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("guards-fin", 1), Accept: apitest.AcceptNDJSON})
	if got := st.NextJobFrame(t, 10*time.Second).Job.ID; got != id {
		t.Fatalf("took %s, want %s", got, id)
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/fin", `{"allocation":2}`), 422,
		"budget 'fin' cannot allocate 2: 1 unfinished job draw up to 3 from it."+tail)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/fin", nil), 409,
		"budget 'fin' is referenced by 1 unfinished job. Delete them or wait for them to finish before deleting it.")
	fj := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/"+id+"/failure", `{"message":"boom","kill":true}`), http.StatusOK)
	if budStr(t, fj, "status") != "dead" {
		t.Fatalf("kill -> status %v", fj["status"])
	}
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/fin", nil))
	dj := budGetJob(t, s, id)
	if b := budCanon(t, dj["budgets"]); b != `[{"cost":3,"key":"fin"}]` {
		t.Fatalf("dead job lost its binding: %s", b)
	}
	// A later budget with the same key is a new budget.
	m = apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/fin", budWIF(1)), http.StatusCreated)
	budCheckBudget(t, m, "fin", 1, `{"type":"while_in_flight"}`)
}

// TestBudgetsMaxBudgets: --max-budgets 2 (§4.10, §9): third create 422 with
// the exact text on POST, PUT and create_with; PUT replace and PATCH still
// work at the limit; POST of an existing key is still 409.
func TestBudgetsMaxBudgets(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, "--max-budgets", "2")
	apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/a", budWIF(1)), http.StatusCreated)
	budMustPut(t, s, "b", budWIF(1))

	limit := func(k string) string {
		return "budget '" + k + "' cannot be created: the limit of 2 budgets has been reached"
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/c", budWIF(1)), 422, limit("c"))
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/c", budWIF(1)), 422, limit("c"))
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", budJob("mx", map[string]any{"key": "c", "create_with": budWIF(1)})), 422, limit("c"))
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": []any{
		budJob("mx", budBind("a", 1)),
		budJob("mx", map[string]any{"key": "c", "create_with": budWIF(1)}),
	}}), 422, "jobs[1]: "+limit("c"))
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/c", nil), 404, "budget 'c' not found")
	queues := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/queues", nil), http.StatusOK)
	if q := budCanon(t, queues["queues"]); q != `[]` {
		t.Fatalf("queues %s: a rejected enqueue wrote a job", q)
	}

	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/a", budWIF(5)), 409, "budget 'a' already exists")
	m := budMustPut(t, s, "a", budWIF(5))
	budCheckBudget(t, m, "a", 5, `{"type":"while_in_flight"}`)
	m = apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/b", `{"allocation":7}`), http.StatusOK)
	budCheckBudget(t, m, "b", 7, `{"type":"while_in_flight"}`)
	// create_with naming an existing budget is fine at the limit.
	budEnqueue(t, s, budJob("mx", map[string]any{"key": "a", "create_with": budWIF(1)}))

	// Freeing a slot allows a creation again, by create_with.
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/b", nil))
	budEnqueue(t, s, budJob("mx", map[string]any{"key": "c", "create_with": budWIF(2)}))
	m = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/c", nil), http.StatusOK)
	budCheckBudget(t, m, "c", 2, `{"type":"while_in_flight"}`)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/d", budWIF(1)), 422, limit("d"))
}

// TestBudgetsMaxBudgetsZeroUnlimited: Decision 25, --max-budgets 0 = unlimited.
func TestBudgetsMaxBudgetsZeroUnlimited(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, "--max-budgets", "0")
	for _, k := range []string{"z1", "z2", "z3"} {
		apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", budPath(k), budWIF(1)), http.StatusCreated)
	}
	budEnqueue(t, s, budJob("z", map[string]any{"key": "z4", "create_with": budWIF(1)}))
}
