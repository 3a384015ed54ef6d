// Cron expressions and zones (SPEC §8.1.2) and the next-time rule with its
// daylight-saving corrections (SPEC §8.1.6). Pure: no clock is read here.

package actors

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/tollgate/tollgate/protocol"
)

// cronStarBit is robfig's mark of a day field written as * or ?, which
// makes the other day field decide alone.
const cronStarBit = 1 << 63

// cronParser reads 5 or 6 fields and the @ nicknames.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronExpr is a parsed expression. It is never changed once parsed, so
// messages may share it.
type cronExpr struct {
	spec *cron.SpecSchedule
	// hourFull is set when the hour field matches every hour: a repeated
	// wall-clock hour then fires in both passes.
	hourFull bool
}

// parseCronExpr parses an expression in tollgate's dialect. Errors carry
// the text of SPEC §8.1.5 (without the never-matching check, which needs a
// zone and a time: see cronNeverMatches).
func parseCronExpr(expr string) (*cronExpr, error) {
	s := strings.TrimSpace(expr)
	bad := func(format string, args ...any) error {
		return protocol.Invalid("invalid cron expression: "+format, args...)
	}
	switch {
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return nil, bad("a TZ= or CRON_TZ= prefix is not supported (use the timezone field)")
	case strings.HasPrefix(s, "@every"):
		return nil, bad("@every is not supported")
	case s == "@reboot":
		return nil, bad("@reboot is not supported")
	}
	var dowBits uint64
	if !strings.HasPrefix(s, "@") {
		fields := strings.Fields(s)
		if len(fields) < 5 || len(fields) > 6 {
			return nil, bad("expected 5 or 6 fields, found %d: %q", len(fields), expr)
		}
		for _, f := range fields {
			if strings.ContainsAny(withoutNames(f), "lw#") {
				return nil, bad("%q: L, W and # are not supported", f)
			}
		}
		// The day-of-week field is read here, to take 7 as Sunday (robfig
		// refuses it); robfig parses the rest with a * in its place.
		last := len(fields) - 1
		bits, err := parseDowField(fields[last])
		if err != nil {
			return nil, bad("%s", err.Error())
		}
		dowBits = bits
		fields[last] = "*"
		s = strings.Join(fields, " ")
	}
	sched, err := cronParser.Parse(s)
	if err != nil {
		return nil, bad("%s", err.Error())
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, bad("%q is not supported", expr)
	}
	if dowBits != 0 {
		spec.Dow = dowBits
	}
	const allHours = 1<<24 - 1
	return &cronExpr{spec: spec, hourFull: spec.Hour&allHours == allHours}, nil
}

// withoutNames lowercases a field and drops the month and day names in it,
// whose letters may include l or w (jul, wed).
func withoutNames(f string) string {
	lf := strings.ToLower(f)
	for _, n := range []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec", "sun", "mon", "tue", "wed", "thu", "fri", "sat"} {
		lf = strings.ReplaceAll(lf, n, "")
	}
	return lf
}

var dowNames = map[string]uint{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// parseDowField reads a day-of-week field: comma lists of *, ?, n, a-b,
// */s, a-b/s and a/s over 0-7 (0 and 7 are Sunday) or SUN-SAT.
func parseDowField(field string) (uint64, error) {
	var bits uint64
	for _, item := range strings.Split(field, ",") {
		rangePart, stepPart, hasStep := strings.Cut(item, "/")
		step := uint(1)
		if hasStep {
			n, err := strconv.ParseUint(stepPart, 10, 8)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("day-of-week %q: invalid step %q", item, stepPart)
			}
			step = uint(n)
		}
		var lo, hi uint
		star := false
		switch {
		case rangePart == "*" || rangePart == "?":
			lo, hi, star = 0, 6, true
		default:
			a, b, isRange := strings.Cut(rangePart, "-")
			var err error
			if lo, err = dowValue(a); err != nil {
				return 0, err
			}
			switch {
			case isRange:
				if hi, err = dowValue(b); err != nil {
					return 0, err
				}
			case hasStep:
				hi = 7
			default:
				hi = lo
			}
			if lo > hi {
				return 0, fmt.Errorf("day-of-week %q: beginning of range (%d) beyond end of range (%d)", item, lo, hi)
			}
		}
		for d := lo; d <= hi; d += step {
			bits |= 1 << (d % 7)
		}
		if star && step == 1 {
			bits |= cronStarBit
		}
	}
	return bits, nil
}

func dowValue(s string) (uint, error) {
	if d, ok := dowNames[strings.ToLower(s)]; ok {
		return d, nil
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("day-of-week: failed to parse int from %s", s)
	}
	if n > 7 {
		return 0, fmt.Errorf("day-of-week: end of range (%d) above maximum (7)", n)
	}
	return uint(n), nil
}

// loadZone resolves an IANA zone name; "" and "Local" are refused (SPEC
// §8.1.2).
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, protocol.Invalid("invalid timezone: %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, protocol.Invalid("invalid timezone: %q", name)
	}
	return loc, nil
}

// cronNext returns the first whole second strictly after the second of
// after whose wall-clock time in loc matches the expression (SPEC §8.1.6),
// or the zero time when none comes within five years. A wall-clock time
// that a backward offset change repeats fires only in its first pass,
// unless the hour field matches every hour.
func cronNext(x *cronExpr, after time.Time, loc *time.Location) time.Time {
	t := after.In(loc)
	for {
		t = x.spec.Next(t)
		if t.IsZero() || x.hourFull || !secondPass(t) {
			return t
		}
	}
}

// secondPass reports whether t's wall-clock reading already occurred
// before, in the period before a backward offset change.
func secondPass(t time.Time) bool {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, off := t.Zone()
	_, prevOff := start.Add(-time.Second).Zone()
	repeated := time.Duration(prevOff-off) * time.Second
	return repeated > 0 && t.Sub(start) < repeated
}

// cronNeverMatches is the error for an expression with no occurrence.
func cronNeverMatches(expr string) error {
	return protocol.Invalid("invalid cron expression: %q never matches", expr)
}
