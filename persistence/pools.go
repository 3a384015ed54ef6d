package persistence

// Pool levels of time_based budgets (SPEC §10.4, --budget-pools durable).
//
// One key per budget, l/<budget key>, holds the level its pool had at one
// instant, the tokens then reserved but not yet debited, and the refill it
// was settled under. The queue actor writes it in the same batch as the
// change that lowered the level (a dispatch's debit), so what is stored
// never shows more tokens than the pool really had; at start the level is
// settled from there to the moment serving starts.
// A budget's delete removes its level with it (Batch.DeleteBudget).

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// PoolLevel is a time_based pool at one instant: Level tokens (negative
// for a debt) at AtNs (Unix ns), of which Pending were reserved by jobs
// that may yet dispatch (and be debited at any later moment), refilling
// Allocation tokens per DurationMs up to Capacity. The refill is the
// slowest the pool had since that instant, so that settling a stored level
// never grants more than the pool really got.
type PoolLevel struct {
	Level      float64
	AtNs       uint64
	Pending    uint64
	Allocation uint32
	DurationMs uint64
	Capacity   uint32
}

// poolLevelSize is the encoded size: version byte, level bits, at, pending,
// allocation, duration, capacity, all fixed width (no reflection on the
// dispatch path).
const poolLevelSize = 1 + 8 + 8 + 8 + 4 + 8 + 4

func poolKey(key string) []byte {
	k := make([]byte, 0, len(poolPrefix)+len(key))
	return append(append(k, poolPrefix...), key...)
}

// AppendPoolLevel appends the stored form of p to dst.
func AppendPoolLevel(dst []byte, p PoolLevel) []byte {
	dst = append(dst, protocol.RecordVersion)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(p.Level))
	dst = binary.BigEndian.AppendUint64(dst, p.AtNs)
	dst = binary.BigEndian.AppendUint64(dst, p.Pending)
	dst = binary.BigEndian.AppendUint32(dst, p.Allocation)
	dst = binary.BigEndian.AppendUint64(dst, p.DurationMs)
	return binary.BigEndian.AppendUint32(dst, p.Capacity)
}

// DecodePoolLevel reads a stored pool level.
func DecodePoolLevel(v []byte) (PoolLevel, error) {
	if len(v) != poolLevelSize {
		return PoolLevel{}, fmt.Errorf("pool level: %d bytes, want %d", len(v), poolLevelSize)
	}
	if v[0] != protocol.RecordVersion {
		return PoolLevel{}, fmt.Errorf("pool level: unknown record version %d", v[0])
	}
	p := PoolLevel{
		Level:      math.Float64frombits(binary.BigEndian.Uint64(v[1:])),
		AtNs:       binary.BigEndian.Uint64(v[9:]),
		Pending:    binary.BigEndian.Uint64(v[17:]),
		Allocation: binary.BigEndian.Uint32(v[25:]),
		DurationMs: binary.BigEndian.Uint64(v[29:]),
		Capacity:   binary.BigEndian.Uint32(v[37:]),
	}
	if math.IsNaN(p.Level) || math.IsInf(p.Level, 0) {
		return PoolLevel{}, fmt.Errorf("pool level: level %v is not a number of tokens", p.Level)
	}
	return p, nil
}

// PutPool stores the pool level of budget key.
func (b *Batch) PutPool(key string, p PoolLevel) {
	k := poolKey(key)
	b.size += len(k) + poolLevelSize + 32
	b.ops = append(b.ops, op{key: k, val: AppendPoolLevel(make([]byte, 0, poolLevelSize), p)})
}

// DeletePool removes the stored pool level of budget key (the pool starts
// full at the next start).
func (b *Batch) DeletePool(key string) { b.del(poolKey(key)) }

// LoadPools returns every stored pool level by budget key.
func (s *Store) LoadPools() (map[string]PoolLevel, error) {
	out := make(map[string]PoolLevel)
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = poolPrefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := string(it.Item().Key()[len(poolPrefix):])
			if err := it.Item().Value(func(v []byte) error {
				p, err := DecodePoolLevel(v)
				if err != nil {
					return err
				}
				out[key] = p
				return nil
			}); err != nil {
				return fmt.Errorf("persistence.LoadPools %q: %w", key, err)
			}
		}
		return nil
	})
	return out, err
}
