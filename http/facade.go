package http

import (
	"context"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

// Engine is what the handlers ask of the actors facade, grouped by concern.
// The server runs on *actors.Engine; handler tests run on a fake.
type Engine interface {
	Jobs
	Streams
	Budgets
	Crons
	Observer
}

// Jobs is the facade of job storage: enqueue, read, change, finish.
type Jobs interface {
	Enqueue(ctx context.Context, jobs []*protocol.NewJob, bulk bool) ([]*protocol.JobView, error)
	GetJob(ctx context.Context, id string) (*protocol.JobView, error)
	PatchJob(ctx context.Context, id string, p *protocol.JobPatch) (*protocol.JobView, error)
	DeleteJob(ctx context.Context, id string) error
	ListJobs(ctx context.Context, f *protocol.JobFilter, from string, desc bool, limit int) ([]*protocol.JobView, bool, error)
	CountJobs(ctx context.Context, f *protocol.JobFilter) (uint64, error)
	DeleteJobs(ctx context.Context, f *protocol.JobFilter) (int, error)
	PatchJobs(ctx context.Context, f *protocol.JobFilter, p *protocol.JobPatch) (int, error)
	JobErrors(ctx context.Context, id string, from uint32, hasFrom, desc bool, limit int) ([]protocol.ErrorRecord, bool, error)
	JobError(ctx context.Context, id string, attempt uint32) (*protocol.ErrorRecord, error)
	AckSettling(ctx context.Context, ids []string, settle map[string][]protocol.Settlement) ([]string, error)
	FailSettling(ctx context.Context, id string, req *protocol.FailureRequest, settle []protocol.Settlement) (*protocol.JobView, error)
	RebindJob(ctx context.Context, m *actors.RebindJob) (*protocol.JobView, error)
	RebindJobs(ctx context.Context, f *protocol.JobFilter, op actors.RebindOp, b protocol.NewBinding) (*actors.RebindJobsResponse, error)
	Queues(ctx context.Context) ([]string, error)
	Reset(ctx context.Context) error
}

// Streams is the facade of take streams.
type Streams interface {
	OpenStream(ctx context.Context, m *actors.OpenStream) (uint64, error)
	CloseStream(ctx context.Context, id uint64) (int, error)
	StreamWritten(id uint64)
	LoadPayloads(jobs []protocol.Job) ([]protocol.Job, error)
}

// Budgets is the facade of the budget catalog and the pools' state.
type Budgets interface {
	Budgets(ctx context.Context) ([]protocol.Budget, error)
	GetBudget(ctx context.Context, key string) (*protocol.Budget, error)
	CreateBudget(ctx context.Context, key string, def protocol.Definition, replace bool) (*protocol.Budget, bool, error)
	PatchBudget(ctx context.Context, key string, p *protocol.BudgetPatch) (*protocol.Budget, error)
	DeleteBudget(ctx context.Context, key string) error
	BudgetState(ctx context.Context, key string) (*actors.BudgetState, error)
	BudgetStates(ctx context.Context) ([]actors.BudgetState, error)
	BudgetLine(ctx context.Context, key string, limit int) (*actors.BudgetLine, error)
	BudgetsPage(ctx context.Context, from string, limit int) ([]protocol.Budget, bool, error)
	HoldBudget(ctx context.Context, key string, req protocol.HoldRequest) (*actors.BudgetState, error)
	ReleaseBudget(ctx context.Context, key string) error
}

// Crons is the facade of cron groups and entries.
type Crons interface {
	CronGroups(ctx context.Context) (*actors.CronGroupsResponse, error)
	CronGroup(ctx context.Context, group string) (*protocol.CronGroupView, error)
	PutCronGroup(ctx context.Context, group string, r *protocol.CronGroupRequest) (*protocol.CronGroupView, error)
	PatchCronGroup(ctx context.Context, group string, p *protocol.CronGroupPatch) (*protocol.CronGroupView, error)
	DeleteCronGroup(ctx context.Context, group string) error
	DeleteCronGroups(ctx context.Context) (*actors.DeletedResponse, error)
	CronEntry(ctx context.Context, group, entry string) (*protocol.CronEntry, error)
	PutCronEntry(ctx context.Context, group, name string, r *protocol.CronEntryRequest, create bool) (*protocol.CronEntry, error)
	PatchCronEntry(ctx context.Context, group, entry string, p *protocol.CronEntryPatch) (*protocol.CronEntry, error)
	DeleteCronEntry(ctx context.Context, group, entry string) error
}

// Observer is what /metrics, /stats and /debug/trace read.
type Observer interface {
	Metrics(ctx context.Context) (*actors.Metrics, error)
	MetricsBounded(ctx context.Context, budgetSeries int) (*actors.Metrics, error)
	FoldWorkersBusy() int
	CronStats() *actors.CronStats
	Tracer() *actors.Tracer
}

var _ Engine = (*actors.Engine)(nil)
