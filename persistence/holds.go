package persistence

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// What a store keeps of a budget besides its record (SPEC §10.2, §10.3):
// its hold (h/<key>) and whether it was made on the fly by a create_with
// and never written since (o/<key>, empty value). Both are removed with the
// budget (Batch.DeleteBudget).

// PutBudgetHold stores a budget's hold.
func (b *Batch) PutBudgetHold(key string, h *protocol.BudgetHold) { b.set(holdKey(key), h) }

// DeleteBudgetHold removes a budget's hold.
func (b *Batch) DeleteBudgetHold(key string) { b.del(holdKey(key)) }

// MarkBudgetOnTheFly records that a budget was made by a create_with (it
// may be collected when idle).
func (b *Batch) MarkBudgetOnTheFly(key string) {
	k := onTheFlyKey(key)
	b.size += len(k) + 32
	b.ops = append(b.ops, op{key: k, val: []byte{}})
}

// UnmarkBudgetOnTheFly records that a budget was written by the API since
// (it is never collected).
func (b *Batch) UnmarkBudgetOnTheFly(key string) { b.del(onTheFlyKey(key)) }

// BudgetExtras is what LoadBudgetExtras reads: the stored holds by budget
// key, and the keys of budgets made on the fly.
type BudgetExtras struct {
	Holds    map[string]protocol.BudgetHold
	OnTheFly map[string]bool
}

// LoadBudgetExtras reads every stored hold and on-the-fly mark.
func (s *Store) LoadBudgetExtras() (*BudgetExtras, error) {
	out := &BudgetExtras{Holds: make(map[string]protocol.BudgetHold), OnTheFly: make(map[string]bool)}
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = holdPrefix
		it := txn.NewIterator(opts)
		for it.Rewind(); it.Valid(); it.Next() {
			key := string(it.Item().Key()[len(holdPrefix):])
			var h protocol.BudgetHold
			if err := it.Item().Value(func(v []byte) error { return protocol.UnmarshalRecord(v, &h) }); err != nil {
				it.Close()
				return fmt.Errorf("hold %q: %w", key, err)
			}
			out.Holds[key] = h
		}
		it.Close()
		opts = badger.DefaultIteratorOptions
		opts.Prefix = onTheFlyPrefix
		opts.PrefetchValues = false
		it = txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			out.OnTheFly[string(it.Item().Key()[len(onTheFlyPrefix):])] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persistence.LoadBudgetExtras: %w", err)
	}
	return out, nil
}

func holdKey(key string) []byte {
	k := make([]byte, 0, len(holdPrefix)+len(key))
	return append(append(k, holdPrefix...), key...)
}

func onTheFlyKey(key string) []byte {
	k := make([]byte, 0, len(onTheFlyPrefix)+len(key))
	return append(append(k, onTheFlyPrefix...), key...)
}
