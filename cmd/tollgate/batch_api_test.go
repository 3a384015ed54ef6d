package main

// Batched jobs against the real binary (SPEC §8.2): folding, checks,
// sealing, bulk, interactions, the jq engine's rules, and what the official
// Node client's suite relies on (§8.2.9).

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// §8.2.3, §8.2.9: three enqueues with one key make one job (201 then 200s,
// same id, folded true); GET shows the merged payload and the stored batch;
// the worker gets the merged payload in one take frame and one ack
// finishes the job. Keys differing in anything fold apart.
func TestBatchFoldMergedPayloadInOneFrame(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := batBatch("push:tenant-42", batFoldConcat)
	first := batEnqueue(t, s, batJob("bq", []any{map[string]any{"id": 1}}, b), false)
	id := budStr(t, first, "id")
	if got := budCanon(t, first["batch"]); got != budCanon(t, b) {
		t.Fatalf("enqueue response batch %s, want %s", got, budCanon(t, b))
	}
	for _, n := range []int{2, 3} {
		m := batEnqueue(t, s, batJob("bq", []any{map[string]any{"id": n}}, b), true)
		if budStr(t, m, "id") != id {
			t.Fatalf("fold answered job %s, want the pending job %s", m["id"], id)
		}
		if _, has := m["payload"]; has {
			t.Fatalf("fold response carries a payload: %v", m)
		}
		if budStr(t, m["batch"].(map[string]any), "key") != "push:tenant-42" {
			t.Fatalf("fold response batch %v", m["batch"])
		}
	}
	// another key (the client puts other arguments into it) does not fold
	other := batEnqueue(t, s, batJob("bq", []any{map[string]any{"id": 9}}, batBatch("push:tenant-43", batFoldConcat)), false)
	job := budGetJob(t, s, id)
	if got := budCanon(t, job["payload"]); got != `[{"id":1},{"id":2},{"id":3}]` {
		t.Fatalf("merged payload %s", got)
	}
	if got := budCanon(t, job["batch"]); got != budCanon(t, b) {
		t.Fatalf("GET batch %s, want %s", got, budCanon(t, b))
	}
	if got := batPayload(t, s, budStr(t, other, "id")); got != `[{"id":9}]` {
		t.Fatalf("other key's payload %s", got)
	}
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("bq", 10), Accept: apitest.AcceptNDJSON})
	frames := st.Frames(t, 2, 10*time.Second)
	var mine apitest.Frame
	for _, f := range frames {
		if f.Job.ID == id {
			mine = f
		}
	}
	if mine.Job == nil {
		t.Fatalf("take frames %v lack job %s", apitest.FrameIDs(frames), id)
	}
	if got := budCanon(t, mine.Job.Raw["payload"]); got != `[{"id":1},{"id":2},{"id":3}]` {
		t.Fatalf("take frame payload %s", got)
	}
	if mine.Job.Raw["batch"] == nil {
		t.Fatalf("take frame lacks batch: %v", mine.Job.Raw)
	}
	st.NoJobFor(t, 300*time.Millisecond, false, "three folded enqueues are one job")
	budAck(t, s, id)
	if n := batCount(t, s, "queue=bq&status=ready,in_flight,scheduled"); n != 1 {
		t.Fatalf("%d unfinished jobs after the ack, want 1 (the other key's)", n)
	}
}

