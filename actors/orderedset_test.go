package actors

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestOrderedSetMatchesSortedSlice runs random operations, biased towards
// the shapes the engine produces (appends past the end, deletes from the
// front), against a sorted slice and compares every read.
func TestOrderedSetMatchesSortedSlice(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := newOrderedSet(func(a, b int) bool { return a < b })
		var ref []int
		next := 0
		for op := range 30000 {
			switch r := rng.IntN(10); {
			case r < 4: // append past the end, as minted ids do
				if len(ref) > 0 {
					next = max(next, ref[len(ref)-1])
				}
				next += 1 + rng.IntN(3)
				s.ReplaceOrInsert(next)
				ref = append(ref, next)
			case r < 6: // anywhere, maybe a duplicate
				v := rng.IntN(next + 10)
				_, replaced := s.ReplaceOrInsert(v)
				i, found := slices.BinarySearch(ref, v)
				if replaced != found {
					t.Fatalf("seed %d op %d: insert %d replaced=%v, want %v", seed, op, v, replaced, found)
				}
				if !found {
					ref = slices.Insert(ref, i, v)
				}
			case r < 8 && len(ref) > 0: // delete from the front
				k := min(rng.IntN(3), len(ref)-1)
				if _, ok := s.Delete(ref[k]); !ok {
					t.Fatalf("seed %d op %d: delete %d not found", seed, op, ref[k])
				}
				ref = slices.Delete(ref, k, k+1)
			case r == 9 && op%2 == 0 && len(ref) > 0: // move an item to a new value
				k := rng.IntN(len(ref))
				v := ref[k] - 2 + rng.IntN(5)
				fits := (k == 0 || ref[k-1] < v) && (k == len(ref)-1 || v < ref[k+1])
				if got := s.Move(ref[k], v); got != fits {
					t.Fatalf("seed %d op %d: move %d to %d = %v, want %v", seed, op, ref[k], v, got, fits)
				}
				if fits {
					ref[k] = v
				}
			default: // delete anything, maybe missing
				v := rng.IntN(next + 10)
				_, ok := s.Delete(v)
				i, found := slices.BinarySearch(ref, v)
				if ok != found {
					t.Fatalf("seed %d op %d: delete %d ok=%v, want %v", seed, op, v, ok, found)
				}
				if found {
					ref = slices.Delete(ref, i, i+1)
				}
			}
			if s.Len() != len(ref) {
				t.Fatalf("seed %d op %d: Len %d, want %d", seed, op, s.Len(), len(ref))
			}
			if op%997 == 0 {
				checkOrderedSet(t, s, ref, rng.IntN(next+10))
			}
		}
		checkOrderedSet(t, s, ref, next/2)
	}
}

func checkOrderedSet(t *testing.T, s *orderedSet[int], ref []int, pivot int) {
	t.Helper()
	var got []int
	s.Ascend(func(v int) bool { got = append(got, v); return true })
	if !slices.Equal(got, ref) && !(len(got) == 0 && len(ref) == 0) {
		t.Fatalf("Ascend: %d items, want %d", len(got), len(ref))
	}
	for _, c := range s.chunks {
		if len(c) == 0 || len(c) > orderedChunk {
			t.Fatalf("chunk of %d items", len(c))
		}
	}
	got = got[:0]
	s.AscendGreaterOrEqual(pivot, func(v int) bool { got = append(got, v); return true })
	i, _ := slices.BinarySearch(ref, pivot)
	if want := ref[i:]; !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("AscendGreaterOrEqual(%d): %v..., want %v...", pivot, head(got), head(want))
	}
	got = got[:0]
	s.AscendLessThan(pivot, func(v int) bool { got = append(got, v); return true })
	if want := ref[:i]; !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("AscendLessThan(%d): %v..., want %v...", pivot, head(got), head(want))
	}
	got = got[:0]
	s.DescendLessOrEqual(pivot, func(v int) bool { got = append(got, v); return true })
	j, found := slices.BinarySearch(ref, pivot)
	if found {
		j++
	}
	want := slices.Clone(ref[:j])
	slices.Reverse(want)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("DescendLessOrEqual(%d): %v..., want %v...", pivot, head(got), head(want))
	}
	got = got[:0]
	s.Descend(func(v int) bool { got = append(got, v); return len(got) < 5 })
	want = slices.Clone(ref[max(0, len(ref)-5):])
	slices.Reverse(want)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("Descend (first 5): %v, want %v", got, want)
	}
	if m, ok := s.Min(); ok != (len(ref) > 0) || (ok && m != ref[0]) {
		t.Fatalf("Min %d %v", m, ok)
	}
	if len(ref) > 0 {
		v := ref[len(ref)/2]
		if g, ok := s.Get(v); !ok || g != v {
			t.Fatalf("Get(%d) = %d, %v", v, g, ok)
		}
	}
}

