package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// queryTestEngine starts an engine on a store holding n jobs written
// directly: queues a/b/c, types x/y, priorities 0..3, every third job
// scheduled an hour ahead, and every seventh a finished job (completed or
// dead) retained for an hour; every 21st of those is already past purge_at
// by the time the test queries (purge_at 300 ms ahead, then a sleep), so it
// must be invisible although the reaper has not removed it.
func queryTestEngine(t *testing.T, n int) (*Engine, *persistence.Store) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(persistence.Config{InMemory: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	now := uint64(time.Now().UnixMilli())
	ids := protocol.NewIDGenerator()
	batch := persistence.NewBatch(false)
	for k := 0; k < n; k++ {
		j := &protocol.Job{ID: ids.Next(now), Type: []string{"x", "y"}[k%2], Queue: []string{"a", "b", "c"}[k%3],
			Priority: uint16(k % 4), Status: protocol.StatusReady, ReadyAt: now, Payload: fmt.Appendf(nil, `{"n":%d}`, k)}
		switch {
		case k%21 == 0:
			j.Status, j.PurgeAt, j.CompletedAt = protocol.StatusCompleted, now+300, now
		case k%7 == 0:
			j.Status, j.PurgeAt, j.Attempts = protocol.StatusDead, now+3600_000, 3
		case k%3 == 1:
			j.Status, j.ReadyAt = protocol.StatusScheduled, now+3600_000
		}
		if k%5 == 0 {
			j.Budgets = []protocol.Binding{{Key: "k", Cost: 1}}
		}
		batch.Enqueued([]*protocol.Job{j}, nil, 0)
	}
	batch.PutBudget(&protocol.Budget{Key: "k", Allocation: 1000000, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}, CreatedAt: now, UpdatedAt: now})
	if err := store.Commit(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	eng, err := Start(Config{Store: store, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Stop()
		_ = store.Close()
	})
	time.Sleep(350 * time.Millisecond)
	return eng, store
}

// expected lists the visible stored jobs matching f by a full store scan.
func expected(t *testing.T, eng *Engine, store *persistence.Store, f *protocol.JobFilter) []string {
	t.Helper()
	var out []string
	now := eng.now()
	if err := store.ScanJobsFrom("", false, func(j *protocol.Job) (bool, error) {
		if !j.Purged(now) && f.Match(context.Background(), j, now) {
			out = append(out, j.ID)
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func parseFilter(t *testing.T, q string) *protocol.JobFilter {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := protocol.ParseJobFilter(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestQueryIndexesMatchFullScan checks lists (both orders, paged) and counts
// answered from the queue actor's indexes against a full store scan, with a
// small scan budget per message so selections span many messages.
func TestQueryIndexesMatchFullScan(t *testing.T) {
	oldScan := selectScan
	selectScan = 37
	defer func() { selectScan = oldScan }()
	eng, store := queryTestEngine(t, 2000)
	ctx := context.Background()
	filters := []string{"", "queue=a", "queue=a,c", "status=ready", "status=scheduled", "status=completed",
		"status=dead,completed", "type=y&queue=b", "priority=1..2&status=ready", "attempts=1..", "budgets.key=k",
		"budgets.key=k&queue=c&status=scheduled", "filter=.n%252==0", "filter=.n>100&queue=b", "queue=nope", "ready_at=..1",
		"status=in_flight", "status=scheduled,ready", "status=ready,dead", "status=scheduled,ready,in_flight,completed,dead",
		"type=x", "type=y,x", "type=nope", "type=x&status=dead", "type=y&priority=2", "type=x,nope&queue=b",
		"budgets.key=k&status=ready", "budgets.key=nope", "budgets.key=k&type=y"}
	for _, q := range filters {
		// a jq filter is bounded in wall-clock time per job: on a busy
		// machine one job may time out (no match, counted in
		// BoundedErrors), as a client would see in Tollgate-Filter-Errors;
		// such a run is retried, any other mismatch fails
		for attempt := 1; ; attempt++ {
			f := parseFilter(t, q)
			bad := compareQuery(t, eng, store, f, q)
			if bad == "" {
				break
			}
			if f.BoundedErrors() == 0 || attempt == 3 {
				t.Fatal(bad)
			}
			t.Logf("%s (after %d filter time-outs; retrying)", bad, f.BoundedErrors())
		}
	}
	// id filter: only the listed visible jobs, in order.
	all := expected(t, eng, store, parseFilter(t, "status=ready"))
	f := parseFilter(t, "id="+all[5]+","+all[1]+",03fvmame0wyuiexbc2033jby2")
	page, more, err := eng.ListJobs(ctx, f, "", false, 50)
	if err != nil || more || len(page) != 2 || page[0].ID != all[1] || page[1].ID != all[5] {
		t.Fatalf("id filter: %v %v %v", page, more, err)
	}
}

// compareQuery checks CountJobs and ListJobs (both directions, paged)
// against a full scan for one filter, and says what differs ("" if
// nothing).
func compareQuery(t *testing.T, eng *Engine, store *persistence.Store, f *protocol.JobFilter, q string) string {
	ctx := context.Background()
	want := expected(t, eng, store, f)
	n, err := eng.CountJobs(ctx, f)
	if err != nil || n != uint64(len(want)) {
		return fmt.Sprintf("count %q: %d, %v; want %d", q, n, err, len(want))
	}
	for _, desc := range []bool{false, true} {
		var got []string
		from := ""
		for pages := 0; ; pages++ {
			page, more, err := eng.ListJobs(ctx, f, from, desc, 23)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range page {
				got = append(got, j.ID)
			}
			if more != (len(page) == 23 && len(got) < len(want)) {
				return fmt.Sprintf("list %q desc=%v page %d: more=%v with %d/%d", q, desc, pages, more, len(got), len(want))
			}
			if !more {
				break
			}
			from = page[len(page)-1].ID
		}
		if len(got) != len(want) {
			return fmt.Sprintf("list %q desc=%v: %d jobs, want %d", q, desc, len(got), len(want))
		}
		for i := range got {
			w := want[i]
			if desc {
				w = want[len(want)-1-i]
			}
			if got[i] != w {
				return fmt.Sprintf("list %q desc=%v: item %d is %s, want %s", q, desc, i, got[i], w)
			}
		}
	}
	return ""
}

// TestBulkDeleteAndPatchInBatches deletes and patches by filter with a batch
// size far below the match count and checks every match was changed and
// nothing else.
func TestBulkDeleteAndPatchInBatches(t *testing.T) {
	oldScan, oldBatch := selectScan, queryBatch
	selectScan, queryBatch = 50, 7
	defer func() { selectScan, queryBatch = oldScan, oldBatch }()
	eng, store := queryTestEngine(t, 1500)
	ctx := context.Background()

	p, err := protocol.DecodeJobPatch(protocol.JSON, []byte(`{"queue":"moved","priority":9}`))
	if err != nil {
		t.Fatal(err)
	}
	f := parseFilter(t, "queue=a&status=ready")
	want := len(expected(t, eng, store, f))
	n, err := eng.PatchJobs(ctx, f, p)
	if err != nil || n != want || want < 100 {
		t.Fatalf("patched %d, %v; want %d", n, err, want)
	}
	for q, w := range map[string]int{"queue=moved&priority=9": want, "queue=a&status=ready": 0} {
		got, err := eng.CountJobs(ctx, parseFilter(t, q))
		if err != nil || got != uint64(w) || len(expected(t, eng, store, parseFilter(t, q))) != w {
			t.Fatalf("after patch, count %q = %d, %v; want %d", q, got, err, w)
		}
	}

	f = parseFilter(t, "type=x")
	want = len(expected(t, eng, store, f))
	total := len(expected(t, eng, store, parseFilter(t, "")))
	n, err = eng.DeleteJobs(ctx, f)
	if err != nil || n != want {
		t.Fatalf("deleted %d, %v; want %d", n, err, want)
	}
	left, err := eng.CountJobs(ctx, parseFilter(t, ""))
	if err != nil || int(left) != total-want || len(expected(t, eng, store, parseFilter(t, ""))) != total-want {
		t.Fatalf("after delete: %d left, %v; want %d", left, err, total-want)
	}
	if got, _ := eng.CountJobs(ctx, parseFilter(t, "type=x")); got != 0 {
		t.Fatalf("type=x still counts %d", got)
	}
}
