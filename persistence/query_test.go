package persistence

import (
	"context"
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

func TestScanJobsFromAndErrorPages(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	b := NewBatch(false)
	for i := 1; i <= 5; i++ {
		b.putJob(testJob(i * 10))
	}
	for a := uint32(1); a <= 4; a++ {
		b.PutError(testJob(10).ID, &protocol.ErrorRecord{Attempt: a, Message: fmt.Sprint(a)})
	}
	b.PutError(testJob(20).ID, &protocol.ErrorRecord{Attempt: 1, Message: "other"})
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	scan := func(from string, desc bool, limit int) []uint64 {
		var out []uint64
		err := s.ScanJobsFrom(from, desc, func(j *protocol.Job) (bool, error) {
			out = append(out, j.ReadyAt)
			return len(out) < limit, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		from  string
		desc  bool
		limit int
		want  string
	}{
		{"", false, 10, "[10 20 30 40 50]"},
		{"", true, 10, "[50 40 30 20 10]"},
		{"", true, 2, "[50 40]"},
		{testJob(20).ID, false, 10, "[30 40 50]"},
		{testJob(20).ID, true, 10, "[10]"},
		{testJob(25).ID, false, 10, "[30 40 50]"}, // a cursor that is not stored
		{testJob(25).ID, true, 10, "[20 10]"},
		{testJob(50).ID, false, 10, "[]"},
		{testJob(10).ID, true, 10, "[]"},
	} {
		if got := fmt.Sprint(scan(c.from, c.desc, c.limit)); got != c.want && !(got == "[]" && c.want == "[]") {
			t.Errorf("from %q desc %v: got %s want %s", c.from, c.desc, got, c.want)
		}
	}
	page := func(from uint32, hasFrom, desc bool, limit int) string {
		recs, err := s.ListErrorsPage(testJob(10).ID, from, hasFrom, desc, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint32
		for _, r := range recs {
			out = append(out, r.Attempt)
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		from          uint32
		hasFrom, desc bool
		limit         int
		want          string
	}{
		{0, false, false, 10, "[1 2 3 4]"},
		{0, false, true, 10, "[4 3 2 1]"},
		{2, true, false, 1, "[3]"},
		{2, true, true, 10, "[1]"},
		{4, true, false, 10, "[]"},
		{0, true, false, 2, "[1 2]"},
	} {
		if got := page(c.from, c.hasFrom, c.desc, c.limit); got != c.want {
			t.Errorf("errors from %d/%v desc %v: got %s want %s", c.from, c.hasFrom, c.desc, got, c.want)
		}
	}
	if rec, ok, err := s.GetError(testJob(10).ID, 3); err != nil || !ok || rec.Message != "3" {
		t.Fatalf("GetError: %v %v %v", rec, ok, err)
	}
	if _, ok, err := s.GetError(testJob(10).ID, 5); err != nil || ok {
		t.Fatalf("GetError missing: %v %v", ok, err)
	}
}
