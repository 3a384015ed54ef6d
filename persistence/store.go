// Package persistence is the only package that knows badger. It stores jobs,
// their error records and budgets, and commits writes from every actor
// through one group committer, so concurrent requests share transactions.
package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/tollgate/tollgate/protocol"
)

// CommitMode says when a write counts as acknowledged.
type CommitMode string

// The commit modes of SPEC §9.
const (
	// Buffered: the write-ahead log is written (survives a process crash);
	// the OS flushes it to disk later.
	Buffered CommitMode = "buffered"
	// Fsync: the batch is synced to disk before anyone is answered
	// (survives power loss).
	Fsync CommitMode = "fsync"
)

// ParseCommitMode returns the mode named s.
func ParseCommitMode(s string) (CommitMode, error) {
	switch m := CommitMode(s); m {
	case Buffered, Fsync:
		return m, nil
	}
	return "", fmt.Errorf("invalid commit mode %q (expected buffered or fsync)", s)
}

// Config configures a Store.
type Config struct {
	// Dir is the badger directory (created if missing).
	Dir string
	// InMemory runs badger without disk (tests and benchmarks).
	InMemory bool
	// Logger receives badger's own log lines at debug level and the
	// store's errors. Default: slog.Default().
	Logger *slog.Logger
	// GroupCacheBytes bounds the decoded job groups kept for payload reads
	// (default 64 MiB; negative: none).
	GroupCacheBytes int
	// MappedTableBytes bounds the resident pages of the tables badger
	// maps: past it they are paged out (mapped.go; default 64 MiB;
	// negative: never).
	MappedTableBytes int
	// MaxGroupBytes bounds one group commit (default 4 MiB).
	MaxGroupBytes int
	// GCInterval is the value-log GC period (default 5 minutes).
	GCInterval time.Duration
	// SlowCommit is the commit duration above which a group commit is
	// logged at warn, with its size (default 1 s; negative: never). A slow
	// disk shows here before clients time out.
	SlowCommit time.Duration
	// Now reads the clock to time commits (default time.Now); tests
	// inject a clock to make a commit look slow.
	Now func() time.Time
}

// Store is tollgate's badger store.
type Store struct {
	db     *badger.DB
	groups *groupCache // decoded job groups, for payload reads
	space  *spaceGuard // nil in memory
	// commits counts group commits, so that reclaim runs only after
	// something was written since it last ran
	commits atomic.Uint64
	// lastCommit is when the last group commit began (Unix ns; 0: none):
	// FlushMemtableIfIdle flushes only an idle store (flush.go)
	lastCommit atomic.Int64
	// flushReq asks the committer to flush badger's memtable (reclaim)
	flushReq chan chan error
	log      *slog.Logger
	cfg      Config
	queue    chan *commit
	wg       sync.WaitGroup
	stop     chan struct{}
	// committed is closed when the committer has returned
	committed chan struct{}
	closed    sync.Once
	// prios are the stored (queue, priority) pairs and priosComplete says
	// they cover every unfinished job (priorities.go); refusals counts the
	// batches refused. Only the committer reads and changes them (after
	// Open), snapshots of the jobs included (NewJobScan).
	prios         map[PriorityPair]struct{}
	priosPeak     int // the most pairs in prios since it was made
	priosComplete bool
	refusals      uint64
}

// commit is a batch to commit, or a request for a snapshot of the jobs
// (scan set, batch nil), which the committer answers once every batch
// submitted before it is committed or refused.
type commit struct {
	batch *Batch
	done  func(error)
	scan  chan<- *jobScan
}

