package persistence

import (
	"bytes"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// PutCronGroup stores a cron group's own record.
func (b *Batch) PutCronGroup(g *protocol.CronGroup) { b.set(cronGroupKey(g.Name), g) }

// DeleteCronGroup removes a cron group's record (its entries are removed
// one by one with DeleteCronEntry).
func (b *Batch) DeleteCronGroup(group string) { b.del(cronGroupKey(group)) }

// PutCronEntry stores one entry of a cron group.
func (b *Batch) PutCronEntry(group string, e *protocol.CronEntry) {
	b.set(cronEntryKey(group, e.Name), e)
}

// DeleteCronEntry removes one entry of a cron group.
func (b *Batch) DeleteCronEntry(group, entry string) { b.del(cronEntryKey(group, entry)) }

// StoredCronGroup is a cron group as loaded: its record and its entries in
// name order.
type StoredCronGroup struct {
	Group   protocol.CronGroup
	Entries []protocol.CronEntry
}

// LoadCronGroups returns every stored cron group in name order, each with
// its entries. An entry whose group record is missing is left out.
func (s *Store) LoadCronGroups() ([]StoredCronGroup, error) {
	var out []StoredCronGroup
	err := s.db.View(func(txn *badger.Txn) error {
		byName := make(map[string]int)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = cronPrefix
		it := txn.NewIterator(opts)
		for it.Rewind(); it.Valid(); it.Next() {
			var g protocol.CronGroup
			if err := it.Item().Value(func(v []byte) error { return protocol.UnmarshalRecord(v, &g) }); err != nil {
				it.Close()
				return fmt.Errorf("persistence.LoadCronGroups %q: %w", it.Item().Key(), err)
			}
			byName[g.Name] = len(out)
			out = append(out, StoredCronGroup{Group: g})
		}
		it.Close()
		opts.Prefix = entryPrefix
		it = txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().Key()[len(entryPrefix):]
			sep := bytes.IndexByte(key, 0)
			if sep < 0 {
				continue
			}
			i, ok := byName[string(key[:sep])]
			if !ok {
				continue
			}
			var e protocol.CronEntry
			if err := it.Item().Value(func(v []byte) error { return protocol.UnmarshalRecord(v, &e) }); err != nil {
				return fmt.Errorf("persistence.LoadCronGroups %q: %w", it.Item().Key(), err)
			}
			out[i].Entries = append(out[i].Entries, e)
		}
		return nil
	})
	return out, err
}