// §8.2.6, §8.2.9: three bulk items with one key give folded false/true/true
// and one id, 201; an item may fold into a job that existed before the
// request; a bulk whose every item folds answers 200.
func TestBatchBulkIntraRequestFolds(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := batBatch("k", batFoldConcat)
	r := apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": []any{
		batJob("q", []any{map[string]any{"id": 1}}, b),
		batJob("q", []any{map[string]any{"id": 2}}, b),
		batJob("q", []any{map[string]any{"id": 3}}, b),
	}})
	jobs := apitest.Object(t, r, http.StatusCreated)["jobs"].([]any)
	var id string
	for i, want := range []bool{false, true, true} {
		j := jobs[i].(map[string]any)
		if j["folded"] != want {
			t.Fatalf("item %d folded=%v, want %v", i, j["folded"], want)
		}
		if i == 0 {
			id = budStr(t, j, "id")
		} else if budStr(t, j, "id") != id {
			t.Fatalf("item %d id %s, want %s", i, j["id"], id)
		}
	}
	if got := batPayload(t, s, id); got != `[{"id":1},{"id":2},{"id":3}]` {
		t.Fatalf("payload %s", got)
	}
	// every item folds (into the job of an earlier request): 200
	r = apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": []any{
		batJob("q", []any{map[string]any{"id": 4}}, b),
		batJob("other", []any{map[string]any{"id": 5}}, b), // another queue: the key alone decides
	}})
	for i, j := range apitest.Object(t, r, http.StatusOK)["jobs"].([]any) {
		if j.(map[string]any)["folded"] != true || budStr(t, j.(map[string]any), "id") != id {
			t.Fatalf("item %d: %v", i, j)
		}
	}
	if got := batPayload(t, s, id); got != `[{"id":1},{"id":2},{"id":3},{"id":4},{"id":5}]` {
		t.Fatalf("payload %s", got)
	}
	if n := batCount(t, s, ""); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	// a failing fold in a bulk fails it whole: nothing written, text prefixed
	plus := map[string]any{"key": "k2", "when": "true", "fold": `$existing + $new`}
	r = apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": []any{
		batJob("q", []any{map[string]any{"id": 6}}, b),
		batJob("q", []any{1}, plus),
		batJob("q", map[string]any{"a": 1}, plus), // array + object fails
		batJob("q", []any{1}, batBatch("fresh", batFoldConcat)),
	}})
	apitest.RequireErrorPrefix(t, r, http.StatusUnprocessableEntity, "jobs[2]: batch fold failed: fold expression failed at runtime: ")
	if got := batPayload(t, s, id); got != `[{"id":1},{"id":2},{"id":3},{"id":4},{"id":5}]` {
		t.Fatalf("payload after a failed bulk %s", got)
	}
	if n := batCount(t, s, ""); n != 1 {
		t.Fatalf("%d jobs after a failed bulk, want 1", n)
	}
	// and the next enqueue still folds into the same job
	batEnqueue(t, s, batJob("q", []any{map[string]any{"id": 6}}, b), true)
}

// §8.2.9: unique inside the fold program deduplicates (it also sorts).
func TestBatchDedupViaFold(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := batBatch("dedup", batFoldUnique)
	id := budStr(t, batEnqueue(t, s, batJob("q", []any{3, 1}, b), false), "id")
	batEnqueue(t, s, batJob("q", []any{1, 2}, b), true)
	batEnqueue(t, s, batJob("q", []any{3, 2}, b), true)
	if got := batPayload(t, s, id); got != `[1,2,3]` {
		t.Fatalf("payload %s, want [1,2,3]", got)
	}
	// the other helper program: a field of an object payload
	b2 := batBatch("devices", `$existing | .deviceIds += ($new | .deviceIds)`)
	b2["when"] = `(($existing | .deviceIds) + ($new | .deviceIds)) | length <= 100`
	id2 := budStr(t, batEnqueue(t, s, batJob("q", map[string]any{"deviceIds": []any{"a"}, "title": "t"}, b2), false), "id")
	batEnqueue(t, s, batJob("q", map[string]any{"deviceIds": []any{"b"}, "title": "u"}, b2), true)
	if got := batPayload(t, s, id2); got != `{"deviceIds":["a","b"],"title":"t"}` {
		t.Fatalf("payload %s", got)
	}
}

