package persistence

import (
	"bytes"
	"testing"
)

func TestErrorKeysSortByAttempt(t *testing.T) {
	id := "03fr1jkpcsipbsckqj0y6pgr7"
	prev := errorKey(id, 0)
	for _, a := range []uint32{1, 2, 255, 256, 65535, 1 << 24, 1<<32 - 1} {
		k := errorKey(id, a)
		if bytes.Compare(prev, k) >= 0 {
			t.Fatalf("errorKey(%d) does not sort after the previous attempt", a)
		}
		if !bytes.HasPrefix(k, errorKeyPrefix(id)) {
			t.Fatalf("errorKey(%d) lacks its job prefix", a)
		}
		prev = k
	}
}

func TestKeyspacesAreDistinct(t *testing.T) {
	keys := [][]byte{versionKey, jobKey("a"), payloadKey("a"), errorKey("a", 1), budgetKey("a"), groupKey("a"), cronGroupKey("a"), cronEntryKey("a", "b"), priorityKey(QueuePair("a", 1))}
	for i := range keys {
		for j := range keys {
			if i != j && bytes.HasPrefix(keys[i], keys[j][:2]) {
				t.Fatalf("key %q shares the prefix of %q", keys[i], keys[j])
			}
		}
	}
}

func TestCronEntryKeysStayInTheirGroup(t *testing.T) {
	if bytes.HasPrefix(cronEntryKey("ab", "c"), cronEntriesPrefix("a")) {
		t.Fatal("an entry of group ab falls under group a's prefix")
	}
	if bytes.Compare(cronEntryKey("a", "b"), cronEntryKey("a", "c")) >= 0 {
		t.Fatal("entries of a group do not sort by name")
	}
	if !bytes.HasPrefix(cronEntryKey("a/b", "x"), cronEntriesPrefix("a/b")) {
		t.Fatal("an entry lacks its group prefix")
	}
}
