package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// Queue priorities.
//
// The store keeps jobs in ID order, so the first job of a queue in
// (priority, id) order is known only once every stored job has been read.
// To let a queue dispatch while the rest of a backlog loads (SPEC §3.9),
// the store also keeps one empty key per (queue, priority) pair an
// unfinished stored job may carry, q/<queue><priority u16>. The key is
// written in the transaction that first stores a job with its pair, and the
// keys are pruned to the pairs of the unfinished jobs at the end of every
// full load (Batch.PrioritiesInUse). So every unfinished stored job has its
// pair's key, and a queue's lowest priority on disk is known without reading
// its jobs (JobScan.Priorities): a loaded job of that priority whose ID the
// scan has passed comes before every job not yet read.
//
// m/priorities says the keys are complete: a new store has it from the
// start. A store an older build wrote has no keys; its first full load
// writes them and the flag, and until then no queue dispatches before the
// load ends. An older build would write jobs without their keys, so schema
// version 4 keeps it from opening the store.

// QueuePriority is a (queue, priority) pair of stored jobs.
type QueuePriority struct {
	Queue    string
	Priority uint16
}

var prioritiesCompleteKey = []byte("m/priorities")

// priorityKey is q/<queue><priority u16>: the priority is always the last
// two bytes, so no separator is needed.
func priorityKey(p QueuePriority) []byte {
	k := make([]byte, 0, len(priorityPrefix)+len(p.Queue)+2)
	k = append(append(k, priorityPrefix...), p.Queue...)
	return binary.BigEndian.AppendUint16(k, p.Priority)
}

func parsePriorityKey(k []byte) (QueuePriority, bool) {
	if len(k) < len(priorityPrefix)+2 {
		return QueuePriority{}, false
	}
	rest := k[len(priorityPrefix):]
	n := len(rest) - 2
	return QueuePriority{Queue: string(rest[:n]), Priority: binary.BigEndian.Uint16(rest[n:])}, true
}

// notePriority records the pair of a job the batch stores, unless the job
// is finished (a finished job is never dispatched again). Jobs of one batch
// mostly share their pair, so a repeat of the last one is not recorded.
func (b *Batch) notePriority(j *protocol.Job) {
	if j.Status.Terminal() {
		return
	}
	p := QueuePriority{Queue: j.Queue, Priority: j.Priority}
	if n := len(b.prios); n > 0 && b.prios[n-1] == p {
		return
	}
	b.prios = append(b.prios, p)
}

// PrioritiesInUse says that inUse holds the pair of every unfinished job
// memory knows at the end of the full load of scan, counting every job of
// a batch submitted before this one. The store then drops the keys of
// other pairs and marks the keys complete, when the batch commits; unless
// it refused a commit since scan's snapshot (a refused removal puts its job
// back in memory after inUse was taken), or the prune would take more
// writes than one transaction holds: then the keys stay as they are, a
// superset. The set is the caller's no longer: the store keeps it.
func (b *Batch) PrioritiesInUse(inUse map[QueuePriority]struct{}, scan JobScan) {
	b.inUse = inUse
	b.pruning = true
	b.pruneAfter = scan.refusalMark()
}

// maxPruneWrites bounds the writes of a prune: far below what a badger
// transaction takes, so that a prune never fails for its size.
const maxPruneWrites = 20_000

// pairWrites is what a transaction changes of the stored pairs.
type pairWrites struct {
	pruned map[QueuePriority]struct{} // the pairs a prune kept (nil: none ran)
	added  []QueuePriority            // pairs stored after any prune
}

// priorityWrites adds to txn what the group's batches need of the priority
// keys, in batch order: a prune, and the key of every pair not yet stored.
// It runs on the committer, which alone reads and changes s.prios.
func (s *Store) priorityWrites(txn *badger.Txn, group []*commit) (pairWrites, error) {
	var w pairWrites
	known := s.prios
	var addedSet map[QueuePriority]struct{} // w.added as a set, once it is needed
	has := func(p QueuePriority) bool {
		if _, ok := known[p]; ok {
			return true
		}
		_, ok := addedSet[p]
		return ok
	}
	for _, c := range group {
		b := c.batch
		if b.pruning && s.mayPrune(b, known, w.added) {
			for p := range known {
				if _, ok := b.inUse[p]; !ok {
					if err := txn.Delete(priorityKey(p)); err != nil {
						return w, err
					}
				}
			}
			for _, p := range w.added {
				if _, ok := b.inUse[p]; !ok {
					if err := txn.Delete(priorityKey(p)); err != nil {
						return w, err
					}
				}
			}
			for p := range b.inUse {
				if !has(p) {
					if err := txn.Set(priorityKey(p), nil); err != nil {
						return w, err
					}
				}
			}
			if err := txn.Set(prioritiesCompleteKey, nil); err != nil {
				return w, err
			}
			known, w.pruned, w.added, addedSet = b.inUse, b.inUse, nil, nil
		}
		for _, p := range b.prios {
			if has(p) {
				continue
			}
			if err := txn.Set(priorityKey(p), nil); err != nil {
				return w, err
			}
			if addedSet == nil {
				addedSet = make(map[QueuePriority]struct{})
			}
			addedSet[p] = struct{}{}
			w.added = append(w.added, p)
		}
	}
	return w, nil
}

// mayPrune reports whether the prune b may run: no commit was refused since
// its scan's snapshot, and it fits in a transaction.
func (s *Store) mayPrune(b *Batch, known map[QueuePriority]struct{}, added []QueuePriority) bool {
	if s.refusals != b.pruneAfter {
		s.log.Warn("queue priorities kept as they were: a commit was refused during the load; the next start may wait longer before it dispatches")
		return false
	}
	if len(known)+len(added)+len(b.inUse) > maxPruneWrites {
		s.log.Warn("queue priorities kept as they were: too many to prune in one commit; the next start may wait longer before it dispatches",
			"pairs", len(known)+len(added), "in_use", len(b.inUse))
		return false
	}
	return true
}

// pairsCommitted applies w to s.prios once its transaction committed.
func (s *Store) pairsCommitted(w pairWrites) {
	if w.pruned != nil {
		s.prios, s.priosComplete = w.pruned, true
	}
	for _, p := range w.added {
		s.prios[p] = struct{}{}
	}
}

// loadPriorities reads the stored pairs and the completeness flag at open.
func (s *Store) loadPriorities() error {
	s.prios = make(map[QueuePriority]struct{})
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