// §8.2.1, §8.2.2: field rules and the exact texts of the checks, which run
// on every batched enqueue (one that would fold, and a scheduled one too).
func TestBatchChecks(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	job := func(when, fold string) map[string]any {
		return batJob("q", []any{1}, map[string]any{"key": "k", "when": when, "fold": fold})
	}
	cases := []struct {
		body   any
		status int
		text   string
	}{
		{job(".[*]", batFoldConcat), 422, `batch expression: when: unexpected token "*"`},
		{job(batWhen, "$existing |"), 422, `batch expression: fold: unexpected EOF`},
		{job(`error("nope")`, batFoldConcat), 422, `batch dry-run: when: expression failed at runtime: error: nope`},
		{job(batWhen, `error("bad")`), 422, `batch dry-run: fold: fold expression failed at runtime: error: bad`},
		{job(batWhen, `empty`), 422, `batch dry-run: fold: fold expression produced no output`},
		{job(batWhen, `$existing, $new`), 422, `batch dry-run: fold: fold expression produced more than one output`},
		{batJob("q", 1, map[string]any{"key": "", "when": batWhen, "fold": batFoldConcat}), 400, `batch.key must not be empty`},
		{map[string]any{"type": "t", "queue": "q", "payload": 1, "unique_key": "u", "batch": batBatch("k", batFoldConcat)}, 400, `unique_key and batch cannot be combined`},
	}
	for _, c := range cases {
		apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", c.body), c.status, c.text)
	}
	// programs that cannot compile with gojq: input, debug, $__loc__
	for _, p := range []string{"input", "$__loc__"} {
		apitest.RequireErrorPrefix(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", job(batWhen, p)), 422, "batch expression: fold: ")
	}
	// a missing or non-string field is a decode error
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", batJob("q", 1, map[string]any{"key": "k", "when": batWhen})), 400, "invalid JSON: ")
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", batJob("q", 1, map[string]any{"key": 5, "when": batWhen, "fold": batFoldConcat})), 400, "invalid JSON: ")
	// several outputs of when: the dry run accepts it, the first decides
	batEnqueue(t, s, job(`true, false`, batFoldConcat), false)
	batEnqueue(t, s, job(`true, false`, batFoldConcat), true)
	// a scheduled batched enqueue is checked too
	sched := job(".[*]", batFoldConcat)
	sched["ready_at"] = budNowMs() + 3600_000
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", sched), 422, `batch expression: when: unexpected token "*"`)
	// an enqueue that would fold has its own programs checked
	bad := job(batWhen, `empty`)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", bad), 422, `batch dry-run: fold: fold expression produced no output`)
	// in a bulk, texts carry the item's index
	r := apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": []any{job(batWhen, batFoldConcat), job(".[*]", batFoldConcat)}})
	apitest.RequireError(t, r, 422, `jobs[1]: batch expression: when: unexpected token "*"`)
	// batch null is no batch
	m := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", map[string]any{"type": "t", "queue": "plain", "payload": 1, "batch": nil}), 201)
	if _, has := m["batch"]; has {
		t.Fatalf("batch:null stored a batch: %v", m)
	}
	if n := batCount(t, s, ""); n != 2 {
		t.Fatalf("%d jobs, want 2 (one folded job, one plain)", n)
	}
}

// §8.2.3: a falsy when seals the pending job (payload and batch kept, still
// ready) and starts a new one; a failing fold is a 422 that writes nothing;
// results JSON cannot hold (infinite) or over 8 MiB are fold failures.
func TestBatchWhenFalseSealsAndFoldFailures(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := map[string]any{"key": "pairs", "when": `($existing | length) < 2`, "fold": batFoldConcat}
	p1 := budStr(t, batEnqueue(t, s, batJob("q", []any{1}, b), false), "id")
	batEnqueue(t, s, batJob("q", []any{2}, b), true)
	p2 := budStr(t, batEnqueue(t, s, batJob("q", []any{3}, b), false), "id")
	if p1 == p2 {
		t.Fatal("a falsy when did not start a new job")
	}
	batEnqueue(t, s, batJob("q", []any{4}, b), true)
	if got := batPayload(t, s, p1); got != `[1,2]` {
		t.Fatalf("sealed job's payload %s", got)
	}
	if j := budGetJob(t, s, p1); j["status"] != "ready" || j["batch"] == nil {
		t.Fatalf("sealed job %v, want ready with its batch", j)
	}
	if got := batPayload(t, s, p2); got != `[3,4]` {
		t.Fatalf("new job's payload %s", got)
	}
	// runtime failure of P's stored fold (the incoming enqueue's own fold
	// is only checked)
	f := map[string]any{"key": "fail", "when": "true", "fold": `$existing + $new`}
	pf := budStr(t, batEnqueue(t, s, batJob("q", []any{1}, f), false), "id")
	apitest.RequireErrorPrefix(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", batJob("q", map[string]any{"a": 1}, f)), 422, "batch fold failed: fold expression failed at runtime: ")
	// a value JSON cannot hold
	inf := map[string]any{"key": "inf", "when": "true", "fold": `if $existing == $new then $new else infinite end`}
	pi := budStr(t, batEnqueue(t, s, batJob("q", 1, inf), false), "id")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", batJob("q", 2, inf)), 422, "batch fold failed: number +Inf cannot be represented in JSON")
	for id, want := range map[string]string{pf: `[1]`, pi: `1`} {
		if got := batPayload(t, s, id); got != want {
			t.Fatalf("job %s payload %s after a failed fold, want %s", id, got, want)
		}
	}
	if n := batCount(t, s, ""); n != 4 {
		t.Fatalf("%d jobs, want 4: failed folds write nothing", n)
	}
}

// §8.2.8: $ENV and env see an empty environment; integers stay exact.
func TestBatchEnvEmptyAndExactIntegers(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := map[string]any{"key": "env", "when": "true", "fold": `$existing + [($ENV | length), (env | length), $ENV.PATH]`}
	id := budStr(t, batEnqueue(t, s, batJob("q", []any{}, b), false), "id")
	batEnqueue(t, s, batJob("q", []any{}, b), true)
	if got := batPayload(t, s, id); got != `[0,0,null]` {
		t.Fatalf("payload %s, want [0,0,null]", got)
	}
	n := map[string]any{"key": "num", "when": "true", "fold": `$existing + $new`}
	id = budStr(t, batEnqueue(t, s, batJob("q", json.Number("9007199254740993"), n), false), "id")
	batEnqueue(t, s, batJob("q", 1, n), true)
	if got := batPayload(t, s, id); got != `9007199254740994` {
		t.Fatalf("payload %s, want 9007199254740994", got)
	}
}

// §8.2.5: a batched enqueue with a future ready_at is an ordinary
// scheduled job: it never folds, never becomes pending and leaves the
// key's pending job alone.
func TestBatchScheduledOptsOut(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := batBatch("sched", batFoldConcat)
	p := budStr(t, batEnqueue(t, s, batJob("q", []any{1}, b), false), "id")
	later := batJob("q", []any{2}, b)
	later["ready_at"] = budNowMs() + 3600_000
	m := batEnqueue(t, s, later, false)
	if m["status"] != "scheduled" || m["batch"] == nil {
		t.Fatalf("scheduled batched enqueue answered %v", m)
	}
	batEnqueue(t, s, batJob("q", []any{3}, b), true)
	if got := batPayload(t, s, p); got != `[1,3]` {
		t.Fatalf("pending job's payload %s", got)
	}
	if got := batPayload(t, s, budStr(t, m, "id")); got != `[2]` {
		t.Fatalf("scheduled job's payload %s", got)
	}
	// a scheduled job that becomes ready is not pending either
	soon := batJob("q", []any{4}, batBatch("soon", batFoldConcat))
	soon["ready_at"] = budNowMs() + 300
	sid := budStr(t, batEnqueue(t, s, soon, false), "id")
	budWaitStatus(t, s, 10*time.Second, "ready", sid)
	nid := budStr(t, batEnqueue(t, s, batJob("q", []any{5}, batBatch("soon", batFoldConcat)), false), "id")
	if nid == sid {
		t.Fatal("folded into a promoted scheduled job")
	}
}

// §8.2.4: dispatch seals for good: a job requeued after its take stream
// closed never takes folds again; a patch to a future ready_at and a
// delete seal too; changing queue or priority keeps the job pending.
func TestBatchSealing(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := batBatch("seal", batFoldConcat)
	p := budStr(t, batEnqueue(t, s, batJob("sq", []any{1}, b), false), "id")
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("sq", 1), Accept: apitest.AcceptNDJSON})
	if f := st.NextJobFrame(t, 10*time.Second); f.Job.ID != p {
		t.Fatalf("took %s, want %s", f.Job.ID, p)
	}
	batEnqueue(t, s, batJob("other", []any{2}, b), false) // P in flight: a new batch
	st.Close()
	budWaitStatus(t, s, 10*time.Second, "ready", p)
	m := batEnqueue(t, s, batJob("other", []any{3}, b), true)
	if budStr(t, m, "id") == p {
		t.Fatal("a requeued job took a fold again")
	}
	if got := batPayload(t, s, p); got != `[1]` {
		t.Fatalf("requeued job's payload %s", got)
	}

	// PATCH: queue and priority keep it pending, a future ready_at seals
	b2 := batBatch("patch", batFoldConcat)
	p2 := budStr(t, batEnqueue(t, s, batJob("pq", []any{1}, b2), false), "id")
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/jobs/"+p2, map[string]any{"queue": "pq2", "priority": 7}), 200)
	batEnqueue(t, s, batJob("pq", []any{2}, b2), true)
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/jobs/"+p2, map[string]any{"ready_at": budNowMs() + 3600_000}), 200)
	p3 := budStr(t, batEnqueue(t, s, batJob("pq", []any{3}, b2), false), "id")
	// patched back to ready, it stays sealed
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/jobs/"+p2, map[string]any{"ready_at": nil}), 200)
	batEnqueue(t, s, batJob("pq", []any{4}, b2), true)
	if got := batPayload(t, s, p2); got != `[1,2]` {
		t.Fatalf("patched job's payload %s", got)
	}
	if got := batPayload(t, s, p3); got != `[3,4]` {
		t.Fatalf("new pending job's payload %s", got)
	}
	// DELETE seals
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/jobs/"+p3, nil))
	if id := budStr(t, batEnqueue(t, s, batJob("pq", []any{5}, b2), false), "id"); id == p3 {
		t.Fatal("folded into a deleted job")
	}
	// POST /reset removes every link
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "POST", "/reset", nil))
	batEnqueue(t, s, batJob("pq", []any{6}, b2), false)
}

