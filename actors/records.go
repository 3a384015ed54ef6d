package actors

import (
	"unsafe"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// How the engine tells the store about a job. The store decides the layout
// (persistence/jobrefs.go); memory keeps the persistence.Ref it returned in
// the job's entry (en.ref) and hands it back with every later write. What
// the engine decides is only which payloads memory keeps: those that fit
// the payload cache (EngineConfig.PayloadCacheBytes), until the job ends.

// storeNewJobs writes the jobs a request enqueued (in ID order) and applies
// the payload cache's rule: a payload stays in memory only while there is
// room.
func (e *queueCore) storeNewJobs(entries []*entry, batch *persistence.Batch) {
	if len(entries) == 0 {
		return
	}
	jobs := make([]*protocol.Job, len(entries))
	kept := make([]bool, len(entries))
	for i, en := range entries {
		jobs[i] = en.full()
		kept[i] = e.keepPayload(en.full().Payload)
	}
	refs := batch.Enqueued(jobs, kept, e.cfg.GroupMinJobs)
	for i, en := range entries {
		en.ref = refs[i]
		if !kept[i] {
			en.full().Payload = nil
		}
	}
}

// keepPayload reports whether memory keeps a payload (and counts it if
// so): while the payload cache has room.
func (e *queueCore) keepPayload(p []byte) bool {
	if e.payloadBytes+payloadCost(p) > e.cfg.PayloadCacheBytes {
		return false
	}
	e.payloadBytes += payloadCost(p)
	return true
}

// cachedJobBytes is what a job costs more in memory while it keeps its
// payload: it stays whole (its entry, a protocol.Job and its ID string)
// where it would otherwise wait as a cold record (coldjobs.go).
const cachedJobBytes = int(unsafe.Sizeof(entry{})+unsafe.Sizeof(protocol.Job{})) + idStringBytes - int(unsafe.Sizeof(coldJob{}))

// idStringBytes is the allocation of an ID string (25 bytes: a 32-byte
// class).
const idStringBytes = 32

// payloadCost is what keeping payload p costs the payload cache: its bytes
// and cachedJobBytes, so that the cache's bound holds for small payloads
// too (8 MiB of 10-byte payloads would otherwise keep 0.8 million whole
// jobs, ~230 MiB).
func payloadCost(p []byte) int {
	if p == nil {
		return 0
	}
	return len(p) + cachedJobBytes
}

// putRecord writes the job's current state.
func (e *queueCore) putRecord(en *entry, batch *persistence.Batch) {
	batch.Updated(en.full(), &en.ref)
}

// putDispatched writes that the job was dispatched.
func (e *queueCore) putDispatched(en *entry, batch *persistence.Batch) {
	writeUnlink(en, batch)
	batch.Dispatched(en.full(), &en.ref)
}

// deleteRecord removes a job's stored state, its error records included.
func deleteRecord(j *protocol.Job, ref persistence.Ref, batch *persistence.Batch) {
	batch.Removed(j.ID, j.Attempts, ref)
}

// deleteTerminal removes a retained finished job's stored state.
func deleteTerminal(t terminalJob, batch *persistence.Batch) {
	batch.Removed(t.id, t.attempts, t.ref)
}
