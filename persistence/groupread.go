package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate/tollgate/protocol"
)

// groupKeyLen is the length of a group record's key (a mark's key is
// longer: a slash and a sequence number follow).
var groupKeyLen = len(groupPrefix) + protocol.IDLength

// findGroup returns the first ID and the last member's ID of the group
// whose ID range holds id: the group with the greatest first ID not above
// it, if its last member is not below it.
func findGroup(txn *badger.Txn, id string) (first, last string, ok bool, err error) {
	opts := badger.DefaultIteratorOptions
	opts.Reverse = true
	opts.Prefix = groupPrefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	it.Seek(groupKey(id))
	if !it.Valid() {
		it.Close()
		return "", "", false, nil
	}
	k := it.Item().Key()
	if len(k) < groupKeyLen {
		it.Close()
		return "", "", false, nil
	}
	first = string(k[len(groupPrefix):groupKeyLen])
	it.Close()
	found, err := readGroup(txn, first, func(val []byte) error {
		var err error
		last, err = groupLast(val)
		return err
	})
	if err != nil || !found || last < id {
		return "", "", false, err
	}
	return first, last, true, nil
}

// readGroup calls fn with the record of group first; it reports false when
// there is no such group.
func readGroup(txn *badger.Txn, first string, fn func(val []byte) error) (bool, error) {
	item, err := txn.Get(groupKey(first))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, item.Value(fn)
}

// getMember reads member id from its group (through the group cache) with
// its state; it returns badger.ErrKeyNotFound when no group holds it or it
// is gone.
func (s *Store) getMember(txn *badger.Txn, id string) (*protocol.Job, error) {
	cg, err := s.cachedGroupOf(txn, id)
	if err != nil {
		return nil, err
	}
	if cg == nil {
		return nil, badger.ErrKeyNotFound
	}
	m, ok := cg.member(id)
	if !ok {
		return nil, badger.ErrKeyNotFound
	}
	if err := s.groups.refresh(txn, cg); err != nil {
		return nil, err
	}
	st := s.groups.state(cg, id)
	if st.gone {
		return nil, badger.ErrKeyNotFound
	}
	job, err := memberJob(m, st)
	if err != nil {
		return nil, fmt.Errorf("group %s member %s: %w", cg.first, id, err)
	}
	return job, nil
}

// readMemberPayload fills in job's payload from its group (the job has its
// own record, which holds no payload).
func (s *Store) readMemberPayload(txn *badger.Txn, job *protocol.Job) error {
	cg, err := s.cachedGroupOf(txn, job.ID)
	if err != nil {
		return err
	}
	if cg != nil {
		if m, ok := cg.member(job.ID); ok {
			job.Payload = append(make([]byte, 0, len(m.payload)), m.payload...)
			job.InGroup = true
			return nil
		}
	}
	return fmt.Errorf("payload of %s is missing from the store", job.ID)
}

// loadMemberPayloads fills in the payloads of jobs[i] for i in need (group
// members, in ID order) from their groups, decoded once and cached
// (groupCache), and marks found those whose member is not gone.
func (s *Store) loadMemberPayloads(txn *badger.Txn, jobs []protocol.Job, need []int, found []bool) error {
	for start := 0; start < len(need); {
		id := jobs[need[start]].ID
		cg, err := s.cachedGroupOf(txn, id)
		if err != nil {
			return err
		}
		if cg == nil {
			start++ // deleted since it was dispatched, with its group
			continue
		}
		if err := s.groups.refresh(txn, cg); err != nil {
			return err
		}
		end := start
		for ; end < len(need) && jobs[need[end]].ID <= cg.last; end++ {
			i := need[end]
			if m, ok := cg.member(jobs[i].ID); ok && !s.groups.state(cg, jobs[i].ID).gone {
				jobs[i].Payload = append(make([]byte, 0, len(m.payload)), m.payload...)
				found[i] = true
			}
		}
		start = end
	}
	return nil
}

