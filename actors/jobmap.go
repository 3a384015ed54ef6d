package actors

import (
	"iter"
	"math/bits"

	"github.com/tollgate/tollgate/protocol"
)

// jobMap is the unfinished jobs by ID: a hash table of entry pointers with
// open addressing (linear probing, and deletion by shifting back the
// entries after a freed slot, so there are no tombstones). A slot holds
// only the entry's pointer, 8 bytes: the ID's key is read from the entry
// (a compact job keeps it, queued_compact.go; a whole job's ID string is
// compared or parsed). A Go map by the ID's 16-byte key cost 24 bytes per
// slot plus control bytes, and 25 to 53 bytes per job with its growth
// steps, and never gave its table back; this one holds between 3/8 and 3/4
// of its slots (11 to 21 bytes per job) and halves once it is an eighth
// full.
//
// Keys and IDs correspond one to one (protocol.ParseIDKey accepts only the
// canonical form), so a lookup by a string that is not an ID finds
// nothing. The jobs in it are not changed while all() walks it.
type jobMap struct {
	slots []*entry // a power of two long, or empty
	n     int
}

// jobMapMinSlots is the smallest table, and the size below which it is
// not shrunk.
const jobMapMinSlots = 64

// len is the number of jobs.
func (m *jobMap) len() int { return m.n }

// get returns the entry of job id, or nil.
func (m *jobMap) get(id string) *entry {
	k, ok := protocol.ParseIDKey(id)
	if !ok || m.n == 0 {
		return nil
	}
	for i, mask := m.home(k), len(m.slots)-1; ; i = (i + 1) & mask {
		en := m.slots[i]
		if en == nil {
			return nil
		}
		if en.jb != nil && en.jb.ID == id || en.jb == nil && en.q.key == k {
			return en
		}
	}
}

// at returns the entry of the job whose ID's key is k, or nil.
func (m *jobMap) at(k protocol.IDKey) *entry {
	if m.n == 0 {
		return nil
	}
	i, found := m.find(k)
	if !found {
		return nil
	}
	return m.slots[i]
}

// put adds en as the entry of job id (an ID the engine stores: idKey),
// replacing the one it had.
func (m *jobMap) put(id string, en *entry) {
	k := idKey(id)
	if (m.n+1)*4 > len(m.slots)*3 {
		m.resize(max(jobMapMinSlots, 2*len(m.slots)))
	}
	i, found := m.find(k)
	m.slots[i] = en
	if !found {
		m.n++
	}
}

// drop removes job id's entry.
func (m *jobMap) drop(id string) {
	k, ok := protocol.ParseIDKey(id)
	if !ok || m.n == 0 {
		return
	}
	i, found := m.find(k)
	if !found {
		return
	}
	// shift back every entry after the freed slot whose home is not
	// between the slot and it (cyclically), so that probes still find it
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j] != nil; j = (j + 1) & mask {
		h := m.home(m.slots[j].key())
		if (j-h)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = nil
	m.n--
	if len(m.slots) > jobMapMinSlots && m.n*8 < len(m.slots) {
		m.resize(len(m.slots) / 2)
	}
}

// clear removes every job and lets the table go.
func (m *jobMap) clear() { *m = jobMap{} }

// all walks the jobs, in no particular order.
func (m *jobMap) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		for _, en := range m.slots {
			if en != nil && !yield(en) {
				return
			}
		}
	}
}

// find returns the slot of key k, or the free slot where it would go.
func (m *jobMap) find(k protocol.IDKey) (int, bool) {
	for i, mask := m.home(k), len(m.slots)-1; ; i = (i + 1) & mask {
		en := m.slots[i]
		if en == nil {
			return i, false
		}
		if en.key() == k {
			return i, true
		}
	}
}

// home is the slot where key k's probe starts: the top bits of a mix of
// both halves (an ID's low half holds its random part, its high half the
// time and a counter).
func (m *jobMap) home(k protocol.IDKey) int {
	h := (k.Lo ^ bits.RotateLeft64(k.Hi, 29)) * 0x9e3779b97f4a7c15
	h ^= h >> 32
	h *= 0xbf58476d1ce4e5b9
	return int(h >> (64 - bits.TrailingZeros(uint(len(m.slots)))))
}

// resize moves the entries into a table of n slots (a power of two).
func (m *jobMap) resize(n int) {
	old := m.slots
	m.slots = make([]*entry, n)
	mask := n - 1
	for _, en := range old {
		if en == nil {
			continue
		}
		i := m.home(en.key())
		for m.slots[i] != nil {
			i = (i + 1) & mask
		}
		m.slots[i] = en
	}
}
