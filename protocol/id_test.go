package protocol

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestIDFormatMatchesBigInt(t *testing.T) {
	cases := []struct {
		ts     uint64
		hi, lo uint32
		ent    uint32
	}{
		{0, 0, 0, 0},
		{maxTimestamp, maxCounter, maxCounter, 0xffffffff},
		{1788216589726, 0x123456, 0xabcdef, 0xdeadbeef},
		{1, 1, 1, 1},
	}
	for _, c := range cases {
		got := formatID(c.ts, c.hi, c.lo, c.ent)
		want := new(big.Int).SetUint64(c.ts)
		want.Lsh(want, 24).Or(want, big.NewInt(int64(c.hi)))
		want.Lsh(want, 24).Or(want, big.NewInt(int64(c.lo)))
		want.Lsh(want, 32).Or(want, new(big.Int).SetUint64(uint64(c.ent)))
		w := want.Text(36)
		for len(w) < IDLength {
			w = "0" + w
		}
		if got != w {
			t.Fatalf("formatID(%v) = %s, want %s", c, got, w)
		}
		if v, ok := parseID(got); !ok || v.Cmp(want) != 0 {
			t.Fatalf("parseID(%s) = %v, want %v", got, v, want)
		}
	}
	if got := formatID(maxTimestamp, maxCounter, maxCounter, 0xffffffff); got != "f5lxx1zz5pnorynqglhzmsp33" {
		t.Fatalf("max id = %s, want the published SCRU128 maximum f5lxx1zz5pnorynqglhzmsp33", got)
	}
}

func TestIDGeneratorMonotonic(t *testing.T) {
	g := NewIDGenerator()
	prev := ""
	now := uint64(1788216589726)
	for i := 0; i < 200000; i++ {
		if i%1000 == 0 {
			now++
		}
		if i == 150000 {
			now -= 5000 // small clock step back is absorbed
		}
		id := g.Next(now)
		if !ValidID(id) {
			t.Fatalf("invalid id %q", id)
		}
		if id <= prev {
			t.Fatalf("id %d not increasing: %s <= %s", i, id, prev)
		}
		prev = id
	}
}

func TestIDEmbedsTimestamp(t *testing.T) {
	g := NewIDGenerator()
	id := g.Next(1788216589726)
	v, _ := parseID(id)
	ts := new(big.Int).Rsh(v, 80).Uint64()
	if ts != 1788216589726 {
		t.Fatalf("timestamp = %d", ts)
	}
}

func TestValidID(t *testing.T) {
	for s, want := range map[string]bool{
		"03fr1jkpcsipbsckqj0y6pgr7":  true,
		"03FR1JKPCSIPBSCKQJ0Y6PGR7":  false,
		"03fr1jkpcsipbsckqj0y6pgr":   false,
		"03fr1jkpcsipbsckqj0y6pgr7a": false,
		"03fr1jkpcsipbsckqj0y6pg-7":  false,
	} {
		if ValidID(s) != want {
			t.Errorf("ValidID(%q) != %v", s, want)
		}
	}
}

// TestIDKeyRoundTripsAndOrders checks ParseIDKey against math/big on random
// and boundary IDs, String back to the ID, that keys order as IDs, and the
// refusals: malformed IDs and 25 digits above 2^128.
func TestIDKeyRoundTripsAndOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ids := []string{"0000000000000000000000000", "0000000000000000000000001", "f5lxx1zz5pnorynqglhzmsp33", "000000000000z000000000000"}
	for range 2000 {
		ids = append(ids, formatID(rng.Uint64()&maxTimestamp, rng.Uint32()&maxCounter, rng.Uint32()&maxCounter, rng.Uint32()))
	}
	keys := make([]IDKey, len(ids))
	for i, id := range ids {
		k, ok := ParseIDKey(id)
		if !ok {
			t.Fatalf("ParseIDKey(%s) refused", id)
		}
		want, _ := parseID(id)
		got := new(big.Int).SetUint64(k.Hi)
		got.Lsh(got, 64).Or(got, new(big.Int).SetUint64(k.Lo))
		if got.Cmp(want) != 0 {
			t.Fatalf("ParseIDKey(%s) = %v, want %v", id, got, want)
		}
		if k.String() != id {
			t.Fatalf("key of %s prints %s", id, k.String())
		}
		keys[i] = k
	}
	for i := range ids {
		j := rng.IntN(len(ids))
		if (ids[i] < ids[j]) != keys[i].Less(keys[j]) {
			t.Fatalf("%s < %s is %v, keys say %v", ids[i], ids[j], ids[i] < ids[j], keys[i].Less(keys[j]))
		}
	}
	if k, ok := ParseIDKey("f5lxx1zz5pnorynqglhzmsp33"); !ok || k != MaxIDKey {
		t.Fatalf("the largest ID is %v, %v", k, ok)
	}
	for _, bad := range []string{"", "short", "0000000000000000000000000x", "000000000000000000000000A", "f5lxx1zz5pnorynqglhzmsp34", "zzzzzzzzzzzzzzzzzzzzzzzzz"} {
		if _, ok := ParseIDKey(bad); ok {
			t.Fatalf("ParseIDKey(%q) accepted", bad)
		}
	}
}

func BenchmarkParseIDKey(b *testing.B) {
	id := formatID(1788216589726, 0x123456, 0xabcdef, 0xdeadbeef)
	for b.Loop() {
		if _, ok := ParseIDKey(id); !ok {
			b.Fatal("refused")
		}
	}
}