// cachedGroupOf returns the decoded group whose ID range holds id, from
// the cache if it still exists, else read from the store (and cached); nil
// when there is none.
func (s *Store) cachedGroupOf(txn *badger.Txn, id string) (*cachedGroup, error) {
	if cg := s.groups.lookup(id); cg != nil {
		_, err := txn.Get(groupKey(cg.first))
		if err == nil {
			return cg, nil
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return nil, fmt.Errorf("group %s: %w", cg.first, err)
		}
		// deleted: its members are all gone. The commit that deleted it
		// dropped it from the cache, but a reader whose snapshot was older
		// may have cached it again since; a group's first ID is never
		// used again, so it goes for good.
		s.groups.forget(cg.first)
		return nil, nil
	}
	first, _, ok, err := findGroup(txn, id)
	if err != nil || !ok {
		return nil, err
	}
	var cg *cachedGroup
	_, err = readGroup(txn, first, func(val []byte) error {
		var err error
		cg, err = decodeCachedGroup(first, val)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", first, err)
	}
	if cg == nil {
		return nil, nil
	}
	s.groups.add(cg)
	return cg, nil
}

// ---------------------------------------------------------------- scanning

// scannedGroup is a group the scan has read: its members in ID order with
// the state their marks give.
type scannedGroup struct {
	g       *Group
	members []*protocol.Job // nil entries: gone members
	empty   bool            // every member was gone on disk
}

// nextGroup reads the group record at it (positioned on a g/ key) and its
// marks, leaving it on the next group's record; it returns nil at the end.
// Marks before the record (of a group never written: an enqueue whose
// commit failed while the jobs stayed in memory) are added to orphans.
func nextGroup(it *badger.Iterator, orphans *[][]byte) (*scannedGroup, error) {
	for ; it.Valid(); it.Next() {
		if len(it.Item().Key()) == groupKeyLen {
			break
		}
		*orphans = append(*orphans, it.Item().KeyCopy(nil))
	}
	if !it.Valid() {
		return nil, nil
	}
	key := it.Item().KeyCopy(nil)
	first := string(key[len(groupPrefix):])
	val, err := it.Item().ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	g := &Group{first: first}
	var members []groupMember
	if err := forEachMember(val, func(m groupMember) bool { members = append(members, m); return true }); err != nil {
		return nil, fmt.Errorf("group %s: %w", first, err)
	}
	states := make(map[string]memberState)
	prefix := markPrefix(first)
	for it.Next(); it.Valid() && bytes.HasPrefix(it.Item().Key(), prefix); it.Next() {
		k := it.Item().Key()
		if len(k) != len(prefix)+4 {
			return nil, fmt.Errorf("group %s: malformed mark key %x", first, k)
		}
		seq := uint32(k[len(prefix)])<<24 | uint32(k[len(prefix)+1])<<16 | uint32(k[len(prefix)+2])<<8 | uint32(k[len(prefix)+3])
		g.marks = max(g.marks, seq+1)
		err := it.Item().Value(func(v []byte) error {
			return forEachMark(v, func(kind byte, id []byte, at uint64) {
				st := states[string(id)]
				st.apply(kind, at)
				states[string(id)] = st
			})
		})
		if err != nil {
			return nil, fmt.Errorf("group %s mark %d: %w", first, seq, err)
		}
	}
	sg := &scannedGroup{g: g, members: make([]*protocol.Job, len(members))}
	for i, m := range members {
		st := states[string(m.id)]
		if st.gone {
			continue
		}
		job, err := memberJob(m, st)
		if err != nil {
			return nil, fmt.Errorf("group %s member %s: %w", first, m.id, err)
		}
		sg.members[i] = job
		g.live++
	}
	sg.empty = g.live == 0
	return sg, nil
}

// ScanJobs calls fn for every stored job in ID order, with where it is
// stored. A job stored alone comes as its record holds it (a payload stored
// apart is not read: it is nil); a group member comes with its payload and
// its state, from its own record when it has one. Groups with no member
// left, which are never written, are deleted if found, and so are marks
// whose group was never stored (an enqueue whose commit failed).
func (s *Store) ScanJobs(fn func(*protocol.Job, Ref) error) error {
	return s.NewJobScan().Run(fn)
}

// JobScan reads the stored jobs from a snapshot of the store, taken when
// the scan was made: what is written meanwhile is not seen.
type JobScan interface {
	// Run calls fn with every job of the snapshot as ScanJobs does, then
	// releases the snapshot. Call it once.
	Run(fn func(*protocol.Job, Ref) error) error
	// Close releases a snapshot that will not be run.
	Close()
	// Priorities returns the (queue, priority) pairs stored with the
	// snapshot, and whether they were complete: then every unfinished job
	// of the snapshot has its pair among them (priorities.go); when not,
	// they say nothing.
	Priorities() (pairs map[PriorityPair]struct{}, complete bool)
	// refusalMark is the store's count of refused commits at the
	// snapshot (Batch.PrioritiesInUse).
	refusalMark() uint64
}

// NewJobScan takes a snapshot of the stored jobs once every batch submitted
// before the call is committed or refused, to be read by Run, perhaps on
// another goroutine. It waits for those commits: a caller that submitted
// nothing waits for nothing but the committer's current group.
func (s *Store) NewJobScan() JobScan {
	reply := make(chan *jobScan, 1)
	select {
	case s.queue <- &commit{scan: reply}:
	case <-s.stop:
		return &jobScan{closed: true}
	}
	select {
	case sc := <-reply:
		return sc
	case <-s.committed: // it returned before the request reached it
		select {
		case sc := <-reply:
			return sc
		default:
			return &jobScan{closed: true}
		}
	}
}

// snapshotJobs takes a snapshot, on the committer, between two commits.
func (s *Store) snapshotJobs() *jobScan {
	return &jobScan{s: s, txn: s.db.NewTransaction(false), pairs: maps.Clone(s.prios), complete: s.priosComplete, refusals: s.refusals}
}

type jobScan struct {
	s        *Store
	txn      *badger.Txn
	pairs    map[PriorityPair]struct{}
	complete bool
	refusals uint64
	closed   bool // the store was closing: Run fails
}

func (sc *jobScan) Priorities() (map[PriorityPair]struct{}, bool) { return sc.pairs, sc.complete }

func (sc *jobScan) refusalMark() uint64 { return sc.refusals }

func (sc *jobScan) Close() {
	if sc.txn != nil {
		sc.txn.Discard()
	}
}

func (sc *jobScan) Run(fn func(*protocol.Job, Ref) error) error {
	if sc.closed {
		return protocol.ErrShuttingDown
	}
	defer sc.txn.Discard()
	s := sc.s
	var (
		empty   []*Group // as found on disk, before fn removes anyone
		orphans [][]byte
	)
	err := func(txn *badger.Txn) error {
		jopts := badger.DefaultIteratorOptions
		jopts.Prefix = jobPrefix
		jopts.PrefetchSize = 256
		jit := txn.NewIterator(jopts)
		defer jit.Close()
		gopts := badger.DefaultIteratorOptions
		gopts.Prefix = groupPrefix
		gopts.PrefetchValues = false
		git := txn.NewIterator(gopts)
		defer git.Close()

		jit.Rewind()
		git.Rewind()
		sg, err := nextGroup(git, &orphans)
		if err != nil {
			return err
		}
		mi := 0 // next member of sg
		for {
			// the next member of the current group, skipping gone ones
			for sg != nil {
				for mi < len(sg.members) && sg.members[mi] == nil {
					mi++
				}
				if mi < len(sg.members) {
					break
				}
				if sg.empty {
					empty = append(empty, sg.g)
				}
				if sg, err = nextGroup(git, &orphans); err != nil {
					return err
				}
				mi = 0
			}
			var jid []byte
			if jit.Valid() {
				jid = jit.Item().Key()[len(jobPrefix):]
			}
			switch {
			case sg == nil && jid == nil:
				return nil
			case sg == nil || (jid != nil && string(jid) < sg.members[mi].ID):
				job, err := decodeJobItem(jit.Item())
				if err != nil {
					return err
				}
				jit.Next()
				if err := fn(job, Ref{apart: job.Payload == nil}); err != nil {
					return err
				}
			case jid != nil && string(jid) == sg.members[mi].ID:
				job, err := decodeJobItem(jit.Item())
				if err != nil {
					return err
				}
				jit.Next()
				job.Payload = sg.members[mi].Payload
				job.InGroup = true
				mi++
				if err := fn(job, Ref{g: sg.g, own: true}); err != nil {
					return err
				}
			default:
				job := sg.members[mi]
				mi++
				if err := fn(job, Ref{g: sg.g}); err != nil {
					return err
				}
			}
		}
	}(sc.txn)
	if err != nil || len(empty)+len(orphans) == 0 {
		return err
	}
	b := NewBatch(false)
	b.kills = empty
	for _, k := range orphans {
		b.del(k)
	}
	s.log.Warn("deleting job groups without members and marks without a group", "groups", len(empty), "marks", len(orphans))
	if err := s.Commit(context.Background(), b); err != nil {
		return fmt.Errorf("persistence.ScanJobs: delete empty groups: %w", err)
	}
	return nil
}

func decodeJobItem(item *badger.Item) (*protocol.Job, error) {
	job := new(protocol.Job)
	if err := item.Value(func(v []byte) error { return protocol.UnmarshalRecord(v, job) }); err != nil {
		return nil, fmt.Errorf("persistence.ScanJobs %s: %w", item.Key(), err)
	}
	return job, nil
}

// GroupNames lists the stored groups by their first member's ID, in order
// (diagnostics and tests: every group must have a member in memory).
func (s *Store) GroupNames() ([]string, error) {
	var out []string
	err := s.groupKeys(func(k []byte) {
		if len(k) == groupKeyLen {
			out = append(out, string(k[len(groupPrefix):]))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("persistence.GroupNames: %w", err)
	}
	return out, nil
}

// groupKeys calls fn with every key under g/ (groups and marks), in order.
func (s *Store) groupKeys(fn func(key []byte)) error {
	return s.db.View(func(txn *badger.Txn) error {
		eachKey(txn, groupPrefix, func(k []byte) bool { fn(k); return true })
		return nil
	})
}
