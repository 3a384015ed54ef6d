package actors

import "github.com/tollgate/tollgate/protocol"

// jobMap is the unfinished jobs by ID. It is keyed by the ID's 16-byte
// key, not the ID string: a compact job then keeps no string of its ID at
// all (queued_compact.go), which would cost 32 bytes more per queued job.
// Keys and IDs correspond one to one (protocol.ParseIDKey accepts only
// the canonical form), so a lookup by a string that is not an ID finds
// nothing, as it did in a map by string.
type jobMap map[protocol.IDKey]*entry

// get returns the entry of job id, or nil.
func (m jobMap) get(id string) *entry {
	k, ok := protocol.ParseIDKey(id)
	if !ok {
		return nil
	}
	return m[k]
}

// put adds en as the entry of job id (an ID the engine stores: idKey).
func (m jobMap) put(id string, en *entry) { m[idKey(id)] = en }

// drop removes job id's entry.
func (m jobMap) drop(id string) {
	if k, ok := protocol.ParseIDKey(id); ok {
		delete(m, k)
	}
}
