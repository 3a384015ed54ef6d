package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// MaxTimeoutMs is the largest job timeout_ms (SPEC §10.5).
const MaxTimeoutMs = 1<<31 - 1

// errTimeoutRange is the 400 of a timeout_ms outside 1..MaxTimeoutMs.
func errTimeoutRange() error {
	return Invalid("timeout_ms must be between 1 and %d", MaxTimeoutMs)
}

// parseTimeoutMs checks a timeout_ms value as sent: an integer literal
// between 1 and MaxTimeoutMs; anything else (a fraction, a negative, zero,
// a value too large, a string) is the one 400 the SPEC names.
func parseTimeoutMs(raw json.RawMessage) (uint32, error) {
	v, ok := parseIntLiteral(raw, MaxTimeoutMs)
	if !ok || v < 1 {
		return 0, errTimeoutRange()
	}
	return uint32(v), nil
}

// parseIntLiteral reads a JSON value that must be a non-negative integer
// literal of at most limit.
func parseIntLiteral(raw json.RawMessage, limit uint64) (uint64, bool) {
	v, err := strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || v > limit {
		return 0, false
	}
	return v, true
}