func head(v []int) []int { return v[:min(len(v), 8)] }

// TestOrderedSetFillsChunksOnAppend checks the point of the structure:
// ordered inserts fill every chunk, and draining from the front frees them.
func TestOrderedSetFillsChunksOnAppend(t *testing.T) {
	s := newOrderedSet(func(a, b int) bool { return a < b })
	for i := range 100 * orderedChunk {
		s.ReplaceOrInsert(i)
	}
	if len(s.chunks) != 100 {
		t.Fatalf("%d chunks for %d ordered items, want 100", len(s.chunks), 100*orderedChunk)
	}
	for i := range 100 * orderedChunk {
		if _, ok := s.Delete(i); !ok {
			t.Fatalf("delete %d", i)
		}
	}
	if len(s.chunks) != 0 || s.Len() != 0 {
		t.Fatalf("%d chunks, %d items left", len(s.chunks), s.Len())
	}
}

// TestOrderedSetFillsChunksBeforeATail: items arriving in order just below
// a few greater ones (a backlog loading while newer jobs are enqueued)
// still fill their chunks, rather than leaving each half empty.
func TestOrderedSetFillsChunksBeforeATail(t *testing.T) {
	s := newOrderedSet(func(a, b int) bool { return a < b })
	const n = 100 * orderedChunk
	for i := range 3 {
		s.ReplaceOrInsert(n + i) // the newer items
	}
	for i := range n {
		s.ReplaceOrInsert(i)
	}
	if len(s.chunks) > 103 {
		t.Fatalf("%d chunks for %d items inserted in order before 3 greater ones, want at most 103", len(s.chunks), n+3)
	}
	prev := -1
	s.Ascend(func(v int) bool {
		if v <= prev {
			t.Fatalf("%d after %d", v, prev)
		}
		prev = v
		return true
	})
	if s.Len() != n+3 || prev != n+2 {
		t.Fatalf("%d items up to %d, want %d up to %d", s.Len(), prev, n+3, n+2)
	}
}

// TestOrderedSetFillsChunksInReverse: items arriving in reverse order
// into the end of a full chunk (scheduled jobs made ready newest first, IDs
// put back while a listing is paged newest first) leave chunks about half
// full, as halves do, rather than one chunk per item.
func TestOrderedSetFillsChunksInReverse(t *testing.T) {
	s := newOrderedSet(func(a, b int) bool { return a < b })
	for i := range orderedChunk - 1 {
		s.ReplaceOrInsert(i)
	}
	const n = 20_000
	s.ReplaceOrInsert(1 << 30) // a newer item closes the full chunk
	for i := range n {
		s.ReplaceOrInsert(1<<20 - i) // descending, between the two
	}
	if want := n/64 + 4; len(s.chunks) > want {
		t.Fatalf("%d chunks for %d items inserted in reverse order, want at most %d", len(s.chunks), s.Len(), want)
	}
	if s.Len() != orderedChunk+n {
		t.Fatalf("%d items, want %d", s.Len(), orderedChunk+n)
	}
}

func BenchmarkOrderedSetFIFO(b *testing.B) {
	s := newOrderedSet(func(a, b int) bool { return a < b })
	for i := range 10000 {
		s.ReplaceOrInsert(i)
	}
	b.ResetTimer()
	for i := range b.N {
		s.ReplaceOrInsert(10000 + i)
		s.Delete(i)
	}
}

