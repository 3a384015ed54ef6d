package actors

import (
	"iter"
	"math/bits"

	"github.com/tollgate/tollgate/protocol"
)

// jobMap is the unfinished jobs by ID: a hash table of entry pointers with
// open addressing (linear probing, and deletion by shifting back the
// entries after a freed slot, so there are no tombstones). A slot holds
// the entry's pointer and two bytes: 8 bits of the key's hash, which let a
// probe pass over other jobs without reading their entries, and the slot's
// distance from the key's home slot, which lets a deletion shift entries
// back without reading them. The key itself is read from the entry only
// to confirm a match: a compact job's key (queued_compact.go), or a whole
// job's ID string. A Go map by the ID's 16-byte key cost 24 bytes per slot
// plus control bytes, 25 to 53 bytes per job with its growth steps, and
// never gave its table back; this one grows at 3/4 full to 3/8 full (13 to
// 27 bytes per job while jobs are added) and halves once it is an eighth
// full (at most ~80 bytes per job while they leave).
//
// Plain ready jobs that nothing refers to are kept apart as cold records
// (coldjobs.go): get and at thaw them back into entries, look reads them
// without, and len and all count them.
//
// Keys and IDs correspond one to one (protocol.ParseIDKey accepts only the
// canonical form), so a lookup by a string that is not an ID finds
// nothing. Nothing is put or dropped while all() walks the table (a drop
// shifts entries, so the walk would miss one or see it twice): put and
// drop panic then.
type jobMap struct {
	slots   []*entry // a power of two long, or empty
	meta    []slotMeta
	n       int       // entries (cold jobs apart)
	walking int       // walks under way (all)
	cold    coldTable // the cold jobs (coldjobs.go)
	// thawed, if set, is told of each cold job that thaws (the engine puts
	// its ID back in its ID index)
	thawed func(*queuedJob)
}

// slotMeta is a used slot's hash tag (high byte) and its distance from
// its key's home slot (low byte).
type slotMeta uint16

func (m slotMeta) tag() uint8             { return uint8(m >> 8) }
func (m slotMeta) dist() int              { return int(m & 0xff) }
func metaOf(tag uint8, dist int) slotMeta { return slotMeta(tag)<<8 | slotMeta(dist) }

// jobMapMinSlots is the smallest table, and the size below which it is
// not shrunk.
const jobMapMinSlots = 64

// jobMapMaxDist is the longest probe a slot records; a longer one grows
// the table (at most 3/4 full, probes are a few slots long).
const jobMapMaxDist = 255

// len is the number of jobs, cold ones included.
func (m *jobMap) len() int { return m.n + m.cold.len() }

// get returns the entry of job id, or nil; a cold job thaws (coldjobs.go).
func (m *jobMap) get(id string) *entry {
	k, ok := protocol.ParseIDKey(id)
	if !ok {
		return nil
	}
	if m.n > 0 {
		if i, found := m.find(k, id); found {
			return m.slots[i]
		}
	}
	return m.thaw(k)
}

// at returns the entry of the job whose ID's key is k, or nil; a cold job
// thaws.
func (m *jobMap) at(k protocol.IDKey) *entry {
	if m.n > 0 {
		if i, found := m.find(k, ""); found {
			return m.slots[i]
		}
	}
	return m.thaw(k)
}

// look returns the entry of the job whose ID's key is k to read without
// changing it (nil: none): a cold job stays cold, and its entry is s's,
// valid until s is used again.
func (m *jobMap) look(k protocol.IDKey, s *entryScratch) *entry {
	if m.n > 0 {
		if i, found := m.find(k, ""); found {
			return m.slots[i]
		}
	}
	if c, ok := m.cold.lookup(k); ok {
		c.fill(m.cold.kindOf(c), &s.en, &s.q)
		return &s.en
	}
	return nil
}

// lookID is look by the job's ID.
func (m *jobMap) lookID(id string, s *entryScratch) *entry {
	k, ok := protocol.ParseIDKey(id)
	if !ok {
		return nil
	}
	return m.look(k, s)
}

// thaw turns the cold job of key k back into an entry and returns it (nil:
// no cold job has that key).
func (m *jobMap) thaw(k protocol.IDKey) *entry {
	if m.cold.len() == 0 {
		return nil
	}
	m.mustNotWalk()
	c, kind, ok := m.cold.take(k)
	if !ok {
		return nil
	}
	s := new(entryScratch) // one allocation for the entry and its compact job
	c.fill(kind, &s.en, &s.q)
	m.add(k, &s.en)
	if m.thawed != nil {
		m.thawed(&s.q)
	}
	return &s.en
}

// freeze makes en, the entry of a job in the table, cold if it can be
// (canFreeze); it reports whether it did. The caller must not use en
// again.
func (m *jobMap) freeze(en *entry) bool {
	if !canFreeze(en) {
		return false
	}
	m.mustNotWalk()
	m.dropKey(en.q.key, "")
	m.cold.add(en)
	return true
}

// put adds en as the entry of job id (an ID the engine stores: idKey),
// replacing the one it had.
func (m *jobMap) put(id string, en *entry) {
	m.mustNotWalk()
	k := idKey(id)
	if m.n > 0 {
		if i, found := m.find(k, id); found {
			m.slots[i] = en
			return
		}
	}
	if m.cold.len() > 0 {
		m.cold.take(k)
	}
	m.add(k, en)
}

