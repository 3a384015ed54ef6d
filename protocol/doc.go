// Package protocol is tollgate's shared vocabulary: the job and budget types,
// their statuses and strategies, request decoding and validation, the wire
// codecs (JSON, MessagePack and the length-prefixed msgpack stream), job IDs
// and the stable error codes. It depends only on the standard library and
// msgpack; it does no I/O and never reads the clock (callers pass "now").
package protocol
