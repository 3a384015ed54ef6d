package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Shared job filters of SPEC §6.1, used by GET/PATCH/DELETE /jobs and
// GET /jobs/count.

// Range is an inclusive range over an unsigned integer; Set is false when
// the parameter was absent or empty.
type Range struct {
	Set      bool
	Min, Max uint64
	limit    uint64 // the type's maximum
}

// Contains reports whether v is in the range (an unset range contains all).
func (r Range) Contains(v uint64) bool { return !r.Set || (v >= r.Min && v <= r.Max) }

// String renders the range in canonical form: N, A..B, ..B, A.. or "..".
func (r Range) String() string {
	switch {
	case r.Min == r.Max:
		return strconv.FormatUint(r.Min, 10)
	case r.Min == 0 && r.Max == r.limit:
		return ".."
	case r.Min == 0:
		return ".." + strconv.FormatUint(r.Max, 10)
	case r.Max == r.limit:
		return strconv.FormatUint(r.Min, 10) + ".."
	}
	return strconv.FormatUint(r.Min, 10) + ".." + strconv.FormatUint(r.Max, 10)
}

// ParseRange parses the range syntax of SPEC §6.1 over [0, limit]; errors
// are the detail after "invalid query parameters: ".
func ParseRange(name, v string, limit uint64) (Range, error) {
	r := Range{Set: true, Max: limit, limit: limit}
	bits := 64
	switch limit {
	case math.MaxUint16:
		bits = 16
	case math.MaxUint32:
		bits = 32
	}
	num := func(s string) (uint64, error) {
		n, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("%s: invalid range %q: expected an unsigned integer up to %d", name, v, limit)
		}
		return n, nil
	}
	lo, hi, isRange := strings.Cut(v, "..")
	var err error
	if !isRange {
		if r.Min, err = num(v); err != nil {
			return r, err
		}
		r.Max = r.Min
		return r, nil
	}
	if lo != "" {
		if r.Min, err = num(lo); err != nil {
			return r, err
		}
	}
	if hi != "" {
		if r.Max, err = num(hi); err != nil {
			return r, err
		}
	}
	if r.Min > r.Max {
		return r, fmt.Errorf("%s: range lower bound exceeds upper bound", name)
	}
	return r, nil
}

// JobFilter is a parsed set of shared filters. Lists are sorted and
// deduplicated; an empty list means "no filter".
type JobFilter struct {
	IDs        []string
	Queues     []string
	Types      []string
	Statuses   []Status
	BudgetKeys []string
	Priority   Range
	ReadyAt    Range
	Attempts   Range
	Filter     string // jq program on the payload ("" = none)

	prog *JQProgram
	// bounded counts the jobs whose jq program was stopped by a bound
	// (SPEC §6.1): the Tollgate-Filter-Errors header.
	bounded atomic.Int64
}

// filterParams are the query parameters JobFilter understands.
var filterParams = map[string]bool{
	"id": true, "queue": true, "type": true, "status": true, "priority": true,
	"ready_at": true, "attempts": true, "budgets.key": true, "filter": true,
}

// ParseJobFilter parses the shared filters from q. Parameters named in
// extra are returned raw (last value) for the caller; any other parameter is
// a 400. It checks syntax, statuses and ranges only: call CheckIDs and
// Compile (or Validate) for the later checks, so endpoints can order their
// checks as SPEC §6.6 requires.
func ParseJobFilter(q url.Values, extra ...string) (*JobFilter, map[string]string, error) {
	f := &JobFilter{}
	rest := make(map[string]string)
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	bad := func(format string, args ...any) error {
		return Invalid("invalid query parameters: "+format, args...)
	}
	for _, name := range names {
		vals := q[name]
		v := vals[len(vals)-1]
		if !filterParams[name] {
			known := false
			for _, e := range extra {
				if e == name {
					known = true
				}
			}
			if !known {
				return nil, nil, bad("unknown field `%s`", name)
			}
			rest[name] = v
			continue
		}
		var err error
		switch name {
		case "id":
			f.IDs = splitSorted(v)
		case "queue":
			f.Queues = splitSorted(v)
		case "type":
			f.Types = splitSorted(v)
		case "budgets.key":
			f.BudgetKeys = splitSorted(v)
		case "status":
			for _, s := range splitSorted(v) {
				st, ok := ParseStatus(s)
				if !ok {
					return nil, nil, bad("status: unknown status: %s", s)
				}
				f.Statuses = append(f.Statuses, st)
			}
		case "priority":
			if v != "" {
				f.Priority, err = ParseRange(name, v, math.MaxUint16)
			}
		case "ready_at":
			if v != "" {
				f.ReadyAt, err = ParseRange(name, v, math.MaxUint64)
			}
		case "attempts":
			if v != "" {
				f.Attempts, err = ParseRange(name, v, math.MaxUint32)
			}
		case "filter":
			f.Filter = v
		}
		if err != nil {
			return nil, nil, bad("%s", err.Error())
		}
	}
	return f, rest, nil
}

