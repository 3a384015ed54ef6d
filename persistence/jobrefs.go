package persistence

import (
	"fmt"

	"github.com/tollgate/tollgate/protocol"
)

// The job verbs: what the engine tells the store about a job, in the
// domain's terms. The store alone decides how a job is laid out (a record
// of its own with the payload inside or apart, or a member of a group with
// marks and maybe a record of its own, group.go); the engine keeps the Ref
// a verb returns next to the job and hands it back to every later verb
// about that job, without looking inside.

// Ref is where the store keeps one job. The zero Ref is a job stored alone
// with its payload in its record. Verbs that change the layout update the
// Ref in place (they take a *Ref).
type Ref struct {
	g     *Group // the group the job belongs to (nil: stored alone)
	own   bool   // a member with a record of its own, overriding the group's copy
	apart bool   // stored alone, its payload under its own key
}

// Group is the stored group the job belongs to, nil when it is stored
// alone (diagnostics and tests: group bookkeeping must match memory).
func (r Ref) Group() *Group { return r.g }

// Packed is r as its group and one byte, for a caller that keeps many
// Refs and cannot spare the padding of the struct; UnpackRef turns them
// back into the same Ref.
func (r Ref) Packed() (*Group, uint8) {
	var bits uint8
	if r.own {
		bits |= 1
	}
	if r.apart {
		bits |= 2
	}
	return r.g, bits
}

// UnpackRef is the Ref that Packed made g and bits of.
func UnpackRef(g *Group, bits uint8) Ref {
	return Ref{g: g, own: bits&1 != 0, apart: bits&2 != 0}
}

// DefaultGroupFrom is how many jobs one request must enqueue for the store
// to keep them together as a group.
const DefaultGroupFrom = 4

// Enqueued stores the new jobs of one request, in ascending ID order, and
// returns where each is. kept[i] says whether the caller keeps job i's
// payload in memory until the job is removed (nil: it keeps every one);
// Updated then needs it in the job, and a payload the caller does not keep
// is stored where no later write needs it. groupFrom is the size from which
// the jobs may be stored together (0: DefaultGroupFrom). A job of a batch
// (protocol.Job.Batch) is always stored alone, since PayloadChanged
// rewrites its payload.
//
// A group member's job gets InGroup set: it tells LoadPayloads where to
// look.
func (b *Batch) Enqueued(jobs []*protocol.Job, kept []bool, groupFrom int) []Ref {
	if groupFrom <= 0 {
		groupFrom = DefaultGroupFrom
	}
	refs := make([]Ref, len(jobs))
	keeps := func(i int) bool { return kept == nil || kept[i] }
	var grouped []*protocol.Job
	var at []int
	for i, j := range jobs {
		if j.Batch == nil {
			grouped, at = append(grouped, j), append(at, i)
		}
	}
	if len(grouped) < groupFrom {
		grouped, at = nil, nil
	}
	var groups []*Group
	if len(grouped) > 0 {
		groups = b.putGroups(grouped)
	}
	inGroup := make(map[int]*Group, len(at))
	for k, i := range at {
		if groups[k] != nil {
			inGroup[i] = groups[k]
		}
	}
	for i, j := range jobs {
		if g := inGroup[i]; g != nil {
			refs[i] = Ref{g: g}
			j.InGroup = true
			continue
		}
		// alone (or the group failed to encode: the batch will not commit)
		if keeps(i) {
			b.putJob(j)
			continue
		}
		b.putApart(j)
		refs[i].apart = true
	}
	return refs
}

// Dispatched records that the job went in flight (j holds its dequeued_at).
func (b *Batch) Dispatched(j *protocol.Job, ref *Ref) {
	if ref.g != nil && !ref.own {
		b.markInFlight(ref.g, j.ID, j.DequeuedAt)
		return
	}
	b.Updated(j, ref)
}

// Updated writes the job's current state (any change but its payload:
// status, attempts, priority, bindings, a retained finished state).
func (b *Batch) Updated(j *protocol.Job, ref *Ref) {
	if ref.g != nil {
		b.putMember(j)
		ref.own = true
		return
	}
	b.putJob(j)
}

// PayloadChanged stores a new payload for a job stored alone (a batch's
// pending job folding another in); kept says whether the caller keeps it in
// memory from now on. A group member's payload never changes.
func (b *Batch) PayloadChanged(j *protocol.Job, payload []byte, kept bool, ref *Ref) {
	if ref.g != nil {
		b.fail(fmt.Errorf("persistence: payload of group member %s changed", j.ID))
		return
	}
	c := *j
	c.Payload = payload
	if kept && !ref.apart {
		b.putJob(&c)
		return
	}
	b.putApart(&c)
	ref.apart = true
}

// PayloadReleased says the caller no longer keeps the payload j still
// holds in memory: the store moves it where later writes do not need it.
func (b *Batch) PayloadReleased(j *protocol.Job, ref *Ref) {
	if ref.g != nil || ref.apart || j.Payload == nil {
		return
	}
	b.putApart(j)
	ref.apart = true
}

// Removed deletes everything stored of a job (attempts: its error records
// 1..attempts).
func (b *Batch) Removed(id string, attempts uint32, ref Ref) {
	if ref.g != nil {
		b.deleteMember(ref.g, id, attempts, ref.own)
		return
	}
	b.deleteJob(id, attempts, ref.apart)
}

// EnqueueRefused undoes what a later, accepted commit may have written of
// a job whose enqueue the store refused (its dispatch). A group member's
// dispatch wrote a mark of a group that does not exist, which loading
// drops; a lone job's wrote its record, which goes.
func (b *Batch) EnqueueRefused(j *protocol.Job, ref Ref) {
	if ref.g != nil {
		return
	}
	b.deleteJob(j.ID, j.Attempts, ref.apart)
}
