// The facade's cron methods: the 400 checks of SPEC §8.1.5 in their order
// (they parse expressions and load zones, which may read zone files, so
// they run here, outside any actor), then one request to the queue actor.

package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// validateCronEntry makes the per-entry 400 checks: name, expression
// (including never matching), own zone, template. A create_with value
// error (422) is kept in Late for the 422 phase.
func validateCronEntry(now time.Time, name string, r *protocol.CronEntryRequest) (CronEntryDef, error) {
	d := CronEntryDef{Name: name, Expression: *r.Expression, Paused: r.Paused}
	if err := protocol.CheckCronName("cron entry name", name); err != nil {
		return d, err
	}
	x, err := parseCronExpr(d.Expression)
	if err != nil {
		return d, err
	}
	if cronNext(x, now, time.UTC).IsZero() {
		return d, cronNeverMatches(d.Expression)
	}
	d.expr = x
	if r.Timezone != nil {
		if d.zone, err = loadZone(*r.Timezone); err != nil {
			return d, err
		}
		d.Timezone = *r.Timezone
	}
	tmpl, nj, err := protocol.ValidateTemplate(r.Job)
	var pe *protocol.Error
	late := err != nil && errors.As(err, &pe) && pe.Code == protocol.CodeUnprocessable
	if err == nil || late {
		// the batch checks come before every budget check (SPEC §8.1.5)
		if berr := protocol.CheckTemplateBatch(r.Job); berr != nil {
			return d, berr
		}
	}
	if err != nil {
		if late {
			d.Late = err
			return d, nil
		}
		return d, err
	}
	d.Template, d.Job = *tmpl, nj
	return d, nil
}

// groupZone validates an optional group zone.
func groupZone(tz *string) (string, *time.Location, error) {
	if tz == nil {
		return "", nil, nil
	}
	loc, err := loadZone(*tz)
	return *tz, loc, err
}

// PutCronGroup creates or replaces a cron group whole.
func (e *Engine) PutCronGroup(ctx context.Context, group string, r *protocol.CronGroupRequest) (*protocol.CronGroupView, error) {
	if err := protocol.CheckCronName("cron group name", group); err != nil {
		return nil, err
	}
	m := &PutCronGroup{Group: group, Paused: r.Paused, Entries: make([]CronEntryDef, len(r.Entries))}
	var err error
	if m.Timezone, m.zone, err = groupZone(r.Timezone); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(r.Entries))
	for _, er := range r.Entries {
		if seen[*er.Name] {
			return nil, protocol.Invalid("duplicate cron entry name: %q", *er.Name)
		}
		seen[*er.Name] = true
	}
	now := e.clock.Now()
	for i, er := range r.Entries {
		if m.Entries[i], err = validateCronEntry(now, *er.Name, er); err != nil {
			return nil, protocol.Prefixed(fmt.Sprintf("entries[%d]: ", i), err)
		}
	}
	res, err := e.call(ctx, m)
	if err != nil {
		return nil, err
	}
	return res.(*protocol.CronGroupView), nil
}

// PutCronEntry creates or replaces one entry (create: POST, where an
// existing name is a conflict), creating its group if missing. name is the
// entry's name: from the body on POST, from the path on PUT.
func (e *Engine) PutCronEntry(ctx context.Context, group, name string, r *protocol.CronEntryRequest, create bool) (*protocol.CronEntry, error) {
	if err := protocol.CheckCronName("cron group name", group); err != nil {
		return nil, err
	}
	d, err := validateCronEntry(e.clock.Now(), name, r)
	if err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &PutCronEntry{Group: group, Entry: d, Create: create})
	if err != nil {
		return nil, err
	}
	return res.(*protocol.CronEntry), nil
}

// PatchCronGroup pauses, resumes or re-zones a group.
func (e *Engine) PatchCronGroup(ctx context.Context, group string, p *protocol.CronGroupPatch) (*protocol.CronGroupView, error) {
	m := &PatchCronGroup{Group: group, Paused: p.Paused, TimezoneSet: p.Timezone.Set}
	if p.Timezone.Set {
		var err error
		if m.Timezone, m.zone, err = groupZone(p.Timezone.Value); err != nil {
			return nil, err
		}
	}
	res, err := e.call(ctx, m)
	if err != nil {
		return nil, err
	}
	return res.(*protocol.CronGroupView), nil
}

// PatchCronEntry pauses or resumes an entry.
func (e *Engine) PatchCronEntry(ctx context.Context, group, entry string, p *protocol.CronEntryPatch) (*protocol.CronEntry, error) {
	res, err := e.call(ctx, &PatchCronEntry{Group: group, Entry: entry, Paused: p.Paused})
	if err != nil {
		return nil, err
	}
	return res.(*protocol.CronEntry), nil
}

// CronGroup returns one group with its entries.
func (e *Engine) CronGroup(ctx context.Context, group string) (*protocol.CronGroupView, error) {
	res, err := e.call(ctx, &GetCronGroup{Group: group})
	if err != nil {
		return nil, err
	}
	return res.(*protocol.CronGroupView), nil
}

// CronEntry returns one entry.
func (e *Engine) CronEntry(ctx context.Context, group, entry string) (*protocol.CronEntry, error) {
	res, err := e.call(ctx, &GetCronEntry{Group: group, Entry: entry})
	if err != nil {
		return nil, err
	}
	return res.(*protocol.CronEntry), nil
}

// CronGroups lists group names, ascending.
func (e *Engine) CronGroups(ctx context.Context) (*CronGroupsResponse, error) {
	res, err := e.call(ctx, &ListCronGroups{})
	if err != nil {
		return nil, err
	}
	return res.(*CronGroupsResponse), nil
}

// DeleteCronGroup deletes a group and its entries.
func (e *Engine) DeleteCronGroup(ctx context.Context, group string) error {
	_, err := e.call(ctx, &DeleteCronGroup{Group: group})
	return err
}

// DeleteCronEntry deletes one entry.
func (e *Engine) DeleteCronEntry(ctx context.Context, group, entry string) error {
	_, err := e.call(ctx, &DeleteCronEntry{Group: group, Entry: entry})
	return err
}

// DeleteCronGroups deletes every group.
func (e *Engine) DeleteCronGroups(ctx context.Context) (*DeletedResponse, error) {
	res, err := e.call(ctx, &DeleteCronGroups{})
	if err != nil {
		return nil, err
	}
	return res.(*DeletedResponse), nil
}

// CronStats returns the cron counters (live, read with atomics).
func (e *Engine) CronStats() *CronStats { return e.cronStats }
