package actors

import (
	"math"
	"time"
)

// Time sums. Every moment the actors compute (a ready_at after a backoff, a
// purge_at after a retention, a budget's wake moment) and every timer delay
// goes through these helpers, which saturate instead of wrapping: the SPEC
// accepts any uint64 ready_at, retry_at and retention and any int64
// duration_ms, so a moment may lie further ahead than a uint64 of
// milliseconds or a time.Duration can count. A wrapped sum lands in the past
// and a timer armed for the past fires at once, re-arms and fires again: one
// core spinning for as long as the job is stored. A saturated moment is
// merely "never in this process's life".

// neverMs is the latest moment a sum of Unix milliseconds saturates to.
const neverMs = math.MaxUint64

// nsPerMs converts between the milliseconds of the wire and the
// nanoseconds a time_based pool is kept in (SPEC §4.4, precision). addMs
// and ceilMs saturate the same way whatever the unit: the budget core uses
// them for nanoseconds too.
const nsPerMs = 1_000_000

// addMs returns t+d in milliseconds, or neverMs when the sum does not fit.
func addMs(t, d uint64) uint64 {
	if d > neverMs-t {
		return neverMs
	}
	return t + d
}

// ceilMs rounds a non-negative number of milliseconds up to a whole uint64,
// saturating at neverMs (and treating NaN as never).
func ceilMs(f float64) uint64 {
	switch {
	case math.IsNaN(f) || f >= math.MaxUint64:
		return neverMs
	case f <= 0:
		return 0
	}
	return uint64(math.Ceil(f))
}

// maxDelayMs is the largest whole number of milliseconds a time.Duration
// holds.
const maxDelayMs = uint64(math.MaxInt64 / int64(time.Millisecond))

// delayUntil is how long from now until the moment due (Unix ms): 0 when it
// has passed, and at most the largest time.Duration (about 292 years) when it
// lies further ahead than that, which a Go timer treats as never.
func delayUntil(due uint64, now time.Time) time.Duration {
	nowNs := now.UnixNano()
	if due >= maxDelayMs {
		return math.MaxInt64
	}
	d := time.Duration(due)*time.Millisecond - time.Duration(nowNs)
	return max(0, d)
}

// delayUntilNs is how long from now until the moment due (Unix ns): 0 when
// it has passed, at most the largest time.Duration.
func delayUntilNs(due uint64, now time.Time) time.Duration {
	nowNs := nanos(now)
	switch {
	case due <= nowNs:
		return 0
	case due-nowNs > math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(due - nowNs)
}
