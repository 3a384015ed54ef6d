package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// Queue and budget priorities.
//
// The store keeps jobs in ID order, so the first job of a queue in
// (priority, id) order is known only once every stored job has been read,
// and so is the first job bound to a budget. To let a queue dispatch while
// the rest of a backlog loads (SPEC §3.9), the store also keeps one empty
// key per (queue, priority) pair an unfinished stored job may carry, and
// per (budget, priority) pair of its bindings: q/q<queue><priority u16> and
// q/b<budget key><priority u16>. A key is written in the transaction that
// first stores a job with its pair, a deleted budget's keys go with it
// (no unfinished job is bound to it then), and the keys are pruned to the
// pairs of the unfinished jobs at the end of every full load
// (Batch.PrioritiesInUse).
// So every unfinished stored job has its pairs' keys, and the lowest
// priority on disk of a queue, or of the jobs bound to a budget, is known
// without reading the jobs (JobScan.Priorities): a loaded job of that
// priority whose ID the scan has passed comes before every job of the
// queue (or bound to the budget) not yet read.
//
// m/priorities says the keys are complete: a new store has it from the
// start. A store an older build wrote has no keys; its first full load
// writes them and the flag, and until then no queue dispatches before the
// load ends. An older build would write jobs without their keys, so schema
// version 4 keeps it from opening the store.

// PriorityPair is a (queue, priority) or (budget, priority) pair of
// unfinished stored jobs: their queue, or a budget they are bound to.
type PriorityPair struct {
	Name     string // the queue or the budget key
	Priority uint16
	Budget   bool // Name is a budget key, else a queue
}

// QueuePair is the pair of a job of queue at priority.
func QueuePair(queue string, priority uint16) PriorityPair {
	return PriorityPair{Name: queue, Priority: priority}
}

// BudgetPair is the pair of a job bound to budget key at priority.
func BudgetPair(key string, priority uint16) PriorityPair {
	return PriorityPair{Budget: true, Name: key, Priority: priority}
}

var prioritiesCompleteKey = []byte("m/priorities")

// The kind byte after q/.
const (
	pairOfQueue  byte = 'q'
	pairOfBudget byte = 'b'
)

// priorityKey is q/<kind><name><priority u16>: the priority is always the
// last two bytes, so no separator is needed.
func priorityKey(p PriorityPair) []byte {
	kind := pairOfQueue
	if p.Budget {
		kind = pairOfBudget
	}
	k := make([]byte, 0, len(priorityPrefix)+1+len(p.Name)+2)
	k = append(append(append(k, priorityPrefix...), kind), p.Name...)
	return binary.BigEndian.AppendUint16(k, p.Priority)
}

// budgetPairsPrefix is what the keys of budget key's pairs start with:
// q/b<key>, the priority after it.
func budgetPairsPrefix(key string) []byte {
	k := priorityKey(BudgetPair(key, 0))
	return k[:len(k)-2]
}

func parsePriorityKey(k []byte) (PriorityPair, bool) {
	if len(k) < len(priorityPrefix)+3 {
		return PriorityPair{}, false
	}
	rest := k[len(priorityPrefix):]
	kind, rest := rest[0], rest[1:]
	if kind != pairOfQueue && kind != pairOfBudget {
		return PriorityPair{}, false
	}
	n := len(rest) - 2
	return PriorityPair{Budget: kind == pairOfBudget, Name: string(rest[:n]), Priority: binary.BigEndian.Uint16(rest[n:])}, true
}

// notePriority records the pairs of a job the batch stores, its queue's and
// its budgets', unless the job is finished (a finished job is never
// dispatched again). Jobs of one batch mostly share their pairs, so a
// repeat of the last pair, or of the last job's bindings, is not recorded.
func (b *Batch) notePriority(j *protocol.Job) {
	if j.Status.Terminal() {
		return
	}
	b.notePair(QueuePair(j.Queue, j.Priority))
	if len(j.Budgets) == 0 || b.sameBindings(j.Priority, j.Budgets) {
		return
	}
	for _, bi := range j.Budgets {
		b.notePair(BudgetPair(bi.Key, j.Priority))
	}
	b.lastPrio, b.lastBindings = j.Priority, j.Budgets
}

func (b *Batch) notePair(p PriorityPair) {
	if n := len(b.prios); n > 0 && b.prios[n-1] == p {
		return
	}
	b.prios = append(b.prios, p)
}

// sameBindings reports whether a job at priority with bindings has the
// pairs the batch noted last (the jobs of a bulk mostly do).
func (b *Batch) sameBindings(priority uint16, bindings []protocol.Binding) bool {
	if b.lastPrio != priority || len(b.lastBindings) != len(bindings) {
		return false
	}
	for i := range bindings {
		if b.lastBindings[i].Key != bindings[i].Key {
			return false
		}
	}
	return true
}

