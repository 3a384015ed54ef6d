package main

import (
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

func obsFieldSet(m map[string]any) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func obsJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestObserveStateWhileInFlight: with allocation 2 held by two slow jobs
// and two more parked, /budgets/{key}/state, the parked jobs' waiting
// objects and /metrics all describe exactly that, and follow an ack.
func TestObserveStateWhileInFlight(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	tr := obsOpenTrace(t, s, "queue=wq")
	obsBudget(t, s, "team/w", obsWIF(2))
	ids := obsEnqueue(t, s, "wq", "team/w", 4)
	take := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("wq", 10), Accept: apitest.AcceptNDJSON, WorkerID: "worker-w"})
	tr.until("2 dispatched, 2 parked", func() bool {
		return tr.count("commit", "") == 2 && tr.count("dispatched", "") == 2 && tr.count("parked", "") == 2
	})

	st := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/team%2Fw/state", nil), http.StatusOK)
	if got := obsFieldSet(st); got != "allocation,at,capacity,dispatches,head,held,in_flight,key,parked,refusals,strategy,tokens" {
		t.Fatalf("state fields %s: %v", got, st)
	}
	want := map[string]float64{"allocation": 2, "capacity": 2, "tokens": 0, "held": 0, "in_flight": 2, "parked": 2, "dispatches": 2, "refusals": 2}
	for k, v := range want {
		if got := obsNum(t, st, k); got != v {
			t.Fatalf("state %s = %v, want %v: %v", k, got, v, st)
		}
	}
	if st["key"] != "team/w" || obsJSON(t, st["strategy"]) != `{"type":"while_in_flight"}` {
		t.Fatalf("state %v", st)
	}
	if got := obsJSON(t, st["head"]); got != `{"cost":1,"id":"`+ids[2]+`","queue":"wq"}` {
		t.Fatalf("head %s, want job %s with no affordable_at (while_in_flight)", got, ids[2])
	}
	// The budget object keeps its exact shape.
	b := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/team%2Fw", nil), http.StatusOK)
	if got := obsFieldSet(b); got != "allocation,created_at,key,strategy,updated_at" {
		t.Fatalf("budget fields %s", got)
	}

	for k, id := range ids[2:] {
		j := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/jobs/"+id, nil), http.StatusOK)
		if j["status"] != "ready" {
			t.Fatalf("parked job status %v", j["status"])
		}
		if got := obsJSON(t, j["waiting"]); got != `{"budget":"team/w","cost":1,"position":`+string(rune('1'+k))+`}` {
			t.Fatalf("job %d waiting %s", 2+k, got)
		}
	}
	// The same in msgpack: a map with string keys.
	resp := apitest.Request(t, nil, s.URL, "GET", "/jobs/"+ids[3], nil, map[string]string{"Accept": "application/msgpack"})
	var mj map[string]any
	err := msgpack.Unmarshal(resp.Body, &mj)
	if err != nil || resp.Header.Get("Content-Type") != "application/msgpack" {
		t.Fatalf("msgpack GET /jobs/{id}: %v %s", err, resp.Header.Get("Content-Type"))
	}
	if w, _ := mj["waiting"].(map[string]any); w == nil || w["budget"] != "team/w" || obsJSON(t, w["position"]) != "2" {
		t.Fatalf("msgpack waiting %v", mj["waiting"])
	}
	for _, id := range ids[:2] {
		if j := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/jobs/"+id, nil), http.StatusOK); j["waiting"] != nil || j["status"] != "in_flight" {
			t.Fatalf("in-flight job %v: no waiting expected", j)
		}
	}

	fams := obsMetrics(t, s)
	q := map[string]string{"queue": "wq"}
	bk := map[string]string{"budget": "team/w"}
	obsRequireMetric(t, fams, "tollgate_jobs", map[string]string{"queue": "wq", "status": "ready"}, 2)
	obsRequireMetric(t, fams, "tollgate_jobs", map[string]string{"queue": "wq", "status": "in_flight"}, 2)
	obsRequireMetric(t, fams, "tollgate_jobs", map[string]string{"queue": "wq", "status": "completed"}, 0)
	obsRequireMetric(t, fams, "tollgate_jobs_parked", q, 2)
	obsRequireMetric(t, fams, "tollgate_jobs_enqueued_total", q, 4)
	obsRequireMetric(t, fams, "tollgate_jobs_dispatched_total", q, 2)
	obsRequireMetric(t, fams, "tollgate_jobs_acked_total", q, 0)
	obsRequireMetric(t, fams, "tollgate_budget_tokens_available", map[string]string{"budget": "team/w", "type": "while_in_flight"}, 0)
	obsRequireMetric(t, fams, "tollgate_budget_cost_in_flight", bk, 2)
	obsRequireMetric(t, fams, "tollgate_budget_parked_jobs", bk, 2)
	obsRequireMetric(t, fams, "tollgate_budget_dispatches_total", bk, 2)
	obsRequireMetric(t, fams, "tollgate_budget_refusals_total", bk, 2)
	obsRequireMetric(t, fams, "tollgate_take_streams", nil, 1)
	obsRequireMetric(t, fams, "tollgate_trace_subscribers", nil, 1)
	if _, ok := obsValue(fams, "tollgate_budget_wake_timer_seconds", bk); ok {
		t.Fatal("a while_in_flight budget has no wake timer")
	}

	// One slow job finishes: job 2 dispatches, job 3 moves up to first.
	obsAck(t, s, take.NextJob(t, obsWait).ID)
	tr.until("job 2 dispatched", func() bool { return tr.count("dispatched", ids[2]) == 1 })
	j := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/jobs/"+ids[3], nil), http.StatusOK)
	if got := obsJSON(t, j["waiting"]); got != `{"budget":"team/w","cost":1,"position":1}` {
		t.Fatalf("job 3 waiting %s after the ack", got)
	}
	st = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/team%2Fw/state", nil), http.StatusOK)
	if obsNum(t, st, "parked") != 1 || obsJSON(t, st["head"]) != `{"cost":1,"id":"`+ids[3]+`","queue":"wq"}` {
		t.Fatalf("state after the ack: %v", st)
	}
	fams = obsMetrics(t, s)
	obsRequireMetric(t, fams, "tollgate_jobs_acked_total", q, 1)
	obsRequireMetric(t, fams, "tollgate_jobs_dispatched_total", q, 3)
	obsRequireMetric(t, fams, "tollgate_budget_parked_jobs", bk, 1)
}

