package protocol

import (
	"bytes"
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
	// The first pass keeps no path and allocates nothing on the usual
	// values; only a value that breaks a rule is walked again to name the
	// field in the error.
	c := canonicalChecker{s: js}
	if c.check() == nil {
		return nil
	}
	c = canonicalChecker{s: js, track: true, field: field}
	return c.check()
}

// canonicalChecker walks one JSON value from s[i:].
type canonicalChecker struct {
	s []byte
	i int
	// track keeps the path to the current value, for error texts
	track bool
	field string
	path  []pathStep
}

// pathStep is an object key or (key == nil) an array index.
type pathStep struct {
	key   []byte
	index int
}

// errCanonical is the first pass's answer; the second pass words it.
var errCanonical = errors.New("canonical limits broken")

func (c *canonicalChecker) check() error {
	c.space()
	if err := c.value(); err != nil {
		return err
	}
	c.space()
	if c.i != len(c.s) {
		return c.fail("trailing characters")
	}
	return nil
}

// fail returns the error of a broken rule: errCanonical in the first pass,
// the text with %s replaced by the path in the second.
func (c *canonicalChecker) fail(format string, args ...any) error {
	if !c.track {
		return errCanonical
	}
	return fmt.Errorf(format, append(args, c.pathString())...)
}

func (c *canonicalChecker) pathString() string {
	var b strings.Builder
	b.WriteString(c.field)
	for _, p := range c.path {
		if p.key == nil {
			fmt.Fprintf(&b, "[%d]", p.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(p.key)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

func (c *canonicalChecker) push(key []byte, index int) {
	if c.track {
		c.path = append(c.path, pathStep{key: key, index: index})
	}
}

func (c *canonicalChecker) pop() {
	if c.track {
		c.path = c.path[:len(c.path)-1]
	}
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

func (c *canonicalChecker) value() error {
	if c.i >= len(c.s) {
		return errCanonicalSyntax
	}
	switch ch := c.s[c.i]; {
	case ch == '{':
		return c.object()
	case ch == '[':
		return c.array()
	case ch == '"':
		_, err := c.str()
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

func (c *canonicalChecker) object() error {
	c.i++ // {
	var small [smallObject][]byte
	keys := small[:0]
	var seen map[string]struct{}
	for {
		c.space()
		if c.i < len(c.s) && c.s[c.i] == '}' {
			c.i++
			return nil
		}
		key, err := c.str()
		if err != nil {
			return err
		}
		if seen == nil && len(keys) == smallObject {
			seen = make(map[string]struct{}, 2*smallObject)
			for _, k := range keys {
				seen[string(k)] = struct{}{}
			}
		}
		dup := false
		if seen != nil {
			_, dup = seen[string(key)]
			seen[string(key)] = struct{}{}
		} else {
			for _, k := range keys {
				if bytes.Equal(k, key) {
					dup = true
					break
				}
			}
			keys = append(keys, key)
		}
		if dup {
			return c.fail("duplicate key %q in %s", key)
		}
		c.space()
		if c.i >= len(c.s) || c.s[c.i] != ':' {
			return errCanonicalSyntax
		}
		c.i++
		c.space()
		c.push(key, -1)
		if err := c.value(); err != nil {
			return err
		}
		c.pop()
		c.space()
		if c.i < len(c.s) && c.s[c.i] == ',' {
			c.i++
		}
	}
}

func (c *canonicalChecker) array() error {
	c.i++ // [
	for n := 0; ; n++ {
		c.space()
		if c.i < len(c.s) && c.s[c.i] == ']' {
			c.i++
			return nil
		}
		c.push(nil, n)
		if err := c.value(); err != nil {
			return err
		}
		c.pop()
		c.space()
		if c.i < len(c.s) && c.s[c.i] == ',' {
			c.i++
		}
	}
}

// str checks one string at s[i] and returns its contents: a slice of the
// input when it has no escapes, otherwise the decoded text. A key's
// invalid UTF-8 is reported against the object holding it.
func (c *canonicalChecker) str() ([]byte, error) {
	if c.i >= len(c.s) || c.s[c.i] != '"' {
		return nil, errCanonicalSyntax
	}
	start := c.i + 1
	escaped := false
	for i := start; i < len(c.s); {
		if !strSpecial[c.s[i]] { // the usual case: plain ASCII
			i++
			continue
		}
		switch b := c.s[i]; {
		case b == '"':
			c.i = i + 1
			if !escaped {
				return c.s[start:i], nil
			}
			var out string
			if err := json.Unmarshal(c.s[start-1:i+1], &out); err != nil {
				return nil, errCanonicalSyntax
			}
			return []byte(out), nil
		case b == '\\':
			escaped = true
			if i+1 < len(c.s) && c.s[i+1] == 'u' {
				r, ok := hex4(c.s, i+2)
				if !ok {
					return nil, errCanonicalSyntax
				}
				i += 6
				switch {
				case r >= 0xDC00 && r <= 0xDFFF: // a low surrogate first
					return nil, c.fail("invalid UTF-8 in %s")
				case r >= 0xD800 && r <= 0xDBFF: // must be followed by a low one
					lo, ok := rune(0), false
					if i+1 < len(c.s) && c.s[i] == '\\' && c.s[i+1] == 'u' {
						lo, ok = hex4(c.s, i+2)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, c.fail("invalid UTF-8 in %s")
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
				return nil, c.fail("invalid UTF-8 in %s")
			}
			i += size
		}
	}
	return nil, errCanonicalSyntax
}

// strSpecial marks the bytes a string scan must look at: the closing quote,
// escapes and the bytes of multi-byte UTF-8 sequences.
var strSpecial = func() (t [256]bool) {
	t['"'], t['\\'] = true, true
	for b := utf8.RuneSelf; b < 256; b++ {
		t[b] = true
	}
	return t
}()

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
		return c.failNumber(lit)
	}
	if len(lit) < 300 && !bytes.ContainsAny(lit, "eE") {
		return nil // no exponent: at most 299 digits, below float64's range
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil && (math.IsInf(f, 0) || !errors.Is(err, strconv.ErrRange)) {
		return c.failNumber(lit)
	}
	return nil
}

func (c *canonicalChecker) failNumber(lit []byte) error {
	if !c.track {
		return errCanonical
	}
	return fmt.Errorf("number %s out of range", shortLiteral(lit))
}

// shortLiteral cuts a long number literal for an error text.
func shortLiteral(lit []byte) string {
	if len(lit) > 40 {
		return string(lit[:37]) + "..."
	}
	return string(lit)
}