// BenchmarkOrderedSetIDWindow is the pattern of the engine's ID indexes
// under load: IDs appended in order, deleted near the front but not in
// order (50 workers ack their own jobs).
func BenchmarkOrderedSetIDWindow(b *testing.B) {
	s := newOrderedSet(func(a, b string) bool { return a < b })
	id := func(i int) string { return fmt.Sprintf("%025d", i) }
	const window = 5000
	ids := make([]string, b.N+window)
	for i := range ids {
		ids[i] = id(i)
	}
	for i := range window {
		s.ReplaceOrInsert(ids[i])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pending := make([]string, 0, 64)
	b.ResetTimer()
	for i := range b.N {
		s.ReplaceOrInsert(ids[window+i])
		pending = append(pending, ids[i])
		if len(pending) == cap(pending) {
			rng.Shuffle(len(pending), func(a, b int) { pending[a], pending[b] = pending[b], pending[a] })
			for _, p := range pending {
				s.Delete(p)
			}
			pending = pending[:0]
		}
	}
}

// wideItem is larger than an int and holds a pointer, so chunks grow past
// orderedChunk slots of capacity and stale references would be visible.
type wideItem struct {
	key  int
	name string
	_    [4]uint64
}

// TestOrderedSetChunksOwnTheirArrays runs random operations on wide items
// and checks after each that no two chunks share a backing array, that
// unused capacity holds no item (nothing kept alive), and that the values
// ReplaceOrInsert and Delete return are the replaced and deleted items.
func TestOrderedSetChunksOwnTheirArrays(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	s := newOrderedSet(func(a, b wideItem) bool { return a.key < b.key })
	ref := map[int]string{}
	next := 0
	for op := range 20000 {
		var v int
		switch r := rng.IntN(10); {
		case r < 5:
			next += 1 + rng.IntN(2)
			v = next
		default:
			v = rng.IntN(next + 5)
		}
		name := strconv.Itoa(op)
		if rng.IntN(3) == 0 {
			old, ok := s.Delete(wideItem{key: v})
			want, found := ref[v]
			if ok != found || (ok && old.name != want) {
				t.Fatalf("op %d: Delete(%d) = %q %v, want %q %v", op, v, old.name, ok, want, found)
			}
			delete(ref, v)
		} else {
			old, replaced := s.ReplaceOrInsert(wideItem{key: v, name: name})
			want, found := ref[v]
			if replaced != found || (replaced && old.name != want) {
				t.Fatalf("op %d: ReplaceOrInsert(%d) replaced %q %v, want %q %v", op, v, old.name, replaced, want, found)
			}
			ref[v] = name
		}
		if s.Len() != len(ref) {
			t.Fatalf("op %d: Len %d, want %d", op, s.Len(), len(ref))
		}
		arrays := map[*wideItem]bool{}
		for _, c := range s.chunks {
			full := c[:cap(c)]
			if arrays[&full[0]] {
				t.Fatalf("op %d: two chunks share a backing array", op)
			}
			arrays[&full[0]] = true
			for _, spare := range full[len(c):] {
				if spare != (wideItem{}) {
					t.Fatalf("op %d: spare capacity still holds item %d", op, spare.key)
				}
			}
		}
	}
	for k, name := range ref {
		if got, ok := s.Get(wideItem{key: k}); !ok || got.name != name || !s.Has(wideItem{key: k}) {
			t.Fatalf("Get(%d) = %q %v, want %q", k, got.name, ok, name)
		}
	}
	if s.Has(wideItem{key: -1}) {
		t.Fatal("Has(-1) on a set without it")
	}
}

// BenchmarkOrderedSetDrainBehindStraggler is a backlog draining in ID
// order behind one job that stays (in flight, or parked): the first chunk
// never empties, so each chunk that does is removed from the second place
// of the list. The cost per delete must not grow with the backlog
// (TOLLGATE_BENCH_JOBS: its size, default 1,000,000).
func BenchmarkOrderedSetDrainBehindStraggler(b *testing.B) {
	n := benchSize("TOLLGATE_BENCH_JOBS", 1_000_000)
	for range b.N {
		b.StopTimer()
		s := newOrderedSet(func(a, b int) bool { return a < b })
		for i := range n {
			s.ReplaceOrInsert(i)
		}
		b.StartTimer()
		for i := 1; i < n; i++ {
			s.Delete(i)
		}
		if s.Len() != 1 {
			b.Fatalf("%d items left, want the straggler", s.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n-1)), "ns/delete")
}