// §8.2.4, §8.2.7: a job parked on a budget is ready and keeps taking folds;
// a folding enqueue's bindings are checked but nothing is created.
func TestBatchFoldIntoParkedJob(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "one", budWIF(1))
	blocker := budEnqueue(t, s, budJob("park", budBind("one", 1)))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("park", 5), Accept: apitest.AcceptNDJSON})
	if f := st.NextJobFrame(t, 10*time.Second); f.Job.ID != budStr(t, blocker, "id") {
		t.Fatalf("took %s first", f.Job.ID)
	}
	b := batBatch("parked", batFoldConcat)
	j := batJob("park", []any{1}, b)
	j["budgets"] = []any{budBind("one", 1)}
	p := budStr(t, batEnqueue(t, s, j, false), "id")
	st.NoJobFor(t, 300*time.Millisecond, false, "the budget's one token is in flight")
	// the fold binds a budget create_with would create: checked, discarded
	f := batJob("park", []any{2}, b)
	f["budgets"] = []any{map[string]any{"key": "fresh", "cost": 1, "create_with": budWIF(3)}}
	if id := budStr(t, batEnqueue(t, s, f, true), "id"); id != p {
		t.Fatalf("folded into %s, want the parked job %s", id, p)
	}
	if r := apitest.DoJSON(t, s.URL, "GET", "/budgets/fresh", nil); r.Status != http.StatusNotFound {
		t.Fatalf("a folding enqueue created a budget: %v", r)
	}
	// a folding enqueue binding a missing budget fails as any enqueue
	g := batJob("park", []any{3}, b)
	g["budgets"] = []any{budBind("missing", 1)}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", g), 422, "budget 'missing' does not exist. Create it first or pass create_with.")
	budAck(t, s, budStr(t, blocker, "id"))
	got := st.NextJobFrame(t, 10*time.Second)
	if got.Job.ID != p || budCanon(t, got.Job.Raw["payload"]) != `[1,2]` {
		t.Fatalf("frame %s %s, want %s with [1,2]", got.Job.ID, budCanon(t, got.Job.Raw["payload"]), p)
	}
	if budCanon(t, got.Job.Raw["budgets"]) != `[{"cost":1,"key":"one"}]` {
		t.Fatalf("the parked job's bindings changed: %s", budCanon(t, got.Job.Raw["budgets"]))
	}
}

