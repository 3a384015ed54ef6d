package protocol

import (
	"encoding/json"
	"fmt"
	"math"
)

// UniqueWhile values (SPEC §6.9).
const (
	UniqueQueued = "queued"
	UniqueActive = "active"
	UniqueExists = "exists"
)

// BindingRequest is one item of an enqueue's budgets array.
type BindingRequest struct {
	Key        *string        `json:"key"`
	Cost       *uint32        `json:"cost"`
	CreateWith *BudgetRequest `json:"create_with"`
}

// EnqueueRequest is the body of POST /jobs and one item of POST /jobs/bulk.
type EnqueueRequest struct {
	Type        *string           `json:"type"`
	Queue       *string           `json:"queue"`
	Payload     Payload           `json:"payload"` // present when non-empty ("null" included)
	Priority    *uint16           `json:"priority"`
	ReadyAt     *uint64           `json:"ready_at"`
	RetryLimit  *uint32           `json:"retry_limit"`
	Backoff     *BackoffRequest   `json:"backoff"`
	Retention   *Retention        `json:"retention"`
	UniqueKey   *string           `json:"unique_key"`
	UniqueWhile *string           `json:"unique_while"`
	Batch       *BatchRequest     `json:"batch"`
	Budgets     []*BindingRequest `json:"budgets"`
	TimeoutMs   *json.RawMessage  `json:"timeout_ms"`
}

// BackoffRequest is a backoff object; all three fields are required.
type BackoffRequest struct {
	Exponent *float64 `json:"exponent"`
	BaseMs   *uint32  `json:"base_ms"`
	JitterMs *uint32  `json:"jitter_ms"`
}

// BatchRequest is a batch object; all three fields are required.
type BatchRequest struct {
	Key  *string `json:"key"`
	When *string `json:"when"`
	Fold *string `json:"fold"`
}

func (r *EnqueueRequest) checkRequired() error {
	switch {
	case r.Type == nil:
		return fmt.Errorf("missing field 'type'")
	case r.Queue == nil:
		return fmt.Errorf("missing field 'queue'")
	case len(r.Payload) == 0:
		return fmt.Errorf("missing field 'payload'")
	}
	if b := r.Backoff; b != nil {
		switch {
		case b.Exponent == nil:
			return fmt.Errorf("missing field 'exponent'")
		case b.BaseMs == nil:
			return fmt.Errorf("missing field 'base_ms'")
		case b.JitterMs == nil:
			return fmt.Errorf("missing field 'jitter_ms'")
		}
	}
	if b := r.Batch; b != nil {
		switch {
		case b.Key == nil:
			return fmt.Errorf("missing field 'key'")
		case b.When == nil:
			return fmt.Errorf("missing field 'when'")
		case b.Fold == nil:
			return fmt.Errorf("missing field 'fold'")
		}
	}
	for _, b := range r.Budgets {
		if b == nil {
			return fmt.Errorf("invalid type: null, expected a budget binding object")
		}
		if b.Key == nil {
			return fmt.Errorf("missing field 'key'")
		}
		if b.CreateWith != nil {
			if err := b.CreateWith.checkRequired(); err != nil {
				return err
			}
		}
	}
	return nil
}

// BulkEnqueueRequest is the body of POST /jobs/bulk.
type BulkEnqueueRequest struct {
	Jobs []*EnqueueRequest `json:"jobs"`
}

func (r *BulkEnqueueRequest) checkRequired() error {
	if r.Jobs == nil {
		return fmt.Errorf("missing field 'jobs'")
	}
	for _, j := range r.Jobs {
		if j == nil {
			return fmt.Errorf("invalid type: null, expected a job object")
		}
		if err := j.checkRequired(); err != nil {
			return err
		}
	}
	return nil
}

// NewJob is a validated enqueue: the job (without ID and status, which the
// queue actor assigns) and the budget bindings with their create_with
// definitions.
type NewJob struct {
	Job        Job
	ReadyAtSet bool
	Bindings   []NewBinding
}

// NewBinding is a validated binding; CreateWith is nil when not given.
type NewBinding struct {
	Key        string
	Cost       uint32
	CreateWith *Definition
}

