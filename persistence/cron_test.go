package persistence

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// Groups and entries survive a reopen; a firing's times (t/) override the
// times inside the entry's record; deleted entries and groups are gone.
func TestCronGroupsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	b := NewBatch(true)
	b.PutCronGroup(&protocol.CronGroup{Name: "g/1", Timezone: "UTC", Paused: true, PausedAt: 5})
	b.PutCronGroup(&protocol.CronGroup{Name: "g"})
	for _, name := range []string{"b", "a", "c"} {
		b.PutCronEntry("g/1", &protocol.CronEntry{Name: name, Expression: "* * * * *", NextEnqueueAt: 1000,
			Job: protocol.CronTemplate{Type: "t", Queue: "q", Priority: 7, Payload: protocol.Payload(`{"x":1}`)}})
	}
	b.PutCronEntry("g", &protocol.CronEntry{Name: "x", Expression: "@daily", NextEnqueueAt: 2000})
	b.PutCronTimes("g/1", "b", 9000, 8000)
	b.DeleteCronEntry("g/1", "c")
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	groups, err := s.LoadCronGroups()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Group.Name != "g" || groups[1].Group.Name != "g/1" {
		t.Fatalf("groups %+v", groups)
	}
	if g := groups[1]; !g.Group.Paused || g.Group.PausedAt != 5 || g.Group.Timezone != "UTC" || len(g.Entries) != 2 {
		t.Fatalf("group g/1 %+v", g)
	}
	a, bb := groups[1].Entries[0], groups[1].Entries[1]
	if a.Name != "a" || a.NextEnqueueAt != 1000 || a.LastEnqueueAt != 0 || string(a.Job.Payload) != `{"x":1}` || a.Job.Priority != 7 {
		t.Fatalf("entry a %+v", a)
	}
	if bb.Name != "b" || bb.NextEnqueueAt != 9000 || bb.LastEnqueueAt != 8000 {
		t.Fatalf("entry b: the times record must override: %+v", bb)
	}
	if len(groups[0].Entries) != 1 || groups[0].Entries[0].Name != "x" {
		t.Fatalf("group g entries %+v (an entry of g/1 must not fall under g)", groups[0].Entries)
	}
}
