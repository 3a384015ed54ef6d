package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"

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
// memory knows at the end of a full load, counting every job of a batch
// submitted before this one. The store then drops the keys of other pairs
// and marks the keys complete, when the batch commits. The set is the
// caller's no longer: the store keeps it.
func (b *Batch) PrioritiesInUse(inUse map[QueuePriority]struct{}) {
	b.inUse = inUse
	b.pruning = true
}

// priorityWrites adds to txn what the group's batches need of the priority
// keys, in batch order: a prune, and the key of every pair not yet stored.
// It returns the pairs stored once txn commits (nil: unchanged) and whether
// a batch pruned them.
func priorityWrites(txn *badger.Txn, group []*commit, known map[QueuePriority]struct{}) (_ map[QueuePriority]struct{}, pruned bool, err error) {
	changed := false
	for _, c := range group {
		b := c.batch
		if b.pruning {
			for p := range known {
				if _, ok := b.inUse[p]; !ok {
					if err := txn.Delete(priorityKey(p)); err != nil {
						return nil, false, err
					}
				}
			}
			for p := range b.inUse {
				if _, ok := known[p]; !ok {
					if err := txn.Set(priorityKey(p), nil); err != nil {
						return nil, false, err
					}
				}
			}
			if err := txn.Set(prioritiesCompleteKey, nil); err != nil {
				return nil, false, err
			}
			known, changed, pruned = maps.Clone(b.inUse), true, true
		}
		for _, p := range b.prios {
			if _, ok := known[p]; ok {
				continue
			}
			if err := txn.Set(priorityKey(p), nil); err != nil {
				return nil, false, err
			}
			if !changed {
				known, changed = maps.Clone(known), true
			}
			known[p] = struct{}{}
		}
	}
	if !changed {
		return nil, false, nil
	}
	return known, pruned, nil
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
		opts := badger.DefaultIteratorOptions
		opts.Prefix = priorityPrefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			p, ok := parsePriorityKey(it.Item().Key())
			if !ok {
				return fmt.Errorf("persistence: malformed queue priority key %q", it.Item().Key())
			}
			s.prios[p] = struct{}{}
		}
		return nil
	})
}

// commitWithPriorities commits txn; prios, when not nil, are the pairs
// stored once it has (priorityWrites). The pairs change under priosMu
// together with the commit, so that a snapshot taken meanwhile
// (NewJobScan) never holds a job whose pair its floors lack.
func (s *Store) commitWithPriorities(txn *badger.Txn, prios map[QueuePriority]struct{}, pruned bool) error {
	if prios == nil {
		return txn.Commit()
	}
	s.priosMu.Lock()
	defer s.priosMu.Unlock()
	if err := txn.Commit(); err != nil {
		return err
	}
	s.prios = prios
	s.priosComplete = s.priosComplete || pruned
	return nil
}
