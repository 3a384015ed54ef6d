package actors

import (
	"os"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// Directed scenarios found by the randomized model test, replayed through
// the same simulation and checks. Picks index the model's lists in creation
// order: unfinished jobs for delete, delivered in-flight jobs for ack.

func scnWIF(a uint32) protocol.Definition {
	return protocol.Definition{Allocation: a, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}
}

func scnJob(q string, prio uint16, binds ...bindSpec) jobSpec {
	return jobSpec{Queue: q, Prio: prio, RetryLimit: -1, Bindings: binds}
}

func runModelScenario(t *testing.T, ops []simOp, live bool) *modelViolation {
	t.Helper()
	s := newSim(t, 1, t.TempDir())
	defer s.close()
	if os.Getenv("MODEL_TRACE") != "" {
		s.trace = func(l string) { t.Log(l) }
	}
	for _, op := range ops {
		if s.viol != nil {
			break
		}
		s.exec(op)
	}
	if s.viol == nil && live {
		s.liveness(1000)
	}
	return s.viol
}

// A job deleted after its reservation completed but before its stream's
// writer took it (it waits in stream.outbox while the writer is busy) is
// still delivered, and flush writes its in_flight record back after the
// delete: after a restart the deleted job is ready again.
func TestModelScenarioDeleteUnwrittenJob(t *testing.T) {
	base := []simOp{
		{Kind: opCreateBudget, Key: "b0", Def: scnWIF(2), Drain: -1},
		{Kind: opOpen, Prefetch: 2, Slow: true, Drain: -1},
		// both reserve at once; A is written (writer now busy), B waits in the outbox
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 1, bindSpec{Key: "b0", Cost: 1}), scnJob("q0", 2, bindSpec{Key: "b0", Cost: 1})}, Drain: -1},
		{Kind: opDelete, Picks: []int{1}, Drain: -1}, // delete B
	}
	t.Run("delivered after delete", func(t *testing.T) {
		ops := append(append([]simOp(nil), base...), simOp{Kind: opAdvance, Dt: 1, Drain: -1}) // the writer finishes
		if v := runModelScenario(t, ops, false); v != nil {
			t.Errorf("%v", v)
		}
	})
	t.Run("resurrected by restart", func(t *testing.T) {
		ops := append(append([]simOp(nil), base...),
			simOp{Kind: opAdvance, Dt: 1, Drain: -1},
			simOp{Kind: opRestart, Drain: -1})
		s := newSim(t, 1, t.TempDir())
		defer s.close()
		s.ignore["deliver-finished"] = true
		for _, op := range ops {
			s.exec(op)
		}
		if s.viol != nil {
			t.Errorf("%v", s.viol)
		}
	})
}

// A job deleted while its reservation on a budget is in flight is refused
// there and parked; the budget must not keep it (a ghost at the head of
// the line holds back every later job on that budget).
func TestModelScenarioDeleteWhileReserving(t *testing.T) {
	ops := []simOp{
		{Kind: opCreateBudget, Key: "b0", Def: scnWIF(3), Drain: -1},
		{Kind: opOpen, Prefetch: 5, Drain: -1},
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 1, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // A runs: 2 left
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 2, bindSpec{Key: "b0", Cost: 3})}, Drain: 0},  // G asks b0 ...
		{Kind: opDelete, Picks: []int{1}, Drain: -1},                                                 // ... and is deleted: b0 refuses and parks it
		{Kind: opPatchBudget, Key: "b0", Patch: patchSpec{Alloc: 2}, Drain: -1},                      // allowed: G is no longer bound
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 3, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // J parks behind G
		{Kind: opAck, Picks: []int{0}, Drain: -1},                                                    // A done: J must run
	}
	if v := runModelScenario(t, ops, true); v != nil {
		t.Errorf("%v", v)
	}
}