// add adds en, of key k, which the table does not hold.
func (m *jobMap) add(k protocol.IDKey, en *entry) {
	if (m.n+1)*4 > len(m.slots)*3 {
		m.resize(max(jobMapMinSlots, 2*len(m.slots)))
	}
	for !m.insert(k, en) {
		m.resize(2 * len(m.slots))
	}
	m.n++
}

// drop removes job id, an entry or a cold job.
func (m *jobMap) drop(id string) {
	m.mustNotWalk()
	if k, ok := protocol.ParseIDKey(id); ok {
		m.dropKey(k, id)
	}
}

// dropKey removes the job of key k (whose ID is id, or "" when the caller
// has only the key).
func (m *jobMap) dropKey(k protocol.IDKey, id string) {
	if m.n > 0 {
		if i, found := m.find(k, id); found {
			m.unslot(i)
			return
		}
	}
	m.cold.take(k)
}

// unslot frees slot i: it shifts back every entry after it whose home is
// not between the slot and it (cyclically), so that probes still find it.
func (m *jobMap) unslot(i int) {
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j] != nil; j = (j + 1) & mask {
		home := (j - m.meta[j].dist()) & mask
		if (j-home)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			m.meta[i] = metaOf(m.meta[j].tag(), (i-home)&mask)
			i = j
		}
	}
	m.slots[i], m.meta[i] = nil, 0
	m.n--
	if len(m.slots) > jobMapMinSlots && m.n*8 < len(m.slots) {
		m.resize(len(m.slots) / 2)
	}
}

// clear removes every job and lets the table go.
func (m *jobMap) clear() {
	m.mustNotWalk()
	*m = jobMap{thawed: m.thawed}
}

// all walks the jobs, in no particular order. A cold job's entry is a
// scratch the walk reuses: read it, do not keep or change it.
func (m *jobMap) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		m.walking++
		defer func() { m.walking-- }()
		for _, en := range m.slots {
			if en != nil && !yield(en) {
				return
			}
		}
		var s entryScratch
		m.cold.each(func(c coldJob) bool {
			c.fill(m.cold.kindOf(c), &s.en, &s.q)
			return yield(&s.en)
		})
	}
}

// mustNotWalk panics if a walk is under way: a change now would make it
// miss jobs or see them twice.
func (m *jobMap) mustNotWalk() {
	if m.walking != 0 {
		panic("actors: the job table changed while all() walked it")
	}
}

// find returns the slot of key k (whose ID is id, or "" when the caller
// has only the key), or the free slot where it would go.
func (m *jobMap) find(k protocol.IDKey, id string) (int, bool) {
	home, tag := m.hash(k)
	for i, mask := home, len(m.slots)-1; ; i = (i + 1) & mask {
		en := m.slots[i]
		if en == nil {
			return i, false
		}
		if m.meta[i].tag() != tag {
			continue
		}
		switch {
		case en.jb == nil:
			if en.q.key == k {
				return i, true
			}
		case id != "":
			if en.jb.ID == id {
				return i, true
			}
		case idKey(en.jb.ID) == k:
			return i, true
		}
	}
}

// insert puts en, of key k, in the first free slot from k's home; it
// reports false when that slot is too far from home to record.
func (m *jobMap) insert(k protocol.IDKey, en *entry) bool {
	home, tag := m.hash(k)
	mask := len(m.slots) - 1
	for d := 0; d <= jobMapMaxDist; d++ {
		i := (home + d) & mask
		if m.slots[i] == nil {
			m.slots[i], m.meta[i] = en, metaOf(tag, d)
			return true
		}
	}
	return false
}

// hash is key k's home slot, from the top bits of a mix of both halves
// (an ID's low half holds its random part, its high half the time and a
// counter), and its tag, from the bits below them.
func (m *jobMap) hash(k protocol.IDKey) (home int, tag uint8) { return idHash(k, len(m.slots)) }

// idHash is key k's home slot in a table of n slots (a power of two) and
// its tag (jobMap.hash).
func idHash(k protocol.IDKey, n int) (home int, tag uint8) {
	h := (k.Lo ^ bits.RotateLeft64(k.Hi, 29)) * 0x9e3779b97f4a7c15
	h ^= h >> 32
	h *= 0xbf58476d1ce4e5b9
	shift := 64 - bits.TrailingZeros(uint(n))
	return int(h >> shift), uint8(h >> (shift - 8))
}

// resize moves the entries into a table of n slots (a power of two), or
// of twice as many if a probe there is too long to record.
func (m *jobMap) resize(n int) {
	old := m.slots
	for !m.rehash(old, n) {
		n *= 2
	}
}

// rehash makes a table of n slots and puts the entries of old in it; it
// reports false if one did not fit (see insert).
func (m *jobMap) rehash(old []*entry, n int) bool {
	m.slots, m.meta = make([]*entry, n), make([]slotMeta, n)
	for _, en := range old {
		if en != nil && !m.insert(en.key(), en) {
			return false
		}
	}
	return true
}
