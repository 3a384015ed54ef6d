package persistence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// floorsAfterReopen closes s, opens dir again and returns its floors.
func floorsAfterReopen(t *testing.T, s *Store, dir string) (*Store, map[string]uint16, bool) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	scan := s.NewJobScan()
	defer scan.Close()
	pairs, complete := scan.Priorities()
	floors := make(map[string]uint16)
	for p := range pairs {
		if f, ok := floors[p.Name]; !p.Budget && (!ok || p.Priority < f) {
			floors[p.Name] = p.Priority
		}
	}
	return s, floors, complete
}

func jobAt(i int, queue string, prio uint16) *protocol.Job {
	j := testJob(i)
	j.Queue, j.Priority = queue, prio
	return j
}

// TestPriorityKeysFollowTheJobs: a new store's pairs are complete; every way
// a job is stored records its (queue, priority) pair in the same commit;
// finished jobs record none; in a store whose pairs were not complete, a
// prune keeps only the pairs in use and marks them complete, and pairs
// stored after it are recorded again.
func TestPriorityKeysFollowTheJobs(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	scan := s.NewJobScan()
	pairs, complete := scan.Priorities()
	scan.Close()
	if len(pairs) != 0 || !complete {
		t.Fatalf("a new store: pairs %v, complete %v; want none, complete", pairs, complete)
	}
	// as in a store an older build wrote, the pairs are not known complete
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(prioritiesCompleteKey) }); err != nil {
		t.Fatal(err)
	}

	b := NewBatch(false)
	bulk := []*protocol.Job{jobAt(1, "a", 9), jobAt(2, "a", 9), jobAt(3, "a", 9), jobAt(4, "a", 5), jobAt(5, "a", 9)}
	refs := b.Enqueued(bulk, nil, 0) // a group
	b.Enqueued([]*protocol.Job{jobAt(6, "b", 7)}, nil, 0)
	b.Enqueued([]*protocol.Job{jobAt(7, "c", 3)}, []bool{false}, 0) // payload apart
	done := jobAt(8, "d", 1)
	done.Status = protocol.StatusCompleted
	b.Enqueued([]*protocol.Job{done}, nil, 0)
	commitTest(t, s, b)
	if refs[0].Group() == nil {
		t.Fatal("the bulk was not stored as a group")
	}

	// a patch moves a group member to a new priority: its own record
	b = NewBatch(false)
	moved := jobAt(2, "a", 2)
	moved.InGroup = true
	b.Updated(moved, &refs[1])
	commitTest(t, s, b)

	s, floors, complete := floorsAfterReopen(t, s, dir)
	want := map[string]uint16{"a": 2, "b": 7, "c": 3}
	if !maps.Equal(floors, want) || complete {
		t.Fatalf("floors %v complete %v, want %v and incomplete", floors, complete, want)
	}

	// prune to what is in use, then store a pair the prune dropped
	scan = s.NewJobScan()
	scan.Close()
	b = NewBatch(false)
	b.PrioritiesInUse(map[PriorityPair]struct{}{QueuePair("a", 9): {}, QueuePair("b", 7): {}}, scan)
	commitTest(t, s, b)
	b = NewBatch(false)
	b.Enqueued([]*protocol.Job{jobAt(9, "c", 3)}, nil, 0)
	commitTest(t, s, b)

	s, floors, complete = floorsAfterReopen(t, s, dir)
	defer s.Close()
	want = map[string]uint16{"a": 9, "b": 7, "c": 3}
	if !maps.Equal(floors, want) || !complete {
		t.Fatalf("after the prune: floors %v complete %v, want %v and complete", floors, complete, want)
	}
}

// TestPruneKeepsItsPlaceInOrder: a prune runs after every batch submitted
// before it and before every batch after it, so a pair stored before it and
// not in use is dropped, and one stored after it is kept.
func TestPruneKeepsItsPlaceInOrder(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	scan := s.NewJobScan()
	scan.Close()
	before, prune, after := NewBatch(false), NewBatch(false), NewBatch(false)
	before.Enqueued([]*protocol.Job{jobAt(1, "x", 1)}, nil, 0)
	prune.PrioritiesInUse(map[PriorityPair]struct{}{QueuePair("y", 4): {}}, scan)
	after.Enqueued([]*protocol.Job{jobAt(2, "z", 6)}, nil, 0)
	s.Submit(before, nil)
	s.Submit(prune, nil)
	commitTest(t, s, after)
	s, floors, complete := floorsAfterReopen(t, s, dir)
	defer s.Close()
	want := map[string]uint16{"y": 4, "z": 6}
	if !maps.Equal(floors, want) || !complete {
		t.Fatalf("floors %v complete %v, want %v and complete", floors, complete, want)
	}
}

