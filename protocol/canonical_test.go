package protocol

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestDecodeRefusesTrailingCloser: a body followed by a stray '}' or ']'
// (or anything else) is not one JSON value, on every request shape.
func TestDecodeRefusesTrailingCloser(t *testing.T) {
	job := `{"type":"t","queue":"q","payload":1}`
	for _, tail := range []string{"}", "]", "}x", "]]", " }", "}\n{", `}"`} {
		for name, v := range map[string]func() any{
			"enqueue": func() any { return new(EnqueueRequest) },
			"bulk":    func() any { return new(BulkEnqueueRequest) },
			"ack":     func() any { return new(AckManyRequest) },
			"map":     func() any { return new(map[string]any) },
		} {
			body := job
			switch name {
			case "bulk":
				body = `{"jobs":[` + job + `]}`
			case "ack":
				body = `{"ids":["a"]}`
			}
			err := Decode(JSON, []byte(body+tail), v())
			if err == nil || !strings.HasPrefix(err.Error(), "invalid JSON: ") {
				t.Errorf("%s %q: error %v, want invalid JSON", name, body+tail, err)
			}
		}
	}
	if _, err := DecodeBudgetPatch(JSON, []byte(`{"allocation":5}}`)); err == nil {
		t.Errorf("budget patch with a trailing '}' accepted")
	}
	if _, err := DecodeJobPatch(JSON, []byte(`{"priority":5}]`)); err == nil {
		t.Errorf("job patch with a trailing ']' accepted")
	}
}

