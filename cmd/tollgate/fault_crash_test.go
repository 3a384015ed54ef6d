package main

// The kill -9 fault suite (issue 12): the real binary is stopped with
// SIGKILL (and once with SIGTERM) while producers enqueue and workers take
// and ack, in both commit modes, and everything is checked from the client
// side, as an outsider would:
//
//   - no acknowledged enqueue (a 201) is lost: after the last restart every
//     one of them is delivered and acked;
//   - no job acked with 204 (or left out of a 422's not_found) is delivered
//     again, in the same server lifetime or a later one;
//   - a while_in_flight budget's bound holds in every lifetime (a restart
//     returns in-flight jobs to ready, so holdings start empty, SPEC §4.9);
//   - a time_based budget dispatches no more in one lifetime than its full
//     pool plus what drips in during that lifetime (a restart refills it).
//
// It is bounded in restarts, time and jobs, so it runs in well under two
// minutes with -race on a busy machine. The figures of each run are logged
// (go test -v -run TestFaultKillLoop ./cmd/tollgate/); docs/RELIABILITY.md
// quotes one campaign.

import (
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// The budgets the suite's jobs bind to.
const (
	faultWIFKey     = "fault-wif" // while_in_flight
	faultWIFAlloc   = 2
	faultTBKey      = "fault-tb" // time_based
	faultTBAlloc    = 5
	faultTBDuration = 500 * time.Millisecond
)

// faultStop is how one server lifetime ends.
type faultStop struct {
	name   string
	signal syscall.Signal
}

// faultPlan is the lifetimes of one mode's campaign: each runs under load
// for faultLifetime, then stops as given; a last lifetime drains.
var faultPlan = []faultStop{
	{"kill -9", syscall.SIGKILL},
	{"kill -9", syscall.SIGKILL},
	{"SIGTERM", syscall.SIGTERM},
	{"kill -9", syscall.SIGKILL},
}

const (
	faultLifetime  = 1500 * time.Millisecond
	faultProducers = 2
	faultWorkers   = 3
	faultPrefetch  = 4
	faultDrainFor  = 60 * time.Second
)

func TestFaultKillLoop(t *testing.T) {
	for _, mode := range []string{"buffered", "fsync"} {
		t.Run(mode, func(t *testing.T) { runFaultCampaign(t, mode) })
	}
}

func runFaultCampaign(t *testing.T, mode string) {
	led := newFaultLedger()
	s := servertest.Start(t, "--default-commit-mode", mode, "--heartbeat-interval", "200ms")
	faultCreateBudgets(t, s.URL)
	// A lifetime's span starts once the server serves: its pools are full
	// then and no stream can exist before, so no dispatch is missed.
	life := led.beginLifetime(s.URL, time.Now())

	for i, stop := range faultPlan {
		load := startFaultLoad(led, life)
		faultWaitLoad(t, led, life, faultLifetime)
		// stop while producers and workers are busy
		switch stop.signal {
		case syscall.SIGKILL:
			s.Kill()
		default:
			s.Stop()
		}
		led.endLifetime(life, time.Now())
		load.stop()
		t.Logf("%s: lifetime %d ended by %s", mode, i+1, stop.name)
		s.Restart()
		life = led.beginLifetime(s.URL, time.Now())
	}

	// Last lifetime: no producers, workers drain until nothing is left.
	load := startFaultWorkers(led, life)
	drained := faultDrain(t, led, life, faultDrainFor)
	load.stop()
	led.endLifetime(life, time.Now())

	sum := led.summary()
	t.Logf("%s campaign: %d stops (%d kill -9, %d SIGTERM), %d enqueues acknowledged, %d acked (%d more with the answer cut off), %d deliveries, "+
		"%d lost, %d delivered after an ack, max while_in_flight held %d (allocation %d), max time_based dispatches per lifetime %d (bound %d..%d)",
		mode, len(faultPlan), faultCount(syscall.SIGKILL), faultCount(syscall.SIGTERM), sum.acknowledged, sum.acked, sum.ackUnknown, sum.deliveries,
		sum.lost, sum.redeliveredAfterAck, sum.maxWIFHeld, faultWIFAlloc, sum.maxTBDispatched, sum.minTBBound, sum.maxTBBound)
	if !drained {
		t.Errorf("drain did not finish within %s: %d acknowledged enqueues never acked (lost?)", faultDrainFor, sum.lost)
	}
	for _, v := range sum.violations {
		t.Error(v)
	}
	if sum.lost > 0 {
		t.Errorf("%d acknowledged enqueues were lost, e.g. %v", sum.lost, sum.lostSample)
	}
	if sum.acknowledged < 100 || sum.acked < 100 {
		t.Errorf("only %d enqueues acknowledged and %d acked: the load did not run", sum.acknowledged, sum.acked)
	}
	if sum.wifDeliveries == 0 || sum.tbDeliveries == 0 {
		t.Errorf("budgeted jobs delivered: while_in_flight %d, time_based %d; want both > 0", sum.wifDeliveries, sum.tbDeliveries)
	}
}

func faultCount(sig syscall.Signal) int {
	n := 0
	for _, s := range faultPlan {
		if s.signal == sig {
			n++
		}
	}
	return n
}

// faultWaitLoad lets the load run for d, and at least until this lifetime
// has acknowledged enqueues and acks (so each stop interrupts real work).
func faultWaitLoad(t *testing.T, led *faultLedger, life *faultLifetimeState, d time.Duration) {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(30 * time.Second)
	for {
		enq, acks := led.lifetimeActivity(life)
		if time.Since(begin) >= d && enq > 0 && acks > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lifetime %d: %d enqueues and %d acks in 30 s", life.n, enq, acks)
		}
		time.Sleep(20 * time.Millisecond) // polling the ledger, not waiting for the server
	}
}

// faultDrain waits until every acknowledged enqueue was acked and the
// server counts no job left.
func faultDrain(t *testing.T, led *faultLedger, life *faultLifetimeState, d time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if led.summary().lost == 0 {
			if n, err := faultCountJobs(life.url); err == nil && n == 0 {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func faultCreateBudgets(t *testing.T, base string) {
	t.Helper()
	for key, def := range map[string]any{
		faultWIFKey: map[string]any{"allocation": faultWIFAlloc, "strategy": map[string]any{"type": "while_in_flight"}},
		faultTBKey:  map[string]any{"allocation": faultTBAlloc, "strategy": map[string]any{"type": "time_based", "duration_ms": faultTBDuration.Milliseconds()}},
	} {
		if status, body, err := faultDo(base, "POST", "/budgets/"+key, def); err != nil || status != 201 {
			t.Fatalf("create budget %s: %d %s %v", key, status, body, err)
		}
	}
}
