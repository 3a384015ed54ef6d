package protocol

import (
	"encoding/json"
	"strconv"
)

// AppendJobViewJSON appends the JSON encoding of v to dst: exactly the bytes
// json.Marshal(v) writes (fields in declaration order, omitempty, HTML-safe
// escaping), without reflection. Rare shapes (strings or payloads that need
// escaping, nested optional objects) go through encoding/json field by
// field, so the output never differs.
func AppendJobViewJSON(dst []byte, v *JobView) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	var err error
	dst = append(dst, `{"attempts":`...)
	dst = strconv.AppendUint(dst, uint64(v.Attempts), 10)
	if v.Backoff != nil {
		dst = append(dst, `,"backoff":`...)
		if dst, err = appendMarshal(dst, v.Backoff); err != nil {
			return dst, err
		}
	}
	if v.Batch != nil {
		dst = append(dst, `,"batch":`...)
		if dst, err = appendMarshal(dst, v.Batch); err != nil {
			return dst, err
		}
	}
	if len(v.Budgets) != 0 {
		dst = append(dst, `,"budgets":[`...)
		for i := range v.Budgets {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"cost":`...)
			dst = strconv.AppendUint(dst, uint64(v.Budgets[i].Cost), 10)
			dst = append(dst, `,"key":`...)
			dst = appendJSONString(dst, v.Budgets[i].Key)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = appendOptUint(dst, `,"completed_at":`, v.CompletedAt)
	dst = appendOptUint(dst, `,"dequeued_at":`, v.DequeuedAt)
	if v.Duplicate != nil {
		dst = append(dst, `,"duplicate":`...)
		dst = strconv.AppendBool(dst, *v.Duplicate)
	}
	dst = appendOptUint(dst, `,"failed_at":`, v.FailedAt)
	if v.Folded != nil {
		dst = append(dst, `,"folded":`...)
		dst = strconv.AppendBool(dst, *v.Folded)
	}
	dst = append(dst, `,"id":`...)
	dst = appendJSONString(dst, v.ID)
	if v.Payload != nil {
		dst = append(dst, `,"payload":`...)
		if p := *v.Payload; len(p) > 0 && plainJSON(p) {
			dst = append(dst, p...)
		} else if dst, err = appendMarshal(dst, v.Payload); err != nil {
			return dst, err
		}
	}
	dst = append(dst, `,"priority":`...)
	dst = strconv.AppendUint(dst, uint64(v.Priority), 10)
	dst = appendOptUint(dst, `,"purge_at":`, v.PurgeAt)
	dst = append(dst, `,"queue":`...)
	dst = appendJSONString(dst, v.Queue)
	dst = append(dst, `,"ready_at":`...)
	dst = strconv.AppendUint(dst, v.ReadyAt, 10)
	if v.Retention != nil {
		dst = append(dst, `,"retention":`...)
		if dst, err = appendMarshal(dst, v.Retention); err != nil {
			return dst, err
		}
	}
	if v.RetryLimit != nil {
		dst = append(dst, `,"retry_limit":`...)
		dst = strconv.AppendUint(dst, uint64(*v.RetryLimit), 10)
	}
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, string(v.Status))
	if v.TimeoutMs != nil {
		dst = append(dst, `,"timeout_ms":`...)
		dst = strconv.AppendUint(dst, uint64(*v.TimeoutMs), 10)
	}
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, v.Type)
	if v.UniqueKey != "" {
		dst = append(dst, `,"unique_key":`...)
		dst = appendJSONString(dst, v.UniqueKey)
	}
	if v.UniqueWhile != "" {
		dst = append(dst, `,"unique_while":`...)
		dst = appendJSONString(dst, v.UniqueWhile)
	}
	if v.Waiting != nil {
		dst = append(dst, `,"waiting":`...)
		if dst, err = appendMarshal(dst, v.Waiting); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

func appendOptUint(dst []byte, key string, n uint64) []byte {
	if n == 0 {
		return dst
	}
	dst = append(dst, key...)
	return strconv.AppendUint(dst, n, 10)
}

func appendMarshal(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendJSONString quotes s as encoding/json does; strings of plain
// printable ASCII (no quote, backslash or HTML-sensitive character) are
// copied as they are, others go through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// plainJSON reports whether stored JSON can be copied as encoding/json
// would write it: it holds no insignificant whitespace and nothing
// encoding/json escapes when it re-compacts a Marshaler's output ('<', '>',
// '&', U+2028 and U+2029, whose UTF-8 encodings begin with 0xE2). Anything
// else takes the encoding/json path.
func plainJSON(p []byte) bool {
	for _, c := range p {
		if notPlain[c] {
			return false
		}
	}
	return true
}

// notPlain marks the bytes plainJSON refuses (a table: this runs over every
// payload a take stream writes).
var notPlain = func() (t [256]bool) {
	for _, c := range []byte{' ', '\t', '\n', '\r', '<', '>', '&', 0xE2} {
		t[c] = true
	}
	return t
}()

func jobViewPayloadLen(v *JobView) int {
	if v == nil || v.Payload == nil {
		return 0
	}
	return len(*v.Payload)
}
