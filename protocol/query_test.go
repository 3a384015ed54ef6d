package protocol

import "testing"

func TestParseQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"%zz=1":            `invalid query parameters: invalid URL escape "%zz"`,
		"queue=a&x=%":      `invalid query parameters: invalid URL escape "%"`,
		"queue=a;b":        "invalid query parameters: invalid semicolon separator in query",
		"queue=a&queue=b":  "invalid query parameters: `queue` given 2 times",
		"limit=1&limit=1":  "invalid query parameters: `limit` given 2 times",
		"queue=%ff%fe":     "invalid query parameters: invalid UTF-8 in `queue`",
		"%c3=1":            "invalid query parameters: invalid UTF-8 in a parameter name",
		"queue=a,b&limit=": "",
		"":                 "",
		"queue=%C3%A9&&":   "",
	} {
		q, err := ParseQuery(raw)
		got := ""
		if err != nil {
			got = err.Error()
			assertCode(t, err, CodeInvalid)
		}
		if got != want {
			t.Errorf("ParseQuery(%q) error %q, want %q", raw, got, want)
		}
		if err == nil {
			for name, vals := range q {
				if len(vals) != 1 {
					t.Errorf("%q: %s has %d values", raw, name, len(vals))
				}
			}
		}
	}
}
