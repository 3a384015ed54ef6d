// Refused batched enqueues: what an enqueue changed of the pending jobs
// (links, merged payloads, counters), kept so that a refusal by the store
// can put memory back as it was (refusals.go).

package actors

import (
	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// foldUndo notes, while an enqueue is built, what it changes of its batch
// keys' pending jobs.
type foldUndo struct {
	links    []priorLink    // each key's pending job before the request, first change only
	payloads []priorPayload // each folded pending job's payload before the request
	folded   []string       // the queue of each fold counted
	sealed   []string       // the queue of each seal counted
}

// priorLink is a batch key's pending job before the request ("" for none).
type priorLink struct {
	key, id string
}

// priorPayload is a pending job's payload before a fold: nil when it was
// stored apart (memory did not hold it then and does not now).
type priorPayload struct {
	en      *entry
	payload []byte
	ref     persistence.Ref // where the store kept it
}

// noteLink remembers key's pending job before the request changes it.
func (u *foldUndo) noteLink(key, id string) {
	for _, l := range u.links {
		if l.key == key {
			return
		}
	}
	u.links = append(u.links, priorLink{key, id})
}

// undoFolds puts back what a refused enqueue changed of its keys' pending
// jobs, after its new jobs were forgotten (undoEnqueue). A key goes back to
// its previous pending job only if the key still names a job of the
// refused request (a later request may have started a batch since) and
// that job can still be pending (never dispatched, ready).
func (e *queueCore) undoFolds(u *foldUndo, stored []*entry) {
	if u == nil {
		return
	}
	mine := make(map[string]bool, len(stored))
	for _, en := range stored {
		mine[en.full().ID] = true
	}
	for _, l := range u.links {
		cur, ok := e.pending[l.key]
		if !ok || !mine[cur] {
			continue
		}
		delete(e.pending, l.key)
		if prev := e.jobs.get(l.id); prev != nil && canBePending(prev) {
			e.pending[l.key] = l.id
		}
	}
	for i := len(u.payloads) - 1; i >= 0; i-- {
		p := u.payloads[i]
		j := p.en.full()
		if e.jobs.get(j.ID) != p.en || p.payload == nil {
			continue
		}
		e.payloadBytes += payloadCost(p.payload) - payloadCost(j.Payload)
		j.Payload = p.payload
		p.en.ref = p.ref
	}
	for _, q := range u.folded {
		e.counters(q).folded--
	}
	for _, q := range u.sealed {
		e.counters(q).sealed--
	}
}

// notePayload remembers a pending job's payload before a fold changes it.
func (u *foldUndo) notePayload(en *entry) {
	u.payloads = append(u.payloads, priorPayload{en: en, payload: en.full().Payload, ref: en.ref})
}

// noteCounted remembers the queue of a fold or seal the request counted.
func (u *foldUndo) noteCounted(j *protocol.Job, fold bool) {
	if fold {
		u.folded = append(u.folded, j.Queue)
	} else {
		u.sealed = append(u.sealed, j.Queue)
	}
}

// restoreLinks makes each job whose pending link a refused request removed
// its key's pending job again (the store still links it), unless another
// job became the key's pending job since or the job cannot be pending any
// more.
func (e *queueCore) restoreLinks(links []priorLink) {
	for _, l := range links {
		if _, taken := e.pending[l.key]; taken {
			continue
		}
		if en := e.jobs.get(l.id); en != nil && canBePending(en) {
			e.pending[l.key] = l.id
		}
	}
}

// canBePending reports whether en's job may be its key's pending job: a
// ready job never dispatched and stored alone (SPEC §8.2.7).
func canBePending(en *entry) bool {
	if en.jb == nil {
		return en.status() == protocol.StatusReady // never dispatched
	}
	return en.jb.Status == protocol.StatusReady && en.jb.DequeuedAt == 0
}
