package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"

	"github.com/tollgate/tollgate/protocol"
)

// Job groups.
//
// A bulk enqueue stores its jobs as one group: one badger entry, g/<first
// id>, holding every member's record (payload included) instead of one entry
// per job. What happens to a member afterwards is written as a small mark
// under g/<first id>/<seq>:
//
//   - in flight: the member was dispatched at dequeued_at (the one change a
//     job makes on its way from enqueue to ack besides finishing);
//   - gone: the member finished or was deleted.
//
// Any other change (a failure, a requeue, a patch, a rebinding, a retained
// finished state) writes the member's own record, j/<id>, without its
// payload; that record then overrides the group's copy and any in-flight
// mark, and the payload is still read from the group. When the last member
// is gone, the group and all its marks are deleted in the same batch.
//
// So the hot path of a bulk of N jobs costs one record write, a few marks
// per dispatch flush and per bulk ack, and the deletes of the group's keys,
// instead of 3·N badger entries. The price: a group stays on disk until its
// last member finishes, so one long-lived member keeps its siblings' bytes.

// Group is a stored job group as the queue actor tracks it. Batches update
// it as they are built, so it must only be used from the goroutine that
// builds and submits batches, in submission order.
type Group struct {
	first string // the first member's ID: the group's key
	live  int    // members not gone
	marks uint32 // marks written so far; the next mark's sequence number
	dead  bool   // deleted, with its marks
}

// First is the ID of the group's first member, which names the group.
func (g *Group) First() string { return g.first }

// Live is the number of members not gone.
func (g *Group) Live() int { return g.live }

// The mark kinds.
const (
	markInFlight byte = 'f'
	markGone     byte = 'x'
)

// pendingMarks is what a batch will write as one mark of a group.
type pendingMarks struct {
	g   *Group
	val []byte
}

// maxGroupRecordBytes bounds the members of one group record before
// compression: a bulk larger than this is stored as several groups.
const maxGroupRecordBytes = 512 << 10

// Group record formats: the record's first byte.
const (
	groupPlain byte = 1 // the members as they are
	groupS2    byte = 2 // the members compressed with S2
)

// putGroups stores jobs, in ascending ID order, as groups of consecutive
// members with their payloads, and returns the group of each job. A group
// record is a format byte, the last member's ID (so a reader can tell which
// IDs the group spans without decoding it), then the members, compressed
// with S2 when that saves an eighth or more. Each member is its ID, its
// record without the payload, and the payload.
//
// Compression keeps what a large backlog costs on disk and in the page
// cache badger maps (the resident set) at a fraction of the payload bytes
// when payloads are JSON, for about a millisecond of CPU per 512 KiB.
func (b *Batch) putGroups(jobs []*protocol.Job) []*Group {
	groups := make([]*Group, len(jobs))
	var (
		g       *Group
		members []byte
		last    string
		rec     []byte // one scratch buffer for every member's record
	)
	emit := func() {
		if g == nil {
			return
		}
		val := appendBytes([]byte{groupPlain}, []byte(last))
		if packed := s2.Encode(nil, members); len(packed) < len(members)-len(members)/8 {
			val[0] = groupS2
			val = append(val, packed...)
		} else {
			val = append(val, members...)
		}
		key := groupKey(g.first)
		b.size += len(key) + len(val) + 32
		b.ops = append(b.ops, op{key: key, val: val})
		g, members = nil, nil
	}
	for i, j := range jobs {
		if i > 0 && jobs[i-1].ID >= j.ID {
			b.fail(fmt.Errorf("persistence: group members out of ID order: %s after %s", j.ID, jobs[i-1].ID))
			return groups
		}
		b.notePriority(j)
		meta := *j
		meta.Payload = nil
		rec = protocol.AppendJobRecord(rec[:0], &meta)
		n := len(j.ID) + len(rec) + len(j.Payload) + 12
		if g != nil && len(members)+n > maxGroupRecordBytes {
			emit()
		}
		if g == nil {
			g = &Group{first: j.ID}
			members = make([]byte, 0, min(maxGroupRecordBytes, n*(len(jobs)-i)))
		}
		members = appendBytes(members, []byte(j.ID))
		members = appendBytes(members, rec)
		members = appendBytes(members, j.Payload)
		last = j.ID
		g.live++
		groups[i] = g
	}
	emit()
	return groups
}

