package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Budget strategies as spelled on the wire (SPEC §4.2).
const (
	strategyWhileInFlight = "while_in_flight"
	strategyTimeBased     = "time_based"
)

// budgetSpec is one budget a scenario binds jobs to.
type budgetSpec struct {
	Key        string        `json:"key"`
	Strategy   string        `json:"strategy"`
	Allocation int           `json:"allocation"`
	Duration   time.Duration `json:"-"`
	DurationMs int64         `json:"duration_ms,omitempty"`
	Burst      int           `json:"burst,omitempty"`
	// CreateWith binds with create_with on every job instead of creating
	// the budget with PUT before the run.
	CreateWith bool `json:"create_with,omitempty"`
}

// capacity is the most tokens the pool holds (SPEC §4.2).
func (b budgetSpec) capacity() int {
	if b.Strategy == strategyTimeBased && b.Burst > 0 {
		return b.Burst
	}
	return b.Allocation
}

// definition is the budget's JSON body for PUT /budgets/{key} and create_with.
func (b budgetSpec) definition() string {
	s := `{"allocation":` + strconv.Itoa(b.Allocation) + `,"strategy":{"type":"` + b.Strategy + `"`
	if b.Strategy == strategyTimeBased {
		s += `,"duration_ms":` + strconv.FormatInt(b.Duration.Milliseconds(), 10)
		if b.Burst > 0 {
			s += `,"burst":` + strconv.Itoa(b.Burst)
		}
	}
	return s + `}}`
}

// binding is the job-side JSON of a binding to this budget (SPEC §4.5).
func (b budgetSpec) binding(cost int) string {
	s := `{"key":"` + b.Key + `","cost":` + strconv.Itoa(cost)
	if b.CreateWith {
		s += `,"create_with":` + b.definition()
	}
	return s + `}`
}

// scenario is what differs between scenarios: the budgets jobs bind to and
// the shape of the run. The load loops themselves are shared (load.go).
type scenario struct {
	name    string
	budgets []*budgetMeter
	// bindings[i] lists budget indices for a job with seq%len(bindings)==i;
	// nil when jobs are unbudgeted.
	bindings [][]int
	// bindingJSON[i] is the "budgets" array for bindings[i].
	bindingJSON []string
	preload     bool // backlog: enqueue everything before any worker starts
	park        bool // many-budgets: build and measure the parked state first (parked.go)
	collect     bool // tenants: after the drain, wait for the idle budgets to be collected (tenants.go)
	restart     bool // kill -9 and restart the server under load
	ceiling     bool // in-process trivial handler instead of tollgate
	// notes are deviations from the SPEC seen during setup.
	notes []string
}

// budgetsOf returns the budget indices job seq is bound to.
func (s *scenario) budgetsOf(seq int64) []int {
	if len(s.bindings) == 0 {
		return nil
	}
	return s.bindings[seq%int64(len(s.bindings))]
}