// Validate validates every job of the bulk in order (an error names the
// job's index) and returns the jobs to enqueue. Jobs whose requests share
// their binding list (the fast decoder decodes a bulk's repeated "budgets"
// value once) share their validated bindings too: a job's binding list is
// replaced, never changed in place.
func (r *BulkEnqueueRequest) Validate() ([]*NewJob, error) {
	jobs := make([]*NewJob, len(r.Jobs))
	var memo bindingMemo
	for i, jr := range r.Jobs {
		nj, err := jr.validate(&memo)
		if err != nil {
			return nil, Prefixed(fmt.Sprintf("jobs[%d]: ", i), err)
		}
		jobs[i] = nj
	}
	return jobs, nil
}

// bindingMemo is the last binding list validated and its results.
type bindingMemo struct {
	reqs     []*BindingRequest
	bindings []NewBinding
	budgets  []Binding
}

// of returns the validated bindings of reqs, from the memo when reqs is the
// list it holds.
func (m *bindingMemo) of(reqs []*BindingRequest) ([]NewBinding, []Binding, error) {
	if m != nil && len(reqs) > 0 && len(reqs) == len(m.reqs) && &reqs[0] == &m.reqs[0] {
		return m.bindings, m.budgets, nil
	}
	bindings, err := validateBindings(reqs)
	if err != nil {
		return nil, nil, err
	}
	var budgets []Binding
	if len(bindings) > 0 {
		budgets = make([]Binding, len(bindings))
		for i, b := range bindings {
			budgets[i] = Binding{Key: b.Key, Cost: b.Cost}
		}
	}
	if m != nil {
		*m = bindingMemo{reqs: reqs, bindings: bindings, budgets: budgets}
	}
	return bindings, budgets, nil
}

// Validate applies the stateless checks of SPEC §5 and §4.10 in order and
// returns the job to enqueue. Errors are 400, except invalid create_with
// values, which are 422 as the SPEC says.
func (r *EnqueueRequest) Validate() (*NewJob, error) { return r.validate(nil) }

func (r *EnqueueRequest) validate(memo *bindingMemo) (*NewJob, error) {
	if reason := CheckName(*r.Type); reason != "" {
		return nil, Invalid("type %s", reason)
	}
	if reason := CheckName(*r.Queue); reason != "" {
		return nil, Invalid("queue %s", reason)
	}
	if r.UniqueWhile != nil && r.UniqueKey == nil {
		return nil, Invalid("unique_while requires unique_key")
	}
	if r.UniqueKey != nil && r.Batch != nil {
		return nil, Invalid("unique_key and batch cannot be combined")
	}
	if r.Batch != nil && *r.Batch.Key == "" {
		return nil, Invalid("batch.key must not be empty")
	}
	uniqueWhile := ""
	if r.UniqueKey != nil {
		uniqueWhile = UniqueQueued
		if r.UniqueWhile != nil {
			switch *r.UniqueWhile {
			case UniqueQueued, UniqueActive, UniqueExists:
				uniqueWhile = *r.UniqueWhile
			default:
				return nil, Invalid("invalid unique_while: %q (expected \"queued\", \"active\", or \"exists\")", *r.UniqueWhile)
			}
		}
	}
	if b := r.Backoff; b != nil {
		if math.IsNaN(*b.Exponent) || math.IsInf(*b.Exponent, 0) || *b.Exponent < 0 {
			return nil, Invalid("backoff.exponent must be a finite number >= 0")
		}
	}
	var timeout *uint32
	if r.TimeoutMs != nil {
		v, err := parseTimeoutMs(*r.TimeoutMs)
		if err != nil {
			return nil, err
		}
		timeout = &v
	}
	bindings, budgets, err := memo.of(r.Budgets)
	if err != nil {
		return nil, err
	}
	nj := &NewJob{
		Job: Job{
			Type:       *r.Type,
			Queue:      *r.Queue,
			Priority:   DefaultPriority,
			Payload:    []byte(r.Payload),
			RetryLimit: r.RetryLimit,
			Retention:  r.Retention,
			TimeoutMs:  timeout,
		},
		Bindings: bindings,
	}
	nj.Job.Budgets = budgets
	if r.Priority != nil {
		nj.Job.Priority = *r.Priority
	}
	if r.ReadyAt != nil {
		nj.Job.ReadyAt = *r.ReadyAt
		nj.ReadyAtSet = true
	}
	if r.Backoff != nil {
		nj.Job.Backoff = &Backoff{Exponent: *r.Backoff.Exponent, BaseMs: *r.Backoff.BaseMs, JitterMs: *r.Backoff.JitterMs}
	}
	if r.UniqueKey != nil {
		nj.Job.UniqueKey = *r.UniqueKey
		nj.Job.UniqueWhile = uniqueWhile
	}
	if r.Batch != nil {
		nj.Job.Batch = &Batch{Key: *r.Batch.Key, When: *r.Batch.When, Fold: *r.Batch.Fold}
	}
	return nj, nil
}

