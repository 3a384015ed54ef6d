// The cron schedule's rules: entries ordered by (next_enqueue_at, group,
// entry), what is due at a given time and when to wake next. Plain data, no
// actor and no clock: the cron actor (cron_actor.go) passes now in.

package actors

import "github.com/google/btree"

// cronRecheck is the longest the cron actor sleeps while anything is
// scheduled: it re-reads the wall clock at least this often, so a forward
// clock jump or a suspended host is noticed (SPEC §8.1.6).
const cronRecheck = 60_000 // ms

// CronSlot names one due firing: an entry and the next_enqueue_at it was
// scheduled for.
type CronSlot struct {
	Group, Entry string
	Slot         uint64 // Unix ms
}

type cronRef struct{ group, entry string }

func cronSlotLess(a, b CronSlot) bool {
	if a.Slot != b.Slot {
		return a.Slot < b.Slot
	}
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	return a.Entry < b.Entry
}

// cronSchedule holds every scheduled entry once, at its next_enqueue_at.
type cronSchedule struct {
	set  *btree.BTreeG[CronSlot]
	next map[cronRef]uint64
}

func newCronSchedule() *cronSchedule {
	return &cronSchedule{set: btree.NewG(32, cronSlotLess), next: make(map[cronRef]uint64)}
}

// put schedules an entry at slot, replacing its previous slot; slot 0
// removes it.
func (s *cronSchedule) put(group, entry string, slot uint64) {
	ref := cronRef{group, entry}
	if old, ok := s.next[ref]; ok {
		s.set.Delete(CronSlot{group, entry, old})
		delete(s.next, ref)
	}
	if slot == 0 {
		return
	}
	s.next[ref] = slot
	s.set.ReplaceOrInsert(CronSlot{group, entry, slot})
}

// clear removes every entry.
func (s *cronSchedule) clear() {
	s.set.Clear(false)
	s.next = make(map[cronRef]uint64)
}

// due removes and returns, in order, up to max entries whose slot is at or
// before now.
func (s *cronSchedule) due(now uint64, max int) []CronSlot {
	var out []CronSlot
	for len(out) < max {
		it, ok := s.set.Min()
		if !ok || it.Slot > now {
			break
		}
		s.set.DeleteMin()
		delete(s.next, cronRef{it.Group, it.Entry})
		out = append(out, it)
	}
	return out
}

// wakeAt is when to look again: the earliest slot, but no later than
// cronRecheck from now; ok is false when nothing is scheduled.
func (s *cronSchedule) wakeAt(now uint64) (at uint64, ok bool) {
	it, ok := s.set.Min()
	if !ok {
		return 0, false
	}
	return min(it.Slot, now+cronRecheck), true
}