// splitSorted splits a comma list, drops empty items, sorts and dedups.
func splitSorted(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s != "" {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	n := 0
	for i, s := range out {
		if i == 0 || s != out[n-1] {
			out[n] = s
			n++
		}
	}
	return out[:n]
}

// CheckIDs returns the 400 for the first invalid job ID.
func (f *JobFilter) CheckIDs() error {
	for _, id := range f.IDs {
		if !ValidID(id) {
			return Invalid("invalid job ID: %q", id)
		}
	}
	return nil
}

// Compile parses and compiles the jq program (400 "invalid filter: ...").
func (f *JobFilter) Compile() error {
	if f.Filter == "" || f.prog != nil {
		return nil
	}
	prog, err := CompileJQ(f.Filter)
	if err != nil {
		return Invalid("invalid filter: %s", err.Error())
	}
	f.prog = prog
	return nil
}

// Validate runs CheckIDs then Compile.
func (f *JobFilter) Validate() error {
	if err := f.CheckIDs(); err != nil {
		return err
	}
	return f.Compile()
}

// HasStatus reports whether the status list names s.
func (f *JobFilter) HasStatus(s Status) bool {
	for _, st := range f.Statuses {
		if st == s {
			return true
		}
	}
	return false
}

// Empty reports whether no filter is set.
func (f *JobFilter) Empty() bool {
	return len(f.IDs) == 0 && len(f.Queues) == 0 && len(f.Types) == 0 && len(f.Statuses) == 0 &&
		len(f.BudgetKeys) == 0 && !f.Priority.Set && !f.ReadyAt.Set && !f.Attempts.Set && f.Filter == ""
}

func inSorted(list []string, s string) bool {
	i := sort.SearchStrings(list, s)
	return i < len(list) && list[i] == s
}

// MatchMeta applies every filter except the jq program to j, seen with
// status st.
func (f *JobFilter) MatchMeta(j *Job, st Status) bool {
	if len(f.IDs) > 0 && !inSorted(f.IDs, j.ID) {
		return false
	}
	if len(f.Queues) > 0 && !inSorted(f.Queues, j.Queue) {
		return false
	}
	if len(f.Types) > 0 && !inSorted(f.Types, j.Type) {
		return false
	}
	if len(f.Statuses) > 0 && !f.HasStatus(st) {
		return false
	}
	if !f.Priority.Contains(uint64(j.Priority)) || !f.ReadyAt.Contains(j.ReadyAt) || !f.Attempts.Contains(uint64(j.Attempts)) {
		return false
	}
	if len(f.BudgetKeys) > 0 {
		found := false
		for _, b := range j.Budgets {
			if inSorted(f.BudgetKeys, b.Key) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// MatchPayload runs the jq program on a canonical-JSON payload, bounded by
// FilterTimeLimit and the memory bound: true when any output is truthy.
// Runtime errors (and a cancelled ctx) mean no match; a program stopped by
// a bound also counts in BoundedErrors. Compile must have succeeded.
func (f *JobFilter) MatchPayload(ctx context.Context, payload []byte) bool {
	if f.Filter == "" {
		return true
	}
	if f.prog == nil {
		return false
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if len(payload) == 0 {
		v = nil
	} else if err := dec.Decode(&v); err != nil {
		return false
	}
	matched := false
	err := f.prog.Run(ctx, FilterTimeLimit, v, nil, func(out any) bool {
		matched = out != nil && out != false
		return !matched
	})
	if errors.Is(err, ErrJQTimeout) || errors.Is(err, ErrJQTooLarge) {
		f.bounded.Add(1)
	}
	return matched
}

// BoundedErrors is the number of jobs on which the jq program was stopped
// by its time or memory bound so far.
func (f *JobFilter) BoundedErrors() int64 { return f.bounded.Load() }

// Match applies every filter to j as seen at now (VisibleStatus).
func (f *JobFilter) Match(ctx context.Context, j *Job, now uint64) bool {
	return f.MatchMeta(j, j.VisibleStatus(now)) && f.MatchPayload(ctx, j.Payload)
}

// AppendQuery appends the filters to a link in the layout of SPEC §6.2:
// "&status=...&queue=...&type=...&id=...&priority=...&ready_at=...
// &attempts=...&budgets.key=...&filter=...".
func (f *JobFilter) AppendQuery(b *strings.Builder) {
	list := func(name string, vals []string) {
		if len(vals) == 0 {
			return
		}
		b.WriteString("&" + name + "=")
		for i, v := range vals {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(url.QueryEscape(v))
		}
	}
	statuses := make([]string, len(f.Statuses))
	for i, s := range f.Statuses {
		statuses[i] = string(s)
	}
	list("status", statuses)
	list("queue", f.Queues)
	list("type", f.Types)
	list("id", f.IDs)
	for _, r := range []struct {
		name string
		r    Range
	}{{"priority", f.Priority}, {"ready_at", f.ReadyAt}, {"attempts", f.Attempts}} {
		if r.r.Set {
			b.WriteString("&" + r.name + "=" + r.r.String())
		}
	}
	list("budgets.key", f.BudgetKeys)
	if f.Filter != "" {
		b.WriteString("&filter=" + url.QueryEscape(f.Filter))
	}
}
