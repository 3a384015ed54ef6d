package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

const (
	budArrive = 5 * time.Second        // a job that must come arrives within this
	budQuiet  = 600 * time.Millisecond // and one that must not, does not within this
)

// TestBudgetsWhileInFlightConcurrency: §4.4/§4.8 — a while_in_flight budget
// of 5 lets exactly 5 of 12 jobs run on a stream with prefetch 20, then one
// more per token returned by single ack, bulk ack, failure (rescheduled and
// killed) and DELETE of an in-flight job; a disconnect returns the tokens and
// the jobs, which another stream then receives.
func TestBudgetsWhileInFlightConcurrency(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "wif5", budWIF(5))
	jobs := make([]map[string]any, 12)
	for i := range jobs {
		jobs[i] = budJob("conc", budBind("wif5", 0))
	}
	ids := budEnqueueBulk(t, s, jobs...)

	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("conc", 20), Accept: apitest.AcceptNDJSON})
	first := st.Frames(t, 5, budArrive)
	if got := apitest.FrameIDs(first); !budSameSet(got, ids[:5]) {
		t.Fatalf("first five %v, want %v (dispatch in id order)", got, ids[:5])
	}
	for _, f := range first {
		if budStr(t, f.Job.Raw, "status") != "in_flight" {
			t.Fatalf("frame status %v", f.Job.Raw["status"])
		}
		if b := budCanon(t, f.Job.Raw["budgets"]); b != `[{"cost":1,"key":"wif5"}]` {
			t.Fatalf("frame budgets %s", b)
		}
	}
	st.NoJobFor(t, budQuiet, false, "allocation 5 is fully held")
	// A parked job is ready and has never been dequeued (§4.7).
	parked := budGetJob(t, s, ids[5])
	if budStr(t, parked, "status") != "ready" {
		t.Fatalf("parked job status %v, want ready", parked["status"])
	}
	if _, has := parked["dequeued_at"]; has {
		t.Fatalf("parked job has dequeued_at: %v", parked)
	}

	inflight := map[string]bool{}
	for _, f := range first {
		inflight[f.Job.ID] = true
	}
	expectMore := func(n int, why string) {
		t.Helper()
		fs := st.Frames(t, n, budArrive)
		for _, f := range fs {
			if inflight[f.Job.ID] {
				t.Fatalf("job %s delivered twice", f.Job.ID)
			}
			inflight[f.Job.ID] = true
		}
		st.NoJobFor(t, budQuiet, false, "only "+why+" freed tokens")
	}
	done := func(id string) {
		if !inflight[id] {
			t.Fatalf("test bug: %s not in flight", id)
		}
		delete(inflight, id)
	}

	// Single ack.
	budAck(t, s, ids[0])
	done(ids[0])
	expectMore(1, "one ack")
	// Bulk ack of two.
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "POST", "/jobs/success", map[string]any{"ids": []string{ids[1], ids[2]}}))
	done(ids[1])
	done(ids[2])
	expectMore(2, "a bulk ack of two")
	// Failure that reschedules (retry far in the future).
	r := apitest.DoJSON(t, s.URL, "POST", "/jobs/"+ids[3]+"/failure", map[string]any{"message": "later", "retry_at": budNowMs() + 3600_000})
	if j := apitest.Object(t, r, http.StatusOK); budStr(t, j, "status") != "scheduled" {
		t.Fatalf("retry_at failure -> %v", j["status"])
	} else if b := budCanon(t, j["budgets"]); b != `[{"cost":1,"key":"wif5"}]` {
		t.Fatalf("failure response budgets %s (§2.6: present whenever the job has bindings)", b)
	}
	done(ids[3])
	expectMore(1, "one rescheduling failure")
	// Failure that kills.
	r = apitest.DoJSON(t, s.URL, "POST", "/jobs/"+ids[4]+"/failure", map[string]any{"message": "dead", "kill": true})
	if j := apitest.Object(t, r, http.StatusOK); budStr(t, j, "status") != "dead" {
		t.Fatalf("kill failure -> %v", j["status"])
	}
	done(ids[4])
	expectMore(1, "one killing failure")
	// DELETE of an in-flight job.
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/jobs/"+ids[5], nil))
	done(ids[5])
	expectMore(1, "one in-flight delete")
	// Now ids[6..10] are in flight and ids[11] is parked.
	var held []string
	for _, id := range ids[6:11] {
		if !inflight[id] {
			t.Fatalf("expected %s in flight; in flight: %v", id, inflight)
		}
		held = append(held, id)
	}
	if len(inflight) != 5 {
		t.Fatalf("in flight %v, want 5", inflight)
	}

	// Disconnect: the jobs go back to ready and their tokens come back; a new
	// stream receives those five again (they order before ids[11]).
	st.Close()
	budWaitStatus(t, s, 10*time.Second, "ready", held...)
	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("conc", 20), Accept: apitest.AcceptNDJSON})
	again := st2.Frames(t, 5, budArrive)
	if got := apitest.FrameIDs(again); !budSameSet(got, held) {
		t.Fatalf("after reconnect got %v, want the returned jobs %v", got, held)
	}
	for _, f := range again {
		if _, has := f.Job.Raw["dequeued_at"]; !has {
			t.Fatalf("redelivered job lacks dequeued_at")
		}
	}
	st2.NoJobFor(t, budQuiet, false, "the five redelivered jobs hold the budget")
	budAck(t, s, held[0])
	if got := st2.NextJobFrame(t, budArrive).Job.ID; got != ids[11] {
		t.Fatalf("after ack got %s, want the last job %s", got, ids[11])
	}
	st2.NoJobFor(t, budQuiet, false, "all jobs delivered")
}

