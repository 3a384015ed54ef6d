package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// The upgrade fixture: a data directory written by the build at commit
// 41dffdc (storage schema 3: lone records with the payload inline or
// apart, job groups with in-flight and gone marks, members' own records,
// error records, retained finished jobs, a budget), with what a reader
// must find in it. TestUpgradeFixture opens a copy with the current build.
//
// It was made by running, at that commit,
//
//	TOLLGATE_WRITE_UPGRADE_FIXTURE=$PWD/testdata/store-41dffdc go test -run TestWriteUpgradeFixture ./actors/
//
// The generator stays so the fixture can be remade from any later build
// for the next layout change; it uses only the engine's facade.
const upgradeFixture = "testdata/store-41dffdc"

// fixtureJob is what the fixture's reader must find of one job.
type fixtureJob struct {
	Status  protocol.Status `json:"status"`
	Payload string          `json:"payload"`
}

// fixtureManifest is the fixture's expected.json.
type fixtureManifest struct {
	Jobs   map[string]fixtureJob `json:"jobs"`
	Absent []string              `json:"absent"` // acked without retention
	Ready  int                   `json:"ready"`
}

func TestWriteUpgradeFixture(t *testing.T) {
	out := os.Getenv("TOLLGATE_WRITE_UPGRADE_FIXTURE")
	if out == "" {
		t.Skip("set TOLLGATE_WRITE_UPGRADE_FIXTURE=<dir> to write the upgrade fixture")
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	size := payloadCost(fixturePayload(0))
	// room for two payloads: the third lone job's is stored apart
	e, stop := startOnDirWith(t, filepath.Join(out, "data"), EngineConfig{PayloadCacheBytes: 2 * size})
	if _, _, err := e.CreateBudget(ctx, "b1", protocol.Definition{Allocation: 50, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}, false); err != nil {
		t.Fatal(err)
	}
	n := 0
	newJob := func() *protocol.NewJob {
		n++
		return &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "q", Priority: protocol.DefaultPriority, Payload: fixturePayload(n)}}
	}
	payloads := map[string]string{}
	enqueue := func(jobs ...*protocol.NewJob) []string {
		t.Helper()
		views, err := e.Enqueue(ctx, jobs, len(jobs) > 1)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(views))
		for i, v := range views {
			ids[i] = v.ID
			payloads[v.ID] = string(jobs[i].Job.Payload)
		}
		return ids
	}
	week := uint64(7 * 24 * time.Hour / time.Millisecond)
	killed := newJob()
	killed.Job.Retention = &protocol.Retention{DeadMs: &week}
	lone := []string{enqueue(newJob())[0], enqueue(killed)[0], enqueue(newJob())[0]}
	var g1, g2 []*protocol.NewJob
	for range 6 {
		g1 = append(g1, newJob())
	}
	g1[1].Job.Retention = &protocol.Retention{CompletedMs: &week}
	for range 5 {
		j := newJob()
		j.Bindings = []protocol.NewBinding{{Key: "b1", Cost: 1}}
		g2 = append(g2, j)
	}
	group1 := enqueue(g1...)
	group2 := enqueue(g2...)
	sched := newJob()
	sched.Job.ReadyAt, sched.ReadyAtSet = uint64(time.Now().UnixMilli())+week, true
	scheduled := enqueue(sched)[0]
	uniq := newJob()
	uniq.Job.UniqueKey, uniq.Job.UniqueWhile = "u1", protocol.UniqueQueued
	unique := enqueue(uniq)[0]

	// in (priority, id) order: the three lone jobs and group 1's first five
	taken := takeAll(t, e, 8)
	if taken[0].ID != lone[0] || taken[7].ID != group1[4] {
		t.Fatalf("took %s..%s, want %s..%s", taken[0].ID, taken[7].ID, lone[0], group1[4])
	}
	if _, err := e.Ack(ctx, []string{lone[0], group1[0], group1[1]}); err != nil {
		t.Fatal(err)
	}
	msg, later := "boom", uint64(time.Now().UnixMilli())+week
	if _, err := e.Fail(ctx, group1[2], &protocol.FailureRequest{Message: &msg, RetryAt: &later}); err != nil {
		t.Fatal(err)
	}
	kill := true
	if _, err := e.Fail(ctx, lone[1], &protocol.FailureRequest{Message: &msg, Kill: &kill}); err != nil {
		t.Fatal(err)
	}
	// lone[2], group1[3..5] and group2[0..1] stay in flight: stopped with
	// the stream open, the store has them so (the space reserve is not
	// part of the fixture: the store makes it anew)
	stop()
	if err := os.Remove(filepath.Join(out, "data", "tollgate-reserve")); err != nil {
		t.Fatal(err)
	}

	m := fixtureManifest{Jobs: map[string]fixtureJob{}, Absent: []string{lone[0], group1[0]}}
	set := func(status protocol.Status, ids ...string) {
		for _, id := range ids {
			m.Jobs[id] = fixtureJob{Status: status, Payload: payloads[id]}
			if status == protocol.StatusReady {
				m.Ready++
			}
		}
	}
	set(protocol.StatusCompleted, group1[1])
	set(protocol.StatusDead, lone[1])
	set(protocol.StatusScheduled, group1[2], scheduled)
	set(protocol.StatusReady, lone[2], group1[3], group1[4], group1[5], unique)
	set(protocol.StatusReady, group2...)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fixturePayload(i int) []byte { return fmt.Appendf(nil, `{"fixture":%d,"pad":"0123456789"}`, i) }

