package persistence

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// PutBatchLink records id as the pending job of the batch key (SPEC §8.2.3).
func (b *Batch) PutBatchLink(key, id string) {
	k := batchLinkKey(key)
	b.size += len(k) + len(id) + 32
	b.ops = append(b.ops, op{key: k, val: []byte(id)})
}

// DeleteBatchLink removes the batch key's pending link (its batch sealed).
func (b *Batch) DeleteBatchLink(key string) { b.del(batchLinkKey(key)) }

// LoadBatchLinks returns every stored pending link: batch key -> job id.
func (s *Store) LoadBatchLinks() (map[string]string, error) {
	out := make(map[string]string)
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = batchPrefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := string(it.Item().Key()[len(batchPrefix):])
			if err := it.Item().Value(func(v []byte) error {
				out[key] = string(v)
				return nil
			}); err != nil {
				return fmt.Errorf("persistence.LoadBatchLinks %q: %w", key, err)
			}
		}
		return nil
	})
	return out, err
}