// newScenario builds the scenario of cfg; prefix makes budget keys unique
// to this run.
func newScenario(cfg Config, prefix string) *scenario {
	s := &scenario{name: cfg.Scenario}
	add := func(spec budgetSpec) int {
		s.budgets = append(s.budgets, newBudgetMeter(spec))
		return len(s.budgets) - 1
	}
	switch cfg.Scenario {
	case scenarioInflight:
		i := add(budgetSpec{Key: prefix + "-inflight", Strategy: strategyWhileInFlight, Allocation: cfg.BudgetAlloc})
		s.bindings = [][]int{{i}}
	case scenarioRate:
		i := add(budgetSpec{Key: prefix + "-rate", Strategy: strategyTimeBased, Allocation: cfg.BudgetAlloc,
			Duration: cfg.BudgetDuration, Burst: cfg.BudgetBurst})
		s.bindings = [][]int{{i}}
	case scenarioMulti:
		// Loose enough never to bind: the largest allocation there is,
		// refilled every second.
		a := add(budgetSpec{Key: prefix + "-multi-wif", Strategy: strategyWhileInFlight, Allocation: 1_000_000})
		b := add(budgetSpec{Key: prefix + "-multi-tb", Strategy: strategyTimeBased, Allocation: 1_000_000, Duration: time.Second})
		s.bindings = [][]int{{a, b}}
	case scenarioManyBudgets:
		for i := range cfg.Budgets {
			j := add(budgetSpec{Key: fmt.Sprintf("%s-b%05d", prefix, i), Strategy: strategyWhileInFlight,
				Allocation: cfg.BudgetAlloc, CreateWith: true})
			s.bindings = append(s.bindings, []int{j})
		}
		s.park = true
	case scenarioTenants:
		for i := range cfg.Budgets {
			j := add(budgetSpec{Key: fmt.Sprintf("%s-t%06d", prefix, i), Strategy: strategyTimeBased,
				Allocation: cfg.BudgetAlloc, Duration: time.Second, CreateWith: true})
			s.bindings = append(s.bindings, []int{j})
		}
		s.park = true
		s.collect = true
	case scenarioBacklog:
		s.preload = true
	case scenarioRestart:
		s.restart = true
	case scenarioCeiling:
		s.ceiling = true
	}
	for _, b := range s.budgets {
		b.spec.DurationMs = b.spec.Duration.Milliseconds()
	}
	for _, idx := range s.bindings {
		js := `[`
		for k, i := range idx {
			if k > 0 {
				js += ","
			}
			js += s.budgets[i].spec.binding(cfg.Cost)
		}
		s.bindingJSON = append(s.bindingJSON, js+`]`)
	}
	return s
}

// setupBudgets creates (or replaces) the budgets that are not made by
// create_with. It returns the time just before the first PUT was sent,
// which is when the pools are at the latest full (SPEC §4.9).
func (s *scenario) setupBudgets(ctx context.Context, c *apiClient, now func() time.Duration) error {
	for _, b := range s.budgets {
		if b.spec.CreateWith {
			continue
		}
		body := []byte(b.spec.definition())
		sent := now()
		resp, err := c.do(ctx, http.MethodPut, "/budgets/"+b.spec.Key, body)
		if err != nil {
			return fmt.Errorf("PUT /budgets/%s: %w", b.spec.Key, err)
		}
		switch resp.status {
		case http.StatusOK:
		case http.StatusCreated:
			// Usable, but SPEC §4.11 says PUT answers 200 even when it creates.
			s.notes = append(s.notes, fmt.Sprintf("PUT /budgets/%s answered 201; SPEC §4.11 says 200 (body %s)",
				b.spec.Key, clip(resp.body, 200)))
		default:
			c.errs.add("budget", "PUT", "/budgets/"+b.spec.Key, body, resp.status, resp.body, nil)
			return fmt.Errorf("PUT /budgets/%s: status %d: %s", b.spec.Key, resp.status, clip(resp.body, 300))
		}
		b.setCreated(sent)
	}
	return nil
}

// countBudgets counts the budgets of this run that GET /budgets lists
// (many-budgets checks that create_with made one per key used).
func (s *scenario) countBudgets(ctx context.Context, c *apiClient, prefix string) (int, error) {
	resp, err := c.do(ctx, http.MethodGet, "/budgets", nil)
	if err != nil {
		return 0, err
	}
	if resp.status != http.StatusOK {
		c.errs.add("budget", "GET", "/budgets", nil, resp.status, resp.body, nil)
		return 0, fmt.Errorf("GET /budgets: status %d", resp.status)
	}
	var list struct {
		Budgets []struct {
			Key string `json:"key"`
		} `json:"budgets"`
	}
	if err := json.Unmarshal(resp.body, &list); err != nil {
		return 0, fmt.Errorf("GET /budgets: %w", err)
	}
	n := 0
	for _, b := range list.Budgets {
		if strings.HasPrefix(b.Key, prefix+"-") {
			n++
		}
	}
	return n, nil
}

// deleteBudgets removes this run's budgets from a shared server (--url),
// best effort and bounded by ctx.
func (s *scenario) deleteBudgets(ctx context.Context, c *apiClient) (deleted int) {
	for _, b := range s.budgets {
		if ctx.Err() != nil {
			return deleted
		}
		resp, err := c.do(ctx, http.MethodDelete, "/budgets/"+b.spec.Key, nil)
		if err == nil && resp.status == http.StatusNoContent {
			deleted++
		}
	}
	return deleted
}
