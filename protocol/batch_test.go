package protocol

import (
	"encoding/json"
	"math"
	"math/big"
	"strings"
	"testing"
)

func TestAppendCanonicalValue(t *testing.T) {
	huge, _ := new(big.Int).SetString("18446744073709551616", 10) // 2^64
	top := new(big.Int).SetUint64(math.MaxUint64)
	cases := []struct {
		in      any
		want    string
		wantErr string
	}{
		{nil, `null`, ""},
		{map[string]any{"b": []any{1, 2.5, true}, "a": "x\"\n\x01<"}, `{"a":"x\"\n\u0001<","b":[1,2.5,true]}`, ""},
		{3.0, `3`, ""},
		{1e20, `1e+20`, ""},
		{json.Number("9007199254740993"), `9007199254740993`, ""},
		{top, `18446744073709551615`, ""},
		{huge, "", "out of range"},
		{json.Number("1e400"), "", "out of range"},
		{json.Number("-9223372036854775809"), "", "out of range"},
		{math.Inf(1), "", "cannot be represented"},
		{math.NaN(), "", "cannot be represented"},
		{"\xff", "", "invalid UTF-8"},
		{map[string]any{"\xfe": 1}, "", "invalid UTF-8"},
	}
	for _, c := range cases {
		got, err := AppendCanonicalValue(nil, c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%#v: error %v, want one containing %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%#v: %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestBatchJoinsTruthiness(t *testing.T) {
	for when, want := range map[string]bool{
		`true`: true, `false`: false, `null`: false, `empty`: false, `0`: true,
		`error("x")`: false, `true, false`: true, `false, true`: false, `$existing < $new`: true,
	} {
		if got := BatchJoins(&Batch{When: when}, 1, 2); got != want {
			t.Errorf("when %s: %v, want %v", when, got, want)
		}
	}
}

func TestFoldBatchExactIntegers(t *testing.T) {
	v, js, err := FoldBatch(&Batch{Fold: `$existing + $new`}, json.Number("9007199254740993"), json.Number("1"), 0)
	if err != nil || string(js) != "9007199254740994" {
		t.Fatalf("%v %s %v", v, js, err)
	}
}

func TestFoldBatchSizeLimit(t *testing.T) {
	// a value over 8 MiB is stopped inside the program (the bounded
	// evaluator, jq.go)
	half := strings.Repeat("x", 4_300_000)
	_, _, err := FoldBatch(&Batch{Fold: `$existing + $new`}, half, half, 0)
	if err == nil || err.Error() != "batch fold failed: fold expression failed at runtime: jq program exceeded its memory bound" {
		t.Fatalf("err %v", err)
	}
	// a value under the bound whose JSON is over 8 MiB (every quote is
	// escaped) fails on the merged payload's size
	quotes := strings.Repeat(`"`, 2_200_000)
	_, _, err = FoldBatch(&Batch{Fold: `$existing + $new`}, quotes, quotes, 0)
	if err == nil || err.Error() != "batch fold failed: merged payload of 8800002 bytes exceeds the limit of 8388608 bytes" {
		t.Fatalf("err %v", err)
	}
	if _, js, err := FoldBatch(&Batch{Fold: `$existing + $new`}, half, "y", 0); err != nil || len(js) != 4_300_003 {
		t.Fatalf("under the limit: %d bytes, %v", len(js), err)
	}
}

// TestFoldBatchHostileProgramsBounded: the batch programs run in the
// bounded evaluator, so a program that would allocate gigabytes in one
// operation is stopped before it does, as a fold failure.
func TestFoldBatchHostileProgramsBounded(t *testing.T) {
	for _, fold := range []string{
		`"a" * 2147483646`,
		`[$existing] | .[500000000] = 1`,
	} {
		_, _, err := FoldBatch(&Batch{Fold: fold}, map[string]any{}, map[string]any{}, 0)
		if err == nil || !strings.Contains(err.Error(), "memory bound") {
			t.Errorf("fold %s: err %v, want a fold failure at the memory bound", fold, err)
		}
	}
	// built one step at a time: the time limit stops it
	_, _, err := FoldBatch(&Batch{Fold: `[range(100000000)] | length`}, map[string]any{}, map[string]any{}, 0)
	if err == nil || !strings.HasPrefix(err.Error(), "batch fold failed: ") {
		t.Errorf("range: err %v, want a fold failure", err)
	}
}