// TestBudgetsParkedDoNotBlockOthers: §4.1/§4.7 — while budgeted jobs are
// parked, unbudgeted jobs and jobs on other budgets keep flowing.
func TestBudgetsParkedDoNotBlockOthers(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "one", budWIF(1))
	budMustPut(t, s, "other", budWIF(5))

	// Parked jobs first, then the others, all enqueued before the worker.
	ids := budEnqueueBulk(t, s,
		budJob("mix", budBind("one", 0)),   // a: dispatched
		budJob("mix", budBind("one", 0)),   // b: parked
		budJob("mix", budBind("one", 0)),   // c: parked
		budJob("mix"),                      // d: unbudgeted
		budJob("mix", budBind("other", 0)), // e: other budget
	)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("mix", 10), Accept: apitest.AcceptNDJSON})
	got := apitest.FrameIDs(st.Frames(t, 3, budArrive))
	if !budSameSet(got, []string{ids[0], ids[3], ids[4]}) {
		t.Fatalf("delivered %v, want %v", got, []string{ids[0], ids[3], ids[4]})
	}
	st.NoJobFor(t, budQuiet, false, "b and c are parked on 'one'")

	// With the stream idle and jobs parked, new unbudgeted / other-budget
	// jobs are delivered at once.
	f := budEnqueue(t, s, budJob("mix"))
	if g := st.NextJobFrame(t, budArrive).Job.ID; g != budStr(t, f, "id") {
		t.Fatalf("unbudgeted job: got %s", g)
	}
	g := budEnqueue(t, s, budJob("mix", budBind("other", 2)))
	if x := st.NextJobFrame(t, budArrive).Job.ID; x != budStr(t, g, "id") {
		t.Fatalf("other-budget job: got %s", x)
	}
	st.NoJobFor(t, budQuiet, false, "b and c are still parked")

	// A token back on 'one' releases exactly the next parked job, in order.
	budAck(t, s, ids[0])
	if x := st.NextJobFrame(t, budArrive).Job.ID; x != ids[1] {
		t.Fatalf("after ack got %s, want %s", x, ids[1])
	}
	st.NoJobFor(t, budQuiet, false, "'one' is held by b")
	budAck(t, s, ids[1])
	if x := st.NextJobFrame(t, budArrive).Job.ID; x != ids[2] {
		t.Fatalf("after ack got %s, want %s", x, ids[2])
	}

	// A parked job does not use a prefetch slot (§4.7): a prefetch-1 stream
	// still gets the unbudgeted job behind it.
	s1 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("mix-pf1", 1), Accept: apitest.AcceptNDJSON})
	p := budStr(t, budEnqueue(t, s, budJob("mix-pf1", budBind("one", 0))), "id")
	s1.NoJobFor(t, budQuiet, false, "'one' is held by c")
	u := budStr(t, budEnqueue(t, s, budJob("mix-pf1")), "id")
	if x := s1.NextJobFrame(t, budArrive).Job.ID; x != u {
		t.Fatalf("prefetch-1 stream got %s, want the unbudgeted %s", x, u)
	}
	budAck(t, s, ids[2])
	s1.NoJobFor(t, budQuiet, false, "the prefetch-1 stream is full with u")
	budAck(t, s, u)
	if x := s1.NextJobFrame(t, budArrive).Job.ID; x != p {
		t.Fatalf("got %s, want the parked %s", x, p)
	}
}

