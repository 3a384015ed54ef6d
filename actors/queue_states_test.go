package actors

import (
	"fmt"
	"sort"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// queueMetricsByWalk counts every queue's jobs by walking them all, as
// /metrics did before the counts were kept (queue_states.go): the model
// test compares the two at every quiescent check.
func queueMetricsByWalk(e *queueCore, now uint64) map[string]*QueueMetrics {
	per := make(map[string]*QueueMetrics)
	get := func(q string) *QueueMetrics { return metricsOf(per, q) }
	for en := range e.jobs.all() {
		m := get(en.queue())
		switch en.state {
		case stInFlight:
			m.InFlight++
		case stScheduled:
			if en.visibleStatus(now) == protocol.StatusScheduled {
				m.Scheduled++
			} else {
				m.Ready++
			}
		case stParked:
			m.Ready++
			m.Parked++
		default:
			m.Ready++
		}
	}
	for _, t := range e.terminal {
		if t.purgeAt != 0 && t.purgeAt <= now {
			continue // purged, awaiting the reaper: invisible
		}
		if m := get(t.queue); t.dead {
			m.Dead++
		} else {
			m.Completed++
		}
	}
	return per
}

// queueMetricsDiff describes how two sets of per-queue counts differ,
// queues whose counts are all zero counting as absent; "" when they agree.
func queueMetricsDiff(got, want map[string]*QueueMetrics) string {
	var diffs []string
	seen := make(map[string]bool)
	for _, m := range []map[string]*QueueMetrics{got, want} {
		for q := range m {
			if seen[q] {
				continue
			}
			seen[q] = true
			g, w := QueueMetrics{Queue: q}, QueueMetrics{Queue: q}
			if got[q] != nil {
				g = *got[q]
			}
			if want[q] != nil {
				w = *want[q]
			}
			if g != w {
				diffs = append(diffs, fmt.Sprintf("%s: counted %+v, walked %+v", q, g, w))
			}
		}
	}
	sort.Strings(diffs)
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprint(diffs)
}

// TestModelKeepsQueueStates runs the model test, whose every quiescent
// check compares the kept per-queue counts with a walk of the jobs, on
// seeds with budgets, scheduled jobs, patches, retention and restarts.
func TestModelKeepsQueueStates(t *testing.T) {
	ops := 1500
	if testing.Short() {
		ops = 300
	}
	for _, seed := range []uint64{1, 2, 5} {
		if res := runModel(t, seed, ops, nil); res.viol != nil {
			t.Fatalf("seed %d: %v", seed, res.viol)
		}
	}
}

// TestQueueStatesFollowPatches patches jobs between queues and states
// (the model test does not patch jobs): ready to another queue, scheduled
// to another queue and due, ready to scheduled; after each, the kept
// counts are a walk's.
func TestQueueStatesFollowPatches(t *testing.T) {
	e, _ := testEngine(EngineConfig{})
	const now = 1_000_000
	jobs := make([]*protocol.NewJob, 4)
	for i := range jobs {
		jobs[i] = &protocol.NewJob{Job: protocol.Job{Type: "t", Queue: "a"}}
	}
	jobs[2].Job.ReadyAt, jobs[2].ReadyAtSet = now+60_000, true
	jobs[3].Job.ReadyAt, jobs[3].ReadyAtSet = now+60_000, true
	e.enqueue(now, &EnqueueJobs{Jobs: jobs, Bulk: true}, noReply)
	var ids []string
	for en := range e.jobs.all() {
		ids = append(ids, en.id())
	}
	sort.Strings(ids)
	check := func(step string) {
		t.Helper()
		if diff := queueMetricsDiff(e.queueMetrics(now), queueMetricsByWalk(e, now)); diff != "" {
			t.Fatalf("%s: %s", step, diff)
		}
	}
	check("enqueued")
	patch := func(id, body string) {
		t.Helper()
		p, err := protocol.DecodeJobPatch(protocol.JSON, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		e.patchEntry(now, e.jobs.get(id), p)
		check(id + " " + body)
	}
	patch(ids[0], `{"queue":"b"}`)
	patch(ids[2], `{"queue":"b","ready_at":null}`)
	patch(ids[1], fmt.Sprintf(`{"ready_at":%d}`, now+30_000))
	patch(ids[3], `{"queue":"c"}`)
	got := e.queueMetrics(now)
	if got["a"].Scheduled != 1 || got["a"].Ready != 0 || got["b"].Ready != 2 || got["c"].Scheduled != 1 {
		t.Fatalf("counts after the patches: a %+v, b %+v, c %+v", *got["a"], *got["b"], *got["c"])
	}
}
