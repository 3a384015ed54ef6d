package actors

// Entries addressable by a plain value. A reservation's request names the
// job's entry so that its answer finds the entry again without a map lookup
// by job id (measured to cost on the dispatch path), yet a message must not
// carry a pointer into the queue actor's state. So an entry that asks a
// budget gets a slot in a table, and the request carries the slot and the
// slot's generation: an entryRef. When the job leaves (finished, deleted,
// reset) its slot is freed and the generation moves on, so an answer that
// still names it finds nothing: the job it was for is gone.

// entryRef names an entry of the queue core: a slot of its entry table and
// the slot's generation when the ref was made. The zero ref names nothing.
type entryRef struct {
	slot uint32 // from 1; 0: none
	gen  uint32
}

// entrySlots is the table entryRefs index.
type entrySlots struct {
	entries []*entry // by slot - 1
	gens    []uint32 // by slot - 1
	free    []uint32 // freed slots
}

// ref returns en's ref, giving en a slot first if it has none.
func (t *entrySlots) ref(en *entry) entryRef {
	if en.slot == 0 {
		if n := len(t.free); n > 0 {
			en.slot = t.free[n-1]
			t.free = t.free[:n-1]
		} else {
			t.entries = append(t.entries, nil)
			t.gens = append(t.gens, 0)
			en.slot = uint32(len(t.entries))
		}
		t.entries[en.slot-1] = en
	}
	return entryRef{slot: en.slot, gen: t.gens[en.slot-1]}
}

// get returns the entry r names, or nil when its job has left since.
func (t *entrySlots) get(r entryRef) *entry {
	if r.slot == 0 || int(r.slot) > len(t.entries) || t.gens[r.slot-1] != r.gen {
		return nil
	}
	return t.entries[r.slot-1]
}

// release frees en's slot, if it has one: refs made for it name nothing
// from now on.
func (t *entrySlots) release(en *entry) {
	if en.slot == 0 {
		return
	}
	i := en.slot - 1
	t.entries[i] = nil
	t.gens[i]++
	t.free = append(t.free, en.slot)
	en.slot = 0
}
