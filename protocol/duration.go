package protocol

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses the command line's durations (SPEC §9): a bare
// integer of milliseconds, or a number with a unit ms, s, m, h, d (24 h) or
// w (7 d); fractions allowed ("12.5s").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if ms, err := strconv.ParseUint(s, 10, 63); err == nil {
		if ms > math.MaxInt64/uint64(time.Millisecond) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	units := []struct {
		suffix string
		unit   time.Duration
	}{
		{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute},
		{"h", time.Hour}, {"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour},
	}
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || strings.ContainsAny(num, "eE+-") {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		d := f * float64(u.unit)
		if d > math.MaxInt64 {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("invalid duration %q (use a number of milliseconds or a unit ms, s, m, h, d, w)", s)
}
