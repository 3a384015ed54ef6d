package protocol

import (
	"net/url"
	"unicode/utf8"
)

// ParseQuery parses the raw query string of an endpoint that reads query
// parameters (SPEC §1.5 Decision): a string that does not decode (a bad
// '%' escape, a ';' separator), a parameter given twice, and a name or
// value that is not UTF-8 are 400 "invalid query parameters: <detail>"
// rather than being skipped or silently taking the last value. Each
// parameter of the result has exactly one value.
func ParseQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, Invalid("invalid query parameters: %s", err.Error())
	}
	for name, vals := range q {
		if !utf8.ValidString(name) {
			return nil, Invalid("invalid query parameters: invalid UTF-8 in a parameter name")
		}
		if len(vals) > 1 {
			return nil, Invalid("invalid query parameters: `%s` given %d times", name, len(vals))
		}
		if !utf8.ValidString(vals[0]) {
			return nil, Invalid("invalid query parameters: invalid UTF-8 in `%s`", name)
		}
	}
	return q, nil
}
