package protocol

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func TestPayloadReadsBackIdenticallyAcrossFormats(t *testing.T) {
	in := `{"big":18446744073709551615,"neg":-9223372036854775808,"f":1.0,"g":2.5e-300,"s":"é\n","a":[null,true,{}]}`
	var p Payload
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	mp, err := MarshalMsgpack(struct {
		P Payload `msgpack:"p"`
	}{p})
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		P Payload `msgpack:"p"`
	}
	if err := msgpack.Unmarshal(mp, &back); err != nil {
		t.Fatal(err)
	}
	var a, b any
	dec := json.NewDecoder(strings.NewReader(in))
	dec.UseNumber()
	_ = dec.Decode(&a)
	dec = json.NewDecoder(strings.NewReader(string(back.P)))
	dec.UseNumber()
	_ = dec.Decode(&b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("payload changed:\n in  %s\n out %s", ja, jb)
	}
	if !strings.Contains(string(back.P), `"f":1.0`) {
		t.Fatalf("float 1.0 lost its fraction: %s", back.P)
	}
}

func TestMsgpackBinAndExtRejected(t *testing.T) {
	bin, _ := msgpack.Marshal(map[string]any{"type": "t", "queue": "q", "payload": []byte{1}})
	var r EnqueueRequest
	err := Decode(Msgpack, bin, &r)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeInvalid || !strings.HasPrefix(pe.Message, "invalid MessagePack: ") {
		t.Fatalf("bin payload: got %v", err)
	}
}

