package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DecodeBudgetPatch decodes a PATCH /budgets/{key} body (JSON merge patch).
func DecodeBudgetPatch(f Format, body []byte) (*BudgetPatch, error) {
	var raw map[string]json.RawMessage
	if err := Decode(f, body, &raw); err != nil {
		return nil, err
	}
	p := &BudgetPatch{}
	bad := func(err error) error { return Invalid("invalid %s: %s", f, err.Error()) }
	if err := decodePatchField(raw, "allocation", &p.Allocation); err != nil {
		return nil, bad(err)
	}
	if s, ok := raw["strategy"]; ok {
		p.Strategy.Present = true
		if isNull(s) {
			p.Strategy.Null = true
		} else {
			var inner map[string]json.RawMessage
			if err := json.Unmarshal(s, &inner); err != nil {
				return nil, bad(fmt.Errorf("field 'strategy': expected an object"))
			}
			p.strategyIsObj = true
			if err := decodePatchField(inner, "type", &p.StrategyType); err != nil {
				return nil, bad(err)
			}
			if err := decodePatchField(inner, "duration_ms", &p.DurationMs); err != nil {
				return nil, bad(err)
			}
			if err := decodePatchField(inner, "burst", &p.Burst); err != nil {
				return nil, bad(err)
			}
		}
	}
	return p, nil
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

func decodePatchField[T any](raw map[string]json.RawMessage, name string, f *patchField[T]) error {
	v, ok := raw[name]
	if !ok {
		return nil
	}
	f.Present = true
	if isNull(v) {
		f.Null = true
		return nil
	}
	if err := json.Unmarshal(v, &f.Value); err != nil {
		return fmt.Errorf("field '%s': %w", name, cleanJSONError(err))
	}
	return nil
}