// PrioritiesInUse makes the batch a prune: inUse holds the pairs of every
// unfinished job memory knows at the end of the full load of scan,
// counting every job of a batch submitted before this one. The store then
// drops the keys of other pairs, writes those missing, and marks the keys
// complete (applyPrune); unless it refused a commit since scan's snapshot
// (a refused removal puts its job back in memory after inUse was taken):
// then the keys stay as they are, a superset. A prune batch holds nothing
// else. The set is the caller's no longer: the store keeps it.
func (b *Batch) PrioritiesInUse(inUse map[PriorityPair]struct{}, scan JobScan) {
	b.inUse = inUse
	b.pruning = true
	b.pruneAfter = scan.refusalMark()
}

// pruneChunk is the most writes one transaction of a prune makes: far below
// what badger takes in one, whatever the memtable size.
const pruneChunk = 5_000

// pairWrite is a pair's key written (set) or deleted.
type pairWrite struct {
	p   PriorityPair
	set bool
}

// apply adds the write to txn.
func (w pairWrite) apply(txn *badger.Txn) error {
	if w.set {
		return txn.Set(priorityKey(w.p), nil)
	}
	return txn.Delete(priorityKey(w.p))
}

// priorityWrites adds to txn, batch by batch, the deletes of the pairs of
// the budgets a batch deleted and the key of every pair a batch stores
// that is not stored at that point; it returns those writes in order. It
// runs on the committer, which alone reads and changes s.prios; prunes
// never share a group (applyPrune).
func (s *Store) priorityWrites(txn *badger.Txn, group []*commit) ([]pairWrite, error) {
	var writes []pairWrite
	var local map[PriorityPair]bool // pairs written in this group: stored or not
	var localBudgets map[string][]uint16
	stored := func(p PriorityPair) bool {
		if set, ok := local[p]; ok {
			return set
		}
		_, ok := s.prios[p]
		return ok
	}
	write := func(w pairWrite) error {
		if err := w.apply(txn); err != nil {
			return err
		}
		if local == nil {
			local, localBudgets = make(map[PriorityPair]bool), make(map[string][]uint16)
		}
		local[w.p] = w.set
		if w.set && w.p.Budget {
			localBudgets[w.p.Name] = append(localBudgets[w.p.Name], w.p.Priority)
		}
		writes = append(writes, w)
		return nil
	}
	var committed *budgetPairReader
	defer func() { committed.close() }()
	for _, c := range group {
		for _, key := range c.batch.budgetsGone {
			if committed == nil {
				committed = s.readBudgetPairs()
			}
			// the pairs stored before this group, and those it stored
			for _, p := range append(committed.of(key), localBudgetPairs(key, localBudgets[key])...) {
				if !stored(p) {
					continue
				}
				if err := write(pairWrite{p, false}); err != nil {
					return nil, err
				}
			}
		}
		for _, p := range c.batch.prios {
			if stored(p) {
				continue
			}
			if err := write(pairWrite{p, true}); err != nil {
				return nil, err
			}
		}
	}
	return writes, nil
}

// localBudgetPairs returns the pairs of budget key at priorities.
func localBudgetPairs(key string, priorities []uint16) []PriorityPair {
	pairs := make([]PriorityPair, len(priorities))
	for i, p := range priorities {
		pairs[i] = BudgetPair(key, p)
	}
	return pairs
}

// budgetPairReader reads the committed (budget, priority) pairs of one
// budget at a time, with one iterator over the committed keys (a read of
// the transaction being written would sort its writes at every read).
type budgetPairReader struct {
	txn *badger.Txn
	it  *badger.Iterator
}

// readBudgetPairs starts a reader; only the committer calls it, so what
// it reads is what s.prios holds.
func (s *Store) readBudgetPairs() *budgetPairReader {
	txn := s.db.NewTransaction(false)
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = budgetPairsPrefix("")
	return &budgetPairReader{txn: txn, it: txn.NewIterator(opts)}
}

// of returns the committed pairs of budget key: the keys of its prefix
// with exactly a priority after it. A shorter one is of a budget whose key
// and priority make this prefix (at most 257 of them). A longer one is of
// a budget whose key starts with key, and they sort among its own (a
// priority is any two bytes): on meeting one, the reader seeks past every
// key that shares its first two bytes after the prefix, so a budget key
// that starts many others costs a seek per two-byte start, not a step per
// key.
func (r *budgetPairReader) of(key string) []PriorityPair {
	prefix := budgetPairsPrefix(key)
	var pairs []PriorityPair
	r.it.Seek(prefix)
	for r.it.ValidForPrefix(prefix) {
		rest := r.it.Item().Key()[len(prefix):]
		switch {
		case len(rest) == 2:
			pairs = append(pairs, BudgetPair(key, binary.BigEndian.Uint16(rest)))
			fallthrough
		case len(rest) < 2: // of a shorter key, its priority's first byte in the prefix
			r.it.Next()
			continue
		}
		start := binary.BigEndian.Uint16(rest)
		if start == math.MaxUint16 {
			break
		}
		r.it.Seek(binary.BigEndian.AppendUint16(prefix[:len(prefix):len(prefix)], start+1))
	}
	return pairs
}