// Open opens (or creates) the store.
func Open(cfg Config) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxGroupBytes <= 0 {
		cfg.MaxGroupBytes = 4 << 20
	}
	switch {
	case cfg.GroupCacheBytes == 0:
		cfg.GroupCacheBytes = groupCacheBytes
	case cfg.GroupCacheBytes < 0:
		cfg.GroupCacheBytes = 0 // nothing is kept
	}
	if cfg.GCInterval <= 0 {
		cfg.GCInterval = 5 * time.Minute
	}
	if cfg.MappedTableBytes == 0 {
		cfg.MappedTableBytes = mappedTableBytes
	}
	if cfg.SlowCommit == 0 {
		cfg.SlowCommit = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	opts := badger.DefaultOptions(cfg.Dir).
		WithLogger(badgerLogger{cfg.Logger}).
		// 64 MiB memtables allow a ~9.6 MiB transaction (badger takes 15%),
		// above the 8 MiB request-body limit; three of them keep the
		// resident set modest.
		WithMemTableSize(64 << 20).
		WithNumMemtables(3).
		// two compactors, not four: each holds table-building buffers of
		// tens of MiB, and this is a 2-core job server, not a database
		WithNumCompactors(2).
		// No compression: job records are short-lived and mostly deleted
		// before compaction sees them, so snappy at every memtable flush
		// bought little disk and cost CPU. Uncompressed blocks are read
		// straight from the mmapped tables, so there is no block cache
		// either (tables an older build compressed are still read).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		// SyncWrites stays false: every write still reaches the mmapped
		// write-ahead log before Commit returns, which survives a process
		// crash; fsync mode adds an explicit db.Sync per group commit.
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		// Every write goes through the one committer goroutine and no
		// transaction reads before it writes (checkVersion runs alone at
		// open), so there is never a conflict to detect: skip the per-key
		// bookkeeping.
		WithDetectConflicts(false).
		// Values stay inline in the LSM tree up to badger's 1 MiB (job
		// groups are at most 512 KiB before compression). The value log
		// was tried for everything from 1 KiB: it saved table-building
		// work, but its files are collected only after compactions report
		// what in them is garbage, and with memtables holding nothing but
		// pointers those come rarely: disk and mapped pages grew by ~11
		// MiB/s under load.
		WithCompactL0OnClose(false)
	var space *spaceGuard
	if cfg.InMemory {
		opts = opts.WithInMemory(true).WithDir("").WithValueDir("")
	} else {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("persistence.Open: %w", err)
		}
		_, total, err := fsSpace(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("persistence.Open: %w", err)
		}
		plan := planSpace(total)
		// on a small disk, smaller memtables (space.go): a transaction
		// then holds at most 15% of one
		opts = opts.WithMemTableSize(plan.memTable).
			WithValueThreshold(min(opts.ValueThreshold, plan.memTable*15/100))
		space = newSpaceGuard(cfg.Dir, plan, cfg.Logger)
		// before badger writes anything: frees the reserve if the disk
		// is full, so the store opens and recovers
		space.check()
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("persistence.Open %s: %w", filepath.Clean(cfg.Dir), err)
	}
	s := &Store{db: db, log: cfg.Logger, cfg: cfg, queue: make(chan *commit, 8192), stop: make(chan struct{}), committed: make(chan struct{}),
		groups: newGroupCache(cfg.GroupCacheBytes), space: space,
		flushReq: make(chan chan error)}
	if err := s.checkVersion(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.loadPriorities(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.commitLoop()
	if !cfg.InMemory {
		s.wg.Add(2)
		go s.gcLoop()
		go s.spaceLoop()
		if s.cfg.MappedTableBytes > 0 {
			s.wg.Add(1)
			go s.mappedLoop()
		}
	}
	return s, nil
}

// spaceCheckInterval is how often free space is measured besides after
// every commit (which notices the store's own growth): it notices space
// that others take or give back.
const spaceCheckInterval = 250 * time.Millisecond

// spaceLoop checks the disk's free space every spaceCheckInterval and, while
// writes are refused for want of it, reclaims space at most every
// reclaimInterval, once more was committed since the last reclaim.
func (s *Store) spaceLoop() {
	var (
		reclaimedAt uint64
		lastReclaim time.Time
	)
	s.every(spaceCheckInterval, func() {
		s.space.check()
		if s.space.admit() != nil && s.commits.Load() != reclaimedAt &&
			time.Since(lastReclaim) >= reclaimInterval {
			reclaimedAt, lastReclaim = s.commits.Load(), time.Now()
			s.reclaim()
			s.space.check()
		}
	})
}

// Admit reports whether a write that adds data (an enqueue, a budget
// write) may go ahead: nil, or the 503 storage-unavailable error to
// answer while the disk is nearly full. Writes that remove or finish data
// are always admitted.
func (s *Store) Admit() error {
	if s.space == nil {
		return nil
	}
	return s.space.admit()
}

// groupCacheBytes bounds the decoded job groups the store keeps for payload
// reads: about 150 groups of 1000 jobs with 200-byte payloads. The take
// streams of many-budgets' drain read from ~80 groups at a time, in ID
// order, over and over; a cache that holds fewer misses on every read.
const groupCacheBytes = 64 << 20

// schemaVersion 2 may keep a payload apart from its job record, under
// p/<id>; version 3 adds job groups (g/, group.go); version 5 the priority
// keys of queues and budgets (q/, priorities.go). An older store holds
// none of these, which version 5 reads the same, so opening one records the
// new version (and drops the queue-only priority keys of version 4, whose
// format differs, to be rebuilt by the first load); an older binary refuses
// a newer store instead of ignoring its groups or writing jobs without
// their priority keys.
const schemaVersion = 5

func (s *Store) checkVersion() error {
	return s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(versionKey)
		if errors.Is(err, badger.ErrKeyNotFound) { // a new store
			if !hasKeys(txn, jobPrefix) && !hasKeys(txn, groupPrefix) {
				// no job, so no pair missing (priorities.go)
				if err := txn.Set(prioritiesCompleteKey, nil); err != nil {
					return err
				}
			}
			return txn.Set(versionKey, []byte{schemaVersion})
		}
		if err != nil {
			return fmt.Errorf("persistence: read schema version: %w", err)
		}
		var version byte
		if err := item.Value(func(v []byte) error {
			if len(v) != 1 || v[0] < 1 || v[0] > schemaVersion {
				return fmt.Errorf("persistence: unsupported schema version %v", v)
			}
			version = v[0]
			return nil
		}); err != nil {
			return err
		}
		if version < schemaVersion {
			if err := dropPriorities(txn); err != nil {
				return err
			}
			return txn.Set(versionKey, []byte{schemaVersion})
		}
		return nil
	})
}

