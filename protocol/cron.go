package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// MaxCronNameBytes bounds cron group and entry names (SPEC §8.1.2).
const MaxCronNameBytes = 255

// CheckCronName returns the 400 error for an invalid cron group or entry
// name (what is "cron group name" or "cron entry name"), or nil.
func CheckCronName(what, name string) error {
	if reason := CheckName(name); reason != "" {
		return Invalid("%s %s", what, reason)
	}
	if len(name) > MaxCronNameBytes {
		return Invalid("%s must be at most %d bytes", what, MaxCronNameBytes)
	}
	return nil
}

// CronEntryRequest is one entry of a cron group request (SPEC §8.1.1).
// Name is required except on PUT of one entry, where the path names it.
type CronEntryRequest struct {
	Name       *string         `json:"name"`
	Expression *string         `json:"expression"`
	Timezone   *string         `json:"timezone"`
	Paused     *bool           `json:"paused"`
	Job        *EnqueueRequest `json:"job"`
}

func (r *CronEntryRequest) checkRequired() error {
	if r.Name == nil {
		return fmt.Errorf("missing field 'name'")
	}
	return r.checkRequiredNoName()
}

func (r *CronEntryRequest) checkRequiredNoName() error {
	switch {
	case r.Expression == nil:
		return fmt.Errorf("missing field 'expression'")
	case r.Job == nil:
		return fmt.Errorf("missing field 'job'")
	}
	return r.Job.checkRequired()
}

// CronEntryPutRequest is the body of PUT /crons/{group}/entries/{entry}:
// an entry whose name is optional (and ignored).
type CronEntryPutRequest struct {
	CronEntryRequest
}

func (r *CronEntryPutRequest) checkRequired() error { return r.checkRequiredNoName() }

// CronGroupRequest is the body of PUT /crons/{group}.
type CronGroupRequest struct {
	Entries  []*CronEntryRequest `json:"entries"`
	Paused   *bool               `json:"paused"`
	Timezone *string             `json:"timezone"`
}

func (r *CronGroupRequest) checkRequired() error {
	if r.Entries == nil {
		return fmt.Errorf("missing field 'entries'")
	}
	for _, e := range r.Entries {
		if e == nil {
			return fmt.Errorf("invalid type: null, expected a cron entry object")
		}
		if err := e.checkRequired(); err != nil {
			return err
		}
	}
	return nil
}

// NullableString is a merge-patch string field: Set when the key was
// present, Value nil when it was null.
type NullableString struct {
	Set   bool
	Value *string
}

// UnmarshalJSON records presence, and the value unless it is null.
func (n *NullableString) UnmarshalJSON(b []byte) error {
	n.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		n.Value = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	n.Value = &s
	return nil
}

// CronGroupPatch is the body of PATCH /crons/{group}.
type CronGroupPatch struct {
	Paused   *bool          `json:"paused"`
	Timezone NullableString `json:"timezone"`
}

// CronEntryPatch is the body of PATCH /crons/{group}/entries/{entry}.
type CronEntryPatch struct {
	Paused *bool `json:"paused"`
}

// CronTemplate is an entry's job template as stored and echoed (SPEC
// §8.1.1): the POST /jobs fields that were sent, priority filled in,
// budgets with their costs and without create_with.
type CronTemplate struct {
	Type        string     `json:"type" msgpack:"type"`
	Queue       string     `json:"queue" msgpack:"queue"`
	Priority    uint16     `json:"priority" msgpack:"priority"`
	Payload     Payload    `json:"payload" msgpack:"payload"`
	RetryLimit  *uint32    `json:"retry_limit,omitempty" msgpack:"retry_limit,omitempty"`
	Backoff     *Backoff   `json:"backoff,omitempty" msgpack:"backoff,omitempty"`
	Retention   *Retention `json:"retention,omitempty" msgpack:"retention,omitempty"`
	UniqueKey   *string    `json:"unique_key,omitempty" msgpack:"unique_key,omitempty"`
	UniqueWhile *string    `json:"unique_while,omitempty" msgpack:"unique_while,omitempty"`
	Batch       *Batch     `json:"batch,omitempty" msgpack:"batch,omitempty"`
	Budgets     []Binding  `json:"budgets,omitempty" msgpack:"budgets,omitempty"`
	TimeoutMs   *uint32    `json:"timeout_ms,omitempty" msgpack:"timeout_ms,omitempty"`
}

