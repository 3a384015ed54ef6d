package protocol

// HoldRequest is the body of PUT /budgets/{key}/hold (SPEC §10.2): hold the
// budget until a moment (Until, Unix ms) or for a while from now (ForMs),
// exactly one of the two; Drain also empties a time_based pool.
type HoldRequest struct {
	Until *uint64 `json:"until"`
	ForMs *uint64 `json:"for_ms"`
	Drain bool    `json:"drain"`
}

// Check is the request's 400: exactly one of until and for_ms.
func (r *HoldRequest) Check() error {
	if (r.Until == nil) == (r.ForMs == nil) {
		return Invalid("hold needs exactly one of until and for_ms")
	}
	return nil
}

// End is the moment the hold asked for ends (Unix ms), for_ms counted from
// now (saturating). The request passed Check.
func (r *HoldRequest) End(now uint64) uint64 {
	if r.Until != nil {
		return *r.Until
	}
	end := now + *r.ForMs
	if end < now {
		end = ^uint64(0)
	}
	return end
}

// BudgetHold is the stored hold of a budget: no job bound to it is
// dispatched before Until (Unix ms). Drained records that a hold in force
// since emptied the pool, so a restart before Until starts the pool empty.
type BudgetHold struct {
	Until   uint64 `json:"until" msgpack:"until"`
	Drained bool   `json:"drained,omitempty" msgpack:"drained,omitempty"`
}