// Close stops the committer after it has committed everything submitted so
// far, then closes badger. It is safe to call more than once.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		close(s.stop)
		s.wg.Wait()
		err = s.db.Close()
	})
	return err
}

// Submit queues a batch for the group committer. done is called once, from
// the committer goroutine, after the batch and every batch submitted before
// it are durable per their commit mode (or with the error that prevented
// it); it must not block. An empty batch without done is dropped.
func (s *Store) Submit(b *Batch, done func(error)) {
	b.Seal()
	if b.Empty() && done == nil {
		return
	}
	// an empty batch with an answer still queues: its answer must come
	// after those of the batches submitted before it (a caller may wait
	// on it for everything it submitted to be committed)
	select {
	case s.queue <- &commit{batch: b, done: done}:
	case <-s.stop:
		if done != nil {
			done(protocol.ErrShuttingDown)
		}
	}
}

// Commit writes a batch and waits for it (for callers outside actors).
func (s *Store) Commit(ctx context.Context, b *Batch) error {
	ch := make(chan error, 1)
	s.Submit(b, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) commitLoop() {
	defer s.wg.Done()
	defer close(s.committed)
	group := make([]*commit, 0, 256)
	for {
		var first *commit
		select {
		case done := <-s.flushReq:
			// no commit runs while badger blocks writes to flush
			done <- s.flushMemtable()
			continue
		case first = <-s.queue:
		case <-s.stop:
			// Drain what was submitted before Close.
			for {
				select {
				case c := <-s.queue:
					if c.alone() {
						s.runAlone(c)
						continue
					}
					s.commitGroup([]*commit{c})
				default:
					return
				}
			}
		}
		if first.alone() {
			s.runAlone(first)
			continue
		}
		group = append(group[:0], first)
		size := first.batch.size
		var alone *commit // a snapshot request or a prune that ended the group
	fill:
		for size < s.cfg.MaxGroupBytes && len(group) < 4096 {
			select {
			case c := <-s.queue:
				if c.alone() {
					alone = c
					break fill
				}
				group = append(group, c)
				size += c.batch.size
			default:
				break fill
			}
		}
		s.lastCommit.Store(s.cfg.Now().UnixNano())
		s.commitGroup(group)
		s.commits.Add(1)
		if s.space != nil {
			s.space.check()
		}
		if alone != nil {
			s.runAlone(alone)
		}
	}
}

// alone reports whether c runs apart from any group: a snapshot request,
// or a prune of the stored pairs.
func (c *commit) alone() bool { return c.scan != nil || c.batch.pruning }

// runAlone answers a snapshot request, or runs a prune (priorities.go),
// once everything before it is committed.
func (s *Store) runAlone(c *commit) {
	if c.scan != nil {
		c.scan <- s.snapshotJobs()
		return
	}
	err := s.applyPrune(c.batch)
	if c.done != nil {
		c.done(err)
	}
}

// commitGroup commits the batches of a group in one transaction. If the
// group is too big for one transaction, each batch commits on its own. A
// batch that could not be built (an encoding error) fails alone.
func (s *Store) commitGroup(group []*commit) {
	if slices.ContainsFunc(group, func(c *commit) bool { return c.batch.err != nil }) {
		ok := make([]*commit, 0, len(group))
		for _, c := range group {
			if c.batch.err == nil {
				ok = append(ok, c)
				continue
			}
			s.log.Error("commit refused", "err", c.batch.err)
			s.refusals++
			if c.done != nil {
				c.done(fmt.Errorf("persistence: commit: %w", c.batch.err))
			}
		}
		if group = ok; len(group) == 0 {
			return
		}
	}
	start := s.cfg.Now()
	err := s.apply(group)
	s.noteSlowCommit(start, group, err)
	if errors.Is(err, badger.ErrTxnTooBig) && len(group) > 1 {
		for _, c := range group {
			s.commitGroup([]*commit{c})
		}
		return
	}
	if err != nil {
		// badger quotes whole values in some errors: keep logs readable.
		msg := err.Error()
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		s.log.Error("commit failed", "err", msg, "batches", len(group))
		// the store could not write (no space, no descriptors, a
		// transaction it cannot take): a 503 for the client, never a
		// crash; what was not committed was not acknowledged
		err = fmt.Errorf("persistence: commit: %w", protocol.Errorf(protocol.CodeUnavailable, "storage unavailable: %s", msg))
		s.refusals += uint64(len(group))
	}
	if err == nil {
		for _, c := range group {
			for _, g := range c.batch.killed {
				s.groups.forget(g.first)
			}
		}
	}
	for _, c := range group {
		if c.done != nil {
			c.done(err)
		}
	}
}

// noteSlowCommit logs a group commit that took longer than SlowCommit.
func (s *Store) noteSlowCommit(start time.Time, group []*commit, err error) {
	took := s.cfg.Now().Sub(start)
	if s.cfg.SlowCommit < 0 || took <= s.cfg.SlowCommit || err != nil {
		return
	}
	size := 0
	sync := false
	for _, c := range group {
		size += c.batch.size
		sync = sync || c.batch.sync
	}
	s.log.Warn("slow commit: the disk took longer than expected to store acknowledged writes",
		"took_ms", took.Milliseconds(), "threshold_ms", s.cfg.SlowCommit.Milliseconds(),
		"writes", len(group), "bytes", size, "fsync", sync)
}

func (s *Store) apply(group []*commit) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	sync := false
	for _, c := range group {
		sync = sync || c.batch.sync
		for _, op := range c.batch.ops {
			if err := op.apply(txn); err != nil {
				return err
			}
		}
	}
	writes, err := s.priorityWrites(txn, group)
	if err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	s.pairsCommitted(writes)
	if sync && !s.cfg.InMemory {
		return s.db.Sync()
	}
	return nil
}

