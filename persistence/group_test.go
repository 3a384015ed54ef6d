package persistence

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

func commitTest(t *testing.T, s *Store, b *Batch) {
	t.Helper()
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// scanAll returns every stored job by ID with how it is stored.
func scanAll(t *testing.T, s *Store) (map[string]*protocol.Job, map[string]Ref, []string) {
	t.Helper()
	jobs := make(map[string]*protocol.Job)
	members := make(map[string]Ref)
	var order []string
	err := s.ScanJobs(func(j *protocol.Job, m Ref) error {
		jobs[j.ID] = j
		members[j.ID] = m
		order = append(order, j.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return jobs, members, order
}

// groupKeys lists the raw keys under g/.
func groupKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var keys []string
	if err := s.groupKeys(func(k []byte) { keys = append(keys, fmt.Sprintf("%q", k)) }); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestGroupLifeCycle follows a group of jobs through what the queue does to
// them: dispatch marks, removals, a member's own record, a reopen (the
// scan rebuilds the group's bookkeeping so later marks do not overwrite
// earlier ones) and the removal of the last member, which deletes every
// key of the group.
func TestGroupLifeCycle(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	var jobs []*protocol.Job
	for i := range 10 {
		jobs = append(jobs, testJobPayload(100+i))
	}
	alone := testJobPayload(50) // before the group's range
	after := testJobPayload(500)
	b := NewBatch(false)
	b.putJob(alone)
	groups := b.putGroups(jobs)
	b.putJob(after)
	commitTest(t, s, b)
	g := groups[0]
	for i := range groups {
		if groups[i] != g {
			t.Fatalf("job %d is in another group", i)
		}
	}
	if g.First() != jobs[0].ID || g.Live() != 10 {
		t.Fatalf("group %s live %d, want %s live 10", g.First(), g.Live(), jobs[0].ID)
	}

	// dispatch 0..4 in one batch, then 0 and 1 finish, 2 fails (its own
	// record), 7 is deleted
	b = NewBatch(false)
	for i := range 5 {
		b.markInFlight(g, jobs[i].ID, uint64(1000+i))
	}
	commitTest(t, s, b)
	b = NewBatch(false)
	b.deleteMember(g, jobs[0].ID, 0, false)
	b.deleteMember(g, jobs[1].ID, 0, false)
	failed := *jobs[2]
	failed.Status, failed.Attempts, failed.ReadyAt, failed.DequeuedAt = protocol.StatusScheduled, 1, 9999, 1002
	b.putMember(&failed)
	b.PutError(failed.ID, &protocol.ErrorRecord{Attempt: 1, Message: "boom"})
	commitTest(t, s, b)
	b = NewBatch(false)
	b.deleteMember(g, jobs[7].ID, 0, false)
	commitTest(t, s, b)

	check := func(s *Store) map[string]Ref {
		t.Helper()
		got, members, order := scanAll(t, s)
		want := []string{alone.ID}
		for _, i := range []int{2, 3, 4, 5, 6, 8, 9} {
			want = append(want, jobs[i].ID)
		}
		want = append(want, after.ID)
		if strings.Join(order, ",") != strings.Join(want, ",") {
			t.Fatalf("scan order\n got %v\nwant %v", order, want)
		}
		if members[alone.ID].g != nil || members[after.ID].g != nil {
			t.Fatalf("jobs stored alone scanned as members")
		}
		for _, i := range []int{3, 4} {
			j := got[jobs[i].ID]
			if j.Status != protocol.StatusInFlight || j.DequeuedAt != uint64(1000+i) || string(j.Payload) != string(jobs[i].Payload) {
				t.Errorf("member %d: %+v, want in_flight since %d with its payload", i, j, 1000+i)
			}
		}
		for _, i := range []int{5, 6, 8, 9} {
			j := got[jobs[i].ID]
			if j.Status != protocol.StatusReady || j.DequeuedAt != 0 || string(j.Payload) != string(jobs[i].Payload) || !j.InGroup {
				t.Errorf("member %d: %+v, want ready with its payload", i, j)
			}
		}
		f := got[failed.ID]
		if f.Status != protocol.StatusScheduled || f.Attempts != 1 || f.ReadyAt != 9999 || string(f.Payload) != string(failed.Payload) {
			t.Errorf("member with its own record: %+v", f)
		}
		if m := members[failed.ID]; !m.own || m.g == nil {
			t.Errorf("member with its own record scanned as %+v", m)
		}
		for id, j := range got {
			v, err := s.GetJob(id)
			if err != nil {
				t.Fatalf("GetJob %s: %v", id, err)
			}
			if v.Status != j.Status || v.DequeuedAt != j.DequeuedAt || string(v.Payload) != string(j.Payload) || v.Attempts != j.Attempts {
				t.Errorf("GetJob %s = %+v, scan gave %+v", id, v, j)
			}
		}
		for _, i := range []int{0, 1, 7} {
			if _, err := s.GetJob(jobs[i].ID); err != protocol.ErrJobNotFound {
				t.Errorf("GetJob of removed member %d: %v", i, err)
			}
		}
		return members
	}
	check(s)

	// LoadPayloads: members by their group, a removed member left out
	batch := []protocol.Job{*jobs[3], *jobs[1], failed, *jobs[9]}
	for i := range batch {
		batch[i].Payload, batch[i].InGroup = nil, true
	}
	loaded, err := s.LoadPayloads(batch)
	if err != nil || len(loaded) != 3 {
		t.Fatalf("LoadPayloads = %d jobs, %v", len(loaded), err)
	}
	for k, i := range []int{3, 2, 9} {
		if loaded[k].ID != jobs[i].ID || string(loaded[k].Payload) != string(jobs[i].Payload) {
			t.Errorf("LoadPayloads[%d] = %s %s, want member %d", k, loaded[k].ID, loaded[k].Payload, i)
		}
	}

	// reopen: the scan's group carries on where the old one stopped
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	members := check(s)
	g2 := members[jobs[5].ID].g
	if g2.Live() != 7 || g2.marks != g.marks {
		t.Fatalf("rescanned group: live %d marks %d, want 7 and %d", g2.Live(), g2.marks, g.marks)
	}
	b = NewBatch(false)
	b.markInFlight(g2, jobs[5].ID, 2005)
	commitTest(t, s, b)
	got, _, _ := scanAll(t, s)
	if j := got[jobs[5].ID]; j.Status != protocol.StatusInFlight || j.DequeuedAt != 2005 {
		t.Fatalf("mark after reopen: %+v", j)
	}
	if j := got[jobs[3].ID]; j.Status != protocol.StatusInFlight || j.DequeuedAt != 1003 {
		t.Fatalf("a mark from before the reopen was lost: %+v", j)
	}

	// the rest leave over two batches; the last one deletes every group key
	b = NewBatch(false)
	for _, i := range []int{3, 4, 5} {
		b.deleteMember(g2, jobs[i].ID, 0, false)
	}
	commitTest(t, s, b)
	b = NewBatch(false)
	b.deleteMember(g2, failed.ID, 1, true)
	for _, i := range []int{6, 8, 9} {
		b.deleteMember(g2, jobs[i].ID, 0, false)
	}
	commitTest(t, s, b)
	if keys := groupKeys(t, s); len(keys) != 0 {
		t.Fatalf("keys left after the last member: %v", keys)
	}
	if _, members, order := scanAll(t, s); len(order) != 2 || members[order[0]].g != nil {
		t.Fatalf("after the group: %v", order)
	}
	if recs, _ := s.ListErrors(failed.ID); len(recs) != 0 {
		t.Fatalf("error records outlived their job: %+v", recs)
	}
}

// TestScanLeavesGroupsEmptiedByTheLoad: a group whose members are all
// retained finished jobs past purge_at is emptied by the load (loadJob
// removes them into its own batch). The scan must not delete the group
// itself, ahead of that batch: if the process stopped in between, the
// members' own records would be left without their payloads.
func TestScanLeavesGroupsEmptiedByTheLoad(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	jobs := []*protocol.Job{testJobPayload(10), testJobPayload(11), testJobPayload(12), testJobPayload(13)}
	b := NewBatch(false)
	b.putGroups(jobs)
	for _, j := range jobs {
		done := *j
		done.Status, done.PurgeAt = protocol.StatusCompleted, 1
		b.putMember(&done)
	}
	commitTest(t, s, b)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	load := NewBatch(true) // the loader's batch, never committed here
	if err := s.ScanJobs(func(j *protocol.Job, m Ref) error {
		load.deleteMember(m.g, j.ID, j.Attempts, m.own)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if names, _ := s.GroupNames(); len(names) != 1 {
		t.Fatalf("groups after the scan: %v", names)
	}
	for _, j := range jobs {
		if got, err := s.GetJob(j.ID); err != nil || string(got.Payload) != string(j.Payload) {
			t.Fatalf("GetJob %s = %+v, %v", j.ID, got, err)
		}
	}
}

// TestGroupDiesInAnyBatchOrder removes the last members in a batch sealed
// before one that still marks the group: the later batch writes nothing for
// it, so no mark outlives its group.
func TestGroupDiesInAnyBatchOrder(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	jobs := []*protocol.Job{testJobPayload(1), testJobPayload(2)}
	b := NewBatch(false)
	g := b.putGroups(jobs)[0]
	commitTest(t, s, b)
	marking := NewBatch(false)
	marking.markInFlight(g, jobs[0].ID, 5)
	killing := NewBatch(false)
	killing.deleteMember(g, jobs[0].ID, 0, false)
	killing.deleteMember(g, jobs[1].ID, 0, false)
	commitTest(t, s, killing)
	commitTest(t, s, marking)
	if keys := groupKeys(t, s); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
	b = NewBatch(false)
	b.deleteMember(g, jobs[0].ID, 0, false)
	if err := s.Commit(context.Background(), b); err == nil {
		t.Fatal("removing a member of a dead group succeeded")
	}
}

// TestGroupsSplitLargeBulks stores a bulk larger than one group record as
// several groups of consecutive members, each readable on its own.
func TestGroupsSplitLargeBulks(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	var jobs []*protocol.Job
	pad := strings.Repeat("x", 40<<10)
	for i := range 40 {
		j := testJob(i)
		j.Payload = fmt.Appendf(nil, `{"i":%d,"p":"%s"}`, i, pad)
		jobs = append(jobs, j)
	}
	b := NewBatch(false)
	groups := b.putGroups(jobs)
	commitTest(t, s, b)
	distinct := map[*Group]int{}
	for i, g := range groups {
		distinct[g]++
		if i > 0 && groups[i-1] != g && g.First() != jobs[i].ID {
			t.Fatalf("group of job %d starts at %s", i, g.First())
		}
	}
	if len(distinct) < 3 {
		t.Fatalf("a %d KiB bulk made %d groups", 40*40, len(distinct))
	}
	for g, n := range distinct {
		if g.Live() != n {
			t.Fatalf("group %s live %d, holds %d", g.First(), g.Live(), n)
		}
	}
	for i, j := range jobs {
		got, err := s.GetJob(j.ID)
		if err != nil || string(got.Payload) != string(j.Payload) || !got.InGroup {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if _, err := s.GetJob(testJob(99).ID); err != protocol.ErrJobNotFound {
		t.Fatalf("GetJob past the last group: %v", err)
	}
}

// TestGroupRecordFormats checks both group record formats: a group that
// compresses well is stored compressed, one that does not (random
// payloads) as it is, and both read back the same. Member IDs have other
// lengths than the first one's: the encoder must not depend on IDs being
// of one length.
func TestGroupRecordFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name    string
		payload func(i int) []byte
		format  byte
	}{
		{"compressible", func(i int) []byte { return fmt.Appendf(nil, `{"i":%d,"p":"%s"}`, i, strings.Repeat("x", 300)) }, groupS2},
		{"random", func(i int) []byte {
			b := make([]byte, 300)
			for k := range b {
				b[k] = "0123456789abcdef"[rng.IntN(16)]
			}
			return fmt.Appendf(nil, `{"i":%d,"p":"%s"}`, i, b)
		}, groupPlain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := []*protocol.Job{testJob(1), testJob(2), testJob(3)}
			jobs[0].ID, jobs[1].ID, jobs[2].ID = "a1", "a22", "a333"
			for i, j := range jobs {
				j.Payload = tc.payload(i)
			}
			b := NewBatch(false)
			b.putGroups(jobs)
			if len(b.ops) != 1 {
				t.Fatalf("%d writes", len(b.ops))
			}
			val := b.ops[0].val
			if val[0] != tc.format {
				t.Fatalf("format %d, want %d", val[0], tc.format)
			}
			if last, err := groupLast(val); err != nil || last != "a333" {
				t.Fatalf("last = %q, %v", last, err)
			}
			var got []string
			err := forEachMember(val, func(m groupMember) bool {
				got = append(got, string(m.id)+"="+string(m.payload))
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, j := range jobs {
				if want := j.ID + "=" + string(j.Payload); got[i] != want {
					t.Fatalf("member %d = %.40s..., want %.40s...", i, got[i], want)
				}
			}
		})
	}
}

// TestLoadPayloadsThroughGroupCache reads members' payloads the way take
// streams do, again and again: a member removed after its group was cached
// is left out (the cache reads the marks written since), as is every
// member once its group is deleted, and the cache stays within its bound.
func TestLoadPayloadsThroughGroupCache(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	var jobs []*protocol.Job
	for i := range 6 {
		jobs = append(jobs, testJobPayload(10+i))
	}
	b := NewBatch(false)
	g := b.putGroups(jobs)[0]
	commitTest(t, s, b)
	load := func() []string {
		t.Helper()
		batch := make([]protocol.Job, len(jobs))
		for i, j := range jobs {
			batch[i] = *j
			batch[i].Payload, batch[i].InGroup = nil, true
		}
		got, err := s.LoadPayloads(batch)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for k, j := range got {
			if string(j.Payload) != string(testJobPayload(10+indexOf(jobs, j.ID)).Payload) {
				t.Fatalf("job %d has payload %s", k, j.Payload)
			}
			ids = append(ids, j.ID[len(j.ID)-2:])
		}
		return ids
	}
	if got := strings.Join(load(), ","); got != "10,11,12,13,14,15" {
		t.Fatalf("first read: %s", got)
	}
	stale := s.groups.lookup(jobs[3].ID)
	if stale == nil {
		t.Fatal("the group was not cached")
	}
	b = NewBatch(false)
	b.deleteMember(g, jobs[1].ID, 0, false)
	b.deleteMember(g, jobs[4].ID, 0, false)
	commitTest(t, s, b)
	if got := strings.Join(load(), ","); got != "10,12,13,15" {
		t.Fatalf("after two removals: %s", got)
	}
	b = NewBatch(false)
	for _, i := range []int{0, 2, 3, 5} {
		b.deleteMember(g, jobs[i].ID, 0, false)
	}
	commitTest(t, s, b)
	if got := load(); len(got) != 0 {
		t.Fatalf("after the group was deleted: %v", got)
	}
	// a deleted group leaves the cache with its commit: an idle server
	// keeps no decoded copy of jobs that are all gone
	if s.groups.size != 0 || len(s.groups.firsts) != 0 || s.groups.lookup(jobs[3].ID) != nil {
		t.Fatalf("the deleted group is still cached: %d bytes, firsts %v", s.groups.size, s.groups.firsts)
	}
	// one cached again by a reader whose snapshot predates the delete goes
	// at the next read that finds it deleted
	s.groups.add(stale)
	if got := load(); len(got) != 0 {
		t.Fatalf("after the group was deleted and cached again: %v", got)
	}
	if s.groups.size != 0 || s.groups.lookup(jobs[3].ID) != nil {
		t.Fatalf("a deleted group cached again stays: %d bytes", s.groups.size)
	}

	c := newGroupCache(100)
	for i := range 20 {
		c.add(&cachedGroup{first: fmt.Sprintf("%02d", i), last: fmt.Sprintf("%02d~", i), body: make([]byte, 30)})
	}
	if c.size > 100 || len(c.firsts) != 3 || c.lookup("19x") == nil || c.lookup("05x") != nil {
		t.Fatalf("cache: size %d, %d groups %v", c.size, len(c.firsts), c.firsts)
	}
}

func indexOf(jobs []*protocol.Job, id string) int {
	for i, j := range jobs {
		if j.ID == id {
			return i
		}
	}
	return -1
}

// TestScanDeletesMarksWithoutGroup: marks of a group that was never stored
// (an enqueue whose commit failed while its jobs stayed in memory, then
// were dispatched) are deleted by the next scan, and nothing is loaded
// from them.
func TestScanDeletesMarksWithoutGroup(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	ghost := &Group{first: testJob(5).ID, live: 2}
	b := NewBatch(false)
	b.markInFlight(ghost, testJob(5).ID, 7)
	b.putJob(testJobPayload(9))
	commitTest(t, s, b)
	if keys := groupKeys(t, s); len(keys) != 1 {
		t.Fatalf("keys under g/: %v", keys)
	}
	_, _, order := scanAll(t, s)
	if len(order) != 1 || order[0] != testJob(9).ID {
		t.Fatalf("scanned %v", order)
	}
	if keys := groupKeys(t, s); len(keys) != 0 {
		t.Fatalf("keys under g/ after the scan: %v", keys)
	}
}
