package protocol

import (
	"encoding/json"
	"fmt"
)

// Budget rebinding bodies (SPEC §8.3.2).

// RebindBindingRequest is the binding body of POST/PUT
// /jobs/{id}/budgets/{key} (and the bulk routes), and one entry of a set
// body (with Key).
type RebindBindingRequest struct {
	Key        *string         `json:"key"`
	Cost       *uint32         `json:"cost"`
	CreateWith *BudgetRequest  `json:"create_with"`
	Bucket     json.RawMessage `json:"bucket"`
}

func (r *RebindBindingRequest) checkRequired() error {
	if r.CreateWith != nil {
		return r.CreateWith.checkRequired()
	}
	return nil
}

// RebindCostRequest is the cost body of PATCH /jobs/{id}/budgets/{key}.
type RebindCostRequest struct {
	Cost *uint32 `json:"cost"`
}

func (r *RebindCostRequest) checkRequired() error {
	if r.Cost == nil {
		return fmt.Errorf("missing field 'cost'")
	}
	return nil
}

// RebindSetRequest is the set body of PUT /jobs/{id}/budgets.
type RebindSetRequest struct {
	Budgets []*RebindBindingRequest `json:"budgets"`
}

func (r *RebindSetRequest) checkRequired() error {
	if r.Budgets == nil {
		return fmt.Errorf("missing field 'budgets'")
	}
	for _, b := range r.Budgets {
		if b == nil {
			return fmt.Errorf("invalid type: null, expected a budget binding object")
		}
		if b.Key == nil {
			return fmt.Errorf("missing field 'key'")
		}
		if err := b.checkRequired(); err != nil {
			return err
		}
	}
	return nil
}

// CheckRebindKey is the 422 for a path or set key that breaks §4.3.
func CheckRebindKey(key string) error {
	if reason := CheckBudgetKey(key); reason != "" {
		return Unprocessable("invalid budget key '%s': %s", key, reason)
	}
	return nil
}

// Validate checks a binding body for key (already checked) and returns the
// binding; cost defaults to 1 (cost 0 is refused later, by the change).
func (r *RebindBindingRequest) Validate(key string) (NewBinding, error) {
	b := NewBinding{Key: key, Cost: 1}
	if len(r.Bucket) > 0 {
		return b, Unprocessable("budget '%s' sets bucket, which is reserved and not yet supported", key)
	}
	if r.Cost != nil {
		b.Cost = *r.Cost
	}
	if r.CreateWith != nil {
		def, err := r.CreateWith.Definition()
		if err != nil {
			return b, err
		}
		b.CreateWith = &def
	}
	return b, nil
}

// Validate checks every entry of a set body (key rules, bucket,
// create_with) and returns the bindings in order.
func (r *RebindSetRequest) Validate() ([]NewBinding, error) {
	out := make([]NewBinding, 0, len(r.Budgets))
	for _, e := range r.Budgets {
		if err := CheckRebindKey(*e.Key); err != nil {
			return nil, err
		}
		b, err := e.Validate(*e.Key)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
