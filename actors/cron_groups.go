// Cron groups in the queue core: the catalog of groups and entries, the
// install rules (SPEC §8.1.4), the 409/422 checks (§8.1.5, §8.1.8), the
// budget guards, and the firing of due entries (§8.1.6-8.1.7) through the
// ordinary enqueue path. The cron actor (cron_actor.go) only keeps time.

package actors

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// cronCatalog is the queue core's cron state.
type cronCatalog struct {
	groups map[string]*cronGroupState
	// claims lists, per budget key, the entries whose template draws on
	// it and their cost: the guards on budget delete and shrink.
	claims map[string]map[cronRef]uint32
	stats  *CronStats
}

type cronGroupState struct {
	rec     protocol.CronGroup
	zone    *time.Location // nil: none
	entries map[string]*cronEntryState
}

type cronEntryState struct {
	rec  protocol.CronEntry
	expr *cronExpr
	zone *time.Location // its own; nil: inherits
}

// CronStats counts firings for /metrics. The queue actor adds to it, the
// facade reads it: atomics, no round trip.
type CronStats struct {
	Fired       atomic.Uint64 // firings that enqueued (or found a duplicate)
	Skipped     atomic.Uint64 // firings whose enqueue failed
	Paused      atomic.Uint64 // ticks of paused entries or groups
	LatenessMs  atomic.Uint64 // sum over firings of (firing time - slot)
	LatenessMax atomic.Uint64 // largest (firing time - slot), ms
	Entries     atomic.Int64  // entries installed
}

func (c *CronStats) late(ms uint64) {
	c.LatenessMs.Add(ms)
	for {
		cur := c.LatenessMax.Load()
		if ms <= cur || c.LatenessMax.CompareAndSwap(cur, ms) {
			return
		}
	}
}

func (c *cronCatalog) init() {
	if c.groups == nil {
		c.groups = make(map[string]*cronGroupState)
		c.claims = make(map[string]map[cronRef]uint32)
	}
	if c.stats == nil {
		c.stats = &CronStats{}
	}
}

func cronGroupNotFound(group string) error {
	return protocol.Errorf(protocol.CodeNotFound, "cron group '%s' not found", group)
}

func cronEntryNotFound(group, entry string) error {
	return protocol.Errorf(protocol.CodeNotFound, "cron entry '%s' not found in group '%s'", entry, group)
}

// effectiveZone is an entry's own zone, else its group's, else the
// server's local zone.
func effectiveZone(own, group *time.Location) *time.Location {
	switch {
	case own != nil:
		return own
	case group != nil:
		return group
	}
	return time.Local
}

// nextSlot is the entry's next due instant after now, in Unix ms (0: none).
func nextSlot(x *cronExpr, now uint64, zone *time.Location) uint64 {
	t := cronNext(x, time.UnixMilli(int64(now)), zone)
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixMilli())
}

func (g *cronGroupState) view() *protocol.CronGroupView {
	v := &protocol.CronGroupView{Name: g.rec.Name, Paused: g.rec.Paused, PausedAt: g.rec.PausedAt,
		ResumedAt: g.rec.ResumedAt, Timezone: g.rec.Timezone, Entries: make([]protocol.CronEntry, 0, len(g.entries))}
	for _, es := range g.entries {
		v.Entries = append(v.Entries, es.rec)
	}
	sort.Slice(v.Entries, func(i, j int) bool { return v.Entries[i].Name < v.Entries[j].Name })
	return v
}

// checkTemplate makes an entry's 422 checks: its create_with values, then
// its budgets against the catalog (created collects the budgets the
// request's create_with make, counted against the limit).
func (e *queueCore) checkTemplate(now uint64, d *CronEntryDef, created map[string]*protocol.Budget, order *[]string) error {
	if d.Late != nil {
		return d.Late
	}
	return e.resolveBindings(now, d.Job, created, order)
}

func (e *queueCore) listCronGroups() *CronGroupsResponse {
	e.cron.init()
	names := make([]string, 0, len(e.cron.groups))
	for name := range e.cron.groups {
		names = append(names, name)
	}
	slices.Sort(names)
	return &CronGroupsResponse{Crons: names}
}