// §8.2.7: the pending link is durable: after a clean restart and after a
// crash, the next enqueue folds into the same job; a job that was in flight
// at the crash is sealed.
func TestBatchFoldAfterRestart(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	b := batBatch("durable", batFoldConcat)
	p := budStr(t, batEnqueue(t, s, batJob("rq", []any{1}, b), false), "id")
	s.Restart()
	if id := budStr(t, batEnqueue(t, s, batJob("rq", []any{2}, b), true), "id"); id != p {
		t.Fatalf("folded into %s after a restart, want %s", id, p)
	}
	s.Kill()
	s.Restart()
	batEnqueue(t, s, batJob("rq", []any{3}, b), true)
	if got := batPayload(t, s, p); got != `[1,2,3]` {
		t.Fatalf("payload %s", got)
	}
	// in flight at a crash: recovered to ready, sealed
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rq", 1), Accept: apitest.AcceptNDJSON})
	if f := st.NextJobFrame(t, 10*time.Second); f.Job.ID != p {
		t.Fatalf("took %s", f.Job.ID)
	}
	s.Kill()
	st.Close()
	s.Restart()
	if id := budStr(t, batEnqueue(t, s, batJob("rq", []any{4}, b), false), "id"); id == p {
		t.Fatal("a job recovered from in flight took a fold")
	}
	if got := batPayload(t, s, p); got != `[1,2,3]` {
		t.Fatalf("recovered job's payload %s", got)
	}
}