// TestPruneInChunks: a prune with more writes than one transaction of it
// takes runs in several, and ends complete.
func TestPruneInChunks(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	n := 2*pruneChunk + 10
	jobs := make([]*protocol.Job, n)
	for i := range jobs {
		jobs[i] = jobAt(i+1, fmt.Sprintf("q%05d", i), 1)
	}
	b := NewBatch(false)
	b.Enqueued(jobs, nil, n+1) // alone, not as a group
	commitTest(t, s, b)
	scan := s.NewJobScan()
	scan.Close()
	prune := NewBatch(false)
	prune.PrioritiesInUse(map[PriorityPair]struct{}{QueuePair("q00007", 1): {}, QueuePair("new", 2): {}}, scan)
	commitTest(t, s, prune)
	s, floors, complete := floorsAfterReopen(t, s, dir)
	defer s.Close()
	want := map[string]uint16{"q00007": 1, "new": 2}
	if !maps.Equal(floors, want) || !complete {
		t.Fatalf("after pruning %d pairs: %d floors, complete %v; want %v and complete", n, len(floors), complete, want)
	}
}

// TestVersion4PrioritiesDropped: a store of schema 4 kept queue pairs in
// another format; opening it drops them and its completeness, so its next
// load writes them again.
func TestVersion4PrioritiesDropped(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	if err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte("q/default\x80\x00"), nil); err != nil {
			return err
		}
		if err := txn.Set(prioritiesCompleteKey, nil); err != nil {
			return err
		}
		return txn.Set(versionKey, []byte{4})
	}); err != nil {
		t.Fatal(err)
	}
	s, floors, complete := floorsAfterReopen(t, s, dir)
	defer s.Close()
	if len(floors) != 0 || complete {
		t.Fatalf("a version-4 store opened with floors %v, complete %v; want none, incomplete", floors, complete)
	}
}