// TestBudgetsStrictOrder: §4.7 Decision — a job costing 10 parked behind
// in-flight jobs is not overtaken by a later cost-1 job, while a
// higher-priority job (ordering before it) is served first.
func TestBudgetsStrictOrder(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "ten", budWIF(10))
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("order", 20), Accept: apitest.AcceptNDJSON})

	small := budEnqueueBulk(t, s,
		budJob("order", budBind("ten", 1)),
		budJob("order", budBind("ten", 1)),
		budJob("order", budBind("ten", 1)),
	)
	if got := apitest.FrameIDs(st.Frames(t, 3, budArrive)); !budSameSet(got, small) {
		t.Fatalf("got %v, want %v", got, small)
	}
	big := budStr(t, budEnqueue(t, s, budJob("order", budBind("ten", 10))), "id")
	st.NoJobFor(t, budQuiet, false, "the cost-10 job needs all 10 tokens, 3 are held")
	late := budStr(t, budEnqueue(t, s, budJob("order", budBind("ten", 1))), "id")
	st.NoJobFor(t, budQuiet, false, "the later cost-1 job must not overtake the parked cost-10 job although 7 tokens are free")

	// A higher-priority job orders before the parked head: served first.
	hpJob := budJob("order", budBind("ten", 1))
	hpJob["priority"] = 100
	hp := budStr(t, budEnqueue(t, s, hpJob), "id")
	if got := st.NextJobFrame(t, budArrive).Job.ID; got != hp {
		t.Fatalf("got %s, want the priority-100 job %s", got, hp)
	}
	st.NoJobFor(t, budQuiet, false, "head still waiting")

	budAck(t, s, small[0])
	budAck(t, s, small[1])
	st.NoJobFor(t, budQuiet, false, "9 free of 10 after two acks; the late cost-1 job still waits")
	budAck(t, s, small[2])
	st.NoJobFor(t, budQuiet, false, "hp still holds 1 token")
	budAck(t, s, hp)
	if got := st.NextJobFrame(t, budArrive).Job.ID; got != big {
		t.Fatalf("got %s, want the cost-10 job %s", got, big)
	}
	st.NoJobFor(t, budQuiet, false, "the cost-10 job holds all tokens")
	budAck(t, s, big)
	if got := st.NextJobFrame(t, budArrive).Job.ID; got != late {
		t.Fatalf("got %s, want the late cost-1 job %s", got, late)
	}
}