// TestObserveStateTimeBased: 6 per 60 s (one token every 10 s): after six
// dispatches two jobs park; the state shows the head becoming affordable 10 s
// after the pool started draining, the wake timer armed for that moment, and
// each parked job's waiting object says when it is expected to dispatch.
func TestObserveStateTimeBased(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	tr := obsOpenTrace(t, s, "budget=slow6")
	obsBudget(t, s, "slow6", obsTB(6, 60000))
	ids := obsEnqueue(t, s, "tq", "slow6", 8)
	apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: apitest.TakeQuery("tq", 10), Accept: apitest.AcceptNDJSON, WorkerID: "worker-t"})
	tr.until("6 commits, 2 parked, a timer", func() bool {
		return tr.count("commit", "") == 6 && tr.count("parked", "") == 2 && tr.count("timer_armed", "") > 0
	})
	drainStart := float64(tr.get("commit", ids[0], 0).Time)

	st := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/slow6/state", nil), http.StatusOK)
	at := obsNum(t, st, "at")
	if tok := obsNum(t, st, "tokens"); tok < 0 || tok > (at-drainStart)/10000+0.001 {
		t.Fatalf("tokens %v: want what dripped in since %v (%v ms ago)", tok, drainStart, at-drainStart)
	}
	for k, v := range map[string]float64{"in_flight": 6, "parked": 2, "dispatches": 6, "refusals": 2, "held": 0, "capacity": 6} {
		if got := obsNum(t, st, k); got != v {
			t.Fatalf("state %s = %v, want %v: %v", k, got, v, st)
		}
	}
	head, _ := st["head"].(map[string]any)
	if head == nil || head["id"] != ids[6] || head["queue"] != "tq" {
		t.Fatalf("head %v, want job %s", st["head"], ids[6])
	}
	affordable := obsNum(t, head, "affordable_at")
	if math.Abs(affordable-(drainStart+10000)) > 250 {
		t.Fatalf("head affordable at %v, want %v ± 250 ms (10 s after the pool started draining)", affordable, drainStart+10000)
	}
	// The timer is for the head. It may be a little early, never late: it
	// is armed when the head parks, counting the drip from then, while the
	// pool only starts dripping when the first reservation is committed (a
	// timer that fires early re-arms itself).
	wake := obsNum(t, st, "wake_at")
	if wake > affordable+2 || wake < affordable-250 {
		t.Fatalf("wake timer at %v, head affordable at %v: the timer is for the head", wake, affordable)
	}
	// The event of arming that timer was emitted before the state answer.
	tr.until("the timer_armed event of wake_at", func() bool {
		armed := tr.index("timer_armed", "", tr.count("timer_armed", "")-1)
		return armed >= 0 && float64(tr.seen[armed].DueAt) == wake && tr.seen[armed].JobID == ids[6]
	})

	for k, id := range ids[6:] {
		j := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/jobs/"+id, nil), http.StatusOK)
		w, _ := j["waiting"].(map[string]any)
		if w == nil || w["budget"] != "slow6" || obsNum(t, w, "position") != float64(k+1) || obsNum(t, w, "cost") != 1 {
			t.Fatalf("job %d waiting %v", 6+k, j["waiting"])
		}
		// Each job in line needs one more token: 10 s more.
		if got := obsNum(t, w, "affordable_at"); math.Abs(got-(affordable+float64(10000*k))) > 5 {
			t.Fatalf("job %d affordable at %v, want %v", 6+k, got, affordable+float64(10000*k))
		}
	}

	fams := obsMetrics(t, s)
	bk := map[string]string{"budget": "slow6"}
	obsRequireMetric(t, fams, "tollgate_budget_parked_jobs", bk, 2)
	obsRequireMetric(t, fams, "tollgate_budget_cost_in_flight", bk, 6)
	obsRequireMetric(t, fams, "tollgate_budget_dispatches_total", bk, 6)
	obsRequireMetric(t, fams, "tollgate_budget_refusals_total", bk, 2)
	obsRequireMetric(t, fams, "tollgate_jobs", map[string]string{"queue": "tq", "status": "ready"}, 2)
	obsRequireMetric(t, fams, "tollgate_jobs", map[string]string{"queue": "tq", "status": "in_flight"}, 6)
	obsRequireMetric(t, fams, "tollgate_jobs_parked", map[string]string{"queue": "tq"}, 2)
	if tok, ok := obsValue(fams, "tollgate_budget_tokens_available", map[string]string{"budget": "slow6", "type": "time_based"}); !ok || tok < 0 || tok >= 1 {
		t.Fatalf("tokens available %v (%v): want a fraction of a token", tok, ok)
	}
	if w, ok := obsValue(fams, "tollgate_budget_wake_timer_seconds", bk); !ok || math.Abs(w*1000-wake) > 1 {
		t.Fatalf("wake timer metric %v (%v), want %v s", w, ok, wake/1000)
	}
}
