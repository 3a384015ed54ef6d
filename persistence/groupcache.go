package persistence

import (
	"bytes"
	"container/list"
	"fmt"
	"sort"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// groupCache keeps the most recently read job groups decoded, for the take
// streams' payload reads (LoadPayloads) and for reads of single members
// (GetJob, behind the query endpoints): the members a stream is given at a
// time usually come from a few groups, one group's members are usually
// given out over many batches, and a page of a listing mostly holds
// neighbours. A group record never changes once written, so a decoded copy
// stays right for as long as the group exists; what changes are its marks,
// which the cache folds into each member's state as it reads them, reading
// only the marks written since it last looked. Whether the group still
// exists is asked of the store on every use.
type groupCache struct {
	mu     sync.Mutex
	max    int // bytes of decoded members kept at most
	size   int
	lru    *list.List // of *cachedGroup, most recent first
	byName map[string]*list.Element
	firsts []string // the cached groups' first IDs, sorted
}

// cachedGroup is one decoded group. Its fields are guarded by the cache's
// mutex, but for members and body, which never change.
type cachedGroup struct {
	first, last string
	body        []byte
	members     []groupMember // into body, in ID order
	states      map[string]memberState
	marksRead   uint32 // marks folded into states: the next one's sequence
}

// cost is what a cached group counts against the cache's bound: its
// decoded members and room for a state per member.
func (cg *cachedGroup) cost() int { return len(cg.body) + 48*len(cg.members) }

func newGroupCache(maxBytes int) *groupCache {
	return &groupCache{max: maxBytes, lru: list.New(), byName: make(map[string]*list.Element)}
}

// lookup returns the cached group whose ID range holds id.
func (c *groupCache) lookup(id string) *cachedGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.SearchStrings(c.firsts, id)
	if i == len(c.firsts) || c.firsts[i] != id {
		i-- // the greatest first ID below id
	}
	if i < 0 {
		return nil
	}
	el := c.byName[c.firsts[i]]
	cg := el.Value.(*cachedGroup)
	if cg.last < id {
		return nil
	}
	c.lru.MoveToFront(el)
	return cg
}

// add caches a decoded group, evicting the least recently used ones
// beyond the bound; a group larger than the bound is not kept.
func (c *groupCache) add(cg *cachedGroup) {
	if cg.cost() > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byName[cg.first]; ok {
		return
	}
	c.byName[cg.first] = c.lru.PushFront(cg)
	c.size += cg.cost()
	i := sort.SearchStrings(c.firsts, cg.first)
	c.firsts = append(c.firsts, "")
	copy(c.firsts[i+1:], c.firsts[i:])
	c.firsts[i] = cg.first
	for c.size > c.max {
		c.remove(c.lru.Back())
	}
}

// remove drops a cached group; the caller holds the mutex.
func (c *groupCache) remove(el *list.Element) {
	cg := c.lru.Remove(el).(*cachedGroup)
	delete(c.byName, cg.first)
	c.size -= cg.cost()
	j := sort.SearchStrings(c.firsts, cg.first)
	c.firsts = append(c.firsts[:j], c.firsts[j+1:]...)
	if len(c.firsts) == 0 {
		c.firsts = nil // its array held the IDs of the largest moment
	}
}

// forget drops the cached group that starts at first, if any: the group
// was deleted (its last member left), and a decoded copy of jobs that are
// all gone would stay until evicted, held for nothing. The commit that
// deletes a group forgets it; a reader that finds a cached group deleted
// (cachedGroupOf) forgets it too, for one cached again from an older
// snapshot meanwhile.
func (c *groupCache) forget(first string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byName[first]; ok {
		c.remove(el)
	}
}

// decodeCachedGroup decodes a group record into a cachedGroup, which owns
// its members (decompressed, or copied out of val).
func decodeCachedGroup(first string, val []byte) (*cachedGroup, error) {
	last, err := groupLast(val)
	if err != nil {
		return nil, err
	}
	body, _, err := groupMembers(val, true)
	if err != nil {
		return nil, err
	}
	cg := &cachedGroup{first: first, last: last, body: body, states: make(map[string]memberState)}
	err = walkMembers(body, func(m groupMember) bool {
		cg.members = append(cg.members, m)
		return true
	})
	return cg, err
}

// member returns the member id of the group.
func (cg *cachedGroup) member(id string) (groupMember, bool) {
	i := sort.Search(len(cg.members), func(k int) bool { return string(cg.members[k].id) >= id })
	if i < len(cg.members) && string(cg.members[i].id) == id {
		return cg.members[i], true
	}
	return groupMember{}, false
}

// refresh folds the group's marks written since the last refresh into its
// members' states.
func (c *groupCache) refresh(txn *badger.Txn, cg *cachedGroup) error {
	c.mu.Lock()
	from := cg.marksRead
	c.mu.Unlock()
	opts := badger.DefaultIteratorOptions
	prefix := markPrefix(cg.first)
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	type entry struct {
		seq  uint32
		kind byte
		id   string
		at   uint64
	}
	var seen []entry
	next := from
	for it.Seek(markKey(cg.first, from)); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != len(prefix)+4 || !bytes.HasPrefix(k, prefix) {
			return fmt.Errorf("group %s: malformed mark key %x", cg.first, k)
		}
		seq := uint32(k[len(prefix)])<<24 | uint32(k[len(prefix)+1])<<16 | uint32(k[len(prefix)+2])<<8 | uint32(k[len(prefix)+3])
		next = max(next, seq+1)
		err := it.Item().Value(func(v []byte) error {
			return forEachMark(v, func(kind byte, id []byte, at uint64) {
				seen = append(seen, entry{seq, kind, string(id), at})
			})
		})
		if err != nil {
			return fmt.Errorf("group %s mark %d: %w", cg.first, seq, err)
		}
	}
	c.mu.Lock()
	// another reader may have folded some of them meanwhile: each mark
	// applies once, in order
	for _, e := range seen {
		if e.seq >= cg.marksRead {
			st := cg.states[e.id]
			st.apply(e.kind, e.at)
			cg.states[e.id] = st
		}
	}
	cg.marksRead = max(cg.marksRead, next)
	c.mu.Unlock()
	return nil
}

// state returns what the marks read so far say of member id.
func (c *groupCache) state(cg *cachedGroup, id string) memberState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cg.states[id]
}
