package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds the canonical value model's limits (SPEC §1.3): every
// value tollgate stores must read back the same in JSON and in msgpack, so
// a number is an integer in [-2^63, 2^64-1] or a finite float64, every
// string (object keys included) is valid UTF-8 once its escapes are
// decoded, and no object repeats a key. CheckCanonical is the one place
// these rules live; request decoding (both JSON paths, and msgpack bodies,
// which are transcoded to JSON first) calls it, and so must any other
// producer of stored values (cron templates, fold results).

// CheckCanonical checks a syntactically valid JSON value against the
// canonical model limits. field names the value in errors ("payload",
// "jobs[2]"; "" for a whole request body). The error texts are those the
// API wraps as "invalid JSON: <text>": "number 1e400 out of range",
// "invalid UTF-8 in payload.name", `duplicate key "a" in payload`.
func CheckCanonical(js []byte, field string) error {
	c := canonicalChecker{s: js}
	root := canonicalPath{name: field, index: -1}
	c.space()
	if err := c.value(&root); err != nil {
		return err
	}
	c.space()
	if c.i != len(c.s) {
		return errors.New("trailing characters")
	}
	return nil
}

// canonicalPath is one step of the path to the value being checked; the
// path is only rendered into a string when an error names it.
type canonicalPath struct {
	parent *canonicalPath
	name   string // an object key (or the root field)
	index  int    // an array index, or -1
}

func (p *canonicalPath) String() string {
	if p == nil {
		return ""
	}
	var parts []*canonicalPath
	for q := p; q != nil; q = q.parent {
		parts = append(parts, q)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		q := parts[i]
		switch {
		case q.index >= 0:
			fmt.Fprintf(&b, "[%d]", q.index)
		case q.name != "":
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(q.name)
		}
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// canonicalChecker walks one JSON value from s[i:].
type canonicalChecker struct {
	s []byte
	i int
}

func (c *canonicalChecker) space() {
	for c.i < len(c.s) {
		switch c.s[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

var errCanonicalSyntax = errors.New("malformed value")

func (c *canonicalChecker) value(at *canonicalPath) error {
	if c.i >= len(c.s) {
		return errCanonicalSyntax
	}
	switch ch := c.s[c.i]; {
	case ch == '{':
		return c.object(at)
	case ch == '[':
		return c.array(at)
	case ch == '"':
		_, err := c.str(at)
		return err
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number()
	case ch == 't' || ch == 'f' || ch == 'n':
		for c.i < len(c.s) && c.s[c.i] >= 'a' && c.s[c.i] <= 'z' {
			c.i++
		}
		return nil
	}
	return errCanonicalSyntax
}

// smallObject is how many keys are compared pairwise before a map is used
// to find repeats.
const smallObject = 16

func (c *canonicalChecker) object(at *canonicalPath) error {
	c.i++ // {
	var small [smallObject]string
	keys := small[:0]
	var seen map[string]struct{}
	for {
		c.space()
		if c.i < len(c.s) && c.s[c.i] == '}' {
			c.i++
			return nil
		}
		key, err := c.str(at)
		if err != nil {
			return err
		}
		if seen == nil && len(keys) == smallObject {
			seen = make(map[string]struct{}, 2*smallObject)
			for _, k := range keys {
				seen[k] = struct{}{}
			}
		}
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			for _, k := range keys {
				if k == key {
					dup = true
					break
				}
			}
			keys = append(keys, key)
		}
		if dup {
			return fmt.Errorf("duplicate key %q in %s", key, at)
		}
		c.space()
		if c.i >= len(c.s) || c.s[c.i] != ':' {
			return errCanonicalSyntax
		}
		c.i++
		c.space()
		if err := c.value(&canonicalPath{parent: at, name: key, index: -1}); err != nil {
			return err
		}
		c.space()
		if c.i < len(c.s) && c.s[c.i] == ',' {
			c.i++
		}
	}
}

func (c *canonicalChecker) array(at *canonicalPath) error {
	c.i++ // [
	for n := 0; ; n++ {
		c.space()
		if c.i < len(c.s) && c.s[c.i] == ']' {
			c.i++
			return nil
		}
		if err := c.value(&canonicalPath{parent: at, index: n}); err != nil {
			return err
		}
		c.space()
		if c.i < len(c.s) && c.s[c.i] == ',' {
			c.i++
		}
	}
}

// str checks one string at s[i] and returns its contents: a slice of the
// input when it has no escapes, otherwise the decoded text.
func (c *canonicalChecker) str(at *canonicalPath) (string, error) {
	if c.i >= len(c.s) || c.s[c.i] != '"' {
		return "", errCanonicalSyntax
	}
	start := c.i + 1
	escaped := false
	for i := start; i < len(c.s); {
		switch b := c.s[i]; {
		case b == '"':
			c.i = i + 1
			raw := c.s[start:i]
			if !escaped {
				return string(raw), nil
			}
			var out string
			if err := json.Unmarshal(c.s[start-1:i+1], &out); err != nil {
				return "", errCanonicalSyntax
			}
			return out, nil
		case b == '\\':
			escaped = true
			if i+1 < len(c.s) && c.s[i+1] == 'u' {
				r, ok := hex4(c.s, i+2)
				if !ok {
					return "", errCanonicalSyntax
				}
				i += 6
				switch {
				case r >= 0xDC00 && r <= 0xDFFF: // a low surrogate first
					return "", fmt.Errorf("invalid UTF-8 in %s", at)
				case r >= 0xD800 && r <= 0xDBFF: // must be followed by a low one
					lo, ok := rune(0), false
					if i+1 < len(c.s) && c.s[i] == '\\' && c.s[i+1] == 'u' {
						lo, ok = hex4(c.s, i+2)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return "", fmt.Errorf("invalid UTF-8 in %s", at)
					}
					i += 6
				}
				continue
			}
			i += 2
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(c.s[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", fmt.Errorf("invalid UTF-8 in %s", at)
			}
			i += size
		}
	}
	return "", errCanonicalSyntax
}

// hex4 reads four hex digits at s[i:].
func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, h := range s[i : i+4] {
		switch {
		case h >= '0' && h <= '9':
			r = r<<4 | rune(h-'0')
		case h >= 'a' && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case h >= 'A' && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number checks that the number at s[i] is an integer within
// [-2^63, 2^64-1] or, written with a fraction or exponent, a finite
// float64.
func (c *canonicalChecker) number() error {
	start := c.i
	isFloat := false
	for c.i < len(c.s) {
		switch ch := c.s[c.i]; {
		case ch >= '0' && ch <= '9', ch == '-', ch == '+':
		case ch == '.', ch == 'e', ch == 'E':
			isFloat = true
		default:
			goto done
		}
		c.i++
	}
done:
	lit := c.s[start:c.i]
	if !isFloat {
		digits := len(lit)
		if lit[0] == '-' {
			digits--
		}
		if digits < 19 { // fits either way
			return nil
		}
		if lit[0] == '-' {
			if _, err := strconv.ParseInt(string(lit), 10, 64); err == nil {
				return nil
			}
		} else if _, err := strconv.ParseUint(string(lit), 10, 64); err == nil {
			return nil
		}
		return fmt.Errorf("number %s out of range", shortLiteral(lit))
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil && (math.IsInf(f, 0) || !errors.Is(err, strconv.ErrRange)) {
		return fmt.Errorf("number %s out of range", shortLiteral(lit))
	}
	return nil
}

// shortLiteral cuts a long number literal for an error text.
func shortLiteral(lit []byte) string {
	if len(lit) > 40 {
		return string(lit[:37]) + "..."
	}
	return string(lit)
}