// TestBudgetsMultiBudgetJob: §4.7 — a job on two budgets is dispatched only
// when both allow, and holds no tokens on one while waiting for the other.
func TestBudgetsMultiBudgetJob(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "mb-a", budWIF(1))
	budMustPut(t, s, "mb-b", budWIF(1))
	ids := budEnqueueBulk(t, s,
		budJob("multi", budBind("mb-a", 0)),
		budJob("multi", budBind("mb-b", 0)),
		budJob("multi", budBind("mb-a", 0), budBind("mb-b", 0)),
	)
	a1, b1, x := ids[0], ids[1], ids[2]
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("multi", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(st.Frames(t, 2, budArrive)); !budSameSet(got, []string{a1, b1}) {
		t.Fatalf("got %v, want %v", got, []string{a1, b1})
	}
	st.NoJobFor(t, budQuiet, false, "x needs both budgets, both are held")

	budAck(t, s, a1)
	st.NoJobFor(t, budQuiet, false, "x still needs mb-b")
	// x holds nothing on mb-a while it waits for mb-b: a later mb-a job runs.
	a2 := budStr(t, budEnqueue(t, s, budJob("multi", budBind("mb-a", 0))), "id")
	if got := st.NextJobFrame(t, budArrive).Job.ID; got != a2 {
		t.Fatalf("got %s, want %s (x must not hold mb-a)", got, a2)
	}
	budAck(t, s, b1)
	st.NoJobFor(t, budQuiet, false, "mb-a is held by a2")
	budAck(t, s, a2)
	f := st.NextJobFrame(t, budArrive)
	if f.Job.ID != x {
		t.Fatalf("got %s, want %s", f.Job.ID, x)
	}
	if b := budCanon(t, f.Job.Raw["budgets"]); b != `[{"cost":1,"key":"mb-a"},{"cost":1,"key":"mb-b"}]` {
		t.Fatalf("frame budgets %s", b)
	}
	// Both tokens are held by x now.
	y := budStr(t, budEnqueue(t, s, budJob("multi", budBind("mb-b", 0))), "id")
	st.NoJobFor(t, budQuiet, false, "mb-b is held by x")
	budAck(t, s, x)
	if got := st.NextJobFrame(t, budArrive).Job.ID; got != y {
		t.Fatalf("got %s, want %s", got, y)
	}
}

// TestBudgetsUpdateWakesParked: §4.7/§4.9 — a PATCH that raises the
// allocation wakes parked jobs at once; a time_based PATCH re-arms the
// refill timer.
func TestBudgetsUpdateWakesParked(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "grow", budWIF(2))
	jobs := make([]map[string]any, 5)
	for i := range jobs {
		jobs[i] = budJob("grow", budBind("grow", 0))
	}
	ids := budEnqueueBulk(t, s, jobs...)
	st := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("grow", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(st.Frames(t, 2, budArrive)); !budSameSet(got, ids[:2]) {
		t.Fatalf("got %v, want %v", got, ids[:2])
	}
	st.NoJobFor(t, budQuiet, false, "allocation 2 held")
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/grow", `{"allocation":4}`), http.StatusOK)
	if got := apitest.FrameIDs(st.Frames(t, 2, 2*time.Second)); !budSameSet(got, ids[2:4]) {
		t.Fatalf("after raise got %v, want %v", got, ids[2:4])
	}
	st.NoJobFor(t, budQuiet, false, "allocation 4 held")
	// PUT raising it again wakes the last one.
	budMustPut(t, s, "grow", budWIF(5))
	if got := st.NextJobFrame(t, 2*time.Second).Job.ID; got != ids[4] {
		t.Fatalf("after PUT got %s, want %s", got, ids[4])
	}

	// time_based: 1 per hour, then 1 per second by PATCH.
	budMustPut(t, s, "slow", budTB(1, 3600_000, 0))
	tids := budEnqueueBulk(t, s, budJob("slow", budBind("slow", 0)), budJob("slow", budBind("slow", 0)))
	st2 := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("slow", 10), Accept: apitest.AcceptNDJSON})
	if got := st2.NextJobFrame(t, budArrive).Job.ID; got != tids[0] {
		t.Fatalf("got %s, want %s", got, tids[0])
	}
	st2.NoJobFor(t, budQuiet, false, "1 per hour, token spent")
	patched := time.Now()
	apitest.Object(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/slow", `{"strategy":{"duration_ms":1000}}`), http.StatusOK)
	f := st2.NextJobFrame(t, 3*time.Second)
	if f.Job.ID != tids[1] {
		t.Fatalf("got %s, want %s", f.Job.ID, tids[1])
	}
	if d := f.At.Sub(patched); d > 1400*time.Millisecond {
		t.Fatalf("second job %v after the PATCH to 1/s, want <= 1s (+400ms)", d)
	}
}