// TestJobScanReadsItsSnapshot: a scan sees the store as it was when it was
// made, not the jobs written before it runs.
func TestJobScanReadsItsSnapshot(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	b := NewBatch(false)
	b.Enqueued([]*protocol.Job{testJob(1)}, nil, 0)
	commitTest(t, s, b)
	scan := s.NewJobScan()
	b = NewBatch(false)
	b.Enqueued([]*protocol.Job{testJob(2)}, nil, 0)
	b.Removed(testJob(1).ID, 0, Ref{})
	commitTest(t, s, b)
	var ids []string
	if err := scan.Run(func(j *protocol.Job, _ Ref) error {
		ids = append(ids, j.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != testJob(1).ID {
		t.Fatalf("the scan found %v, want only the job stored before it was made", ids)
	}
}

// TestPruneSkippedAfterARefusal: a commit refused after the load's
// snapshot may have put a job back in memory after the pairs in use were
// taken, so the prune keeps every stored pair.
func TestPruneSkippedAfterARefusal(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	b := NewBatch(false)
	b.Enqueued([]*protocol.Job{jobAt(1, "x", 1)}, nil, 0)
	commitTest(t, s, b)
	scan := s.NewJobScan()
	scan.Close()
	refused := NewBatch(false)
	refused.Removed(jobAt(1, "x", 1).ID, 0, Ref{})
	refused.fail(errors.New("refused for the test"))
	if err := s.Commit(context.Background(), refused); err == nil {
		t.Fatal("the failed batch committed")
	}
	prune := NewBatch(false)
	prune.PrioritiesInUse(map[PriorityPair]struct{}{}, scan)
	commitTest(t, s, prune)
	s, floors, complete := floorsAfterReopen(t, s, dir)
	defer s.Close()
	if want := map[string]uint16{"x": 1}; !maps.Equal(floors, want) || !complete {
		t.Fatalf("floors %v complete %v, want %v (the prune skipped) and complete", floors, complete, want)
	}
}

// TestJobScanWaitsForEarlierCommits: a snapshot taken after batches were
// submitted, their commits not awaited, holds their jobs and their pairs.
func TestJobScanWaitsForEarlierCommits(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	const n = 200
	for i := range n {
		b := NewBatch(false)
		b.Enqueued([]*protocol.Job{jobAt(i+1, "w", uint16(1000-i))}, nil, 0)
		s.Submit(b, nil)
	}
	scan := s.NewJobScan()
	pairs, _ := scan.Priorities()
	if _, ok := pairs[QueuePair("w", 1000-n+1)]; !ok || len(pairs) != n {
		t.Errorf("the snapshot's pairs miss some of the %d submitted before it: %d", n, len(pairs))
	}
	found := 0
	if err := scan.Run(func(*protocol.Job, Ref) error { found++; return nil }); err != nil {
		t.Fatal(err)
	}
	if found != n {
		t.Fatalf("the snapshot holds %d of the %d jobs submitted before it", found, n)
	}
}

// TestStoreWithoutVersionButJobsIsNotComplete: a store that has jobs but
// no schema version (never written by tollgate, but possible after damage)
// does not claim its pairs are complete.
func TestStoreWithoutVersionButJobsIsNotComplete(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	b := NewBatch(false)
	b.Enqueued([]*protocol.Job{jobAt(1, "x", 1)}, nil, 0)
	commitTest(t, s, b)
	if err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Delete(versionKey); err != nil {
			return err
		}
		return txn.Delete(prioritiesCompleteKey)
	}); err != nil {
		t.Fatal(err)
	}
	s, _, complete := floorsAfterReopen(t, s, dir)
	defer s.Close()
	if complete {
		t.Fatal("a store with jobs and no version claims complete pairs")
	}
}

// TestBudgetPairsFollowBindings: a job's bindings record a (budget,
// priority) pair each, apart from the (queue, priority) pairs even under
// the same name, and a rebinding records its new budgets'.
func TestBudgetPairsFollowBindings(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	j := jobAt(1, "x", 5)
	j.Budgets = []protocol.Binding{{Key: "x", Cost: 1}, {Key: "api", Cost: 2}}
	b := NewBatch(false)
	refs := b.Enqueued([]*protocol.Job{j}, nil, 0)
	commitTest(t, s, b)
	j.Budgets = []protocol.Binding{{Key: "other", Cost: 1}}
	b = NewBatch(false)
	b.Updated(j, &refs[0])
	commitTest(t, s, b)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	scan := s.NewJobScan()
	defer scan.Close()
	pairs, _ := scan.Priorities()
	want := map[PriorityPair]struct{}{QueuePair("x", 5): {}, BudgetPair("x", 5): {}, BudgetPair("api", 5): {}, BudgetPair("other", 5): {}}
	if !maps.Equal(pairs, want) {
		t.Fatalf("pairs %v, want %v", pairs, want)
	}
}

// storedPairs returns the pairs the store holds, as its committer knows
// them and, reopened, as its keys say.
func storedPairs(t *testing.T, s *Store, dir string) (*Store, map[PriorityPair]struct{}, map[PriorityPair]struct{}) {
	t.Helper()
	scan := s.NewJobScan()
	known, _ := scan.Priorities()
	scan.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	scan = s.NewJobScan()
	defer scan.Close()
	keys, _ := scan.Priorities()
	return s, known, keys
}

// TestDeletedBudgetTakesItsPairs: deleting a budget deletes the keys of
// its (budget, priority) pairs, at every priority, and leaves those of a
// budget whose key starts with its key and of a queue of the same name;
// in one transaction, a job bound to the budget stored after the delete
// keeps its pair, and one stored before it loses it.
func TestDeletedBudgetTakesItsPairs(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	j1, j2 := jobAt(1, "a", 5), jobAt(2, "q", 7)
	j1.Budgets = []protocol.Binding{{Key: "a", Cost: 1}}
	j2.Budgets = []protocol.Binding{{Key: "a", Cost: 1}, {Key: "ab", Cost: 1}}
	b := NewBatch(false)
	refs := b.Enqueued([]*protocol.Job{j1}, nil, 0)
	refs = append(refs, b.Enqueued([]*protocol.Job{j2}, nil, 0)...)
	commitTest(t, s, b)

	b = NewBatch(false)
	b.Removed(j1.ID, 0, refs[0])
	b.Removed(j2.ID, 0, refs[1])
	b.DeleteBudget("a")
	commitTest(t, s, b)
	s, known, keys := storedPairs(t, s, dir)
	want := map[PriorityPair]struct{}{QueuePair("a", 5): {}, QueuePair("q", 7): {}, BudgetPair("ab", 7): {}}
	if !maps.Equal(known, want) || !maps.Equal(keys, want) {
		t.Fatalf("after the delete: pairs known %v, stored %v; want %v", known, keys, want)
	}

	// one transaction: "ab" deleted, then recreated for a new job; "c"
	// bound by a job that is then finished, then deleted
	j3, j4 := jobAt(3, "q", 7), jobAt(4, "q", 2)
	j3.Budgets = []protocol.Binding{{Key: "ab", Cost: 1}}
	j4.Budgets = []protocol.Binding{{Key: "c", Cost: 1}}
	gone := NewBatch(false)
	gone.DeleteBudget("ab")
	again := NewBatch(false)
	again.Enqueued([]*protocol.Job{j3}, nil, 0)
	bound := NewBatch(false)
	r4 := bound.Enqueued([]*protocol.Job{j4}, nil, 0)
	finished := NewBatch(false)
	finished.Removed(j4.ID, 0, r4[0])
	finished.DeleteBudget("c")
	group := []*commit{{batch: gone}, {batch: again}, {batch: bound}, {batch: finished}}
	for _, c := range group {
		c.batch.Seal()
	}
	if err := s.apply(group); err != nil {
		t.Fatal(err)
	}
	s, known, keys = storedPairs(t, s, dir)
	defer s.Close()
	want = map[PriorityPair]struct{}{QueuePair("a", 5): {}, QueuePair("q", 7): {}, QueuePair("q", 2): {}, BudgetPair("ab", 7): {}}
	if !maps.Equal(known, want) || !maps.Equal(keys, want) {
		t.Fatalf("after one transaction: pairs known %v, stored %v; want %v", known, keys, want)
	}
}

// TestPairsMadeAfreshWhenSparse: once the stored pairs fall to a quarter
// of their peak, the set is a new map holding them.
func TestPairsMadeAfreshWhenSparse(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	var writes []pairWrite
	for i := range 2 * priosShrinkMin {
		writes = append(writes, pairWrite{BudgetPair(fmt.Sprint(i), 0), true})
	}
	s.pairsCommitted(writes)
	for i := range writes {
		writes[i].set = false
	}
	full := reflect.ValueOf(s.prios).UnsafePointer()
	s.pairsCommitted(writes[:len(writes)*3/4-1])
	if s.priosPeak != 2*priosShrinkMin || reflect.ValueOf(s.prios).UnsafePointer() != full {
		t.Fatalf("peak %d after deletes down to a quarter and one, want %d and the same map", s.priosPeak, 2*priosShrinkMin)
	}
	s.pairsCommitted(writes[len(writes)*3/4-1 : len(writes)*3/4])
	if s.priosPeak != len(s.prios) || len(s.prios) != priosShrinkMin/2 || reflect.ValueOf(s.prios).UnsafePointer() == full {
		t.Fatalf("peak %d, %d pairs after deletes down to a quarter; want both %d, in a new map", s.priosPeak, len(s.prios), priosShrinkMin/2)
	}
}

// TestBudgetPairReaderSkipsLongerKeys: the pairs of a budget are found
// among those of budgets whose keys start with its key, whatever the
// bytes of their priorities and names.
func TestBudgetPairReaderSkipsLongerKeys(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	// "a" at 0x62xx is under the prefix of "ab" ('b' is 0x62), as "" at "ab"
	own := []PriorityPair{BudgetPair("a", 1), BudgetPair("a", 0x6200), BudgetPair("a", 0x6201), BudgetPair("a", 0xffff)}
	others := []PriorityPair{BudgetPair("ab", 5), BudgetPair("ab", 0xffff), BudgetPair("a\xff\xffz", 3),
		BudgetPair("aa", 1), QueuePair("a", 7), BudgetPair("", 2), BudgetPair("", 'a'<<8|'b')}
	for i := range 300 {
		others = append(others, BudgetPair(fmt.Sprintf("a%d", i), uint16(i)))
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, p := range append(append([]PriorityPair{}, own...), others...) {
			if err := txn.Set(priorityKey(p), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := s.readBudgetPairs()
	defer r.close()
	got := r.of("a")
	if !slices.Equal(got, own) {
		t.Fatalf("pairs of a: %v, want %v", got, own)
	}
	if got := r.of("ab"); !slices.Equal(got, []PriorityPair{BudgetPair("ab", 5), BudgetPair("ab", 0xffff)}) {
		t.Fatalf("pairs of ab: %v", got)
	}
}
