package actors

import (
	"github.com/tollgate/tollgate/protocol"
)

// Messages of the budget actor. The queue actor sends them; the budget
// actor answers reservations with ReserveResponse and wakes parked jobs
// with JobsWoken, both sent back to the queue actor.

type budgetMsg interface{ isBudgetMsg() }

// ReserveRequest asks a budget to hold Job.Cost tokens for a dispatch.
// Commit marks the last of a job's budgets (in key order): nothing can
// refuse the job after it, so a grant debits at once, with no hold and no
// CommitReservation to follow.
type ReserveRequest struct {
	Job    JobRef
	Commit bool
	// entry names the queue actor's entry of the job, handed back in the
	// answer so it need not look the job up; the budget never reads it.
	entry entryRef
}

// CommitReservation turns a granted hold into a debit (the job dispatches).
type CommitReservation struct {
	JobID string
	Cost  uint32 // the binding's cost (a failed budget's report names it, budget_recovery.go)
}

// ReleaseReservation drops a granted hold that will not be committed.
type ReleaseReservation struct{ JobID string }

// ReturnTokens tells a budget that a dispatched job stopped being in flight.
type ReturnTokens struct {
	JobID string
	Cost  uint32
}

// RefundTokens gives back a debit that a final reservation (Commit) made
// for a job that was not dispatched after all (deleted while reserving,
// or its stream closed): the tokens return to the pool, time_based ones
// included.
type RefundTokens struct {
	JobID string
	Cost  uint32
	// Incarnation is the budget's that made the debit
	// (ReserveResponse.Incarnation): a budget made anew under the same key
	// since (after a reset, a delete and create, or a failure) did not, and
	// ignores the refund.
	Incarnation uint64
}

// UnparkJob removes a job from the budget's parked list; Priority is the one
// it parked with, which finds it there.
type UnparkJob struct {
	JobID    string
	Priority uint16
}

// ApplyDefinition replaces the budget's definition.
type ApplyDefinition struct{ Definition protocol.Definition }

// QueuesChanged says the set of consumed queues changed.
type QueuesChanged struct{}

// Reevaluate asks a budget to look at its parked jobs again: a job it woke
// (and counted against its free tokens) will not reserve there after all,
// because it was deleted or parked on another of its budgets first.
type Reevaluate struct{}

// BudgetStateRequest asks for a snapshot of the budget's live state.
type BudgetStateRequest struct{}

// budgetWake is the budget's own wake-timer message.
type budgetWake struct{ gen uint64 }

func (*ReserveRequest) isBudgetMsg()     {}
func (*CommitReservation) isBudgetMsg()  {}
func (*ReleaseReservation) isBudgetMsg() {}
func (*ReturnTokens) isBudgetMsg()       {}
func (*RefundTokens) isBudgetMsg()       {}
func (*UnparkJob) isBudgetMsg()          {}
func (*ApplyDefinition) isBudgetMsg()    {}
func (*QueuesChanged) isBudgetMsg()      {}
func (*Reevaluate) isBudgetMsg()         {}
func (*BudgetStateRequest) isBudgetMsg() {}
func (*budgetWake) isBudgetMsg()         {}

// Messages the queue actor receives from budget actors.

type queueMsg interface{ isQueueMsg() }

// ReserveResponse answers a ReserveRequest.
type ReserveResponse struct {
	Key      string
	JobID    string
	Priority uint16 // the job's, as it reserved (and parked, if refused)
	Granted  bool
	// Committed is set when a final reservation (Commit) was granted: the
	// tokens are debited already, Cost of them.
	Committed bool
	Cost      uint32
	// Incarnation is the answering budget's (see RefundTokens).
	Incarnation uint64
	entry       entryRef // ReserveRequest.entry, handed back
	epoch       uint64   // the engine's the answering budget was made for

	// Pool is the time_based pool as the grant left it (durable pools,
	// budget_pools.go).
	Pool poolNote
}

// JobsWoken hands parked jobs back to the queue: their budget can now
// afford them, in this order.
type JobsWoken struct {
	Key    string
	JobIDs []string
	epoch  uint64 // the engine's the waking budget was made for

	// Debited reports that the budget's wake timer found JobIDs[0], bound
	// to this budget alone, affordable and debited its cost at once
	// (prepaid.go): the queue dispatches it without asking again, or
	// refunds the cost to the budget of this Incarnation.
	Debited     bool
	Cost        uint32
	Incarnation uint64
	// Pool is the pool's note after the debit (durable pools,
	// budget_pools.go), as a grant's answer carries one.
	Pool poolNote
}

func (*ReserveResponse) isQueueMsg() {}
func (*JobsWoken) isQueueMsg()       {}

// BudgetState is a snapshot of a budget's pool.
type BudgetState struct {
	Key        string
	Tokens     float64
	InFlight   uint64
	Held       uint64
	Parked     int
	HeadID     string
	HeadCost   uint32
	WakeAt     uint64
	Dispatches uint64
	Refusals   uint64
	// Settlements counts the settlements that moved the pool (SPEC §10.1).
	Settlements uint64

	// Filled in by observeState (observe.go).
	Definition       protocol.Definition
	At               uint64 // when Tokens was settled (Unix ms)
	HeadQueue        string
	HeadAffordableAt uint64 // time_based: when the head's cost is covered (0: no head, or while_in_flight)
	HeldUntil        uint64 // the end of the hold in force (Unix ms; 0: none), SPEC §10.2
}

