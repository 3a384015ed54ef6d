package protocol

import (
	"encoding/binary"
	"math"
)

// AppendJobRecord appends the stored record of j (version byte, then
// msgpack) to dst. It writes exactly the bytes MarshalRecord(j) writes
// through the reflective msgpack encoder (string-keyed map in field order,
// omitempty fields left out, compact integers, float64 floats), without
// reflection and in one allocation at most.
func AppendJobRecord(dst []byte, j *Job) []byte {
	dst = append(dst, RecordVersion)
	n := 7 // id, type, queue, priority, attempts, status, ready_at
	if len(j.Payload) != 0 {
		n++
	}
	if j.RetryLimit != nil {
		n++
	}
	if j.Backoff != nil {
		n++
	}
	if j.Retention != nil {
		n++
	}
	if j.DequeuedAt != 0 {
		n++
	}
	if j.FailedAt != 0 {
		n++
	}
	if j.CompletedAt != 0 {
		n++
	}
	if j.PurgeAt != 0 {
		n++
	}
	if j.UniqueKey != "" {
		n++
	}
	if j.UniqueWhile != "" {
		n++
	}
	if j.Batch != nil {
		n++
	}
	if len(j.Budgets) != 0 {
		n++
	}
	if j.TimeoutMs != nil {
		n++
	}
	dst = mpMapLen(dst, n)
	dst = mpStr(mpStr(dst, "id"), j.ID)
	dst = mpStr(mpStr(dst, "type"), j.Type)
	dst = mpStr(mpStr(dst, "queue"), j.Queue)
	dst = mpUint(mpStr(dst, "priority"), uint64(j.Priority))
	dst = mpUint(mpStr(dst, "attempts"), uint64(j.Attempts))
	dst = mpStr(mpStr(dst, "status"), string(j.Status))
	if len(j.Payload) != 0 {
		dst = mpBytes(mpStr(dst, "payload"), j.Payload)
	}
	dst = mpUint(mpStr(dst, "ready_at"), j.ReadyAt)
	if j.RetryLimit != nil {
		dst = mpUint(mpStr(dst, "retry_limit"), uint64(*j.RetryLimit))
	}
	if b := j.Backoff; b != nil {
		dst = mpMapLen(mpStr(dst, "backoff"), 3)
		dst = mpStr(dst, "exponent")
		dst = binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(b.Exponent))
		dst = mpUint(mpStr(dst, "base_ms"), uint64(b.BaseMs))
		dst = mpUint(mpStr(dst, "jitter_ms"), uint64(b.JitterMs))
	}
	if r := j.Retention; r != nil {
		m := 0
		if r.CompletedMs != nil {
			m++
		}
		if r.DeadMs != nil {
			m++
		}
		dst = mpMapLen(mpStr(dst, "retention"), m)
		if r.CompletedMs != nil {
			dst = mpUint(mpStr(dst, "completed_ms"), *r.CompletedMs)
		}
		if r.DeadMs != nil {
			dst = mpUint(mpStr(dst, "dead_ms"), *r.DeadMs)
		}
	}
	if j.DequeuedAt != 0 {
		dst = mpUint(mpStr(dst, "dequeued_at"), j.DequeuedAt)
	}
	if j.FailedAt != 0 {
		dst = mpUint(mpStr(dst, "failed_at"), j.FailedAt)
	}
	if j.CompletedAt != 0 {
		dst = mpUint(mpStr(dst, "completed_at"), j.CompletedAt)
	}
	if j.PurgeAt != 0 {
		dst = mpUint(mpStr(dst, "purge_at"), j.PurgeAt)
	}
	if j.UniqueKey != "" {
		dst = mpStr(mpStr(dst, "unique_key"), j.UniqueKey)
	}
	if j.UniqueWhile != "" {
		dst = mpStr(mpStr(dst, "unique_while"), j.UniqueWhile)
	}
	if b := j.Batch; b != nil {
		dst = mpMapLen(mpStr(dst, "batch"), 3)
		dst = mpStr(mpStr(dst, "key"), b.Key)
		dst = mpStr(mpStr(dst, "when"), b.When)
		dst = mpStr(mpStr(dst, "fold"), b.Fold)
	}
	if len(j.Budgets) != 0 {
		dst = mpArrayLen(mpStr(dst, "budgets"), len(j.Budgets))
		for _, b := range j.Budgets {
			dst = mpMapLen(dst, 2)
			dst = mpUint(mpStr(dst, "cost"), uint64(b.Cost))
			dst = mpStr(mpStr(dst, "key"), b.Key)
		}
	}
	if j.TimeoutMs != nil {
		dst = mpUint(mpStr(dst, "timeout_ms"), uint64(*j.TimeoutMs))
	}
	return dst
}

// jobRecordSize is an upper bound of the usual record size, for sizing the
// buffer once.
func jobRecordSize(j *Job) int {
	n := 200 + len(j.ID) + len(j.Type) + len(j.Queue) + len(j.Payload) + len(j.UniqueKey) + len(j.UniqueWhile)
	for _, b := range j.Budgets {
		n += 20 + len(b.Key)
	}
	if j.Batch != nil {
		n += 24 + len(j.Batch.Key) + len(j.Batch.When) + len(j.Batch.Fold)
	}
	return n
}

func mpMapLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
}

func mpArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

func mpStr(dst []byte, s string) []byte {
	switch l := len(s); {
	case l < 32:
		dst = append(dst, 0xa0|byte(l))
	case l < 256:
		dst = append(dst, 0xd9, byte(l))
	case l <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(l))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(l))
	}
	return append(dst, s...)
}

func mpBytes(dst []byte, b []byte) []byte {
	if b == nil {
		return append(dst, 0xc0)
	}
	switch l := len(b); {
	case l < 256:
		dst = append(dst, 0xc4, byte(l))
	case l <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xc5), uint16(l))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xc6), uint32(l))
	}
	return append(dst, b...)
}

// mpUint is the encoder's EncodeUint with compact integers.
func mpUint(dst []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(dst, byte(n))
	case n <= math.MaxUint8:
		return append(dst, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), n)
}