// putMember writes a group member's own record, which overrides the
// group's copy from now on. The payload stays in the group.
func (b *Batch) putMember(j *protocol.Job) {
	b.notePriority(j)
	meta := *j
	meta.Payload = nil
	b.set(jobKey(j.ID), &meta)
}

// markInFlight records that member id of g was dispatched at dequeuedAt.
func (b *Batch) markInFlight(g *Group, id string, dequeuedAt uint64) {
	val := b.marksOf(g)
	val = appendBytes(append(val, markInFlight), []byte(id))
	val = binary.AppendUvarint(val, dequeuedAt)
	b.setMarks(g, val)
}

// deleteMember removes member id of g: a gone mark (the group and its marks
// are deleted when it was the last member), its own record when it has one
// (override), and its error records (attempts 1..n).
func (b *Batch) deleteMember(g *Group, id string, attempts uint32, override bool) {
	if override {
		b.del(jobKey(id))
	}
	for a := uint32(1); a <= attempts; a++ {
		b.del(errorKey(id, a))
	}
	if g.live <= 0 {
		b.fail(fmt.Errorf("persistence: member %s of group %s removed twice", id, g.first))
		return
	}
	g.live--
	b.removed = append(b.removed, g)
	if g.live == 0 {
		b.kills = append(b.kills, g)
		return
	}
	val := b.marksOf(g)
	b.setMarks(g, appendBytes(append(val, markGone), []byte(id)))
}

func (b *Batch) marksOf(g *Group) []byte {
	for i := range b.marks {
		if b.marks[i].g == g {
			return b.marks[i].val
		}
	}
	b.marks = append(b.marks, pendingMarks{g: g, val: []byte{protocol.RecordVersion}})
	return b.marks[len(b.marks)-1].val
}

func (b *Batch) setMarks(g *Group, val []byte) {
	for i := range b.marks {
		if b.marks[i].g == g {
			b.size += len(val) - len(b.marks[i].val)
			b.marks[i].val = val
			return
		}
	}
}

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Seal turns the batch's pending marks into writes, in submission order:
// each group gets its next mark sequence number, and a group whose last
// member left in this batch is deleted with every mark it has (its pending
// mark is not written). A group that died in an earlier batch gets nothing.
// Submit calls it; a JobStore that refuses a batch without Submit calls it
// too, so the groups' bookkeeping moves on as it does for a failed commit.
func (b *Batch) Seal() {
	for _, g := range b.kills {
		if g.dead {
			continue
		}
		g.dead = true
		b.killed = append(b.killed, g)
		b.del(groupKey(g.first))
		for seq := range g.marks {
			b.del(markKey(g.first, seq))
		}
	}
	for _, pm := range b.marks {
		if pm.g.dead {
			continue
		}
		key := markKey(pm.g.first, pm.g.marks)
		pm.g.marks++
		b.size += len(key) + 32
		b.ops = append(b.ops, op{key: key, val: pm.val})
	}
	b.marks, b.kills = nil, nil
}

// Revert undoes what a batch the store refused did to its groups'
// bookkeeping: the members it removed count as live again and the groups it
// deleted exist again. Call it for a refused batch only, before any later
// batch is built on the same groups' bookkeeping being wrong (the queue
// actor does it when the refusal reaches it; a batch built in between that
// removed a group's last member has deleted it for good). Mark sequence
// numbers the batch used stay used: marks only need to be distinct.
func (b *Batch) Revert() {
	for _, g := range b.removed {
		g.live++
	}
	for _, g := range b.killed {
		g.dead = false
	}
	b.removed, b.killed = nil, nil
}

