package persistence

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// TestPoolLevelsRoundTrip: stored pool levels come back by budget key after
// a reopen, the latest write wins, and deleting a budget removes its level.
func TestPoolLevelsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	a := PoolLevel{Level: 2.5, AtNs: 1_800_000_000_123_456_789, Pending: 3, Allocation: 10, DurationMs: 60_000, Capacity: 20}
	debt := PoolLevel{Level: -4.25, AtNs: 7, Allocation: 1, DurationMs: 1, Capacity: 1}
	b := NewBatch(true)
	b.PutBudget(&protocol.Budget{Key: "a", Allocation: 10, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 60_000, Burst: 20}})
	b.PutBudget(&protocol.Budget{Key: "d/ebt", Allocation: 1, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 1}})
	b.PutPool("a", PoolLevel{Level: 9, AtNs: 1, Allocation: 10, DurationMs: 60_000, Capacity: 20})
	b.PutPool("a", a)
	b.PutPool("d/ebt", debt)
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	got, err := s.LoadPools()
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]PoolLevel{"a": a, "d/ebt": debt}; !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadPools = %+v, want %+v", got, want)
	}
	d := NewBatch(false)
	d.DeleteBudget("a")
	if err := s.Commit(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadPools(); err != nil || len(got) != 1 || got["d/ebt"] != debt {
		t.Fatalf("after deleting budget a: %+v, %v", got, err)
	}
}

// TestDecodePoolLevelRejectsDamage: a value of the wrong size or version,
// or a level that is not a number, is an error, not a pool.
func TestDecodePoolLevelRejectsDamage(t *testing.T) {
	good := AppendPoolLevel(nil, PoolLevel{Level: 1, AtNs: 2, Pending: 3, Allocation: 4, DurationMs: 5, Capacity: 6})
	if _, err := DecodePoolLevel(good); err != nil {
		t.Fatal(err)
	}
	badVersion := append([]byte{9}, good[1:]...)
	nan := AppendPoolLevel(nil, PoolLevel{Level: math.NaN()})
	for name, v := range map[string][]byte{"empty": nil, "short": good[:10], "long": append(good, 0), "version": badVersion, "NaN": nan} {
		if _, err := DecodePoolLevel(v); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// FuzzDecodePoolLevel: any input decodes or errs without panicking, and
// whatever decodes encodes back to the same bytes.
func FuzzDecodePoolLevel(f *testing.F) {
	f.Add(AppendPoolLevel(nil, PoolLevel{Level: 2.5, AtNs: 1, Pending: 2, Allocation: 10, DurationMs: 1000, Capacity: 10}))
	f.Add(AppendPoolLevel(nil, PoolLevel{Level: -3}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, v []byte) {
		p, err := DecodePoolLevel(v)
		if err != nil {
			return
		}
		if back := AppendPoolLevel(nil, p); string(back) != string(v) {
			t.Fatalf("round trip %x -> %+v -> %x", v, p, back)
		}
	})
}
