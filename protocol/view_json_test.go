package protocol

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
)

func randPayload(r *rand.Rand) []byte {
	payloads := []string{
		`{"s":1,"t":2,"p":"xxxx"}`, `null`, `1`, `"a<b>&c"`, `[1,2.5e3,-0.1,{"a":[]}]`,
		`{"a":"\u2028 x"}`, "{\"a\":\"\xe2\x80\xa8\"}", `{"k":"\"\\\/\n"}`, `{"a": 1}`, `{"é":"ü"}`, `true`,
	}
	return []byte(payloads[r.Intn(len(payloads))])
}

func TestAppendJobViewJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 300; i++ {
		j := randJob(r)
		if len(j.Payload) > 0 || r.Intn(2) == 0 {
			j.Payload = randPayload(r)
		}
		now := randUint(r)
		var views []*JobView
		views = append(views, j.View(now, true), j.View(now, false), j.EnqueueView(now, r.Intn(2) == 0, r.Intn(2) == 0))
		w := j.View(now, true)
		w.Waiting = &Waiting{AffordableAt: randUint(r), Budget: randString(r), Cost: uint32(randUint(r)), Position: r.Intn(100)}
		views = append(views, w)
		for k, v := range views {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendJobViewJSON([]byte("prefix"), v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[6:], want) {
				t.Fatalf("job %d view %d:\n got %s\nwant %s", i, k, got[6:], want)
			}
			for _, f := range []StreamFormat{StreamNDJSON, StreamSSE, StreamMsgpack} {
				got, err := f.AppendFrame(nil, v)
				if err != nil {
					t.Fatal(err)
				}
				if ref := referenceFrame(t, f, v); !bytes.Equal(got, ref) {
					t.Fatalf("job %d view %d format %d:\n got %q\nwant %q", i, k, f, got, ref)
				}
			}
			enc, err := Encode(JSON, v)
			if err != nil || !bytes.Equal(enc, want) {
				t.Fatalf("Encode(JSON): %v\n got %s\nwant %s", err, enc, want)
			}
		}
	}
	if got, _ := AppendJobViewJSON(nil, nil); string(got) != "null" {
		t.Fatalf("nil view: %s", got)
	}
}

// referenceFrame is AppendFrame as written with encoding/json.
func referenceFrame(t *testing.T, f StreamFormat, v *JobView) []byte {
	switch f {
	case StreamMsgpack:
		b, err := MarshalMsgpack(v)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte{byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))}, b...)
	case StreamSSE:
		b, _ := json.Marshal(v)
		return append(append([]byte("data: "), b...), '\n', '\n')
	}
	b, _ := json.Marshal(v)
	return append(b, '\n')
}