// getCronGroup answers the group's view or a 404 error.
func (e *queueCore) getCronGroup(name string) any {
	e.cron.init()
	g := e.cron.groups[name]
	if g == nil {
		return cronGroupNotFound(name)
	}
	return g.view()
}

// getCronEntry answers a copy of the entry or a 404 error.
func (e *queueCore) getCronEntry(group, entry string) any {
	e.cron.init()
	if g := e.cron.groups[group]; g != nil {
		if es := g.entries[entry]; es != nil {
			rec := es.rec
			return &rec
		}
	}
	return cronEntryNotFound(group, entry)
}

// putCronGroup creates or replaces a group whole.
func (e *queueCore) putCronGroup(now uint64, m *PutCronGroup, reply func(any)) {
	e.cron.init()
	created := make(map[string]*protocol.Budget)
	var order []string
	for i := range m.Entries {
		if err := e.checkTemplate(now, &m.Entries[i], created, &order); err != nil {
			reply(protocol.Prefixed(fmt.Sprintf("entries[%d]: ", i), err))
			return
		}
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	e.createBudgets(created, order, batch)
	g := e.cron.groups[m.Group]
	if g == nil {
		g = e.newCronGroup(now, m.Group, m.Paused)
	} else if m.Paused != nil {
		protocol.SetPaused(&g.rec.Paused, &g.rec.PausedAt, &g.rec.ResumedAt, *m.Paused, now)
	}
	oldZone := g.zone
	g.rec.Timezone, g.zone = m.Timezone, m.zone
	keep := make(map[string]bool, len(m.Entries))
	for i := range m.Entries {
		keep[m.Entries[i].Name] = true
	}
	for name, es := range g.entries {
		if !keep[name] {
			e.removeCronEntry(g, es, batch)
		}
	}
	for i := range m.Entries {
		e.installCronEntry(now, g, oldZone, &m.Entries[i], batch)
	}
	batch.PutCronGroup(&g.rec)
	e.persistThenReply(batch, reply, g.view())
}

// putCronEntry creates or replaces one entry (POST: creates only).
func (e *queueCore) putCronEntry(now uint64, m *PutCronEntry, reply func(any)) {
	e.cron.init()
	g := e.cron.groups[m.Group]
	if m.Create && g != nil && g.entries[m.Entry.Name] != nil {
		reply(protocol.Errorf(protocol.CodeConflict, "cron entry '%s' already exists in group '%s'", m.Entry.Name, m.Group))
		return
	}
	created := make(map[string]*protocol.Budget)
	var order []string
	if err := e.checkTemplate(now, &m.Entry, created, &order); err != nil {
		reply(err)
		return
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	e.createBudgets(created, order, batch)
	if g == nil {
		g = e.newCronGroup(now, m.Group, nil)
		batch.PutCronGroup(&g.rec)
	}
	es := e.installCronEntry(now, g, g.zone, &m.Entry, batch)
	rec := es.rec
	e.persistThenReply(batch, reply, &rec)
}

func (e *queueCore) newCronGroup(now uint64, name string, paused *bool) *cronGroupState {
	g := &cronGroupState{rec: protocol.CronGroup{Name: name}, entries: make(map[string]*cronEntryState)}
	if paused != nil && *paused {
		g.rec.Paused, g.rec.PausedAt = true, now
	}
	e.cron.groups[name] = g
	return g
}

// installCronEntry applies the replace rules of SPEC §8.1.4 to one entry;
// oldZone is the group's zone before the request.
func (e *queueCore) installCronEntry(now uint64, g *cronGroupState, oldZone *time.Location, d *CronEntryDef, batch *persistence.Batch) *cronEntryState {
	ref := cronRef{g.rec.Name, d.Name}
	eff := effectiveZone(d.zone, g.zone)
	es := g.entries[d.Name]
	reschedule := true
	if es == nil {
		es = &cronEntryState{rec: protocol.CronEntry{Name: d.Name}}
		g.entries[d.Name] = es
		e.cron.stats.Entries.Add(1)
		if d.Paused != nil && *d.Paused {
			es.rec.Paused, es.rec.PausedAt = true, now
		}
	} else {
		before := effectiveZone(es.zone, oldZone)
		reschedule = es.rec.Expression != d.Expression || before.String() != eff.String()
		if d.Paused != nil {
			protocol.SetPaused(&es.rec.Paused, &es.rec.PausedAt, &es.rec.ResumedAt, *d.Paused, now)
		}
		e.unclaimCron(ref, es.rec.Job.Budgets)
	}
	es.rec.Expression, es.rec.Timezone, es.rec.Job = d.Expression, d.Timezone, d.Template
	es.expr, es.zone = d.expr, d.zone
	e.claimCron(ref, es.rec.Job.Budgets)
	if reschedule {
		es.rec.NextEnqueueAt = nextSlot(es.expr, now, eff)
		e.out.scheduleCron(CronSlot{ref.group, ref.entry, es.rec.NextEnqueueAt})
	}
	batch.PutCronEntry(g.rec.Name, &es.rec)
	return es
}

func (e *queueCore) removeCronEntry(g *cronGroupState, es *cronEntryState, batch *persistence.Batch) {
	ref := cronRef{g.rec.Name, es.rec.Name}
	e.unclaimCron(ref, es.rec.Job.Budgets)
	delete(g.entries, es.rec.Name)
	e.cron.stats.Entries.Add(-1)
	e.out.scheduleCron(CronSlot{ref.group, ref.entry, 0})
	batch.DeleteCronEntry(ref.group, ref.entry)
}

func (e *queueCore) claimCron(ref cronRef, budgets []protocol.Binding) {
	for _, b := range budgets {
		m := e.cron.claims[b.Key]
		if m == nil {
			m = make(map[cronRef]uint32)
			e.cron.claims[b.Key] = m
		}
		m[ref] = b.Cost
	}
}

func (e *queueCore) unclaimCron(ref cronRef, budgets []protocol.Binding) {
	for _, b := range budgets {
		if m := e.cron.claims[b.Key]; m != nil {
			delete(m, ref)
			if len(m) == 0 {
				delete(e.cron.claims, b.Key)
			}
		}
	}
}

func (e *queueCore) patchCronGroup(now uint64, m *PatchCronGroup, reply func(any)) {
	e.cron.init()
	g := e.cron.groups[m.Group]
	if g == nil {
		reply(cronGroupNotFound(m.Group))
		return
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	if m.Paused != nil {
		protocol.SetPaused(&g.rec.Paused, &g.rec.PausedAt, &g.rec.ResumedAt, *m.Paused, now)
	}
	if m.TimezoneSet && m.Timezone != g.rec.Timezone {
		g.rec.Timezone, g.zone = m.Timezone, m.zone
		for _, es := range g.entries {
			if es.zone != nil {
				continue
			}
			es.rec.NextEnqueueAt = nextSlot(es.expr, now, effectiveZone(nil, g.zone))
			e.out.scheduleCron(CronSlot{g.rec.Name, es.rec.Name, es.rec.NextEnqueueAt})
			batch.PutCronTimes(g.rec.Name, es.rec.Name, es.rec.NextEnqueueAt, es.rec.LastEnqueueAt)
		}
	}
	batch.PutCronGroup(&g.rec)
	e.persistThenReply(batch, reply, g.view())
}

func (e *queueCore) patchCronEntry(now uint64, m *PatchCronEntry, reply func(any)) {
	e.cron.init()
	g := e.cron.groups[m.Group]
	var es *cronEntryState
	if g != nil {
		es = g.entries[m.Entry]
	}
	if es == nil {
		reply(cronEntryNotFound(m.Group, m.Entry))
		return
	}
	if m.Paused != nil {
		protocol.SetPaused(&es.rec.Paused, &es.rec.PausedAt, &es.rec.ResumedAt, *m.Paused, now)
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.PutCronEntry(m.Group, &es.rec)
	rec := es.rec
	e.persistThenReply(batch, reply, &rec)
}

func (e *queueCore) deleteCronEntry(m *DeleteCronEntry, reply func(any)) {
	e.cron.init()
	g := e.cron.groups[m.Group]
	if g == nil || g.entries[m.Entry] == nil {
		reply(cronEntryNotFound(m.Group, m.Entry))
		return
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	e.removeCronEntry(g, g.entries[m.Entry], batch)
	e.persistThenReply(batch, reply, &Done{})
}

func (e *queueCore) deleteCronGroup(m *DeleteCronGroup, reply func(any)) {
	e.cron.init()
	g := e.cron.groups[m.Group]
	if g == nil {
		reply(cronGroupNotFound(m.Group))
		return
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	e.dropCronGroup(g, batch)
	e.persistThenReply(batch, reply, &Done{})
}

func (e *queueCore) dropCronGroup(g *cronGroupState, batch *persistence.Batch) {
	for _, es := range g.entries {
		e.removeCronEntry(g, es, batch)
	}
	delete(e.cron.groups, g.rec.Name)
	batch.DeleteCronGroup(g.rec.Name)
}

// cronDeleteChunk bounds the writes of one batch that deletes groups: a
// store of 100,000 entries holds 200,000 keys for them, beyond what badger
// takes in one transaction.
const cronDeleteChunk = 20000

// deleteCronGroups removes every group and returns how many, with the
// batches that delete them from the store, to be committed in order.
func (e *queueCore) deleteCronGroups() (int, []*persistence.Batch) {
	e.cron.init()
	n := len(e.cron.groups)
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batches := []*persistence.Batch{batch}
	for _, g := range e.cron.groups {
		for _, es := range g.entries {
			if batch.Len() >= cronDeleteChunk {
				batch = persistence.NewBatch(e.cfg.DefaultSync)
				batches = append(batches, batch)
			}
			batch.DeleteCronEntry(g.rec.Name, es.rec.Name)
		}
		batch.DeleteCronGroup(g.rec.Name)
	}
	e.cron.stats.Entries.Store(0)
	e.cron.groups = make(map[string]*cronGroupState)
	e.cron.claims = make(map[string]map[cronRef]uint32)
	e.out.clearCrons()
	return n, batches
}

// persistAll submits batches in order and calls done once, after the last
// has committed, with the first error if any failed.
func (e *queueCore) persistAll(batches []*persistence.Batch, done func(error)) {
	var mu sync.Mutex
	left := len(batches)
	var first error
	for _, b := range batches {
		e.out.persist(b, func(err error) {
			mu.Lock()
			if err != nil && first == nil {
				first = err
			}
			left--
			last, ferr := left == 0, first
			mu.Unlock()
			if last {
				done(ferr)
			}
		})
	}
}

// cronClaimOf returns how many entries draw on a budget and the first in
// (group, entry) order whose cost is above limit (any cost when limit is
// 0).
func (e *queueCore) cronClaimOf(key string, limit uint32) (n int, first cronRef, cost uint32, found bool) {
	e.cron.init()
	m := e.cron.claims[key]
	for ref, c := range m {
		if c <= limit && limit > 0 {
			continue
		}
		if !found || ref.group < first.group || ref.group == first.group && ref.entry < first.entry {
			first, cost, found = ref, c, true
		}
	}
	return len(m), first, cost, found
}

// cronGuardDelete is the 409 of SPEC §8.1.8 for deleting a budget that a
// template draws on.
func (e *queueCore) cronGuardDelete(key string) error {
	n, first, _, found := e.cronClaimOf(key, 0)
	if !found {
		return nil
	}
	return protocol.Errorf(protocol.CodeConflict, "budget '%s' is referenced by %d cron %s, including '%s/%s'. Remove them before deleting it.",
		key, n, plural(n, "entry", "entries"), first.group, first.entry)
}

// cronGuardShrink is the 422 of SPEC §8.1.8 for an allocation or burst
// below a template's cost.
func (e *queueCore) cronGuardShrink(key string, def protocol.Definition) error {
	if _, ref, cost, found := e.cronClaimOf(key, def.Allocation); found {
		return protocol.Unprocessable("budget '%s' cannot allocate %d: cron entry '%s/%s' draws %d from it. Lower the entry's cost or remove it first.",
			key, def.Allocation, ref.group, ref.entry, cost)
	}
	if def.Strategy.Type == protocol.TimeBased && def.Strategy.Burst > 0 {
		if _, ref, cost, found := e.cronClaimOf(key, def.Strategy.Burst); found {
			return protocol.Unprocessable("budget '%s' cannot burst %d: cron entry '%s/%s' draws %d from it. Lower the entry's cost or remove it first.",
				key, def.Strategy.Burst, ref.group, ref.entry, cost)
		}
	}
	return nil
}

// loadCronGroup adds a stored group at startup and schedules its entries;
// an entry whose slot passed while the server was down is due at once and
// fires once (SPEC §8.1.6).
func (e *queueCore) loadCronGroup(sg persistence.StoredCronGroup) {
	e.cron.init()
	g := &cronGroupState{rec: sg.Group, entries: make(map[string]*cronEntryState, len(sg.Entries))}
	if g.rec.Timezone != "" {
		zone, err := loadZone(g.rec.Timezone)
		if err != nil {
			e.log.Error("stored cron group zone no longer loads; the server's zone is used", "group", g.rec.Name, "err", err)
		}
		g.zone = zone
	}
	e.cron.groups[g.rec.Name] = g
	for _, rec := range sg.Entries {
		x, err := parseCronExpr(rec.Expression)
		if err != nil {
			e.log.Error("stored cron entry no longer parses; left out", "group", g.rec.Name, "entry", rec.Name, "err", err)
			continue
		}
		es := &cronEntryState{rec: rec, expr: x}
		if rec.Timezone != "" {
			if es.zone, err = loadZone(rec.Timezone); err != nil {
				e.log.Error("stored cron entry zone no longer loads; its group's is used", "group", g.rec.Name, "entry", rec.Name, "err", err)
			}
		}
		g.entries[rec.Name] = es
		e.cron.stats.Entries.Add(1)
		e.claimCron(cronRef{g.rec.Name, rec.Name}, rec.Job.Budgets)
		e.out.scheduleCron(CronSlot{g.rec.Name, rec.Name, rec.NextEnqueueAt})
	}
}

// cronFiring is one due entry about to fire.
type cronFiring struct {
	g    *cronGroupState
	es   *cronEntryState
	slot CronSlot
}

// onCronDue fires due entries in order, each in one transaction with its
// new next_enqueue_at: the enqueue of its template (unless it or its group
// is paused; SPEC §8.1.6). The firings of one message share a transaction
// when they can: their jobs go through enqueue together, as a bulk would.
func (e *queueCore) onCronDue(now uint64, slots []CronSlot) {
	e.cron.init()
	var firing []cronFiring
	var paused *persistence.Batch
	for _, s := range slots {
		g := e.cron.groups[s.Group]
		if g == nil {
			continue
		}
		es := g.entries[s.Entry]
		if es == nil || es.rec.NextEnqueueAt != s.Slot {
			continue // deleted or rescheduled since
		}
		if s.Slot > now {
			// the clock went back between the cron actor's reading and ours
			e.out.scheduleCron(s)
			continue
		}
		if g.rec.Paused || es.rec.Paused {
			// SPEC §8.1.6: a paused entry still ticks; nothing is enqueued
			if paused == nil {
				paused = persistence.NewBatch(e.cfg.EnqueueSync)
			}
			e.advanceCron(now, g, es)
			paused.PutCronTimes(g.rec.Name, es.rec.Name, es.rec.NextEnqueueAt, es.rec.LastEnqueueAt)
			e.cron.stats.Paused.Add(1)
			e.tracer.cron(EventCronSkipped, s, "", es.rec.Job.Queue, "paused")
			continue
		}
		if es.rec.Job.Batch != nil {
			// folds: planned off the actor, then enqueued with its
			// times (cron_fold.go); the entry stays due meanwhile
			e.out.foldCron(s, es.rec.Job.NewJob())
			continue
		}
		firing = append(firing, cronFiring{g, es, s})
	}
	if paused != nil {
		e.persistCronTicks(paused)
	}
	if len(firing) > 1 && e.fireCronsTogether(now, firing) {
		return
	}
	for _, f := range firing {
		e.fireCron(now, f.g, f.es, f.slot)
	}
}

// advanceCron sets the entry's next_enqueue_at after now and schedules it.
func (e *queueCore) advanceCron(now uint64, g *cronGroupState, es *cronEntryState) {
	es.rec.NextEnqueueAt = nextSlot(es.expr, now, effectiveZone(es.zone, g.zone))
	e.out.scheduleCron(CronSlot{g.rec.Name, es.rec.Name, es.rec.NextEnqueueAt})
}

// fireCronsTogether fires several entries in one enqueue and one
// transaction. It reports false, having changed nothing, when the enqueue
// refuses (then each entry fires alone, and only the failing ones skip).
func (e *queueCore) fireCronsTogether(now uint64, fs []cronFiring) bool {
	jobs := make([]*protocol.NewJob, len(fs))
	for i, f := range fs {
		jobs[i] = f.es.rec.Job.NewJob()
	}
	queues := make([]string, len(fs))
	written := false
	var refused error
	stats, tracer, log := e.cron.stats, e.tracer, e.log
	reply := func(res any) {
		switch r := res.(type) {
		case *EnqueueJobsResponse:
			for i, f := range fs {
				stats.Fired.Add(1)
				stats.late(now - f.slot.Slot)
				if tracer.on() {
					tracer.cron(EventCronFired, f.slot, r.Jobs[i].ID, queues[i], duplicateReason(r.Jobs[i]))
				}
			}
		case error:
			if !written {
				refused = r
				return
			}
			log.Error("cron firings not stored", "entries", len(fs), "err", r)
		}
	}
	e.enqueueWith(now, &EnqueueJobs{Jobs: jobs}, func(b *persistence.Batch) {
		for i, f := range fs {
			f.es.rec.LastEnqueueAt = now
			e.advanceCron(now, f.g, f.es)
			queues[i] = f.es.rec.Job.Queue
			b.PutCronTimes(f.slot.Group, f.slot.Entry, f.es.rec.NextEnqueueAt, now)
		}
		written = true
	}, reply)
	return refused == nil
}

func duplicateReason(v *protocol.JobView) string {
	if v.Duplicate != nil && *v.Duplicate {
		return "duplicate"
	}
	return ""
}

// fireCron fires one entry: the enqueue of its template and its new times
// in one transaction; when the enqueue fails, the tick is skipped (SPEC
// §8.1.7): next_enqueue_at advances alone.
func (e *queueCore) fireCron(now uint64, g *cronGroupState, es *cronEntryState, s CronSlot) {
	stats, tracer, log, queue := e.cron.stats, e.tracer, e.log, es.rec.Job.Queue
	var refused error
	written := false
	reply := func(res any) {
		switch r := res.(type) {
		case *EnqueueJobsResponse:
			stats.Fired.Add(1)
			stats.late(now - s.Slot)
			tracer.cron(EventCronFired, s, r.Jobs[0].ID, queue, duplicateReason(r.Jobs[0]))
		case error:
			if !written {
				refused = r // before anything was written: the enqueue refused
				return
			}
			log.Error("cron firing not stored", "group", s.Group, "entry", s.Entry, "err", r)
		}
	}
	e.enqueueWith(now, &EnqueueJobs{Jobs: []*protocol.NewJob{es.rec.Job.NewJob()}}, func(b *persistence.Batch) {
		es.rec.LastEnqueueAt = now
		e.advanceCron(now, g, es)
		b.PutCronTimes(s.Group, s.Entry, es.rec.NextEnqueueAt, now)
		written = true
	}, reply)
	if refused != nil {
		e.skipCronTick(now, g, es, s, refused)
	}
}

// skipCronTick skips a firing whose enqueue failed (SPEC §8.1.7): the
// error is logged with the group and entry, next_enqueue_at advances alone
// and last_enqueue_at stays.
func (e *queueCore) skipCronTick(now uint64, g *cronGroupState, es *cronEntryState, s CronSlot, err error) {
	e.cron.stats.Skipped.Add(1)
	e.log.Error("cron firing skipped: the enqueue failed", "group", s.Group, "entry", s.Entry, "err", err)
	e.advanceCron(now, g, es)
	batch := persistence.NewBatch(e.cfg.EnqueueSync)
	batch.PutCronTimes(g.rec.Name, es.rec.Name, es.rec.NextEnqueueAt, es.rec.LastEnqueueAt)
	e.persistCronTicks(batch)
	e.tracer.cron(EventCronSkipped, s, "", es.rec.Job.Queue, err.Error())
}

// persistCronTicks stores entries whose next_enqueue_at advanced alone.
func (e *queueCore) persistCronTicks(batch *persistence.Batch) {
	log := e.log
	e.out.persist(batch, func(err error) {
		if err != nil {
			log.Error("cron ticks not stored", "err", err)
		}
	})
}
