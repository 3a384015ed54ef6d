package protocol

import (
	"encoding/json"
	"fmt"
	"sort"
)

// MaxSettleCost is the largest real cost a settle entry may report (SPEC
// §10.1).
const MaxSettleCost = 1_000_000

// Settlement is a validated settle entry: the real cost of a job on one of
// its budgets.
type Settlement struct {
	Key  string
	Cost uint32
}

// SettleRequest is one item of a settle list as sent. Cost is kept raw so
// that every value other than an integer in range gets the one 400 the SPEC
// names.
type SettleRequest struct {
	Key  *string          `json:"key"`
	Cost *json.RawMessage `json:"cost"`
}

// SuccessRequest is the optional body of POST /jobs/{id}/success.
type SuccessRequest struct {
	Settle []*SettleRequest `json:"settle"`
}

func (r *SuccessRequest) checkRequired() error { return checkSettleRequired(r.Settle) }

func checkSettleRequired(list []*SettleRequest) error {
	for _, s := range list {
		switch {
		case s == nil:
			return fmt.Errorf("invalid type: null, expected a settle entry object")
		case s.Key == nil:
			return fmt.Errorf("missing field 'key'")
		case s.Cost == nil:
			return fmt.Errorf("missing field 'cost'")
		}
	}
	return nil
}

// ValidateSettle checks a settle list in order (SPEC §10.1): each cost an
// integer 0..MaxSettleCost, no key twice. Whether each key is bound to the
// job is the engine's check, made after the job lookup.
func ValidateSettle(list []*SettleRequest) ([]Settlement, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]Settlement, 0, len(list))
	for i, s := range list {
		cost, ok := parseIntLiteral(*s.Cost, MaxSettleCost)
		if !ok {
			return nil, Invalid("settle[%d].cost must be an integer between 0 and %d", i, MaxSettleCost)
		}
		for _, o := range out {
			if o.Key == *s.Key {
				return nil, Invalid("settle: duplicate budget key '%s'", *s.Key)
			}
		}
		out = append(out, Settlement{Key: *s.Key, Cost: uint32(cost)})
	}
	return out, nil
}

// ValidateSettleMany checks a bulk ack's settle object (SPEC §10.1): every
// job it names must be listed in ids, and each list is checked as
// ValidateSettle checks it. Jobs are checked in id order, so the error a
// request gets does not depend on map order.
func (r *AckManyRequest) ValidateSettleMany() (map[string][]Settlement, error) {
	if len(r.Settle) == 0 {
		return nil, nil
	}
	listed := make(map[string]bool, len(r.IDs))
	for _, id := range r.IDs {
		listed[id] = true
	}
	ids := make([]string, 0, len(r.Settle))
	for id := range r.Settle {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make(map[string][]Settlement, len(ids))
	for _, id := range ids {
		if !listed[id] {
			return nil, Invalid("settle names job %s, which is not in ids", id)
		}
		list, err := ValidateSettle(r.Settle[id])
		if err != nil {
			return nil, err
		}
		if len(list) > 0 {
			out[id] = list
		}
	}
	return out, nil
}
