package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Batched jobs (SPEC §8.2): the checks every batched enqueue passes, the
// when predicate, the fold and the conversion of its result back to the
// canonical payload model.

// MaxFoldPayloadBytes bounds a merged payload; a fold past it fails.
const MaxFoldPayloadBytes = 8 << 20

// CheckBatch runs SPEC §8.2.2's checks on a batched enqueue: both programs
// compile, and a dry run with $existing and $new bound to payload succeeds
// (when without error, fold with exactly one output). Failures are 422s.
// It returns the payload decoded (DecodeBatchValue), for the fold.
func CheckBatch(b *Batch, payload []byte) (any, error) {
	when, err := compileBatchProgram(b.When)
	if err != nil {
		return nil, Unprocessable("batch expression: when: %s", err.Error())
	}
	fold, err := compileBatchProgram(b.Fold)
	if err != nil {
		return nil, Unprocessable("batch expression: fold: %s", err.Error())
	}
	v, err := DecodeBatchValue(payload)
	if err != nil {
		return nil, Unprocessable("batch dry-run: %s", err.Error())
	}
	if _, err := evalBatchProgram(when, v, v, 1); err != nil {
		return nil, Unprocessable("batch dry-run: when: expression failed at runtime: %s", err.Error())
	}
	if _, err := foldOnce(fold, v, v); err != nil {
		return nil, Unprocessable("batch dry-run: fold: %s", err.Error())
	}
	return v, nil
}

// foldOnce runs a fold program and returns its single output.
func foldOnce(code *JQProgram, existing, new any) (any, error) {
	outs, err := evalBatchProgram(code, existing, new, 2)
	switch {
	case err != nil:
		return nil, fmt.Errorf("fold expression failed at runtime: %w", err)
	case len(outs) == 0:
		return nil, errors.New("fold expression produced no output")
	case len(outs) > 1:
		return nil, errors.New("fold expression produced more than one output")
	}
	return outs[0], nil
}

// BatchJoins reports whether b's when program admits new into the pending
// payload existing: its first output is neither false nor null. No output,
// a runtime error or a timeout count as false (a new batch starts).
func BatchJoins(b *Batch, existing, new any) bool {
	code, err := compileBatchProgram(b.When)
	if err != nil {
		return false
	}
	outs, err := evalBatchProgram(code, existing, new, 1)
	if err != nil || len(outs) == 0 {
		return false
	}
	switch v := outs[0].(type) {
	case nil:
		return false
	case bool:
		return v
	}
	return true
}

// FoldBatch runs b's fold program on the pending payload existing and the
// incoming new and returns the merged value and its canonical JSON (sizeHint
// is about its expected length, to size the buffer once). A
// runtime error, a count of outputs other than one, a value outside the
// canonical model (SPEC §1.3) or a result over MaxFoldPayloadBytes is the
// 422 "batch fold failed: <detail>".
func FoldBatch(b *Batch, existing, new any, sizeHint int) (any, []byte, error) {
	code, err := compileBatchProgram(b.Fold)
	if err != nil {
		return nil, nil, Unprocessable("batch fold failed: %s", err.Error())
	}
	v, err := foldOnce(code, existing, new)
	if err != nil {
		return nil, nil, Unprocessable("batch fold failed: %s", err.Error())
	}
	js, err := AppendCanonicalValue(make([]byte, 0, min(sizeHint+sizeHint/8+64, MaxFoldPayloadBytes)), v)
	if err != nil {
		return nil, nil, Unprocessable("batch fold failed: %s", err.Error())
	}
	if len(js) > MaxFoldPayloadBytes {
		return nil, nil, Unprocessable("batch fold failed: merged payload of %d bytes exceeds the limit of %d bytes", len(js), MaxFoldPayloadBytes)
	}
	return v, js, nil
}

// DecodeBatchValue decodes a canonical JSON payload into the values jq
// programs take (numbers as json.Number, so integers stay exact).
func DecodeBatchValue(payload []byte) (any, error) {
	if len(payload) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	return v, nil
}

var (
	minInt64  = big.NewInt(math.MinInt64)
	maxUint64 = new(big.Int).SetUint64(math.MaxUint64)
)

// AppendCanonicalValue appends v, a value as jq returns it, as compact JSON
// within the canonical model (SPEC §1.3): integers in [-2^63, 2^64-1],
// finite floats, valid UTF-8; object keys in ascending order.
func AppendCanonicalValue(dst []byte, v any) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case json.Number:
		if err := checkNumber(string(v)); err != nil {
			return nil, err
		}
		return append(dst, v...), nil
	case string:
		return appendCanonicalString(dst, v)
	case map[string]any:
		var small [8]member
		members := small[:0]
		for k, e := range v {
			members = append(members, member{k, e})
		}
		if len(members) > 1 {
			slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
		}
		dst = append(dst, '{')
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendCanonicalString(dst, m.key); err != nil {
				return nil, err
			}
			dst = append(dst, ':')
			if dst, err = AppendCanonicalValue(dst, m.value); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = AppendCanonicalValue(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("number %v cannot be represented in JSON", v)
		}
		if v == math.Trunc(v) && math.Abs(v) < 1e17 {
			return strconv.AppendInt(dst, int64(v), 10), nil
		}
		return strconv.AppendFloat(dst, v, 'g', -1, 64), nil
	case *big.Int:
		if v.Cmp(minInt64) < 0 || v.Cmp(maxUint64) > 0 {
			return nil, fmt.Errorf("number %s out of range", v.String())
		}
		return v.Append(dst, 10), nil
	}
	return nil, fmt.Errorf("value of type %T cannot be represented in JSON", v)
}

// member is one key and value of an object being encoded.
type member struct {
	key   string
	value any
}

// checkNumber applies the canonical number limits to a JSON number.
func checkNumber(s string) error {
	if shortInteger(s) {
		return nil
	}
	if !strings.ContainsAny(s, ".eE") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return nil
		}
		if _, err := strconv.ParseUint(s, 10, 64); err == nil {
			return nil
		}
		return fmt.Errorf("number %s out of range", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return fmt.Errorf("number %s out of range", s)
	}
	return nil
}

// shortInteger reports whether s is an integer of at most 18 digits (always
// within int64).
func shortInteger(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// appendCanonicalString appends s as a JSON string; invalid UTF-8 is an
// error.
func appendCanonicalString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, errors.New("invalid UTF-8 in a string")
	}
	dst = append(dst, '"')
	for len(s) > 0 {
		// copy the run that needs no escape in one go
		n := strings.IndexFunc(s, needsEscape)
		if n < 0 {
			n = len(s)
		}
		dst = append(dst, s[:n]...)
		if s = s[n:]; len(s) == 0 {
			break
		}
		c := s[0]
		s = s[1:]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(dst, '"'), nil
}

func needsEscape(r rune) bool { return r < 0x20 || r == '"' || r == '\\' }