// ValidateTemplate applies the template checks of SPEC §8.1.5 in order:
// type, queue, ready_at refused, then those of POST /jobs. It returns the
// stored template and the validated job (bindings with create_with).
// Errors are 400, except invalid create_with values (422).
func ValidateTemplate(r *EnqueueRequest) (*CronTemplate, *NewJob, error) {
	if reason := CheckName(*r.Type); reason != "" {
		return nil, nil, Invalid("type %s", reason)
	}
	if reason := CheckName(*r.Queue); reason != "" {
		return nil, nil, Invalid("queue %s", reason)
	}
	if r.ReadyAt != nil {
		return nil, nil, Invalid("ready_at is not supported for cron entries")
	}
	nj, err := r.Validate()
	if err != nil {
		return nil, nil, err
	}
	j := &nj.Job
	t := &CronTemplate{Type: j.Type, Queue: j.Queue, Priority: j.Priority, Payload: Payload(j.Payload),
		RetryLimit: j.RetryLimit, Backoff: j.Backoff, Retention: j.Retention, UniqueKey: r.UniqueKey,
		UniqueWhile: r.UniqueWhile, Batch: j.Batch, Budgets: j.Budgets, TimeoutMs: j.TimeoutMs}
	return t, nj, nil
}

// NewJob is the enqueue a firing of the template makes (SPEC §8.1.7):
// ready at once, bound to the template's budgets (no create_with).
func (t *CronTemplate) NewJob() *NewJob {
	nj := &NewJob{Job: Job{
		Type: t.Type, Queue: t.Queue, Priority: t.Priority, Payload: []byte(t.Payload),
		RetryLimit: t.RetryLimit, Backoff: t.Backoff, Retention: t.Retention, Batch: t.Batch,
		// its own copy: the engine interns a new job's binding keys in place
		Budgets:   slices.Clone(t.Budgets),
		TimeoutMs: t.TimeoutMs,
	}}
	if t.UniqueKey != nil {
		nj.Job.UniqueKey = *t.UniqueKey
		nj.Job.UniqueWhile = UniqueQueued
		if t.UniqueWhile != nil {
			nj.Job.UniqueWhile = *t.UniqueWhile
		}
	}
	if len(t.Budgets) > 0 {
		nj.Bindings = make([]NewBinding, len(t.Budgets))
		for i, b := range t.Budgets {
			nj.Bindings[i] = NewBinding{Key: b.Key, Cost: b.Cost}
		}
	}
	return nj
}

// CronEntry is a cron entry as stored (without its group's name, which is
// in its key) and as answered.
type CronEntry struct {
	Name          string       `json:"name" msgpack:"name"`
	Expression    string       `json:"expression" msgpack:"expression"`
	Timezone      string       `json:"timezone,omitempty" msgpack:"timezone,omitempty"`
	Paused        bool         `json:"paused" msgpack:"paused"`
	PausedAt      uint64       `json:"paused_at,omitempty" msgpack:"paused_at,omitempty"`
	ResumedAt     uint64       `json:"resumed_at,omitempty" msgpack:"resumed_at,omitempty"`
	Job           CronTemplate `json:"job" msgpack:"job"`
	NextEnqueueAt uint64       `json:"next_enqueue_at" msgpack:"next_enqueue_at"`
	LastEnqueueAt uint64       `json:"last_enqueue_at,omitempty" msgpack:"last_enqueue_at,omitempty"`
}

// CronGroup is a cron group's own record (its entries are stored apart).
type CronGroup struct {
	Name      string `json:"name" msgpack:"name"`
	Paused    bool   `json:"paused" msgpack:"paused"`
	PausedAt  uint64 `json:"paused_at,omitempty" msgpack:"paused_at,omitempty"`
	ResumedAt uint64 `json:"resumed_at,omitempty" msgpack:"resumed_at,omitempty"`
	Timezone  string `json:"timezone,omitempty" msgpack:"timezone,omitempty"`
}

// CronGroupView is a group as answered: its record and its entries in
// ascending name order.
type CronGroupView struct {
	Name      string      `json:"name" msgpack:"name"`
	Paused    bool        `json:"paused" msgpack:"paused"`
	PausedAt  uint64      `json:"paused_at,omitempty" msgpack:"paused_at,omitempty"`
	ResumedAt uint64      `json:"resumed_at,omitempty" msgpack:"resumed_at,omitempty"`
	Timezone  string      `json:"timezone,omitempty" msgpack:"timezone,omitempty"`
	Entries   []CronEntry `json:"entries" msgpack:"entries"`
}

// SetPaused applies a pause change at now to a paused flag and its
// timestamps (SPEC §8.1.4): setting the current value changes nothing.
func SetPaused(paused *bool, pausedAt, resumedAt *uint64, want bool, now uint64) {
	if *paused == want {
		return
	}
	*paused = want
	if want {
		*pausedAt = now
	} else {
		*resumedAt = now
	}
}

// CheckTemplateBatch runs SPEC §8.2.2's batch checks (compile, dry run on
// the template's own payload) on a cron template whose other checks
// passed or failed only with a 422: for a template they are 400s, checked
// before any budget (SPEC §8.1.5). The key was checked with the template.
func CheckTemplateBatch(r *EnqueueRequest) error {
	if r.Batch == nil || r.Batch.Key == nil || *r.Batch.Key == "" {
		return nil
	}
	b := &Batch{Key: *r.Batch.Key, When: *r.Batch.When, Fold: *r.Batch.Fold}
	if _, err := CheckBatch(b, r.Payload); err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return Invalid("%s", pe.Message)
		}
		return err
	}
	return nil
}
