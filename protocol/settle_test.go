package protocol

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func TestValidateSettle(t *testing.T) {
	decode := func(body string) []*SettleRequest {
		t.Helper()
		var r SuccessRequest
		require.NoError(t, Decode(JSON, []byte(body), &r))
		return r.Settle
	}
	got, err := ValidateSettle(decode(`{"settle":[{"key":"a","cost":0},{"key":"b","cost":1000000}]}`))
	require.NoError(t, err)
	require.Equal(t, []Settlement{{Key: "a", Cost: 0}, {Key: "b", Cost: 1000000}}, got)
	got, err = ValidateSettle(decode(`{"settle":[]}`))
	require.NoError(t, err)
	require.Empty(t, got)
	for body, want := range map[string]string{
		`{"settle":[{"key":"a","cost":1},{"key":"b","cost":-1}]}`: "settle[1].cost must be an integer between 0 and 1000000",
		`{"settle":[{"key":"a","cost":1000001}]}`:                 "settle[0].cost must be an integer between 0 and 1000000",
		`{"settle":[{"key":"a","cost":2.5}]}`:                     "settle[0].cost must be an integer between 0 and 1000000",
		`{"settle":[{"key":"a","cost":"1"}]}`:                     "settle[0].cost must be an integer between 0 and 1000000",
		`{"settle":[{"key":"a","cost":1},{"key":"a","cost":2}]}`:  "settle: duplicate budget key 'a'",
		`{"settle":[{"key":"a","cost":1},{"key":"a","cost":-2}]}`: "settle[1].cost must be an integer between 0 and 1000000",
		`{"settle":[{"key":"a","cost":9999999999}]}`:              "settle[0].cost must be an integer between 0 and 1000000",
	} {
		_, err := ValidateSettle(decode(body))
		require.EqualError(t, err, want, body)
	}
	var r1, r2 SuccessRequest
	require.EqualError(t, Decode(JSON, []byte(`{"settle":[{"key":"a"}]}`), &r1), "invalid JSON: missing field 'cost'")
	require.EqualError(t, Decode(JSON, []byte(`{"settle":[{"cost":1}]}`), &r2), "invalid JSON: missing field 'key'")
}

func TestValidateSettleMany(t *testing.T) {
	var r AckManyRequest
	require.NoError(t, Decode(JSON, []byte(`{"ids":["x","y"],"settle":{"y":[{"key":"k","cost":3}],"x":[]}}`), &r))
	got, err := r.ValidateSettleMany()
	require.NoError(t, err)
	require.Equal(t, map[string][]Settlement{"y": {{Key: "k", Cost: 3}}}, got)

	// the error does not depend on map order: ids are checked in order
	require.NoError(t, Decode(JSON, []byte(`{"ids":["x"],"settle":{"z":[],"c":[{"key":"k","cost":-1}],"x":[{"key":"k","cost":-1}]}}`), &r))
	for i := 0; i < 20; i++ {
		_, err = r.ValidateSettleMany()
		require.EqualError(t, err, "settle names job c, which is not in ids")
	}
}

func TestTimeoutMs(t *testing.T) {
	for _, raw := range []string{"0", "-1", "2147483648", "1.5", `"5"`, "1e3", "null"} {
		_, err := parseTimeoutMs(json.RawMessage(raw))
		require.EqualError(t, err, "timeout_ms must be between 1 and 2147483647", raw)
	}
	for raw, want := range map[string]uint32{"1": 1, "2147483647": 2147483647, " 300 ": 300} {
		got, err := parseTimeoutMs(json.RawMessage(raw))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}

	// stored: the hand-written record encoder writes what the reflective
	// one writes, and it reads back
	tm := uint32(12345)
	j := &Job{ID: "03hbt979pupt29ecd9dfw0uzh", Type: "t", Queue: "q", Priority: 1, Status: StatusReady, TimeoutMs: &tm,
		Budgets: []Binding{{Key: "k", Cost: 2}}}
	got := AppendJobRecord(nil, j)
	var want bytes.Buffer
	enc := msgpack.NewEncoder(&want)
	enc.UseCompactInts(true)
	require.NoError(t, enc.Encode(j))
	require.Equal(t, want.Bytes(), got[1:])
	var back Job
	require.NoError(t, UnmarshalRecord(got, &back))
	require.Equal(t, tm, *back.TimeoutMs)

	// echoed only when set
	require.Contains(t, string(mustJSON(t, j.View(0, false))), `"status":"ready","timeout_ms":12345,"type":"t"`)
	j.TimeoutMs = nil
	require.NotContains(t, string(mustJSON(t, j.View(0, false))), "timeout_ms")
}

func mustJSON(t *testing.T, v *JobView) []byte {
	t.Helper()
	b, err := AppendJobViewJSON(nil, v)
	require.NoError(t, err)
	return b
}