// close ends the reader; a nil reader is closed already.
func (r *budgetPairReader) close() {
	if r != nil {
		r.it.Close()
		r.txn.Discard()
	}
}

// pairsCommitted applies to s.prios the writes of a committed
// transaction, in order, and makes the set afresh once it holds at most a
// quarter of its peak: a Go map keeps the table it grew to, and after a
// wave of tenants collected that is one entry's room per tenant.
func (s *Store) pairsCommitted(writes []pairWrite) {
	for _, w := range writes {
		if w.set {
			s.prios[w.p] = struct{}{}
		} else {
			delete(s.prios, w.p)
		}
	}
	n := len(s.prios)
	s.priosPeak = max(s.priosPeak, n)
	if s.priosPeak >= priosShrinkMin && n <= s.priosPeak/4 {
		fresh := make(map[PriorityPair]struct{}, n)
		maps.Copy(fresh, s.prios)
		s.prios, s.priosPeak = fresh, n
	}
}

// priosShrinkMin is the smallest peak of s.prios worth making it afresh.
const priosShrinkMin = 1024

// applyPrune runs a prune batch, on the committer, after every batch
// submitted before it: deletes and writes in transactions of at most
// pruneChunk keys, the completeness flag in the last. Each is safe on its
// own (the stored pairs stay a superset of those in use), so a failure
// leaves them valid, and s.prios follows every committed transaction.
func (s *Store) applyPrune(b *Batch) error {
	if s.refusals != b.pruneAfter {
		s.log.Warn("queue priorities kept as they were: a commit was refused during the load; the next start may wait longer before it dispatches")
		return nil
	}
	var writes []pairWrite
	for p := range s.prios {
		if _, ok := b.inUse[p]; !ok {
			writes = append(writes, pairWrite{p, false})
		}
	}
	for p := range b.inUse {
		if _, ok := s.prios[p]; !ok {
			writes = append(writes, pairWrite{p, true})
		}
	}
	for {
		n := min(len(writes), pruneChunk)
		chunk, last := writes[:n], n == len(writes)
		err := s.db.Update(func(txn *badger.Txn) error {
			for _, w := range chunk {
				if err := w.apply(txn); err != nil {
					return err
				}
			}
			if last {
				return txn.Set(prioritiesCompleteKey, nil)
			}
			return nil
		})
		if err != nil {
			s.refusals++
			return fmt.Errorf("persistence: prune queue priorities: %w", err)
		}
		s.pairsCommitted(chunk)
		if last {
			s.priosComplete = true
			return nil
		}
		writes = writes[n:]
	}
}

// loadPriorities reads the stored pairs and the completeness flag at open.
func (s *Store) loadPriorities() error {
	s.prios = make(map[PriorityPair]struct{})
	return s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(prioritiesCompleteKey)
		switch {
		case err == nil:
			s.priosComplete = true
		case !errors.Is(err, badger.ErrKeyNotFound):
			return fmt.Errorf("persistence: read %s: %w", prioritiesCompleteKey, err)
		}
		var bad error
		eachKey(txn, priorityPrefix, func(k []byte) bool {
			p, ok := parsePriorityKey(k)
			if !ok {
				bad = fmt.Errorf("persistence: malformed queue priority key %q", k)
				return false
			}
			s.prios[p] = struct{}{}
			return true
		})
		return bad
	})
}

// hasKeys reports whether txn sees any key with prefix.
func hasKeys(txn *badger.Txn, prefix []byte) bool {
	found := false
	eachKey(txn, prefix, func([]byte) bool { found = true; return false })
	return found
}

// eachKey calls fn with every key under prefix that txn sees, in order,
// until fn returns false; no value is read.
func eachKey(txn *badger.Txn, prefix []byte, fn func(key []byte) bool) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid() && fn(it.Item().Key()); it.Next() {
	}
}

// dropPriorities deletes every priority key and the completeness flag, for
// an older store whose keys, if any, are in another format: its next full
// load writes them again.
func dropPriorities(txn *badger.Txn) error {
	var keys [][]byte
	eachKey(txn, priorityPrefix, func(k []byte) bool {
		keys = append(keys, append([]byte(nil), k...))
		return true
	})
	for _, k := range append(keys, prioritiesCompleteKey) {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
