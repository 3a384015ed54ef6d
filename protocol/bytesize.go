package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseByteSize parses a command-line size (SPEC §1.4's
// --stream-buffer-limit): a whole number of bytes, or a number (fractions
// allowed) with KiB, MiB or GiB.
func ParseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	for _, u := range []struct {
		suffix string
		unit   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || f < 0 || f*u.unit >= 1<<62 || strings.ContainsAny(num, "eEinfINFxX+-") {
			return 0, fmt.Errorf("invalid size %q", s)
		}
		return int64(f * u.unit), nil
	}
	return 0, fmt.Errorf("invalid size %q (use a number of bytes or a number with KiB, MiB or GiB)", s)
}
