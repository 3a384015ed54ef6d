package protocol

import "fmt"

// StrategyType names a budget strategy.
type StrategyType string

// The two budget strategies (SPEC §4.4).
const (
	WhileInFlight StrategyType = "while_in_flight"
	TimeBased     StrategyType = "time_based"
)

// MaxAllocation is the largest allocation or burst a budget may have.
const MaxAllocation = 1000000

// MaxCost is the largest cost a binding may carry (2^31-1).
const MaxCost = 1<<31 - 1

// MaxBindings is the most budgets one job may bind to.
const MaxBindings = 32

// Strategy is a budget's strategy. DurationMs and Burst are zero when unset.
type Strategy struct {
	Burst      uint32       `json:"burst,omitempty" msgpack:"burst,omitempty"`
	DurationMs int64        `json:"duration_ms,omitempty" msgpack:"duration_ms,omitempty"`
	Type       StrategyType `json:"type" msgpack:"type"`
}

// Definition is what a client sets on a budget: allocation and strategy.
type Definition struct {
	Allocation uint32   `json:"allocation" msgpack:"allocation"`
	Strategy   Strategy `json:"strategy" msgpack:"strategy"`
}

// Capacity is the most tokens the pool can hold: burst if set (time_based),
// else allocation.
func (d Definition) Capacity() uint32 {
	if d.Strategy.Type == TimeBased && d.Strategy.Burst > 0 {
		return d.Strategy.Burst
	}
	return d.Allocation
}

// Ceiling is the largest cost a bound job may have: min(allocation, burst).
func (d Definition) Ceiling() uint32 {
	if d.Strategy.Type == TimeBased && d.Strategy.Burst > 0 && d.Strategy.Burst < d.Allocation {
		return d.Strategy.Burst
	}
	return d.Allocation
}

// CheckCost returns the 422 error for a job of cost on budget key, or nil.
func (d Definition) CheckCost(key string, cost uint32) error {
	if cost > d.Allocation {
		return Unprocessable("budget '%s' cannot accept a job costing %d: its allocation is %d. Lower the cost or raise the allocation.", key, cost, d.Allocation)
	}
	if d.Strategy.Type == TimeBased && d.Strategy.Burst > 0 && cost > d.Strategy.Burst {
		return Unprocessable("budget '%s' cannot accept a job costing %d: its burst is %d. Lower the cost or raise the burst.", key, cost, d.Strategy.Burst)
	}
	return nil
}

// Budget is a stored budget: key, definition and timestamps.
type Budget struct {
	Allocation uint32   `json:"allocation" msgpack:"allocation"`
	CreatedAt  uint64   `json:"created_at" msgpack:"created_at"`
	Key        string   `json:"key" msgpack:"key"`
	Strategy   Strategy `json:"strategy" msgpack:"strategy"`
	UpdatedAt  uint64   `json:"updated_at" msgpack:"updated_at"`
}

// Definition returns the budget's allocation and strategy.
func (b *Budget) Definition() Definition {
	return Definition{Allocation: b.Allocation, Strategy: b.Strategy}
}

// BudgetRequest is the body of POST/PUT /budgets/{key} and a create_with.
// Integer widths follow the seed's schema (allocation and burst int32,
// duration int64) so out-of-range values are decode errors.
type BudgetRequest struct {
	Allocation *int32           `json:"allocation"`
	Strategy   *StrategyRequest `json:"strategy"`
}

// StrategyRequest is the strategy object of a BudgetRequest.
type StrategyRequest struct {
	Type       *string `json:"type"`
	DurationMs *int64  `json:"duration_ms"`
	Burst      *int32  `json:"burst"`
}

func (r *BudgetRequest) checkRequired() error {
	if r.Allocation == nil {
		return fmt.Errorf("missing field 'allocation'")
	}
	if r.Strategy == nil {
		return fmt.Errorf("missing field 'strategy'")
	}
	if r.Strategy.Type == nil {
		return fmt.Errorf("missing field 'type'")
	}
	return nil
}