// TestBudgetsRestart: §3.9/§4.9 — definitions and bindings survive a
// restart; parked jobs are delivered afterwards; while_in_flight pools start
// with nothing held and time_based pools start full.
func TestBudgetsRestart(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	budMustPut(t, s, "rs-wif", budWIF(2))
	budMustPut(t, s, "rs-tb", budTB(3, 3600_000, 0))
	wjobs := make([]map[string]any, 4)
	for i := range wjobs {
		wjobs[i] = budJob("rs-w", budBind("rs-wif", 0))
	}
	wids := budEnqueueBulk(t, s, wjobs...)
	tjobs := make([]map[string]any, 5)
	for i := range tjobs {
		tjobs[i] = budJob("rs-t", budBind("rs-tb", 0))
	}
	tids := budEnqueueBulk(t, s, tjobs...)

	sw := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rs-w", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(sw.Frames(t, 2, budArrive)); !budSameSet(got, wids[:2]) {
		t.Fatalf("got %v want %v", got, wids[:2])
	}
	stt := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rs-t", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(stt.Frames(t, 3, budArrive)); !budSameSet(got, tids[:3]) {
		t.Fatalf("got %v want %v", got, tids[:3])
	}
	sw.NoJobFor(t, budQuiet, false, "wif held")
	stt.NoJobFor(t, time.Millisecond, false, "tb drained")
	list := budCanon(t, apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets", nil), http.StatusOK))

	sw.Close()
	stt.Close()
	s.Restart()

	if l2 := budCanon(t, apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets", nil), http.StatusOK)); l2 != list {
		t.Fatalf("budgets after restart %s, before %s", l2, list)
	}
	for i, id := range wids {
		j := budGetJob(t, s, id)
		if b := budCanon(t, j["budgets"]); b != `[{"cost":1,"key":"rs-wif"}]` {
			t.Fatalf("job %d budgets after restart %s", i, b)
		}
		if st := budStr(t, j, "status"); st != "ready" {
			t.Fatalf("job %d status after restart %s", i, st)
		}
	}
	// while_in_flight: recovery returned the two in-flight jobs, nothing held.
	sw = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rs-w", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(sw.Frames(t, 2, budArrive)); !budSameSet(got, wids[:2]) {
		t.Fatalf("after restart got %v want %v", got, wids[:2])
	}
	sw.NoJobFor(t, budQuiet, false, "wif 2 held again")
	// time_based: pool full again, 3 dispatch at once although 3 were spent
	// within the hour before the restart.
	stt = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rs-t", 10), Accept: apitest.AcceptNDJSON})
	got := apitest.FrameIDs(stt.Frames(t, 3, budArrive))
	want := []string{tids[0], tids[1], tids[2]}
	if !budSameSet(got, want) {
		t.Fatalf("after restart got %v want %v", got, want)
	}
	stt.NoJobFor(t, budQuiet, false, "tb drained again")
	// The jobs that were parked before the restart are delivered.
	budAck(t, s, wids[0])
	budAck(t, s, wids[1])
	if got := apitest.FrameIDs(sw.Frames(t, 2, budArrive)); !budSameSet(got, wids[2:]) {
		t.Fatalf("parked jobs after restart: got %v want %v", got, wids[2:])
	}
	// Restart again with everything idle: a while_in_flight budget of 2
	// whose jobs were all in flight starts empty-held.
	sw.Close()
	stt.Close()
	s.Restart()
	sw = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rs-w", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(sw.Frames(t, 2, budArrive)); !budSameSet(got, wids[2:]) {
		t.Fatalf("after 2nd restart got %v want %v", got, wids[2:])
	}
	stt = apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("rs-t", 10), Accept: apitest.AcceptNDJSON})
	if got := apitest.FrameIDs(stt.Frames(t, 3, budArrive)); !budSameSet(got, []string{tids[0], tids[1], tids[2]}) {
		t.Fatalf("after 2nd restart tb got %v", got)
	}
}