// TestMsgpackLyingLengthsRejectedCheaply feeds headers that claim about
// 800 million elements or bytes with almost nothing behind them: the
// transcoder must refuse them without allocating for the claimed length.
// (FuzzMsgpackStreamFraming once found a map32 header that made a generic
// msgpack.Unmarshal allocate gigabytes.)
func TestMsgpackLyingLengthsRejectedCheaply(t *testing.T) {
	tail := strings.Repeat("0", 32)
	for name, head := range map[string]string{
		"map32":   "\xdf0000",
		"array32": "\xdd0000",
		"str32":   "\xdb0000",
		"nested":  "\x81\xa1p\xdf0000",
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := MsgpackToJSON([]byte(head + tail)); err == nil {
			t.Errorf("%s: accepted a value whose length header lies", name)
		}
		runtime.ReadMemStats(&after)
		// msgpack reads a long string in chunks of 1 MiB into a growing
		// buffer, so one lying str32 header costs a few MiB (not the
		// 800 MB it claims); a map or array header costs nothing
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 8<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte input", name, grown, len(head+tail))
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		body, want string
	}{
		{`{"queue":"q","payload":1}`, "invalid JSON: missing field 'type'"},
		{`{"type":"t","queue":"q"}`, "invalid JSON: missing field 'payload'"},
		{`{"type":"t","queue":"q","payload":1,"priority":65536}`, "invalid JSON: "},
		{`{"type":"t","queue":"q","payload":1,"priority":-1}`, "invalid JSON: "},
		{`{"type":"t","queue":"q","payload":1,"ready_at":1.5}`, "invalid JSON: "},
		{`{"type":"t","queue":"q","payload":1,"backoff":{"exponent":1}}`, "invalid JSON: missing field 'base_ms'"},
		{``, "invalid JSON: "},
		{`{"type":"t","queue":"q","payload":null}`, ""},
	}
	for _, c := range cases {
		var r EnqueueRequest
		err := Decode(JSON, []byte(c.body), &r)
		if c.want == "" {
			if err != nil || string(r.Payload) != "null" {
				t.Errorf("%s: got %v / payload %q, want a present null payload", c.body, err, r.Payload)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want prefix %q", c.body, err, c.want)
		}
	}
}

func TestEnqueueValidationOrder(t *testing.T) {
	cases := []struct {
		body, want string
	}{
		{`{"type":"","queue":"a,b","payload":1}`, "type must not be empty"},
		{`{"type":"t","queue":"a,b","payload":1}`, "queue must not contain ','"},
		{`{"type":"t","queue":"a*","payload":1}`, "queue must not contain '*' (reserved)"},
		{`{"type":"t","queue":"q","payload":1,"unique_while":"queued"}`, "unique_while requires unique_key"},
		{`{"type":"t","queue":"q","payload":1,"unique_key":"k","batch":{"key":"a","when":"b","fold":"c"}}`, "unique_key and batch cannot be combined"},
		{`{"type":"t","queue":"q","payload":1,"unique_key":"k","unique_while":"x"}`, `invalid unique_while: "x" (expected "queued", "active", or "exists")`},
		{`{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a,b"}]}`, "budgets[0]: invalid budget key 'a,b': must not contain ','"},
		{`{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a","cost":0}]}`, "budgets[0]: cost must be at least 1"},
		{`{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a"},{"key":"a"}]}`, "budgets: duplicate key 'a'"},
		{`{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a","create_with":{"allocation":0,"strategy":{"type":"while_in_flight"}}}]}`, "budgets[0].create_with: allocation must be at least 1"},
		{`{"type":"t","queue":"q","payload":1,"backoff":{"exponent":-1,"base_ms":1,"jitter_ms":1}}`, "backoff.exponent must be a finite number >= 0"},
	}
	for _, c := range cases {
		var r EnqueueRequest
		if err := Decode(JSON, []byte(c.body), &r); err != nil {
			t.Fatalf("%s: decode: %v", c.body, err)
		}
		_, err := r.Validate()
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got  %v\n want %s", c.body, err, c.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	cases := map[string]time.Duration{
		"1500": 1500 * time.Millisecond, "12.5s": 12500 * time.Millisecond, "3m": 3 * time.Minute,
		"2h": 2 * time.Hour, "7d": 7 * 24 * time.Hour, "1w": 7 * 24 * time.Hour, "100ms": 100 * time.Millisecond, "0": 0,
	}
	for in, want := range cases {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Beyond what a time.Duration holds (about 292 years): refused, never
	// wrapped to a negative or short duration.
	for _, bad := range []string{"", "-1s", "1x", "s", "1e3s", "abc", "9223372036854775807", "9223372036855", "300000w"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

func TestBudgetDefinitionValidation(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	i64 := func(v int64) *int64 { return &v }
	s := func(v string) *string { return &v }
	cases := []struct {
		req  BudgetRequest
		want string
	}{
		{BudgetRequest{i32(0), &StrategyRequest{Type: s("while_in_flight")}}, "allocation must be at least 1"},
		{BudgetRequest{i32(1000001), &StrategyRequest{Type: s("while_in_flight")}}, "allocation must be at most 1000000"},
		{BudgetRequest{i32(1), &StrategyRequest{Type: s("leaky")}}, "unknown budget strategy 'leaky' (expected 'while_in_flight' or 'time_based')"},
		{BudgetRequest{i32(1), &StrategyRequest{Type: s("time_based")}}, "time_based strategy requires duration_ms"},
		{BudgetRequest{i32(1), &StrategyRequest{Type: s("time_based"), DurationMs: i64(0)}}, "duration_ms must be at least 1"},
		{BudgetRequest{i32(1), &StrategyRequest{Type: s("time_based"), DurationMs: i64(1), Burst: i32(0)}}, "burst must be at least 1"},
		{BudgetRequest{i32(1), &StrategyRequest{Type: s("time_based"), DurationMs: i64(1), Burst: i32(1000001)}}, "burst must be at most 1000000"},
		{BudgetRequest{i32(1), &StrategyRequest{Type: s("while_in_flight"), DurationMs: i64(1)}}, "while_in_flight strategy does not accept duration_ms"},
		{BudgetRequest{i32(1), &StrategyRequest{Type: s("while_in_flight"), Burst: i32(1)}}, "while_in_flight strategy does not accept burst"},
	}
	for _, c := range cases {
		_, err := c.req.Definition()
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
}

func TestCeilingAndCostChecks(t *testing.T) {
	d := Definition{Allocation: 10, Strategy: Strategy{Type: TimeBased, DurationMs: 1000, Burst: 4}}
	if d.Ceiling() != 4 || d.Capacity() != 4 {
		t.Fatalf("ceiling %d capacity %d", d.Ceiling(), d.Capacity())
	}
	if err := d.CheckCost("k", 5); err == nil || err.Error() != "budget 'k' cannot accept a job costing 5: its burst is 4. Lower the cost or raise the burst." {
		t.Fatalf("burst check: %v", err)
	}
	up := Definition{Allocation: 10, Strategy: Strategy{Type: TimeBased, DurationMs: 1000, Burst: 20}}
	if up.Ceiling() != 10 || up.Capacity() != 20 {
		t.Fatalf("burst above allocation: ceiling %d capacity %d", up.Ceiling(), up.Capacity())
	}
	if err := up.CheckCost("k", 11); err == nil || err.Error() != "budget 'k' cannot accept a job costing 11: its allocation is 10. Lower the cost or raise the allocation." {
		t.Fatalf("allocation check: %v", err)
	}
}

// TestCheckNameReasons: every rule of SPEC §2.4 gives its own text, the
// first broken one in the order of the rules, and valid names pass.
func TestCheckNameReasons(t *testing.T) {
	for name, want := range map[string]string{
		"":          "must not be empty",
		"a,b":       "must not contain ','",
		"a\x00b":    "must not contain null bytes",
		"a*b,c":     "must not contain ','",
		"x\x00*":    "must not contain null bytes",
		"a*b":       "must not contain '*' (reserved)",
		"q?":        "must not contain '?' (reserved)",
		"[q":        "must not contain '[' (reserved)",
		"q]":        "must not contain ']' (reserved)",
		"{q}":       "must not contain '{' (reserved)",
		"q}":        "must not contain '}' (reserved)",
		`a\b`:       `must not contain '\' (reserved)`,
		"\xff\xfe":  "must be valid UTF-8",
		"é\xc3":     "must be valid UTF-8",
		"\xff,":     "must not contain ','",
		"emails":    "",
		"a/b c-d_é": "",
	} {
		if got := CheckName(name); got != want {
			t.Errorf("CheckName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "4MiB": 4 << 20, "64KiB": 64 << 10, "1.5KiB": 1536, "0.5MiB": 512 << 10, "4GiB": 4 << 30} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "4MB", "KiB", "1e3KiB", "-1KiB", "infKiB", "0x10", "4GB", "99999999999999MiB"} {
		if _, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", bad)
		}
	}
}
