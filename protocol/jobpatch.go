package protocol

import (
	"encoding/json"
	"fmt"
	"math"
)

// JobPatch is a decoded PATCH /jobs body (SPEC §6.6, merge-patch semantics:
// absent = unchanged, null = reset).
type JobPatch struct {
	Queue      patchField[string]
	Priority   patchField[uint16]
	ReadyAt    patchField[uint64]
	RetryLimit patchField[uint32]
	Backoff    patchField[BackoffRequest]
	// Retention: Present/Null for the whole object; inner fields merge.
	Retention   patchField[struct{}]
	CompletedMs patchField[uint64]
	DeadMs      patchField[uint64]
	// TimeoutMs applies from the job's next dispatch (SPEC §10.5).
	TimeoutMs patchField[json.RawMessage]
}

// DecodeJobPatch decodes a job patch body. Malformed bodies are 400s; the
// 422 checks are in Check.
func DecodeJobPatch(f Format, body []byte) (*JobPatch, error) {
	var raw map[string]json.RawMessage
	if err := Decode(f, body, &raw); err != nil {
		return nil, err
	}
	p := &JobPatch{}
	bad := func(err error) error { return Invalid("invalid %s: %s", f, err.Error()) }
	if err := decodePatchField(raw, "queue", &p.Queue); err != nil {
		return nil, bad(err)
	}
	if err := decodePatchField(raw, "priority", &p.Priority); err != nil {
		return nil, bad(err)
	}
	if err := decodePatchField(raw, "ready_at", &p.ReadyAt); err != nil {
		return nil, bad(err)
	}
	if err := decodePatchField(raw, "retry_limit", &p.RetryLimit); err != nil {
		return nil, bad(err)
	}
	if err := decodePatchField(raw, "backoff", &p.Backoff); err != nil {
		return nil, bad(err)
	}
	if err := decodePatchField(raw, "timeout_ms", &p.TimeoutMs); err != nil {
		return nil, errTimeoutRange()
	}
	if p.Backoff.Present && !p.Backoff.Null {
		b := p.Backoff.Value
		switch {
		case b.Exponent == nil:
			return nil, bad(fmt.Errorf("field 'backoff': missing field 'exponent'"))
		case b.BaseMs == nil:
			return nil, bad(fmt.Errorf("field 'backoff': missing field 'base_ms'"))
		case b.JitterMs == nil:
			return nil, bad(fmt.Errorf("field 'backoff': missing field 'jitter_ms'"))
		}
	}
	if r, ok := raw["retention"]; ok {
		p.Retention.Present = true
		if isNull(r) {
			p.Retention.Null = true
		} else {
			var inner map[string]json.RawMessage
			if err := json.Unmarshal(r, &inner); err != nil {
				return nil, bad(fmt.Errorf("field 'retention': expected an object"))
			}
			if err := decodePatchField(inner, "completed_ms", &p.CompletedMs); err != nil {
				return nil, bad(err)
			}
			if err := decodePatchField(inner, "dead_ms", &p.DeadMs); err != nil {
				return nil, bad(err)
			}
		}
	}
	return p, nil
}

// CheckQueue returns the 422 for a null or invalid queue.
func (p *JobPatch) CheckQueue() error {
	if !p.Queue.Present {
		return nil
	}
	if p.Queue.Null {
		return Unprocessable("queue cannot be null")
	}
	if reason := CheckName(p.Queue.Value); reason != "" {
		return Unprocessable("queue %s", reason)
	}
	return nil
}

// CheckPriority returns the 422 for a null priority.
func (p *JobPatch) CheckPriority() error {
	if p.Priority.Present && p.Priority.Null {
		return Unprocessable("priority cannot be null")
	}
	return nil
}

// CheckBackoff returns the 400 for an invalid backoff exponent.
func (p *JobPatch) CheckBackoff() error {
	if p.Backoff.Present && !p.Backoff.Null {
		if e := *p.Backoff.Value.Exponent; math.IsNaN(e) || math.IsInf(e, 0) || e < 0 {
			return Invalid("backoff.exponent must be a finite number >= 0")
		}
	}
	return nil
}

// CheckTimeout returns the 400 for a timeout_ms out of range.
func (p *JobPatch) CheckTimeout() error {
	if p.TimeoutMs.Present && !p.TimeoutMs.Null {
		if _, err := parseTimeoutMs(p.TimeoutMs.Value); err != nil {
			return err
		}
	}
	return nil
}

// Check runs every 422 check in SPEC order (queue, then priority), then
// the backoff and timeout checks.
func (p *JobPatch) Check() error {
	if err := p.CheckQueue(); err != nil {
		return err
	}
	if err := p.CheckPriority(); err != nil {
		return err
	}
	if err := p.CheckBackoff(); err != nil {
		return err
	}
	return p.CheckTimeout()
}

// ApplyFields applies every field but ready_at to j (the engine handles
// ready_at, which can move the job between scheduled and ready).
func (p *JobPatch) ApplyFields(j *Job) {
	if p.Queue.Present && !p.Queue.Null {
		j.Queue = p.Queue.Value
	}
	if p.Priority.Present && !p.Priority.Null {
		j.Priority = p.Priority.Value
	}
	if p.RetryLimit.Present {
		if p.RetryLimit.Null {
			j.RetryLimit = nil
		} else {
			v := p.RetryLimit.Value
			j.RetryLimit = &v
		}
	}
	if p.TimeoutMs.Present {
		j.TimeoutMs = nil
		if v, err := parseTimeoutMs(p.TimeoutMs.Value); !p.TimeoutMs.Null && err == nil {
			j.TimeoutMs = &v
		}
	}
	if p.Backoff.Present {
		if p.Backoff.Null {
			j.Backoff = nil
		} else {
			b := p.Backoff.Value
			j.Backoff = &Backoff{Exponent: *b.Exponent, BaseMs: *b.BaseMs, JitterMs: *b.JitterMs}
		}
	}
	if p.Retention.Present {
		if p.Retention.Null {
			j.Retention = nil
			return
		}
		r := Retention{}
		if j.Retention != nil {
			r = *j.Retention
		}
		setOpt := func(f patchField[uint64], dst **uint64) {
			if !f.Present {
				return
			}
			if f.Null {
				*dst = nil
				return
			}
			v := f.Value
			*dst = &v
		}
		setOpt(p.CompletedMs, &r.CompletedMs)
		setOpt(p.DeadMs, &r.DeadMs)
		if r.CompletedMs == nil && r.DeadMs == nil {
			j.Retention = nil
		} else {
			j.Retention = &r
		}
	}
}
