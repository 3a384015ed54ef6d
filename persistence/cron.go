package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// PutCronGroup stores a cron group's own record.
func (b *Batch) PutCronGroup(g *protocol.CronGroup) { b.set(cronGroupKey(g.Name), g) }

// DeleteCronGroup removes a cron group's record (its entries are removed
// one by one with DeleteCronEntry).
func (b *Batch) DeleteCronGroup(group string) { b.del(cronGroupKey(group)) }

// PutCronEntry stores one entry of a cron group, times included.
func (b *Batch) PutCronEntry(group string, e *protocol.CronEntry) {
	b.set(cronEntryKey(group, e.Name), e)
	b.PutCronTimes(group, e.Name, e.NextEnqueueAt, e.LastEnqueueAt)
}

// PutCronTimes stores an entry's next_enqueue_at and last_enqueue_at
// alone: what a firing changes.
func (b *Batch) PutCronTimes(group, entry string, next, last uint64) {
	key := cronTimesKey(group, entry)
	val := make([]byte, 1, 17)
	val[0] = protocol.RecordVersion
	val = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(val, next), last)
	b.size += len(key) + len(val) + 32
	b.ops = append(b.ops, op{key: key, val: val})
}

// DeleteCronEntry removes one entry of a cron group.
func (b *Batch) DeleteCronEntry(group, entry string) {
	b.del(cronEntryKey(group, entry))
	b.del(cronTimesKey(group, entry))
}

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
		return loadCronTimes(txn, out, byName)
	})
	return out, err
}

// loadCronTimes applies the stored t/ times to the loaded entries.
func loadCronTimes(txn *badger.Txn, groups []StoredCronGroup, byName map[string]int) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = timesPrefix
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		key := it.Item().Key()[len(timesPrefix):]
		sep := bytes.IndexByte(key, 0)
		if sep < 0 {
			continue
		}
		i, ok := byName[string(key[:sep])]
		if !ok {
			continue
		}
		entries := groups[i].Entries
		name := string(key[sep+1:])
		j, found := slices.BinarySearchFunc(entries, name, func(e protocol.CronEntry, n string) int { return strings.Compare(e.Name, n) })
		if !found {
			continue
		}
		if err := it.Item().Value(func(v []byte) error {
			if len(v) != 17 || v[0] != protocol.RecordVersion {
				return fmt.Errorf("bad cron times record %x", v)
			}
			entries[j].NextEnqueueAt = binary.BigEndian.Uint64(v[1:9])
			entries[j].LastEnqueueAt = binary.BigEndian.Uint64(v[9:17])
			return nil
		}); err != nil {
			return fmt.Errorf("persistence.LoadCronGroups %q: %w", it.Item().Key(), err)
		}
	}
	return nil
}