func validateBindings(reqs []*BindingRequest) ([]NewBinding, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	out := make([]NewBinding, 0, len(reqs))
	var seen map[string]bool // for many bindings; a few are scanned
	if len(reqs) > 8 {
		seen = make(map[string]bool, len(reqs))
	}
	for i, b := range reqs {
		key := *b.Key
		if reason := CheckBudgetKey(key); reason != "" {
			return nil, Invalid("budgets[%d]: invalid budget key '%s': %s", i, key, reason)
		}
		cost := uint32(1)
		if b.Cost != nil {
			cost = *b.Cost
		}
		if cost < 1 {
			return nil, Invalid("budgets[%d]: cost must be at least 1", i)
		}
		if cost > MaxCost {
			return nil, Invalid("budgets[%d]: cost must be at most %d", i, MaxCost)
		}
		if duplicateKey(out, seen, key) {
			return nil, Invalid("budgets: duplicate key '%s'", key)
		}
		out = append(out, NewBinding{Key: key, Cost: cost})
	}
	if len(reqs) > MaxBindings {
		return nil, Invalid("budgets: at most %d bindings per job", MaxBindings)
	}
	for i, b := range reqs {
		if b.CreateWith == nil {
			continue
		}
		def, err := b.CreateWith.Definition()
		if err != nil {
			return nil, Prefixed(fmt.Sprintf("budgets[%d].create_with: ", i), err)
		}
		out[i].CreateWith = &def
	}
	return out, nil
}

// duplicateKey reports whether key is among the bindings so far (out), and
// notes it in seen when there is one.
func duplicateKey(out []NewBinding, seen map[string]bool, key string) bool {
	if seen != nil {
		dup := seen[key]
		seen[key] = true
		return dup
	}
	for _, o := range out {
		if o.Key == key {
			return true
		}
	}
	return false
}

// FailureRequest is the body of POST /jobs/{id}/failure.
type FailureRequest struct {
	Message   *string `json:"message"`
	ErrorType *string `json:"error_type"`
	Backtrace *string `json:"backtrace"`
	RetryAt   *uint64 `json:"retry_at"`
	Kill      *bool   `json:"kill"`
	// Settle reports the job's real costs (SPEC §10.1, settle.go).
	Settle []*SettleRequest `json:"settle"`
}

func (r *FailureRequest) checkRequired() error {
	if r.Message == nil {
		return fmt.Errorf("missing field 'message'")
	}
	return checkSettleRequired(r.Settle)
}

// AckManyRequest is the body of POST /jobs/success.
type AckManyRequest struct {
	IDs []string `json:"ids"`
	// Settle maps a job id to its settle list (SPEC §10.1, settle.go).
	Settle map[string][]*SettleRequest `json:"settle"`
}

func (r *AckManyRequest) checkRequired() error {
	if r.IDs == nil {
		return fmt.Errorf("missing field 'ids'")
	}
	for _, list := range r.Settle {
		if err := checkSettleRequired(list); err != nil {
			return err
		}
	}
	return nil
}

// Validate rejects an empty list.
func (r *AckManyRequest) Validate() error {
	if len(r.IDs) == 0 {
		return Invalid("ids must not be empty")
	}
	return nil
}