// §8.2.8: a program that would run for a minute is stopped after 500 ms:
// the enqueue is answered within about a second with a 422, and the server
// answers other requests meanwhile.
func TestBatchLongProgramStopped(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	spin := `last(range(1e12)) > 0`
	start := time.Now()
	r := apitest.DoJSON(t, s.URL, "POST", "/jobs", batJob("q", 1, map[string]any{"key": "spin", "when": spin, "fold": batFoldConcat}))
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("answered after %v, want about a second", elapsed)
	}
	apitest.RequireError(t, r, 422, "batch dry-run: when: expression failed at runtime: evaluation exceeded the time limit of 500ms")
	// (that the server answers others meanwhile: TestBatchSlowProgramStallsNobody)
	// a fold that times out on the real payloads is a fold failure
	slowFold := map[string]any{"key": "slowfold", "when": "true", "fold": `if $existing == $new then $new else (last(range(1e12)) | $new) end`}
	p := budStr(t, batEnqueue(t, s, batJob("q", 1, slowFold), false), "id")
	t0 := time.Now()
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", batJob("q", 2, slowFold)), 422, "batch fold failed: fold expression failed at runtime: evaluation exceeded the time limit of 500ms")
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("fold failure answered after %v", d)
	}
	if got := batPayload(t, s, p); got != `1` {
		t.Fatalf("payload %s", got)
	}
	// a when that times out is falsy: a new batch starts
	slowWhen := map[string]any{"key": "slowwhen", "when": `if $existing == $new then true else last(range(1e12)) end`, "fold": `$new`}
	w := budStr(t, batEnqueue(t, s, batJob("q", 1, slowWhen), false), "id")
	if id := budStr(t, batEnqueue(t, s, batJob("q", 2, slowWhen), false), "id"); id == w {
		t.Fatal("a timed-out when folded")
	}
}

