package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// decodeWithEncodingJSON decodes body the way decodeJSON did before the
// fast decoder: json.Unmarshal into a fresh value.
func decodeWithEncodingJSON[T any](body []byte) (*T, error) {
	v := new(T)
	err := json.Unmarshal(body, v)
	return v, err
}

// checkFastAgrees fails when the fast decoder accepts body but
// encoding/json refuses it or decodes something else.
func checkFastAgrees[T any](t *testing.T, body []byte) bool {
	t.Helper()
	fast := new(T)
	if !fastDecode(body, fast) {
		return false
	}
	assertCanonicalJSON(t, body)
	slow, err := decodeWithEncodingJSON[T](body)
	if err != nil {
		t.Fatalf("fast decoder accepted what encoding/json refuses (%v): %q", err, body)
	}
	if !reflect.DeepEqual(fast, slow) {
		fj, _ := json.Marshal(fast)
		sj, _ := json.Marshal(slow)
		t.Fatalf("fast decoder differs from encoding/json on %q:\nfast %s\njson %s", body, fj, sj)
	}
	return true
}

func TestFastDecodeTakesTheUsualShapes(t *testing.T) {
	usual := []string{
		`{"jobs":[{"type":"bench","queue":"q","payload":{"seq":1,"t":1764467000000000000,"s":"xxxx"}}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":{"a":[1,2.5,"x\"y",null,true,{}]},"priority":7,"ready_at":1764467000000,` +
			`"retry_limit":3,"unique_key":"u-1","unique_while":"queued","budgets":[{"key":"k1","cost":2},{"key":"k2"}]},` +
			"\n {\"queue\":\"q\",\"type\":\"t\",\"payload\":\"text\",\"budgets\":[]}]}",
		`{"jobs":[]}`,
		` { "jobs" : [ { "type" : "t" , "queue" : "q" , "payload" : 12 } ] } `,
		`{"jobs":[{"type":"t","queue":"q","payload":true},{"type":"t","queue":"q","payload":-1.5e3}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k","cost":2,"create_with":{"allocation":5,"strategy":{"type":"time_based","duration_ms":1000,"burst":2}}},` +
			`{"key":"w","create_with":{"strategy":{"type":"while_in_flight"},"allocation":2147483647}}]}]}`,
	}
	for _, body := range usual {
		if !checkFastAgrees[BulkEnqueueRequest](t, []byte(body)) {
			t.Errorf("fast decoder gave up on a usual body: %s", body)
		}
	}
	for _, body := range []string{`{"ids":["0abc","0abd"]}`, `{ "ids" : [ ] }`} {
		if !checkFastAgrees[AckManyRequest](t, []byte(body)) {
			t.Errorf("fast decoder gave up on a usual bulk ack: %s", body)
		}
	}
	single := `{"type":"t","queue":"q","payload":{"n":1},"priority":65535,"budgets":[{"key":"k","cost":4294967295}]}`
	if !checkFastAgrees[EnqueueRequest](t, []byte(single)) {
		t.Errorf("fast decoder gave up on a usual single enqueue: %s", single)
	}
}

func TestFastDecodeGivesUpOnTheUnusual(t *testing.T) {
	unusual := []string{
		`{"jobs":[{"type":"t\u0041","queue":"q","payload":1}]}`,      // escape in a name
		`{"jobs":[{"type":"tÿ","queue":"q","payload":1}]}`,           // non-ASCII
		`{"jobs":[{"Type":"t","queue":"q","payload":1}]}`,            // case-folded key
		`{"jobs":[{"type":"t","type":"u","queue":"q","payload":1}]}`, // repeated key
		`{"jobs":[{"type":"t","queue":"q","payload":null}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"priority":65536}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"priority":1.0}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"priority":01}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"priority":-1}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"ready_at":99999999999999999999}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"backoff":{"exponent":1,"base_ms":1,"jitter_ms":1}}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k","create_with":{"allocation":-1}}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k","create_with":{"allocation":1,"allocation":2}}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k","create_with":{"allocation":1,"strategy":{"type":"time_based","rate":1}}}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k","create_with":null}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[null]}]}`,
		`{"jobs":[null]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":{"a":1]}}]}`, // invalid payload
		`{"jobs":[{"type":"t","queue":"q","payload":tru}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1}]} x`,
		`{"jobs":[{"type":"t","queue":"q","payload":1}],"more":1}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1},]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}]}`,
	}
	for _, body := range unusual {
		if fastDecode([]byte(body), new(BulkEnqueueRequest)) {
			t.Errorf("fast decoder took an unusual body it should leave to encoding/json: %s", body)
		}
	}
	for _, body := range []string{`{"ids":["a\u0041"]}`, `{"ids":null}`, `{"ids":[1]}`, `{"IDS":["a"]}`, `{"ids":["a"],"ids":["b"]}`, `{"ids":["a",]}`} {
		if fastDecode([]byte(body), new(AckManyRequest)) {
			t.Errorf("fast decoder took an unusual bulk ack: %s", body)
		}
	}
}