// TestCanonicalLimitsJSON checks SPEC §1.3's canonical model limits on JSON
// bodies, on the fast decoder's shapes and on the fallback's alike.
func TestCanonicalLimitsJSON(t *testing.T) {
	refused := []struct{ body, want string }{
		{`{"type":"t","queue":"q","payload":{"x":1e400}}`, "invalid JSON: number 1e400 out of range"},
		{`{"type":"t","queue":"q","payload":{"x":-1e400}}`, "invalid JSON: number -1e400 out of range"},
		{`{"type":"t","queue":"q","payload":[18446744073709551616]}`, "invalid JSON: number 18446744073709551616 out of range"},
		{`{"type":"t","queue":"q","payload":-9223372036854775809}`, "invalid JSON: number -9223372036854775809 out of range"},
		{`{"type":"t","queue":"q","payload":{"s":"\ud800"}}`, "invalid JSON: invalid UTF-8 in payload.s"},
		{`{"type":"t","queue":"q","payload":{"s":"\udc00\ud800"}}`, "invalid JSON: invalid UTF-8 in payload.s"},
		{`{"type":"t","queue":"q","payload":{"s":"\ud800x"}}`, "invalid JSON: invalid UTF-8 in payload.s"},
		{`{"type":"t","queue":"q","payload":{"s":["a","\ud83d\u0041"]}}`, "invalid JSON: invalid UTF-8 in payload.s[1]"},
		{"{\"type\":\"t\",\"queue\":\"q\",\"payload\":\"\xff\xfe\"}", "invalid JSON: invalid UTF-8 in payload"},
		{"{\"type\":\"t\",\"queue\":\"q\xff\",\"payload\":1}", "invalid JSON: invalid UTF-8 in queue"},
		{`{"type":"t","queue":"q\udfff","payload":1}`, "invalid JSON: invalid UTF-8 in queue"},
		{"{\"type\":\"t\",\"queue\":\"q\",\"payload\":{\"\xc3\":1}}", "invalid JSON: invalid UTF-8 in payload"},
		{`{"type":"t","queue":"q","payload":{"a":1,"a":2}}`, `invalid JSON: duplicate key "a" in payload`},
		{`{"type":"t","queue":"q","payload":{"a":1,"\u0061":2}}`, `invalid JSON: duplicate key "a" in payload`},
		{`{"type":"t","queue":"q","queue":"r","payload":1}`, `invalid JSON: duplicate key "queue" in body`},
		{`{"type":"t","queue":"q","payload":{"k":[{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}]}}`,
			`invalid JSON: duplicate key "a" in payload.k[0]`},
	}
	for _, tc := range refused {
		for _, bulk := range []bool{false, true} {
			body, want := tc.body, tc.want
			var v any = new(EnqueueRequest)
			if bulk {
				body = `{"jobs":[{"type":"t","queue":"q","payload":1},` + body + `]}`
				want = inSecondBulkJob(want)
				v = new(BulkEnqueueRequest)
			}
			err := Decode(JSON, []byte(body), v)
			if err == nil || err.Error() != want {
				t.Errorf("%q: error %v, want %q", body, err, want)
			}
		}
	}
	accepted := []string{
		`{"type":"t","queue":"q","payload":[18446744073709551615,-9223372036854775808,1.7976931348623157e308,-1.7976931348623157e308,1e-400,0.5,-0]}`,
		`{"type":"t","queue":"q","payload":{"s":"\ud83d\ude00 é \u00e9 \u2028","a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}}`,
		"{\"type\":\"t\",\"queue\":\"q\u00e9\",\"payload\":\"\u65e5\u672c\"}",
	}
	for _, body := range accepted {
		if err := Decode(JSON, []byte(body), new(EnqueueRequest)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// inSecondBulkJob rewrites the field an error names ("in payload.s") as
// the field of the second job of a bulk ("in jobs[1].payload.s").
func inSecondBulkJob(want string) string {
	i := strings.LastIndex(want, " in ")
	if i < 0 {
		return want // numbers out of range name no field
	}
	path := want[i+len(" in "):]
	if path == "body" {
		return want[:i] + " in jobs[1]"
	}
	return want[:i] + " in jobs[1]." + path
}

// TestCanonicalLimitsMsgpack: msgpack bodies meet the same rules, with the
// MessagePack error prefix.
func TestCanonicalLimitsMsgpack(t *testing.T) {
	enc := func(build func(e *msgpack.Encoder)) []byte {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		build(e)
		return buf.Bytes()
	}
	job := func(payload func(e *msgpack.Encoder), queue string) []byte {
		return enc(func(e *msgpack.Encoder) {
			_ = e.EncodeMapLen(3)
			_ = e.EncodeString("type")
			_ = e.EncodeString("t")
			_ = e.EncodeString("queue")
			_ = e.EncodeString(queue)
			_ = e.EncodeString("payload")
			payload(e)
		})
	}
	cases := []struct {
		name, want string
		body       []byte
	}{
		{"invalid UTF-8 string", "invalid MessagePack: invalid UTF-8 in payload",
			job(func(e *msgpack.Encoder) { _ = e.EncodeString("a\xffb") }, "q")},
		{"invalid UTF-8 key", "invalid MessagePack: invalid UTF-8 in payload",
			job(func(e *msgpack.Encoder) { _ = e.EncodeMapLen(1); _ = e.EncodeString("\xfe"); _ = e.EncodeInt(1) }, "q")},
		{"invalid UTF-8 queue", "invalid MessagePack: invalid UTF-8 in queue",
			job(func(e *msgpack.Encoder) { _ = e.EncodeInt(1) }, "\xff\xfe")},
		{"duplicate key", `invalid MessagePack: duplicate key "a" in payload`,
			job(func(e *msgpack.Encoder) {
				_ = e.EncodeMapLen(2)
				_ = e.EncodeString("a")
				_ = e.EncodeInt(1)
				_ = e.EncodeString("a")
				_ = e.EncodeInt(2)
			}, "q")},
	}
	for _, tc := range cases {
		err := Decode(Msgpack, tc.body, new(EnqueueRequest))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	ok := job(func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(3)
		_ = e.EncodeUint(1<<64 - 1)
		_ = e.EncodeInt(-1 << 63)
		_ = e.EncodeString("日本 \U0001F600")
	}, "q")
	var r EnqueueRequest
	if err := Decode(Msgpack, ok, &r); err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.Payload), "[18446744073709551615,-9223372036854775808,\"日本 \U0001F600\"]"; got != want {
		t.Errorf("payload %s, want %s", got, want)
	}
}

// TestCanonicalValuesReadBackIdentically: every accepted payload encodes to
// msgpack (the read-back path of msgpack clients) and back to the same JSON
// value.
func TestCanonicalValuesReadBackIdentically(t *testing.T) {
	for _, p := range []string{
		`[18446744073709551615,-9223372036854775808,1.7976931348623157e308,0.5,-0.25e-3]`,
		`{"s":"\ud83d\ude00","n":null,"t":true,"o":{"x":[1,"2",3.5]}}`,
	} {
		var r EnqueueRequest
		if err := Decode(JSON, []byte(`{"type":"t","queue":"q","payload":`+p+`}`), &r); err != nil {
			t.Fatal(err)
		}
		mp, err := MarshalMsgpack(r.Payload)
		if err != nil {
			t.Fatalf("%s: msgpack encoding failed: %v", p, err)
		}
		back, err := MsgpackToJSON(mp)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckCanonical(back, "payload"); err != nil {
			t.Errorf("%s: read back %s breaks the limits: %v", p, back, err)
		}
	}
}

// BenchmarkCheckCanonical is the canonical check alone over the body of
// BenchmarkDecodeBulkEnqueue (1000 jobs of ~200-byte payloads): what the
// check adds to decoding a bulk. 0 allocs/op.
func BenchmarkCheckCanonical(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"type":"bench","queue":"q","payload":{"s":%d,"t":1700000000000000000,"p":"%s","f":-0.25e-3}}`, i, strings.Repeat("x", 160))
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckCanonical(body, ""); err != nil {
			b.Fatal(err)
		}
	}
}
