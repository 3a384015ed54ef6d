package protocol

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func FuzzDecodeEnqueueJSON(f *testing.F) {
	f.Add([]byte(`{"type":"t","queue":"q","payload":{"a":[1,2.5,"x",null,true]}}`))
	f.Add([]byte(`{"type":"t","queue":"q","payload":1,"priority":70000}`))
	f.Add([]byte(`{"type":"t","queue":"q","payload":{},"budgets":[{"key":"k","cost":2,"create_with":{"allocation":5,"strategy":{"type":"time_based","duration_ms":1000,"burst":2}}}]}`))
	f.Add([]byte(`{"type":"","queue":"q","payload":null,"backoff":{"exponent":1e400,"base_ms":1,"jitter_ms":1}}`))
	f.Add([]byte(`{"jobs":[{"type":"t"`))
	f.Add([]byte(`{"type":"t","queue":"q","payload":{"x":1}}}`))
	f.Add([]byte(`{"type":"t","queue":"q","payload":{"x":"\ud800","x":1e400}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r EnqueueRequest
		if err := Decode(JSON, body, &r); err != nil {
			assertCode(t, err, CodeInvalid)
			return
		}
		assertCanonicalJSON(t, body)
		nj, err := r.Validate()
		if err != nil {
			pe, ok := err.(*Error)
			if !ok || (pe.Code != CodeInvalid && pe.Code != CodeUnprocessable) {
				t.Fatalf("validation error %v is not a 400/422", err)
			}
			return
		}
		if !json.Valid(nj.Job.Payload) {
			t.Fatalf("accepted payload is not valid JSON: %q", nj.Job.Payload)
		}
		if CheckName(nj.Job.Queue) != "" || CheckName(nj.Job.Type) != "" {
			t.Fatalf("accepted invalid names %q/%q", nj.Job.Queue, nj.Job.Type)
		}
	})
}

func FuzzDecodeEnqueueMsgpack(f *testing.F) {
	seed := func(v any) []byte { b, _ := msgpack.Marshal(v); return b }
	f.Add(seed(map[string]any{"type": "t", "queue": "q", "payload": map[string]any{"n": 1, "f": 1.5}}))
	f.Add(seed(map[string]any{"type": "t", "queue": "q", "payload": []byte("bin")}))
	f.Add(seed(map[string]any{"type": "t", "queue": "q", "payload": 1, "priority": -1}))
	f.Add([]byte{0x81, 0xa4})
	f.Fuzz(func(t *testing.T, body []byte) {
		var r EnqueueRequest
		if err := Decode(Msgpack, body, &r); err != nil {
			assertCode(t, err, CodeInvalid)
			return
		}
		assertCanonicalJSON(t, r.Payload)
	})
}

// FuzzMsgpackJSONRoundTrip checks decode(encode(x)) == x across formats:
// a msgpack value transcoded to JSON and back to msgpack and JSON again
// gives the same JSON.
func FuzzMsgpackJSONRoundTrip(f *testing.F) {
	seed := func(v any) []byte { b, _ := msgpack.Marshal(v); return b }
	f.Add(seed(map[string]any{"a": []any{int64(-1), uint64(1 << 63), 1.0, "s", nil, true}}))
	f.Add(seed(float32(0.1)))
	f.Add(seed("\u2028<>&"))
	f.Fuzz(func(t *testing.T, in []byte) {
		js, err := MsgpackToJSON(in)
		if err != nil {
			return
		}
		if !json.Valid(js) {
			t.Fatalf("transcoded JSON invalid: %q", js)
		}
		mp, err := JSONToMsgpack(js)
		if err != nil {
			t.Fatalf("JSON -> msgpack failed for %q: %v", js, err)
		}
		js2, err := MsgpackToJSON(mp)
		if err != nil {
			t.Fatalf("second transcode failed: %v", err)
		}
		var a, b any
		_ = json.Unmarshal(js, &a)
		_ = json.Unmarshal(js2, &b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Fatalf("round trip changed the value: %s -> %s", js, js2)
		}
	})
}

func FuzzDecodeBudgetPatch(f *testing.F) {
	f.Add([]byte(`{"strategy":{"burst":null,"type":"while_in_flight","duration_ms":null}}`))
	f.Add([]byte(`{"allocation":null}`))
	f.Add([]byte(`{"allocation":5,"strategy":{"duration_ms":10}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodeBudgetPatch(JSON, body)
		if err != nil {
			assertCode(t, err, CodeInvalid)
			return
		}
		assertCanonicalJSON(t, body)
		def, err := p.Apply(Definition{Allocation: 10, Strategy: Strategy{Type: TimeBased, DurationMs: 1000}})
		if err != nil {
			assertCode(t, err, CodeUnprocessable)
			return
		}
		if def.Allocation < 1 || def.Allocation > MaxAllocation || def.Ceiling() < 1 {
			t.Fatalf("patch produced an invalid definition %+v", def)
		}
	})
}

// assertCanonicalJSON fails unless an accepted body is one valid JSON value
// within the canonical model limits (SPEC §1.3).
func assertCanonicalJSON(t *testing.T, body []byte) {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("accepted body is not valid JSON: %q", body)
	}
	if err := CheckCanonical(body, ""); err != nil {
		t.Fatalf("accepted body breaks the canonical limits (%v): %q", err, body)
	}
}

func assertCode(t *testing.T, err error, code Code) {
	t.Helper()
	pe, ok := err.(*Error)
	if !ok || pe.Code != code {
		t.Fatalf("error %v: want code %d", err, code)
	}
}
