package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// ScanJobsFrom calls fn for stored jobs with their payloads in ID order
// (descending when desc), starting after the job ID from (exclusive; ""
// starts at the first or last job). fn returns false to stop. It reads
// every job first (tests and diagnostics: the server selects IDs from
// memory and reads records with GetJob).
func (s *Store) ScanJobsFrom(from string, desc bool, fn func(*protocol.Job) (bool, error)) error {
	var jobs []*protocol.Job
	err := s.ScanJobs(func(j *protocol.Job, _ Ref) error {
		if from == "" || (!desc && j.ID > from) || (desc && j.ID < from) {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if desc {
		slices.Reverse(jobs)
	}
	for _, j := range jobs {
		if j.Payload == nil {
			err := s.db.View(func(txn *badger.Txn) error { return s.readPayload(txn, j) })
			if err != nil {
				return fmt.Errorf("persistence.ScanJobsFrom: %w", err)
			}
		}
		more, err := fn(j)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// ListErrorsPage returns up to limit error records of a job in attempt
// order (descending when desc), after attempt from when hasFrom.
func (s *Store) ListErrorsPage(id string, from uint32, hasFrom, desc bool, limit int) ([]protocol.ErrorRecord, error) {
	var out []protocol.ErrorRecord
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = errorKeyPrefix(id)
		opts.Reverse = desc
		it := txn.NewIterator(opts)
		defer it.Close()
		var seek []byte
		switch {
		case hasFrom:
			seek = errorKey(id, from)
		case desc:
			seek = append(errorKeyPrefix(id), 0xff, 0xff, 0xff, 0xff, 0xff)
		default:
			seek = errorKeyPrefix(id)
		}
		it.Seek(seek)
		if hasFrom && it.Valid() && bytes.Equal(it.Item().Key(), seek) {
			it.Next()
		}
		for ; it.Valid() && len(out) < limit; it.Next() {
			var rec protocol.ErrorRecord
			if err := it.Item().Value(func(v []byte) error { return protocol.UnmarshalRecord(v, &rec) }); err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persistence.ListErrorsPage %s: %w", id, err)
	}
	return out, nil
}

// GetError reads one error record; ok is false when absent.
func (s *Store) GetError(id string, attempt uint32) (*protocol.ErrorRecord, bool, error) {
	var rec protocol.ErrorRecord
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(errorKey(id, attempt))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return protocol.UnmarshalRecord(v, &rec) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("persistence.GetError %s/%d: %w", id, attempt, err)
	}
	return &rec, true, nil
}