// TestDecodeJSONSameResultBothPaths checks that decodeJSON (fast path
// first) and encoding/json agree on the usual bodies, required-field errors
// included.
func TestDecodeJSONSameResultBothPaths(t *testing.T) {
	for _, body := range []string{
		`{"jobs":[{"type":"t","queue":"q"}]}`,
		`{"jobs":[{"type":"t","payload":1}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"cost":1}]}]}`,
	} {
		fastErr := decodeJSON([]byte(body), new(BulkEnqueueRequest))
		slow, err := decodeWithEncodingJSON[BulkEnqueueRequest]([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		slowErr := slow.checkRequired()
		if fastErr == nil || slowErr == nil || fastErr.Error() != slowErr.Error() {
			t.Errorf("%s: fast path error %v, encoding/json path error %v", body, fastErr, slowErr)
		}
	}
}

// FuzzFastDecodeMatchesEncodingJSON is the differential check: whatever the
// fast decoder accepts, encoding/json must accept and decode the same.
func FuzzFastDecodeMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"jobs":[{"type":"t","queue":"q","payload":{"a":[1,2.5,"x\"y",null,true,{}]},"priority":7,"ready_at":17,"retry_limit":3,"unique_key":"u","unique_while":"queued","budgets":[{"key":"k1","cost":2},{"key":"k2"}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1},{"type":"t","queue":"q","payload":"s"}]}`,
		`{"jobs":[]}`,
		`{"type":"t","queue":"q","payload":[],"budgets":[]}`,
		`{"type":"t","queue":"q","payload":-0.5e-3 }`,
		`{"ids":["a","b"]}`,
		`{"type":"t","queue":"q","payload":{"x":[1e400,"\udc00"],"x":1}}]`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k","cost":2,"create_with":{"allocation":5,"strategy":{"type":"time_based","duration_ms":1000,"burst":2}}}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k","create_with":{"strategy":{"type":"while_in_flight"},"allocation":10}},{"key":"j","create_with":{}}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a","cost":1}]},{"type":"t","queue":"q","payload":2,"budgets":[{"key":"a","cost":1}]},{"type":"t","queue":"q","payload":3,"budgets":[{"key":"a","cost":1},{"key":"b"}]}]}`,
		`{"jobs":[{"type":"t","queue":"q","budgets":[{"key":"a"}],"payload":1},{"type":"t","queue":"q","budgets":[{"key":"a"}] ,"payload":1},{"budgets":[{"key":"a"}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastAgrees[BulkEnqueueRequest](t, body)
		checkFastAgrees[EnqueueRequest](t, body)
		checkFastAgrees[AckManyRequest](t, body)
	})
}

// TestFastDecodeSharesRepeatedBindings checks that jobs of a bulk with the
// same "budgets" bytes share one decoded list, that a value which differs
// anywhere (or only extends the previous one) is decoded on its own, and
// that BulkEnqueueRequest.Validate then shares the validated bindings of
// the jobs that share a list (and reports an invalid one at its index).
func TestFastDecodeSharesRepeatedBindings(t *testing.T) {
	body := `{"jobs":[` +
		`{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a","cost":2},{"key":"b"}]},` +
		`{"type":"t","queue":"q","payload":2,"budgets":[{"key":"a","cost":2},{"key":"b"}]},` +
		`{"type":"t","queue":"q","payload":3,"budgets":[{"key":"a","cost":2},{"key":"b"},{"key":"c"}]},` +
		`{"type":"t","queue":"q","payload":4,"budgets":[{"key":"a","cost":2},{"key":"b"},{"key":"c"}]},` +
		`{"type":"t","queue":"q","payload":5,"budgets":[{"key":"a","cost":3},{"key":"b"},{"key":"c"}]}]}`
	if !checkFastAgrees[BulkEnqueueRequest](t, []byte(body)) {
		t.Fatal("fast decoder gave up")
	}
	var req BulkEnqueueRequest
	if !fastDecode([]byte(body), &req) {
		t.Fatal("fast decoder gave up")
	}
	same := func(a, b []*BindingRequest) bool { return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] }
	j := req.Jobs
	if !same(j[0].Budgets, j[1].Budgets) || !same(j[2].Budgets, j[3].Budgets) {
		t.Errorf("repeated budgets values were decoded apart")
	}
	if same(j[1].Budgets, j[2].Budgets) || same(j[3].Budgets, j[4].Budgets) {
		t.Errorf("different budgets values share a list")
	}
	if *j[4].Budgets[0].Cost != 3 || len(j[2].Budgets) != 3 {
		t.Errorf("job 4 cost %d, job 2 has %d bindings", *j[4].Budgets[0].Cost, len(j[2].Budgets))
	}

	jobs, err := req.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if &jobs[0].Job.Budgets[0] != &jobs[1].Job.Budgets[0] || &jobs[1].Job.Budgets[0] == &jobs[2].Job.Budgets[0] {
		t.Errorf("validated bindings not shared exactly where the requests share them")
	}
	want := []Binding{{Key: "a", Cost: 3}, {Key: "b", Cost: 1}, {Key: "c", Cost: 1}}
	if !reflect.DeepEqual(jobs[4].Job.Budgets, want) {
		t.Errorf("job 4 budgets %v, want %v", jobs[4].Job.Budgets, want)
	}

	bad := `{"jobs":[{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a"}]},{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a"}]},` +
		`{"type":"t","queue":"q","payload":1,"budgets":[{"key":"a"},{"key":"a"}]}]}`
	req = BulkEnqueueRequest{}
	if !fastDecode([]byte(bad), &req) {
		t.Fatal("fast decoder gave up")
	}
	if _, err := req.Validate(); err == nil || !strings.Contains(err.Error(), "jobs[2]: budgets: duplicate key 'a'") {
		t.Errorf("error %v, want jobs[2]'s duplicate key", err)
	}
}