// A job bound to two budgets is woken by one (which counts its cost against
// its free tokens) and then refused by the other, where it parks. The first
// budget does not look again, so a later job parked on it stays parked
// while its tokens are free and a worker is idle; if the two-budget job is
// then deleted, nothing ever wakes the later job.
func TestModelScenarioMultiBudgetWokenThenRefused(t *testing.T) {
	ops := []simOp{
		{Kind: opCreateBudget, Key: "b4", Def: scnWIF(1), Drain: -1},
		{Kind: opCreateBudget, Key: "b5", Def: scnWIF(1), Drain: -1},
		{Kind: opOpen, Prefetch: 10, Drain: -1},
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 0, bindSpec{Key: "b5", Cost: 1})}, Drain: -1},                               // X runs on b5
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 1, bindSpec{Key: "b4", Cost: 1}, bindSpec{Key: "b5", Cost: 1})}, Drain: -1}, // A parks on b5
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 2, bindSpec{Key: "b5", Cost: 1})}, Drain: -1},                               // B parks on b5 behind A
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 3, bindSpec{Key: "b4", Cost: 1})}, Drain: -1},                               // Y runs on b4
		{Kind: opAck, Picks: []int{0}, Drain: -1},                                                                                  // X done: b5 wakes A only; b4 refuses A
	}
	t.Run("stall", func(t *testing.T) {
		if v := runModelScenario(t, ops, false); v != nil {
			t.Errorf("%v", v)
		}
	})
	t.Run("lost wake after delete", func(t *testing.T) {
		ops := append(append([]simOp(nil), ops...),
			simOp{Kind: opDelete, Picks: []int{0}, Drain: -1}, // delete A (unfinished: A, B, Y)
		)
		s := newSim(t, 1, t.TempDir())
		defer s.close()
		s.ignore["stall-multi"] = true
		s.ignore["stall"] = true
		for _, op := range ops {
			s.exec(op)
		}
		s.liveness(1000) // B must still run eventually
		if s.viol != nil {
			t.Errorf("%v", s.viol)
		}
	})
}

// A budget wakes a parked job and counts its cost against its free tokens;
// the woken job waits in the ready index (its stream is full) and is
// deleted there. Deleting a ready job tells no budget, so the next parked
// job, whose own stream is idle, is never woken although the budget is
// back to full.
func TestModelScenarioWokenJobDeleted(t *testing.T) {
	ops := []simOp{
		{Kind: opCreateBudget, Key: "b0", Def: scnWIF(1), Drain: -1},
		{Kind: opOpen, Queues: []string{"q0"}, Prefetch: 1, Drain: -1},
		{Kind: opOpen, Queues: []string{"q1"}, Prefetch: 2, Drain: -1},
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q1", 0, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // X runs (q1 stream)
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 1, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // A parks on b0
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 5)}, Drain: -1},                               // U fills the q0 stream
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q1", 2, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // B parks behind A
		{Kind: opAck, Picks: []int{0}, Drain: -1},                                                    // X done: b0 wakes A only; A waits for a q0 slot
		{Kind: opDelete, Picks: []int{0}, Drain: -1},                                                 // delete A (unfinished: A, U, B)
	}
	s := newSim(t, 1, t.TempDir())
	defer s.close()
	for _, op := range ops {
		s.exec(op)
	}
	if s.viol != nil {
		t.Errorf("%v", s.viol)
	}
}

// A parked job is deleted while its budget is waking it: the budget's wake
// (here a token return) is processed first and counts the job against its
// free tokens, then UnparkJob finds nothing parked and does not look
// again, and the queue drops the JobsWoken of a job it no longer has. The
// next parked job is never woken although the budget is full.
func TestModelScenarioWokenWhileDeleted(t *testing.T) {
	ops := []simOp{
		{Kind: opCreateBudget, Key: "b0", Def: scnWIF(1), Drain: -1},
		{Kind: opOpen, Prefetch: 5, Drain: -1},
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 0, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // X runs
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 1, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // A parks
		{Kind: opEnqueue, Jobs: []jobSpec{scnJob("q0", 2, bindSpec{Key: "b0", Cost: 1})}, Drain: -1}, // B parks behind A
		{Kind: opAck, Picks: []int{0}, Drain: 0},                                                     // X done: ReturnTokens pending
		{Kind: opDelete, Picks: []int{0}, Drain: -1},                                                 // delete A (still parked for the queue)
	}
	s := newSim(t, 1, t.TempDir())
	defer s.close()
	if os.Getenv("MODEL_TRACE") != "" {
		s.trace = func(l string) { t.Log(l) }
	}
	for _, op := range ops {
		s.exec(op)
	}
	if s.viol != nil {
		t.Errorf("%v", s.viol)
	}
}