// TestUpgradeFixture opens a data directory written by an earlier build
// (upgradeFixture) and checks that every job it holds reads back with its
// status and payload, that the ready ones (those in flight when it stopped
// included) are delivered with their payloads, and that after they are
// acked a restart finds only the retained and scheduled jobs.
func TestUpgradeFixture(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(upgradeFixture, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m fixtureManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyDir(t, filepath.Join(upgradeFixture, "data"), dir)
	ctx := context.Background()
	e, stop := startOnDirWith(t, dir, EngineConfig{})
	defer func() { stop() }()
	// the acks and failures made room on the stream for three more
	if got := e.Stats(); got.Recovered != 6 {
		t.Errorf("recovered %d in-flight jobs at start, want 6", got.Recovered)
	}
	check := func(stage string, e *Engine, jobs map[string]fixtureJob) {
		t.Helper()
		for id, want := range jobs {
			v, err := e.GetJob(ctx, id)
			if err != nil {
				t.Errorf("%s: GetJob %s: %v", stage, id, err)
				continue
			}
			if v.Status != want.Status {
				t.Errorf("%s: job %s is %v, want %v", stage, id, v.Status, want.Status)
			}
			if v.Payload == nil || string(*v.Payload) != want.Payload {
				t.Errorf("%s: job %s payload %v, want %s", stage, id, v.Payload, want.Payload)
			}
		}
		for _, id := range m.Absent {
			if _, err := e.GetJob(ctx, id); err != protocol.ErrJobNotFound {
				t.Errorf("%s: acked job %s reads %v, want not found", stage, id, err)
			}
		}
	}
	check("opened", e, m.Jobs)

	got := takeAll(t, e, m.Ready)
	loaded, err := e.LoadPayloads(got)
	if err != nil || len(loaded) != m.Ready {
		t.Fatalf("LoadPayloads: %d of %d, %v", len(loaded), m.Ready, err)
	}
	var ids []string
	for _, j := range loaded {
		want, ok := m.Jobs[j.ID]
		if !ok || want.Status != protocol.StatusReady {
			t.Errorf("delivered %s, which is not a ready job of the fixture", j.ID)
			continue
		}
		if string(j.Payload) != want.Payload {
			t.Errorf("delivered %s with payload %s, want %s", j.ID, j.Payload, want.Payload)
		}
		ids = append(ids, j.ID)
	}
	if !sort.StringsAreSorted(ids) {
		t.Errorf("delivered out of (priority, id) order: %v", ids)
	}
	if notFound, err := e.Ack(ctx, ids); err != nil || len(notFound) != 0 {
		t.Fatalf("ack the delivered jobs: not found %v, %v", notFound, err)
	}
	stop()
	checkPrioritiesComplete(t, dir)

	e, stop = startOnDirWith(t, dir, EngineConfig{})
	left := map[string]fixtureJob{}
	for id, j := range m.Jobs {
		if j.Status != protocol.StatusReady {
			left[id] = j
		}
	}
	check("acked and restarted", e, left)
	for _, id := range ids {
		if _, err := e.GetJob(ctx, id); err != protocol.ErrJobNotFound {
			t.Errorf("acked and restarted: job %s reads %v, want not found", id, err)
		}
	}
}

// copyDir copies the files of src into dst (a store directory is flat).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, d.Name()), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkPrioritiesComplete: after a full load the store in dir knows the
// (queue, priority) pair of every unfinished job, and says so
// (persistence/priorities.go): the next start may dispatch while loading.
func checkPrioritiesComplete(t *testing.T, dir string) {
	t.Helper()
	store := quietStore(t, dir)
	defer store.Close()
	scan := store.NewJobScan()
	pairs, complete := scan.Priorities()
	if !complete {
		t.Error("the queue priorities are not complete after a full load")
	}
	err := scan.Run(func(j *protocol.Job, _ persistence.Ref) error {
		if j.Status.Terminal() {
			return nil
		}
		if _, ok := pairs[persistence.QueuePair(j.Queue, j.Priority)]; !ok {
			t.Errorf("job %s (%s, priority %d) has no stored pair", j.ID, j.Queue, j.Priority)
		}
		for _, b := range j.Budgets {
			if _, ok := pairs[persistence.BudgetPair(b.Key, j.Priority)]; !ok {
				t.Errorf("job %s (priority %d) bound to %s has no stored pair for it", j.ID, j.Priority, b.Key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