// A slow program stalls neither other keys nor other queues: while one
// request's batch programs run for seconds, an enqueue of another key
// folds, a plain job of another queue is enqueued and dispatched, and the
// server answers, all before the slow request's answer. Shown by order, not
// by a time threshold: the slow request is known to be evaluating (the
// fold-workers gauge) before the others start. The slow request is a bulk
// whose items' when programs each spin to the 500 ms limit (a timed-out
// when is false: each item starts a new batch), so it lasts at least
// 2.5 s of wall clock on any machine, every evaluation within its limit.
func TestBatchSlowProgramStallsNobody(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	slow := map[string]any{"key": "slow", "fold": "$new",
		"when": `if $existing == $new then true else last(range(1e12)) end`}
	other := batBatch("fast", batFoldConcat)
	batEnqueue(t, s, batJob("fq", []any{1}, other), false)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("wq", 1), Accept: apitest.AcceptNDJSON})

	slowDone := make(chan time.Time, 1)
	var slowResp apitest.Response
	go func() {
		items := make([]any, 6)
		for i := range items {
			items[i] = batJob("sq", i, slow)
		}
		slowResp = apitest.DoJSON(t, s.URL, "POST", "/jobs/bulk", map[string]any{"jobs": items})
		slowDone <- time.Now()
	}()
	batWaitFoldWorkerBusy(t, s, func() bool { return len(slowDone) > 0 })
	batEnqueue(t, s, batJob("fq", []any{2}, other), true)
	w := apitest.Object(t, apitest.DoJSON(t, s.URL, "POST", "/jobs", map[string]any{"type": "t", "queue": "wq", "payload": 1}), 201)
	if f := st.NextJobFrame(t, 10*time.Second); f.Job.ID != budStr(t, w, "id") {
		t.Fatalf("took %s", f.Job.ID)
	}
	othersDone := time.Now()
	slowAt := <-slowDone
	jobs := apitest.Object(t, slowResp, 201)["jobs"].([]any)
	for i, j := range jobs {
		if j.(map[string]any)["folded"] != false {
			t.Fatalf("item %d folded although its when timed out: %v", i, j)
		}
	}
	if !othersDone.Before(slowAt) {
		t.Fatalf("the others finished after the slow request (at %v vs %v)", othersDone, slowAt)
	}
	t.Logf("others done %v before the slow request's answer", slowAt.Sub(othersDone))
}

// Folds and seals are traced and counted: /debug/trace shows folded and
// batch_sealed (with the reason), /metrics the folded and sealed totals by
// queue. A batched enqueue in msgpack folds like a JSON one.
func TestBatchTracedAndCounted(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	tr := obsOpenTrace(t, s, "queue=tq")
	b := map[string]any{"key": "obs", "when": `($existing | length) < 2`, "fold": batFoldConcat}
	p := budStr(t, batEnqueue(t, s, batJob("tq", []any{1}, b), false), "id")
	r := apitest.DoMsgpack(t, s.URL, "POST", "/jobs", batJob("tq", []any{2}, b))
	if m := apitest.Object(t, r, 200); m["folded"] != true || m["id"] != p {
		t.Fatalf("msgpack fold answered %v", m)
	}
	p2 := budStr(t, batEnqueue(t, s, batJob("tq", []any{3}, b), false), "id") // when false: p seals
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("tq", 10), Accept: apitest.AcceptNDJSON})
	st.Frames(t, 2, 10*time.Second) // p2's dispatch seals it
	tr.until("two seals and a fold", func() bool {
		return tr.count("folded", p) == 1 && tr.count("batch_sealed", p) == 1 && tr.count("batch_sealed", p2) == 1
	})
	if got := tr.get("batch_sealed", p, 0).Reason; got != "when_false" {
		t.Fatalf("p sealed for %q", got)
	}
	if got := tr.get("batch_sealed", p2, 0).Reason; got != "dispatched" {
		t.Fatalf("p2 sealed for %q", got)
	}
	fams := obsMetrics(t, s)
	obsRequireMetric(t, fams, "tollgate_jobs_folded_total", map[string]string{"queue": "tq"}, 1)
	obsRequireMetric(t, fams, "tollgate_batches_sealed_total", map[string]string{"queue": "tq"}, 2)
	obsRequireMetric(t, fams, "tollgate_fold_workers_busy", nil, 0)
}