// Requests the facade sends to the queue actor. Each is answered (after
// its writes are durable) with the matching response or a *protocol.Error.

// EnqueueJobs adds validated jobs; Bulk prefixes errors with "jobs[i]: ".
type EnqueueJobs struct {
	Jobs []*protocol.NewJob
	Bulk bool
	// Plan is the facade's fold plan (batch_core.go), set when any job is
	// batched and ready; without it such a request is answered foldStale.
	Plan *foldPlan
	// Cron, set for a cron firing planned off the actor (cron_fold.go),
	// is the slot that fires: its entry's new times are written in the
	// enqueue's transaction.
	Cron *CronSlot
}

// EnqueueJobsResponse lists the enqueued jobs in request order.
type EnqueueJobsResponse struct{ Jobs []*protocol.JobView }

// AckJobs reports success for in-flight jobs.
type AckJobs struct {
	IDs []string
	// Settle holds the settle lists by job id (SPEC §10.1, settle.go).
	Settle map[string][]protocol.Settlement
}

// AckJobsResponse lists the IDs that were not in flight.
type AckJobsResponse struct{ NotFound []string }

// FailJob reports a failure of an in-flight job.
type FailJob struct {
	ID  string
	Req *protocol.FailureRequest
	// Settle is the validated settle list (SPEC §10.1, settle.go).
	Settle []protocol.Settlement
}

// JobResponse carries one job view.
type JobResponse struct{ Job *protocol.JobView }

// DeleteJob deletes one job in any status.
type DeleteJob struct{ ID string }

// ResetAll deletes every job and budget.
type ResetAll struct{}

// ListQueues asks for the distinct queue names of stored jobs.
type ListQueues struct{}

// QueuesResponse lists queue names in byte order.
type QueuesResponse struct{ Queues []string }

// OpenStream registers a take stream. Deliver is called (from another
// goroutine, never blocking) with each batch of dispatched jobs once their
// in-flight state is durable; the stream then reports StreamWritten.
type OpenStream struct {
	Queues   []string // empty: all queues
	Prefetch int      // 0: unlimited, one job per batch
	WorkerID string
	// Deliver receives each batch dispatched to the stream, after it was
	// committed; nil means the server ended the stream (the store refused
	// to record a dispatch: its jobs are ready again) and nothing follows.
	Deliver func([]protocol.Job)
}

// OpenStreamResponse names the new stream.
type OpenStreamResponse struct{ StreamID uint64 }

// StreamWritten says the stream wrote its last batch and can take more.
type StreamWritten struct{ StreamID uint64 }

// CloseStream ends a stream; its in-flight jobs return to ready.
type CloseStream struct{ StreamID uint64 }

// CloseStreamResponse answers CloseStream once the stream's jobs are back
// to ready and durably so: Requeued counts them.
type CloseStreamResponse struct{ Requeued int }

// Done answers requests that return nothing but success.
type Done struct{}

// GetBudget asks for one budget.
type GetBudget struct{ Key string }

// ListBudgets asks for every budget, by key.
type ListBudgets struct{}

// BudgetResponse carries one budget; Created is true when it was new.
type BudgetResponse struct {
	Budget  protocol.Budget
	Created bool
}

// BudgetsResponse carries budgets in key order.
type BudgetsResponse struct{ Budgets []protocol.Budget }

// CreateBudget creates a budget (POST) or creates-or-replaces it (PUT).
type CreateBudget struct {
	Key        string
	Definition protocol.Definition
	Replace    bool
}

// PatchBudget merges a patch onto an existing budget.
type PatchBudget struct {
	Key   string
	Patch *protocol.BudgetPatch
}

// DeleteBudget deletes a budget no unfinished job is bound to.
type DeleteBudget struct{ Key string }

// JobsDue is sent by the scheduler: these scheduled jobs reached ready_at.
type JobsDue struct{ IDs []string }

// reapTick is the queue actor's periodic retention reaper.
type reapTick struct{}

func (*EnqueueJobs) isQueueMsg()   {}
func (*AckJobs) isQueueMsg()       {}
func (*FailJob) isQueueMsg()       {}
func (*DeleteJob) isQueueMsg()     {}
func (*ResetAll) isQueueMsg()      {}
func (*ListQueues) isQueueMsg()    {}
func (*OpenStream) isQueueMsg()    {}
func (*StreamWritten) isQueueMsg() {}
func (*CloseStream) isQueueMsg()   {}
func (*GetBudget) isQueueMsg()     {}
func (*ListBudgets) isQueueMsg()   {}
func (*CreateBudget) isQueueMsg()  {}
func (*PatchBudget) isQueueMsg()   {}
func (*DeleteBudget) isQueueMsg()  {}
func (*JobsDue) isQueueMsg()       {}
func (*reapTick) isQueueMsg()      {}

// Messages of the scheduler actor.

type schedulerMsg interface{ isSchedulerMsg() }

// ScheduleJob adds or moves a job in the scheduled set.
type ScheduleJob struct {
	ID      string
	ReadyAt uint64
}

// UnscheduleJob removes a job from the scheduled set.
type UnscheduleJob struct{ ID string }

// ClearSchedule empties the scheduled set.
type ClearSchedule struct{}

type schedulerTick struct{ gen uint64 }

func (*ScheduleJob) isSchedulerMsg()   {}
func (*UnscheduleJob) isSchedulerMsg() {}
func (*ClearSchedule) isSchedulerMsg() {}
func (*schedulerTick) isSchedulerMsg() {}
