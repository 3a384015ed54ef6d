package persistence

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// modelJob is what the store must hold of one job in TestGroupsRandomized.
type modelJob struct {
	id       string
	payload  string
	status   protocol.Status
	dq       uint64
	attempts uint32
	grp      *Group
	override bool // a member with its own record
}

func cloneJobs(m map[string]*modelJob) map[string]*modelJob {
	out := make(map[string]*modelJob, len(m))
	for k, v := range m {
		c := *v
		out[k] = &c
	}
	return out
}

// TestGroupsRandomized drives lone jobs and groups through random batches
// of what the queue actor writes (enqueue, dispatch marks, own records for
// failures and retained finishes, removals), committed one by one or
// several in one transaction, and now and then drops the batch being built
// and reopens the store: the scan (and GetJob and LoadPayloads) must give
// back exactly what was committed, and no group may outlive its members.
func TestGroupsRandomized(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runGroupsRandomized(t, seed, 300) })
	}
}

func runGroupsRandomized(t *testing.T, seed uint64, steps int) {
	r := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	s := openTest(t, dir)
	defer func() { _ = s.Close() }()
	next := 1
	committed := map[string]*modelJob{}
	rebuild := func() map[string]*modelJob {
		got := map[string]*modelJob{}
		err := s.ScanJobs(func(j *protocol.Job, m Ref) error {
			if _, dup := got[j.ID]; dup {
				t.Fatalf("seed %d: %s scanned twice", seed, j.ID)
			}
			got[j.ID] = &modelJob{id: j.ID, payload: string(j.Payload), status: j.Status, dq: j.DequeuedAt, attempts: j.Attempts, grp: m.g, override: m.own}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	check := func(got map[string]*modelJob) {
		t.Helper()
		if len(got) != len(committed) {
			t.Fatalf("seed %d: scan found %d jobs, %d committed", seed, len(got), len(committed))
		}
		live := map[string]bool{}
		for id, w := range committed {
			g := got[id]
			if g == nil {
				t.Fatalf("seed %d: lost %s", seed, id)
			}
			if g.status != w.status || g.payload != w.payload || g.attempts != w.attempts || (w.status == protocol.StatusInFlight && g.dq != w.dq) {
				t.Fatalf("seed %d: %s scanned as %+v, committed %+v", seed, id, g, w)
			}
			if (g.grp != nil) != (w.grp != nil) || (w.grp != nil && g.override != w.override) {
				t.Fatalf("seed %d: %s scanned in group %v (own record %v), committed in %v (%v)", seed, id, g.grp != nil, g.override, w.grp != nil, w.override)
			}
			if w.grp != nil {
				live[w.grp.first] = true
			}
			v, err := s.GetJob(id)
			if err != nil || string(v.Payload) != w.payload || v.Status != w.status {
				t.Fatalf("seed %d: GetJob %s = %+v, %v", seed, id, v, err)
			}
		}
		names, err := s.GroupNames()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !live[n] {
				t.Fatalf("seed %d: group %s outlived its members", seed, n)
			}
		}
	}
	reopen := func() {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTest(t, dir)
		got := rebuild()
		check(got)
		committed = got
	}
	work := cloneJobs(committed)
	for step := 0; step < steps; step++ {
		b := NewBatch(false)
		for range 1 + r.IntN(6) {
			ids := make([]string, 0, len(work))
			for id := range work {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			op := r.IntN(10)
			if len(ids) == 0 || op < 2 {
				n := 1 + r.IntN(8)
				var jobs []*protocol.Job
				for range n {
					j := testJob(next)
					j.Payload = fmt.Appendf(nil, `{"n":%d}`, next)
					next++
					jobs = append(jobs, j)
				}
				if n >= 3 {
					gs := b.putGroups(jobs)
					for i, j := range jobs {
						work[j.ID] = &modelJob{id: j.ID, payload: string(j.Payload), status: protocol.StatusReady, grp: gs[i]}
					}
				} else {
					for _, j := range jobs {
						b.putJob(j)
						work[j.ID] = &modelJob{id: j.ID, payload: string(j.Payload), status: protocol.StatusReady}
					}
				}
				continue
			}
			j := work[ids[r.IntN(len(ids))]]
			write := func() {
				rec := testJob(0)
				rec.ID, rec.Status, rec.DequeuedAt, rec.Attempts = j.id, j.status, j.dq, j.attempts
				if j.grp != nil {
					b.putMember(rec)
					j.override = true
				} else {
					rec.Payload = []byte(j.payload)
					b.putJob(rec)
				}
			}
			switch {
			case op < 4 && j.status == protocol.StatusReady: // dispatch
				j.status, j.dq = protocol.StatusInFlight, uint64(step*10+op+1)
				if j.grp != nil && !j.override {
					b.markInFlight(j.grp, j.id, j.dq)
				} else {
					write()
				}
			case op < 5 && j.status == protocol.StatusInFlight: // failure: back to ready
				j.status = protocol.StatusReady
				j.attempts++
				b.PutError(j.id, &protocol.ErrorRecord{Attempt: j.attempts, Message: "x"})
				write()
			case op < 6 && j.status == protocol.StatusInFlight: // retained finish
				j.status = protocol.StatusCompleted
				write()
			case op < 9: // ack or delete
				if j.grp != nil {
					b.deleteMember(j.grp, j.id, j.attempts, j.override)
				} else {
					b.deleteJob(j.id, j.attempts, false)
				}
				delete(work, j.id)
			}
		}
		switch x := r.IntN(20); {
		case x == 0: // the process stops before this batch commits
			reopen()
			work = cloneJobs(committed)
			continue
		case x < 4: // not waited for: several batches may share a transaction
			s.Submit(b, func(err error) {
				if err != nil {
					panic(err)
				}
			})
		default:
			commitTest(t, s, b)
			if r.IntN(5) == 0 {
				// an empty batch commits at once, before batches submitted
				// earlier: wait for those with one that writes something
				barrier := NewBatch(false)
				barrier.PutBudget(&protocol.Budget{Key: "barrier"})
				commitTest(t, s, barrier)
				checkLoadPayloads(t, s, seed, work, next)
			}
		}
		committed = cloneJobs(work)
		if r.IntN(30) == 0 {
			reopen()
			work = cloneJobs(committed)
		}
	}
}

// checkLoadPayloads asks for every member ever stored, as a take stream
// would: exactly the live ones come back, with their payloads.
func checkLoadPayloads(t *testing.T, s *Store, seed uint64, live map[string]*modelJob, next int) {
	t.Helper()
	var batch []protocol.Job
	want := 0
	for i := 1; i < next; i++ {
		id := testJob(i).ID
		if j := live[id]; j == nil || j.grp != nil {
			batch = append(batch, protocol.Job{ID: id, InGroup: true})
			if j != nil {
				want++
			}
		}
	}
	got, err := s.LoadPayloads(batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range got {
		if live[j.ID] == nil {
			t.Fatalf("seed %d: LoadPayloads gave removed member %s", seed, j.ID)
		}
		if string(j.Payload) != live[j.ID].payload {
			t.Fatalf("seed %d: %s has payload %s", seed, j.ID, j.Payload)
		}
	}
	if len(got) != want {
		t.Fatalf("seed %d: LoadPayloads gave %d of %d live members", seed, len(got), want)
	}
}