// appendBytes appends a uvarint-length-prefixed byte string.
func appendBytes(dst, s []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// ---------------------------------------------------------------- reading

// groupMember is one member of a decoded group record; its slices point
// into the record.
type groupMember struct {
	id      []byte
	rec     []byte // its record without the payload (version byte, msgpack)
	payload []byte
}

// memberState is what a group's marks say of one member.
type memberState struct {
	gone       bool
	inFlight   bool
	dequeuedAt uint64
}

var (
	errBadGroup = errors.New("malformed group record")
	errBadMark  = errors.New("malformed group mark")
)

// groupHeader splits a group record into its format, its last member's ID
// and its (possibly compressed) members.
func groupHeader(val []byte) (format byte, last, body []byte, err error) {
	if len(val) == 0 || (val[0] != groupPlain && val[0] != groupS2) {
		return 0, nil, nil, errBadGroup
	}
	last, body, ok := cutBytes(val[1:])
	if !ok {
		return 0, nil, nil, errBadGroup
	}
	return val[0], last, body, nil
}

// groupLast returns the ID of a group record's last member.
func groupLast(val []byte) (string, error) {
	_, last, _, err := groupHeader(val)
	return string(last), err
}

// forEachMember calls fn for each member of a group record, in ID order,
// until fn returns false. The member's slices are valid until fn returns.
func forEachMember(val []byte, fn func(m groupMember) bool) error {
	members, _, err := groupMembers(val, false)
	if err != nil {
		return err
	}
	return walkMembers(members, fn)
}

// groupMembers returns a group record's members, decompressed when stored
// compressed. With own set, the result never aliases val (it is copied
// when stored plain); the second result reports whether it was copied or
// decompressed at all.
func groupMembers(val []byte, own bool) ([]byte, bool, error) {
	format, _, body, err := groupHeader(val)
	if err != nil {
		return nil, false, err
	}
	switch {
	case format == groupS2:
		members, err := s2.Decode(nil, body)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %v", errBadGroup, err)
		}
		return members, true, nil
	case own:
		return bytes.Clone(body), true, nil
	}
	return body, false, nil
}

// walkMembers calls fn for each member of a group's (decompressed)
// members, in ID order, until fn returns false; the slices point into
// members.
func walkMembers(members []byte, fn func(m groupMember) bool) error {
	for rest := members; len(rest) > 0; {
		var m groupMember
		var ok bool
		if m.id, rest, ok = cutBytes(rest); !ok {
			return errBadGroup
		}
		if m.rec, rest, ok = cutBytes(rest); !ok {
			return errBadGroup
		}
		if m.payload, rest, ok = cutBytes(rest); !ok {
			return errBadGroup
		}
		if !fn(m) {
			return nil
		}
	}
	return nil
}

// forEachMark calls fn for each entry of one mark value.
func forEachMark(val []byte, fn func(kind byte, id []byte, dequeuedAt uint64)) error {
	if len(val) == 0 || val[0] != protocol.RecordVersion {
		return errBadMark
	}
	for rest := val[1:]; len(rest) > 0; {
		kind := rest[0]
		id, r, ok := cutBytes(rest[1:])
		if !ok {
			return errBadMark
		}
		var at uint64
		switch kind {
		case markInFlight:
			n := 0
			if at, n = binary.Uvarint(r); n <= 0 {
				return errBadMark
			}
			r = r[n:]
		case markGone:
		default:
			return fmt.Errorf("unknown group mark kind %q", kind)
		}
		fn(kind, id, at)
		rest = r
	}
	return nil
}

// apply folds one mark entry into a member's state.
func (st *memberState) apply(kind byte, dequeuedAt uint64) {
	switch kind {
	case markInFlight:
		st.inFlight, st.dequeuedAt = true, dequeuedAt
	case markGone:
		st.gone = true
	}
}

// cutBytes splits a uvarint-length-prefixed byte string off b.
func cutBytes(b []byte) (s, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// memberJob decodes a member into a job with its payload (copied) and
// applies its state: an in-flight mark makes it in_flight since
// dequeued_at.
func memberJob(m groupMember, st memberState) (*protocol.Job, error) {
	job := new(protocol.Job)
	if err := protocol.UnmarshalRecord(m.rec, job); err != nil {
		return nil, err
	}
	job.Payload = append(make([]byte, 0, len(m.payload)), m.payload...)
	job.InGroup = true
	if st.inFlight {
		job.Status = protocol.StatusInFlight
		job.DequeuedAt = st.dequeuedAt
	}
	return job, nil
}