// gcLoop collects the value log every GCInterval until the store stops.
func (s *Store) gcLoop() {
	s.every(s.cfg.GCInterval, func() {
		for s.db.RunValueLogGC(0.5) == nil {
		}
	})
}

// every runs fn every interval until the store stops; it is the body of
// one of the store's goroutines (s.wg).
func (s *Store) every(interval time.Duration, fn func()) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// GetJob reads one job with its payload, from its own record or its group;
// it returns protocol.ErrJobNotFound when absent.
func (s *Store) GetJob(id string) (*protocol.Job, error) {
	var job *protocol.Job
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(jobKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			job, err = s.getMember(txn, id)
			return err
		}
		if err != nil {
			return err
		}
		job = new(protocol.Job)
		if err := item.Value(func(v []byte) error { return protocol.UnmarshalRecord(v, job) }); err != nil {
			return err
		}
		if job.Payload != nil {
			return nil
		}
		return s.readPayload(txn, job)
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, protocol.ErrJobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("persistence.GetJob %s: %w", id, err)
	}
	return job, nil
}

// readPayload fills in the payload of a job whose record holds none: from
// its own key, or else from the group it belongs to.
func (s *Store) readPayload(txn *badger.Txn, job *protocol.Job) error {
	item, err := txn.Get(payloadKey(job.ID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		// a member's own record: the payload is in its group (whose
		// absence is damage, not a missing job)
		return s.readMemberPayload(txn, job)
	}
	if err != nil {
		return fmt.Errorf("payload of %s: %w", job.ID, err)
	}
	return item.Value(func(v []byte) error { return setPayload(job, v) })
}

// setPayload copies a stored payload value into job.
func setPayload(job *protocol.Job, v []byte) error {
	if len(v) == 0 || v[0] != protocol.RecordVersion {
		return fmt.Errorf("payload of %s: unknown record version", job.ID)
	}
	job.Payload = append(make([]byte, 0, len(v)-1), v[1:]...)
	return nil
}

// LoadPayloads fills in the payload of every job in jobs that has none, in
// one read transaction. It returns the jobs whose payload was found (a job
// deleted since is left out), in their order.
//
// A delivered batch is mostly consecutive job IDs, so the payloads are
// read in ID order with one iterator: each key is usually the iterator's
// next one, which is much cheaper than a point lookup per job.
func (s *Store) LoadPayloads(jobs []protocol.Job) ([]protocol.Job, error) {
	need := make([]int, 0, len(jobs))
	var inGroups []int
	for i := range jobs {
		switch {
		case jobs[i].Payload != nil:
		case jobs[i].InGroup:
			inGroups = append(inGroups, i)
		default:
			need = append(need, i)
		}
	}
	if len(need) == 0 && len(inGroups) == 0 {
		return jobs, nil
	}
	slices.SortFunc(need, func(a, b int) int { return strings.Compare(jobs[a].ID, jobs[b].ID) })
	found := make([]bool, len(jobs))
	err := s.db.View(func(txn *badger.Txn) error {
		// a batch's members mostly share a few groups: one read of each
		slices.SortFunc(inGroups, func(a, b int) int { return strings.Compare(jobs[a].ID, jobs[b].ID) })
		if err := s.loadMemberPayloads(txn, jobs, inGroups, found); err != nil {
			return err
		}
		if len(need) == 0 {
			return nil
		}
		opts := badger.DefaultIteratorOptions
		opts.Prefix = payloadPrefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		positioned := false
		for _, i := range need {
			key := payloadKey(jobs[i].ID)
			if !positioned || !it.Valid() || bytes.Compare(it.Item().Key(), key) > 0 {
				it.Seek(key)
				positioned = true
			} else {
				// a few steps forward, then give up and seek
				for steps := 0; it.Valid() && bytes.Compare(it.Item().Key(), key) < 0; steps++ {
					if steps == 8 {
						it.Seek(key)
						break
					}
					it.Next()
				}
			}
			if !it.Valid() || !bytes.Equal(it.Item().Key(), key) {
				continue // deleted since it was dispatched
			}
			if err := it.Item().Value(func(v []byte) error { return setPayload(&jobs[i], v) }); err != nil {
				return err
			}
			found[i] = true
			it.Next()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persistence.LoadPayloads: %w", err)
	}
	out := jobs[:0]
	for i := range jobs {
		if jobs[i].Payload != nil || found[i] {
			out = append(out, jobs[i])
		}
	}
	return out, nil
}

// LoadBudgets returns every stored budget in key order.
func (s *Store) LoadBudgets() ([]*protocol.Budget, error) {
	var out []*protocol.Budget
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = budgetPrefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			b := new(protocol.Budget)
			if err := it.Item().Value(func(v []byte) error { return protocol.UnmarshalRecord(v, b) }); err != nil {
				return fmt.Errorf("persistence.LoadBudgets %s: %w", it.Item().Key(), err)
			}
			out = append(out, b)
		}
		return nil
	})
	return out, err
}

// ListErrors returns a job's error records in attempt order.
func (s *Store) ListErrors(id string) ([]protocol.ErrorRecord, error) {
	var out []protocol.ErrorRecord
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = errorKeyPrefix(id)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var rec protocol.ErrorRecord
			if err := it.Item().Value(func(v []byte) error { return protocol.UnmarshalRecord(v, &rec) }); err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Infof(f string, a ...any) {
	b.l.Debug(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Debugf(f string, a ...any) {
	b.l.Debug(fmt.Sprintf(f, a...), "component", "badger")
}
