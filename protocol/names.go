package protocol

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// reservedNameChars may not appear in queue, type or budget names.
const reservedNameChars = "*?[]{}\\"

// badNameByte marks the bytes a name may not hold: ',', NUL and the
// reserved characters (a table: every job of a bulk is checked).
var badNameByte = func() (t [256]bool) {
	t[','], t[0] = true, true
	for i := 0; i < len(reservedNameChars); i++ {
		t[reservedNameChars[i]] = true
	}
	return t
}()

// CheckName applies the queue/type name rules of SPEC §2.4 and returns the
// reason a name breaks them ("must not be empty", ...) or "" when it is valid.
// Names are UTF-8 strings: invalid UTF-8 ("must be valid UTF-8", checked
// last) is refused too, which matters where a name comes from a path (budget
// keys) rather than from a body that CheckCanonical already checked.
func CheckName(name string) string {
	if name == "" {
		return "must not be empty"
	}
	clean, ascii := true, true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if badNameByte[c] {
			clean = false
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if clean && !ascii && !utf8.ValidString(name) {
		return "must be valid UTF-8"
	}
	if clean {
		return ""
	}
	// the first rule broken, in the order of the error texts
	if strings.IndexByte(name, ',') >= 0 {
		return "must not contain ','"
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "must not contain null bytes"
	}
	if i := strings.IndexAny(name, reservedNameChars); i >= 0 {
		return fmt.Sprintf("must not contain '%c' (reserved)", name[i])
	}
	if !utf8.ValidString(name) {
		return "must be valid UTF-8"
	}
	return ""
}

// MaxBudgetKeyBytes is the longest budget key accepted (SPEC §4.3).
const MaxBudgetKeyBytes = 255

// CheckBudgetKey returns why key is not a valid budget key, or "".
func CheckBudgetKey(key string) string {
	if reason := CheckName(key); reason != "" {
		return reason
	}
	if len(key) > MaxBudgetKeyBytes {
		return "must be at most 255 bytes"
	}
	return ""
}

// ValidateBudgetKey returns the 422 error for an invalid key, or nil.
func ValidateBudgetKey(key string) error {
	if reason := CheckBudgetKey(key); reason != "" {
		return Unprocessable("invalid budget key '%s': %s", key, reason)
	}
	return nil
}
