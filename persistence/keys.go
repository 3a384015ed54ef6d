package persistence

import "encoding/binary"

// Keyspaces. Every key starts with a one-letter prefix and a slash; integers
// are fixed-width big-endian so byte order is numeric order.
//
//	key                          value                          owner
//	m/version                    schema version (1 byte)        Store.Open
//	j/<job id>                   job record without its payload queue actor
//	p/<job id>                   payload (version byte + JSON)  queue actor
//	e/<job id>/<attempt u32>     error record                   queue actor
//	b/<budget key>               budget record                  queue actor
//	g/<first job id>             job group: its members' records queue actor
//	g/<first job id>/<seq u32>   group mark: dispatches, removals queue actor
//	c/<cron group>               cron group record              queue actor
//	n/<cron group>\x00<entry>    cron entry record              queue actor
//	t/<cron group>\x00<entry>    cron entry times (next, last)  queue actor
//	m/reclaim                    empty; written and dropped to   Store (space.go)
//	                             flush the memtable
//	k/<batch key>                id of the key's pending job    queue actor
//	h/<budget key>               budget hold (until, drained)   queue actor
//	o/<budget key>               empty: made by a create_with   queue actor
//	l/<budget key>               time_based pool level          queue actor
//	q/q<queue><priority u16>     empty: a pair of stored jobs   Store (priorities.go)
//	q/b<budget key><priority>    empty: a pair of their bindings Store (priorities.go)
//	m/priorities                 empty: the q/ keys are complete Store (priorities.go)
//
// A bulk enqueue stores its jobs as groups (group.go); a member's own
// j/<id> record, when it has one, overrides the group's copy.
//
// The payload is written at enqueue and changes only when a batched enqueue
// folds into the job (SPEC §8.2, a job that never joins a group), so the
// many rewrites of a job record as its status changes stay small.
//
// A k/ entry is the durable link from a batch key to its pending job; it is
// removed in the transaction that seals the batch.
//
// A firing rewrites only the entry's times (t/, 17 bytes), not its record
// with the template; the times there override those in the record.
//
// Cron group and entry names never contain NUL, so the NUL after the group
// name ends it: a group's entries are one prefix, in entry-name order.
//
// Job IDs are 25 fixed-length base-36 characters, so "e/<id>/" prefixes
// never collide. Budget keys never contain NUL and are at most 255 bytes.
var (
	versionKey     = []byte("m/version")
	reclaimKey     = []byte("m/reclaim")
	jobPrefix      = []byte("j/")
	payloadPrefix  = []byte("p/")
	errorPrefix    = []byte("e/")
	budgetPrefix   = []byte("b/")
	groupPrefix    = []byte("g/")
	cronPrefix     = []byte("c/")
	entryPrefix    = []byte("n/")
	timesPrefix    = []byte("t/")
	batchPrefix    = []byte("k/")
	holdPrefix     = []byte("h/")
	onTheFlyPrefix = []byte("o/")
	poolPrefix     = []byte("l/")
	priorityPrefix = []byte("q/")
)

func cronTimesKey(group, entry string) []byte {
	k := make([]byte, 0, len(timesPrefix)+len(group)+1+len(entry))
	k = append(append(append(k, timesPrefix...), group...), 0)
	return append(k, entry...)
}

func cronGroupKey(group string) []byte {
	k := make([]byte, 0, len(cronPrefix)+len(group))
	return append(append(k, cronPrefix...), group...)
}

// cronEntriesPrefix is the prefix of a group's entries.
func cronEntriesPrefix(group string) []byte {
	k := make([]byte, 0, len(entryPrefix)+len(group)+1)
	return append(append(append(k, entryPrefix...), group...), 0)
}

func cronEntryKey(group, entry string) []byte {
	return append(cronEntriesPrefix(group), entry...)
}

func jobKey(id string) []byte {
	k := make([]byte, 0, len(jobPrefix)+len(id))
	return append(append(k, jobPrefix...), id...)
}

func payloadKey(id string) []byte {
	k := make([]byte, 0, len(payloadPrefix)+len(id))
	return append(append(k, payloadPrefix...), id...)
}

func errorKeyPrefix(id string) []byte {
	k := make([]byte, 0, len(errorPrefix)+len(id)+1)
	k = append(append(k, errorPrefix...), id...)
	return append(k, '/')
}

func errorKey(id string, attempt uint32) []byte {
	return binary.BigEndian.AppendUint32(errorKeyPrefix(id), attempt)
}

func budgetKey(key string) []byte {
	k := make([]byte, 0, len(budgetPrefix)+len(key))
	return append(append(k, budgetPrefix...), key...)
}

func groupKey(first string) []byte {
	k := make([]byte, 0, len(groupPrefix)+len(first))
	return append(append(k, groupPrefix...), first...)
}

// markPrefix is the prefix of a group's marks: its key and a slash.
func markPrefix(first string) []byte {
	k := make([]byte, 0, len(groupPrefix)+len(first)+5)
	return append(append(append(k, groupPrefix...), first...), '/')
}

func markKey(first string, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(markPrefix(first), seq)
}

func batchLinkKey(key string) []byte {
	k := make([]byte, 0, len(batchPrefix)+len(key))
	return append(append(k, batchPrefix...), key...)
}
