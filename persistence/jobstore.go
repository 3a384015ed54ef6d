package persistence

import (
	"context"

	"github.com/tollgate/tollgate/protocol"
)

// JobStore is what the engine needs of a store, in its own terms: commit a
// batch of job and budget writes (the job verbs of jobrefs.go: enqueued,
// dispatched, updated, removed), rebuild memory at start, and read what
// memory does not keep (payloads for delivery, whole jobs, error records). *Store is the
// badger implementation; persistence/storetest wraps any JobStore to refuse
// commits on demand.
//
// A commit is all or nothing: when done reports an error, none of the
// batch's writes are stored.
type JobStore interface {
	// Submit queues b for commit; done is called once, from the store's
	// goroutine and without blocking, when b is durable per its commit
	// mode or with the error that refused it. An implementation seals b
	// (Batch.Seal) before it commits or refuses it.
	Submit(b *Batch, done func(error))
	// Commit submits b and waits for the outcome (for callers outside
	// actors).
	Commit(ctx context.Context, b *Batch) error
	// LoadBudgets returns every stored budget in key order.
	LoadBudgets() ([]*protocol.Budget, error)
	// LoadBudgetExtras returns the stored budget holds and on-the-fly
	// marks (holds.go).
	LoadBudgetExtras() (*BudgetExtras, error)
	// LoadPools returns every stored time_based pool level by budget key
	// (SPEC §10.4; written only with --budget-pools durable).
	LoadPools() (map[string]PoolLevel, error)
	// LoadCronGroups returns every stored cron group in name order, each
	// with its entries.
	LoadCronGroups() ([]StoredCronGroup, error)
	// LoadBatchLinks returns every batch key's link to its pending job.
	LoadBatchLinks() (map[string]string, error)
	// ScanJobs calls fn with every stored job, in ID order, and where it
	// is stored (the Ref every later verb about the job takes).
	ScanJobs(fn func(*protocol.Job, Ref) error) error
	// NewJobScan takes a snapshot of the stored jobs, with the (queue,
	// priority) pairs stored with them, once every batch submitted before
	// is committed or refused: a scan that sees all of those and nothing
	// written after it (the background load, which serves meanwhile).
	NewJobScan() JobScan
	// GetJob reads one job with its payload (protocol.ErrJobNotFound when
	// absent).
	GetJob(id string) (*protocol.Job, error)
	// LoadPayloads fills in the payloads jobs lack; jobs deleted since are
	// left out.
	LoadPayloads(jobs []protocol.Job) ([]protocol.Job, error)
	// ListErrorsPage reads a page of a job's error records.
	ListErrorsPage(id string, from uint32, hasFrom, desc bool, limit int) ([]protocol.ErrorRecord, error)
	// GetError reads one error record of a job.
	GetError(id string, attempt uint32) (*protocol.ErrorRecord, bool, error)
	// Admit reports whether a write that adds data may go ahead: nil, or
	// the storage-unavailable error to answer while the disk is nearly
	// full. Writes that remove or finish data are always admitted.
	Admit() error
}

var _ JobStore = (*Store)(nil)