// Definition validates the request's values (SPEC §4.10, first table) and
// returns the definition. Errors are 422.
func (r *BudgetRequest) Definition() (Definition, error) {
	return validateDefinition(int64(*r.Allocation), *r.Strategy.Type, r.Strategy.DurationMs, int32PtrTo64(r.Strategy.Burst))
}

func int32PtrTo64(p *int32) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

// validateDefinition checks a full definition in the order of SPEC §4.10.
func validateDefinition(allocation int64, typ string, durationMs, burst *int64) (Definition, error) {
	if allocation < 1 {
		return Definition{}, Unprocessable("allocation must be at least 1")
	}
	if allocation > MaxAllocation {
		return Definition{}, Unprocessable("allocation must be at most %d", MaxAllocation)
	}
	def := Definition{Allocation: uint32(allocation), Strategy: Strategy{Type: StrategyType(typ)}}
	switch StrategyType(typ) {
	case TimeBased:
		if durationMs == nil {
			return Definition{}, Unprocessable("time_based strategy requires duration_ms")
		}
		if *durationMs < 1 {
			return Definition{}, Unprocessable("duration_ms must be at least 1")
		}
		def.Strategy.DurationMs = *durationMs
		if burst != nil {
			if *burst < 1 {
				return Definition{}, Unprocessable("burst must be at least 1")
			}
			if *burst > MaxAllocation {
				return Definition{}, Unprocessable("burst must be at most %d", MaxAllocation)
			}
			def.Strategy.Burst = uint32(*burst)
		}
	case WhileInFlight:
		if durationMs != nil {
			return Definition{}, Unprocessable("while_in_flight strategy does not accept duration_ms")
		}
		if burst != nil {
			return Definition{}, Unprocessable("while_in_flight strategy does not accept burst")
		}
	default:
		return Definition{}, Unprocessable("unknown budget strategy '%s' (expected 'while_in_flight' or 'time_based')", typ)
	}
	return def, nil
}

// BudgetPatch is a decoded JSON merge patch for PATCH /budgets/{key}. Each
// field records whether it was present and whether it was null.
type BudgetPatch struct {
	Allocation    patchField[int32]
	Strategy      patchField[struct{}]
	StrategyType  patchField[string]
	DurationMs    patchField[int64]
	Burst         patchField[int32]
	strategyIsObj bool
}

type patchField[T any] struct {
	Present bool
	Null    bool
	Value   T
}

// Apply merges the patch onto def and validates the result as a full
// definition. Errors are 422.
func (p *BudgetPatch) Apply(def Definition) (Definition, error) {
	if p.Allocation.Present && p.Allocation.Null {
		return Definition{}, Unprocessable("allocation cannot be null")
	}
	if p.Strategy.Present && p.Strategy.Null {
		return Definition{}, Unprocessable("strategy cannot be null")
	}
	if p.StrategyType.Present && p.StrategyType.Null {
		return Definition{}, Unprocessable("strategy.type cannot be null")
	}
	allocation := int64(def.Allocation)
	if p.Allocation.Present {
		allocation = int64(p.Allocation.Value)
	}
	typ := string(def.Strategy.Type)
	if p.StrategyType.Present {
		typ = p.StrategyType.Value
	}
	var duration, burst *int64
	if def.Strategy.Type == TimeBased {
		d := def.Strategy.DurationMs
		duration = &d
		if def.Strategy.Burst > 0 {
			b := int64(def.Strategy.Burst)
			burst = &b
		}
	}
	if p.DurationMs.Present {
		if p.DurationMs.Null {
			duration = nil
		} else {
			d := p.DurationMs.Value
			duration = &d
		}
	}
	if p.Burst.Present {
		if p.Burst.Null {
			burst = nil
		} else {
			b := int64(p.Burst.Value)
			burst = &b
		}
	}
	return validateDefinition(allocation, typ, duration, burst)
}
