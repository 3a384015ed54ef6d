package actors

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unique"

	"github.com/google/btree"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// EngineConfig holds the queue's policies. Zero values are filled in by
// WithDefaults.
type EngineConfig struct {
	// GlobalInFlightLimit caps in-flight jobs across streams (0: none).
	GlobalInFlightLimit int
	// DefaultRetryLimit is the retries a job gets when it sets none (25).
	DefaultRetryLimit uint32
	// DefaultBackoff is the backoff of jobs that set none (4, 15 s, 30 s).
	DefaultBackoff protocol.Backoff
	// CompletedRetention keeps completed jobs visible this long (0).
	CompletedRetention time.Duration
	// DeadRetention keeps dead jobs visible this long (7 days).
	DeadRetention time.Duration
	// MaxBudgets caps the number of budgets (0: unlimited).
	MaxBudgets int
	// EnqueueSync and DefaultSync ask for fsync before acknowledging.
	EnqueueSync, DefaultSync bool
	// ReaperInterval is how often finished jobs past purge_at are removed.
	ReaperInterval time.Duration
	// Random returns a uniform float in [0, 1) for backoff jitter.
	Random func() float64
	// PayloadCacheBytes bounds the payload bytes memory keeps of unfinished
	// jobs (default 16 MiB). A job enqueued while there is room keeps its
	// payload in memory and inside its record until it finishes; beyond
	// it, the payload is stored apart and read when the job is written to
	// its stream (Engine.LoadPayloads).
	PayloadCacheBytes int
	// GroupMinJobs is the size from which the jobs of one enqueue request
	// are stored as a group, one record for all of them (default 4; see
	// records.go).
	GroupMinJobs int
}

// outbox is how the engine acts on the world; the queue actor implements
// it with protoactor and the store, tests with a recorder.
type outbox interface {
	persist(b *persistence.Batch, done func(error))
	toBudget(key string, msg budgetMsg)
	spawnBudget(b protocol.Budget)
	stopBudget(key string)
	schedule(id string, readyAt uint64)
	unschedule(id string)
	clearSchedule()
	queuesChanged()
}

type jobState uint8

const (
	stReady jobState = iota
	stReserving
	stParked
	stScheduled
	stInFlight
	// stGone marks the entry of a job that finished or was deleted: a
	// budget's answer that still names it finds it gone.
	stGone
)

// entry is an unfinished job and where it is.
type entry struct {
	job      *protocol.Job
	parkedOn string
	stream   *stream
	resv     *reservation
	schedAt  uint64 // its ready_at in e.sched (statusindex.go)
	// grp is the stored group the job belongs to (nil: stored alone);
	// override is set once the member has its own record (records.go).
	grp      *persistence.Group
	state    jobState
	inSched  bool // in e.sched
	override bool
	// parkedPrio is the priority the job parked with on parkedOn (its
	// place in that budget's list).
	parkedPrio uint16
}

// reservation is a job gathering holds from its budgets in key order.
type reservation struct {
	bindings []protocol.Binding // sorted by key
	idx      int                // the binding whose answer is awaited
	sorted   [4]protocol.Binding
}

// terminalJob is what memory keeps of a retained finished job.
type terminalJob struct {
	id       string
	queue    string
	purgeAt  uint64
	attempts uint32
	apart    bool          // its payload is stored apart from its record
	job      *protocol.Job // without payload; kept only for unique-key holders
	meta     *protocol.Job // without payload, for the query filters
	dead     bool
	grp      *persistence.Group // its stored group (it then has its own record)
}

func terminalLess(a, b terminalJob) bool {
	if a.purgeAt != b.purgeAt {
		return a.purgeAt < b.purgeAt
	}
	return a.id < b.id
}

// budgetEntry is the catalog entry of a budget: its stored record and the
// count of unfinished jobs bound to it, by cost.
type budgetEntry struct {
	budget protocol.Budget
	// bound counts the unfinished jobs bound to the budget by cost: those
	// costing 1 (nearly all) in boundOne, the others in bound.
	bound      map[uint32]int
	boundOne   int
	boundTotal int
}

// stream is a take stream's bookkeeping.
type stream struct {
	id         uint64
	queues     map[string]bool // nil: all queues
	prefetch   int
	workerID   string
	inFlight   map[string]*entry
	reserving  int
	outbox     []*entry // dispatched, not yet persisted and handed to the writer
	writerBusy bool
	closed     bool
	deliver    func([]protocol.Job)
}

// engine is the queue actor's state machine: every unfinished job, the ready
// index, the take streams, the budget catalog and the retained finished jobs.
// It never reads the clock (methods take now in Unix ms) and never blocks:
// writes go to the outbox's group committer and replies are sent when they
// are durable.
type engine struct {
	cfg EngineConfig
	out outbox
	log *slog.Logger
	ids *protocol.IDGenerator

	jobs map[string]*entry
	// payloadBytes is the size of the payloads jobs hold in memory
	// (bounded by cfg.PayloadCacheBytes).
	payloadBytes int
	ready        *readyIndex
	terminal     map[string]terminalJob
	purgeOrder   *btree.BTreeG[terminalJob]
	// sched, completedTotal and deadTotal index statuses (statusindex.go).
	sched          *btree.BTreeG[schedItem]
	completedTotal int
	deadTotal      int
	queueCounts    map[string]int
	// byID and byQueue are every stored job's ID (unfinished and retained
	// finished), in ID order, overall and per queue: the indexes of the
	// query endpoints (query.go).
	byID    *orderedSet[protocol.IDKey]
	byQueue map[string]*orderedSet[protocol.IDKey]
	byType  map[string]*orderedSet[protocol.IDKey] // the same per type
	byKey   map[string]*orderedSet[protocol.IDKey] // the same per bound budget key

	streams        map[uint64]*stream
	order          []*stream
	rr             int
	nextStream     uint64
	inFlightTotal  int
	reservingTotal int
	consumed       *consumedSet
	flushPending   []*stream
	// inBatch is set while a batch of budget answers is handled: pump then
	// only notes pumpWanted, and runs once when the batch ends, so that a
	// batch of N answers costs one pass over the streams and one commit of
	// the jobs it dispatched, not N of each.
	inBatch    bool
	pumpWanted bool

	budgets map[string]*budgetEntry
	unique  map[string]string // unique key -> holder job id
	tracer  *Tracer
	obs     engineObs // counters for metrics (observe.go)
	names   nameInterner
	// epoch tells this engine from the one a restarted queue actor had
	// before: answers of that one's budget actors may still be queued,
	// and are dropped (they name entries and holds that are gone).
	epoch uint64
	// msgs allocates the messages of the budget protocol (batching.go)
	msgs struct {
		reserves slab[ReserveRequest]
		commits  slab[CommitReservation]
		returns  slab[ReturnTokens]
	}
	// reservations are short-lived too (a job holds one between leaving
	// the ready index and its dispatch or parking)
	reservations slab[reservation]

	recoveredUnique []*protocol.Job   // queued-scope jobs recovered from in flight
	loadLatest      map[string]string // unique key -> latest stored job id with it (load only)

	// deferred holds requests about a job that wait for its reservation to
	// end (dispatched, parked or deleted).
	deferred map[string][]func(now uint64)
}

// afterReservation runs f once the job's current reservation has ended.
func (e *engine) afterReservation(id string, f func(now uint64)) {
	if e.deferred == nil {
		e.deferred = make(map[string][]func(now uint64))
	}
	e.deferred[id] = append(e.deferred[id], f)
}

// runDeferred runs what waited for the job's reservation, if it has ended.
func (e *engine) runDeferred(now uint64, id string) {
	fns, ok := e.deferred[id]
	if !ok {
		return
	}
	if en := e.jobs[id]; en != nil && en.state == stReserving {
		return
	}
	delete(e.deferred, id)
	for _, f := range fns {
		f(now)
	}
}

// engineEpochs numbers engines (engine.epoch).
var engineEpochs atomic.Uint64

func newEngine(cfg EngineConfig, out outbox, log *slog.Logger, consumed *consumedSet, tracer *Tracer) *engine {
	return &engine{
		epoch:       engineEpochs.Add(1),
		cfg:         cfg,
		out:         out,
		log:         log,
		ids:         protocol.NewIDGenerator(),
		jobs:        make(map[string]*entry),
		ready:       newReadyIndex(),
		terminal:    make(map[string]terminalJob),
		purgeOrder:  btree.NewG(16, terminalLess),
		sched:       newSchedSet(),
		queueCounts: make(map[string]int),
		byID:        newOrderedSet(keyLess),
		byQueue:     make(map[string]*orderedSet[protocol.IDKey]),
		byType:      make(map[string]*orderedSet[protocol.IDKey]),
		byKey:       make(map[string]*orderedSet[protocol.IDKey]),
		streams:     make(map[uint64]*stream),
		consumed:    consumed,
		budgets:     make(map[string]*budgetEntry),
		unique:      make(map[string]string),
		tracer:      tracer,
	}
}

// ---------------------------------------------------------------- loading

// loadBudget adds a stored budget at startup.
func (e *engine) loadBudget(b protocol.Budget) {
	e.budgets[b.Key] = &budgetEntry{budget: b, bound: make(map[uint32]int)}
	e.out.spawnBudget(b)
}

// loadJob adds a stored job at startup; in-flight jobs return to ready and
// are rewritten in batch. It returns whether the job was recovered from
// in flight.
func (e *engine) loadJob(now uint64, j *protocol.Job, m persistence.Member, batch *persistence.Batch) (recovered bool) {
	if _, ok := protocol.ParseIDKey(j.ID); !ok {
		// tollgate mints every ID; this one is damage, and the ID indexes
		// could not order it
		e.log.Error("stored job with a malformed ID left out", "job_id", j.ID)
		return false
	}
	e.internNames(j)
	e.noteLoadedKey(j)
	if j.Status.Terminal() {
		if j.Purged(now) {
			deleteRecord(j, m.Group, m.Override, batch)
			return false
		}
		e.addStored(j)
		e.addTerminal(j, m.Group)
		if j.UniqueKey != "" && j.UniqueWhile == protocol.UniqueExists {
			e.claimUnique(j)
		}
		return false
	}
	e.addStored(j)
	en := &entry{job: j}
	if m.Group != nil {
		e.joinGroup(en, m.Group, m.Override)
	} else {
		e.loadPayload(j, batch)
	}
	e.jobs[j.ID] = en
	e.bind(j)
	if j.Status == protocol.StatusInFlight {
		j.Status = protocol.StatusReady
		e.putRecord(en, batch)
		recovered = true
		if j.UniqueWhile == protocol.UniqueQueued {
			e.recoveredUnique = append(e.recoveredUnique, j)
		} else {
			e.claimUnique(j)
		}
	} else {
		e.claimUnique(j)
	}
	if j.ReadyAt > now && j.Status == protocol.StatusScheduled {
		en.state = stScheduled
		e.out.schedule(j.ID, j.ReadyAt)
	} else {
		j.Status = protocol.StatusReady
		e.makeReady(en)
	}
	e.syncSched(en)
	return recovered
}

// finishLoad re-claims the keys of queued-scope jobs recovered from in
// flight, where no other job holds them (SPEC §3.9).
func (e *engine) finishLoad() {
	e.dropSupersededHolders()
	for _, j := range e.recoveredUnique {
		e.reclaimUnique(j)
	}
	e.recoveredUnique = nil
}

// ---------------------------------------------------------------- enqueue

func (e *engine) enqueue(now uint64, m *EnqueueJobs, reply func(any)) {
	created := make(map[string]*protocol.Budget)
	var createdOrder []string
	for i, nj := range m.Jobs {
		if err := e.resolveBindings(now, nj, created, &createdOrder); err != nil {
			if m.Bulk {
				err = protocol.Prefixed(fmt.Sprintf("jobs[%d]: ", i), err)
			}
			reply(err)
			return
		}
	}
	// Unique keys, in request order: a later job may duplicate an earlier
	// one of the same request. Budgets are created only for the jobs that
	// are really written.
	views := make([]*protocol.JobView, len(m.Jobs))
	holderIndex := make(map[int]int) // duplicate index -> holder index in this request
	pendingHolder := make(map[string]int)
	dups := 0
	for i, nj := range m.Jobs {
		key := nj.Job.UniqueKey
		if key == "" {
			continue
		}
		if k, ok := pendingHolder[key]; ok && duplicateOf(nj.Job.UniqueWhile, protocol.StatusReady) {
			holderIndex[i] = k
			views[i] = &protocol.JobView{}
			dups++
			continue
		}
		if id, st := e.holderStatus(key); id != "" && duplicateOf(nj.Job.UniqueWhile, st) {
			views[i] = e.holderView(now, id)
			dups++
			continue
		}
		pendingHolder[key] = i
	}
	if dups > 0 {
		created = make(map[string]*protocol.Budget)
		createdOrder = createdOrder[:0]
		for i, nj := range m.Jobs {
			if views[i] != nil {
				continue
			}
			if err := e.resolveBindings(now, nj, created, &createdOrder); err != nil {
				if m.Bulk {
					err = protocol.Prefixed(fmt.Sprintf("jobs[%d]: ", i), err)
				}
				reply(err)
				return
			}
		}
	}
	batch := persistence.NewBatch(e.cfg.EnqueueSync)
	e.createBudgets(created, createdOrder, batch)
	ids := make([]string, len(m.Jobs))
	viewArray := make([]protocol.JobView, len(m.Jobs)) // one allocation for the new jobs' views
	stored := make([]*entry, 0, len(m.Jobs))
	for i, nj := range m.Jobs {
		if views[i] != nil {
			continue
		}
		job := nj.Job
		e.internNames(&job)
		job.ID = e.ids.Next(now)
		if !nj.ReadyAtSet {
			job.ReadyAt = now
		}
		job.Attempts = 0
		en := &entry{job: &job}
		if job.ReadyAt > now {
			job.Status = protocol.StatusScheduled
		} else {
			job.Status = protocol.StatusReady
		}
		e.jobs[job.ID] = en
		e.addStored(&job)
		e.observeEnqueued(&job)
		e.bind(&job)
		e.claimUnique(&job)
		ids[i] = job.ID
		stored = append(stored, en)
		job.FillEnqueueView(&viewArray[i], now, false, false)
		views[i] = &viewArray[i]
		if job.Status == protocol.StatusScheduled {
			en.state = stScheduled
			e.out.schedule(job.ID, job.ReadyAt)
		} else {
			e.makeReady(en)
		}
		e.syncSched(en)
	}
	for i, k := range holderIndex {
		views[i] = e.jobs[ids[k]].job.EnqueueView(now, true, false)
	}
	e.storeNewJobs(stored, batch)
	e.persistThenReply(batch, reply, &EnqueueJobsResponse{Jobs: views})
	e.pump(now)
}

// resolveBindings checks that every budget a job binds to exists (or is
// created by its create_with, counted against the limit) and that the cost
// fits the authoritative definition.
func (e *engine) resolveBindings(now uint64, nj *protocol.NewJob, created map[string]*protocol.Budget, order *[]string) error {
	for _, b := range nj.Bindings {
		var def protocol.Definition
		if be := e.budgets[b.Key]; be != nil {
			def = be.budget.Definition()
		} else if c := created[b.Key]; c != nil {
			def = c.Definition()
		} else if b.CreateWith != nil {
			if err := e.checkBudgetLimit(b.Key, len(created)); err != nil {
				return err
			}
			def = *b.CreateWith
			created[b.Key] = &protocol.Budget{Key: b.Key, Allocation: def.Allocation, Strategy: def.Strategy, CreatedAt: now, UpdatedAt: now}
			*order = append(*order, b.Key)
		} else {
			return protocol.Unprocessable("budget '%s' does not exist. Create it first or pass create_with.", b.Key)
		}
		if err := def.CheckCost(b.Key, b.Cost); err != nil {
			return err
		}
	}
	return nil
}

// createBudgets adds the budgets a request's create_with resolved to the
// catalog, spawns their actors (pools full) and writes them in batch.
func (e *engine) createBudgets(created map[string]*protocol.Budget, order []string, batch *persistence.Batch) {
	for _, key := range order {
		b := *created[key]
		e.budgets[key] = &budgetEntry{budget: b, bound: make(map[uint32]int)}
		e.out.spawnBudget(b)
		batch.PutBudget(&b)
	}
}

func (e *engine) checkBudgetLimit(key string, pending int) error {
	if e.cfg.MaxBudgets > 0 && len(e.budgets)+pending >= e.cfg.MaxBudgets {
		return protocol.Unprocessable("budget '%s' cannot be created: the limit of %d budgets has been reached", key, e.cfg.MaxBudgets)
	}
	return nil
}

// bind counts an unfinished job against its budgets.
func (e *engine) bind(j *protocol.Job) {
	for _, b := range j.Budgets {
		if be := e.budgets[b.Key]; be != nil {
			if b.Cost == 1 {
				be.boundOne++
			} else {
				be.bound[b.Cost]++
			}
			be.boundTotal++
		}
	}
}

// unbind stops counting a job that finished or was deleted.
func (e *engine) unbind(j *protocol.Job) {
	for _, b := range j.Budgets {
		if be := e.budgets[b.Key]; be != nil {
			if b.Cost == 1 {
				be.boundOne--
			} else if be.bound[b.Cost]--; be.bound[b.Cost] <= 0 {
				delete(be.bound, b.Cost)
			}
			be.boundTotal--
		}
	}
}

// ---------------------------------------------------------------- dispatch

func (e *engine) makeReady(en *entry) {
	en.state = stReady
	en.parkedOn = ""
	en.stream = nil
	en.resv = nil
	e.ready.add(readyItem{priority: en.job.Priority, id: en.job.ID, queue: en.job.Queue, en: en})
	e.tracer.job(EventReady, en.job, 0)
}

func (e *engine) globalFull() bool {
	return e.cfg.GlobalInFlightLimit > 0 && e.inFlightTotal+e.reservingTotal >= e.cfg.GlobalInFlightLimit
}

// room is how many more jobs the stream may be given now.
func (s *stream) room() int {
	if s.closed || s.writerBusy {
		return 0
	}
	if s.prefetch == 0 {
		if len(s.outbox) == 0 && s.reserving == 0 {
			return 1
		}
		return 0
	}
	return s.prefetch - len(s.inFlight) - s.reserving
}

// pump hands ready jobs to streams with room, one job per stream per round
// so streams share fairly, until no stream can take or no job qualifies.
func (e *engine) pump(now uint64) {
	if e.inBatch {
		e.pumpWanted = true
		return
	}
	if len(e.order) > 0 && e.ready.len() > 0 {
		n := len(e.order)
		start := e.rr % n
		e.rr++
		for progress := true; progress && !e.globalFull(); {
			progress = false
			for k := 0; k < n && !e.globalFull(); k++ {
				s := e.order[(start+k)%n]
				if s.room() <= 0 {
					continue
				}
				it, ok := e.ready.best(s.queues)
				if !ok {
					continue
				}
				e.ready.remove(it)
				en := it.en
				if len(en.job.Budgets) == 0 {
					e.dispatch(now, en, s)
				} else {
					e.startReservation(en, s)
				}
				progress = true
			}
		}
	}
	e.flush()
}

// beginBatch defers pumping until endBatch (see inBatch).
func (e *engine) beginBatch() { e.inBatch = true }

// endBatch pumps once if anything handled since beginBatch asked to.
func (e *engine) endBatch(now uint64) {
	e.inBatch = false
	if e.pumpWanted {
		e.pumpWanted = false
		e.pump(now)
	}
}

// dispatch marks a job in flight on s; flush persists and delivers it.
func (e *engine) dispatch(now uint64, en *entry, s *stream) {
	en.state = stInFlight
	en.stream = s
	en.resv = nil
	en.parkedOn = ""
	en.job.Status = protocol.StatusInFlight
	en.job.DequeuedAt = now
	e.releaseUniqueOnDispatch(en.job)
	s.inFlight[en.job.ID] = en
	e.inFlightTotal++
	if len(s.outbox) == 0 {
		e.flushPending = append(e.flushPending, s)
		if s.outbox == nil && s.prefetch > 0 {
			// The batch usually fills the stream's free room (this job
			// and those still reserving included): size it once instead
			// of growing it job by job, but no bigger, since a window that
			// is mostly in flight frees only a few slots at a time.
			s.outbox = make([]*entry, 0, min(s.room()+s.reserving+1, 256))
		}
	}
	s.outbox = append(s.outbox, en)
	e.observeDispatched(en, s)
}

// internNames makes a job's queue, type and budget keys share one copy of
// each distinct name: they repeat across millions of jobs.
func (e *engine) internNames(j *protocol.Job) {
	j.Queue = e.names.intern(j.Queue)
	j.Type = e.names.intern(j.Type)
	for i := range j.Budgets {
		j.Budgets[i].Key = e.names.intern(j.Budgets[i].Key)
	}
}

// nameInterner remembers the last few interned names: the jobs of a bulk
// mostly share their queue, type and budget keys, and comparing with a
// recent name is cheaper than interning it again.
type nameInterner struct {
	recent [8]string
	next   int
}

func (c *nameInterner) intern(s string) string {
	for _, r := range c.recent {
		if r == s {
			return r
		}
	}
	v := unique.Make(s).Value()
	c.recent[c.next] = v
	c.next = (c.next + 1) % len(c.recent)
	return v
}

// storeNewJob writes a new job into batch. While the payload cache has room
// the job keeps its payload in memory and inside its record until it
// finishes (one key per job, written whole); otherwise the payload is
// stored apart and memory keeps none of it.
func (e *engine) storeNewJob(j *protocol.Job, batch *persistence.Batch) {
	if e.payloadBytes+len(j.Payload) <= e.cfg.PayloadCacheBytes {
		e.payloadBytes += len(j.Payload)
		batch.PutJob(j)
		return
	}
	batch.PutJobPayloadApart(j)
	j.Payload = nil
}

// loadPayload applies storeNewJob's rule to a job loaded at startup whose
// record holds its payload: beyond the cache, the payload moves apart.
func (e *engine) loadPayload(j *protocol.Job, batch *persistence.Batch) {
	if j.Payload == nil {
		return
	}
	if e.payloadBytes+len(j.Payload) <= e.cfg.PayloadCacheBytes {
		e.payloadBytes += len(j.Payload)
		return
	}
	batch.PutJobPayloadApart(j)
	j.Payload = nil
}

// dropPayload forgets the payload memory holds of a job that finished or
// was deleted, once its last record write was added to a batch.
func (e *engine) dropPayload(j *protocol.Job) {
	e.payloadBytes -= len(j.Payload)
	j.Payload = nil
}

// flush persists the in-flight state of every job dispatched since the last
// flush in one batch, then delivers each stream its jobs.
func (e *engine) flush() {
	if len(e.flushPending) == 0 {
		return
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	type delivery struct {
		deliver func([]protocol.Job)
		jobs    []protocol.Job
	}
	deliveries := make([]delivery, 0, len(e.flushPending))
	for _, s := range e.flushPending {
		if len(s.outbox) == 0 || s.writerBusy {
			continue
		}
		// the writer gets copies as the jobs are now (a patch since the
		// dispatch included)
		jobs := make([]protocol.Job, len(s.outbox))
		for i, en := range s.outbox {
			e.putDispatched(en, batch)
			jobs[i] = *en.job
		}
		s.writerBusy = true
		deliveries = append(deliveries, delivery{s.deliver, jobs})
		clear(s.outbox) // no stale entry kept alive by the reused array
		s.outbox = s.outbox[:0]
	}
	e.flushPending = e.flushPending[:0]
	log := e.log
	e.out.persist(batch, func(err error) {
		if err != nil {
			log.Error("persisting dispatched jobs failed; delivering anyway (at-least-once)", "err", err)
		}
		for _, d := range deliveries {
			d.deliver(d.jobs)
		}
	})
}

func (e *engine) startReservation(en *entry, s *stream) {
	// reserve in key order; binding lists are replaced, never changed in
	// place, so an already sorted one (the usual case) is used as it is
	r := e.reservations.new()
	r.bindings = en.job.Budgets
	if !slices.IsSortedFunc(r.bindings, compareBindingKeys) {
		if len(r.bindings) <= len(r.sorted) {
			// a few bindings out of order: sort a copy kept in the
			// reservation itself
			sorted := append(r.sorted[:0], r.bindings...)
			slices.SortFunc(sorted, compareBindingKeys)
			r.bindings = sorted
		} else {
			r.bindings = slices.SortedFunc(slices.Values(r.bindings), compareBindingKeys)
		}
	}
	en.state = stReserving
	en.stream = s
	en.resv = r
	s.reserving++
	e.reservingTotal++
	e.askNext(en)
}

func compareBindingKeys(a, b protocol.Binding) int { return strings.Compare(a.Key, b.Key) }

// askNext asks the next budget in key order; the last one is asked for a
// final reservation, debited at once when granted (ReserveRequest.Commit).
func (e *engine) askNext(en *entry) {
	b := en.resv.bindings[en.resv.idx]
	last := en.resv.idx == len(en.resv.bindings)-1
	r := e.msgs.reserves.new()
	*r = ReserveRequest{Job: JobRef{ID: en.job.ID, Priority: en.job.Priority, Queue: en.job.Queue, Cost: b.Cost}, Commit: last, en: en}
	e.out.toBudget(b.Key, r)
}

// persistThenReply commits batch and answers with resp once it is durable
// (or with the error that prevented it).
func (e *engine) persistThenReply(batch *persistence.Batch, reply func(any), resp any) {
	e.out.persist(batch, func(err error) {
		if err != nil {
			reply(err)
			return
		}
		reply(resp)
	})
}

// nudge tells budgets that a job they may have woken will not reserve on
// them now, so they look at their parked jobs again.
func (e *engine) nudge(bindings []protocol.Binding) {
	for _, b := range bindings {
		e.out.toBudget(b.Key, &Reevaluate{})
	}
}

// endReservation gives the stream slot back.
func (e *engine) endReservation(en *entry) {
	if en.stream != nil {
		en.stream.reserving--
	}
	e.reservingTotal--
}

// releaseHolds releases the holds a reservation was granted so far.
func (e *engine) releaseHolds(en *entry) {
	for _, b := range en.resv.bindings[:en.resv.idx] {
		e.out.toBudget(b.Key, &ReleaseReservation{JobID: en.job.ID})
	}
}

func (e *engine) onReserveResponse(now uint64, m *ReserveResponse) {
	if m.epoch != e.epoch {
		return // from a budget of a former life of the queue actor
	}
	defer e.runDeferred(now, m.JobID)
	en := m.en // the entry the request named (stGone once the job left)
	if en == nil {
		en = e.jobs[m.JobID]
	}
	if en == nil || en.state != stReserving || en.resv.bindings[en.resv.idx].Key != m.Key {
		// The job left (deleted, reset) while asking: give a hold (or a
		// final reservation's debit) back, or take it off the parked list a
		// refusal put it on.
		switch {
		case m.Committed:
			e.out.toBudget(m.Key, &RefundTokens{JobID: m.JobID, Cost: m.Cost, by: m.by})
		case m.Granted:
			e.out.toBudget(m.Key, &ReleaseReservation{JobID: m.JobID})
		default:
			e.out.toBudget(m.Key, &UnparkJob{JobID: m.JobID, Priority: m.Priority})
		}
		return
	}
	if !m.Granted {
		e.releaseHolds(en)
		e.nudge(en.resv.bindings[en.resv.idx+1:])
		e.endReservation(en)
		en.state = stParked
		en.parkedOn = m.Key
		en.parkedPrio = m.Priority // a patch may change the job's meanwhile
		en.stream = nil
		en.resv = nil
		e.pump(now)
		return
	}
	en.resv.idx++
	if en.resv.idx < len(en.resv.bindings) {
		e.askNext(en)
		return
	}
	// all granted: the last budget debited already (a final reservation),
	// the others hold
	s := en.stream
	e.endReservation(en)
	held := en.resv.bindings[:len(en.resv.bindings)-1]
	if !m.Committed {
		held = en.resv.bindings // answered as a plain hold
	}
	if s.closed {
		en.resv.idx = len(held)
		e.releaseHolds(en)
		if m.Committed {
			e.out.toBudget(m.Key, &RefundTokens{JobID: en.job.ID, Cost: m.Cost, by: m.by})
		}
		e.makeReady(en)
		e.pump(now)
		return
	}
	for _, b := range held {
		c := e.msgs.commits.new()
		c.JobID = en.job.ID
		e.out.toBudget(b.Key, c)
	}
	e.dispatch(now, en, s)
	e.pump(now)
}

func (e *engine) onJobsWoken(now uint64, m *JobsWoken) {
	if m.epoch != e.epoch {
		return // from a budget of a former life of the queue actor
	}
	stale := false
	for _, id := range m.JobIDs {
		en := e.jobs[id]
		if en != nil && en.state == stParked && en.parkedOn == m.Key {
			e.makeReady(en)
		} else {
			stale = true
		}
	}
	if stale {
		// A woken job left meanwhile (deleted): the budget counted its cost
		// when it woke it, so let it look at its parked jobs again.
		e.out.toBudget(m.Key, &Reevaluate{})
	}
	e.pump(now)
}

func (e *engine) onJobsDue(now uint64, ids []string) {
	for _, id := range ids {
		en := e.jobs[id]
		// A job re-dated by PATCH after the scheduler sent this stays scheduled.
		if en != nil && en.state == stScheduled && en.job.ReadyAt <= now {
			en.job.Status = protocol.StatusReady
			e.makeReady(en)
			e.syncSched(en)
		}
	}
	e.pump(now)
}

// leaveInFlight takes a job off its stream and returns its tokens.
func (e *engine) leaveInFlight(en *entry) {
	if s := en.stream; s != nil {
		delete(s.inFlight, en.job.ID)
		// A job dispatched while its stream's writer was busy waits in the
		// outbox: it must not be persisted as in flight or delivered now.
		for i := range s.outbox {
			if s.outbox[i] == en {
				s.outbox = slices.Delete(s.outbox, i, i+1)
				break
			}
		}
	}
	en.stream = nil
	e.inFlightTotal--
	for _, b := range en.job.Budgets {
		r := e.msgs.returns.new()
		*r = ReturnTokens{JobID: en.job.ID, Cost: b.Cost}
		e.out.toBudget(b.Key, r)
	}
}

// detach removes an unfinished job from wherever it waits (not in flight).
func (e *engine) detach(en *entry) {
	switch en.state {
	case stReady:
		e.ready.remove(readyItem{priority: en.job.Priority, id: en.job.ID, queue: en.job.Queue})
		e.nudge(en.job.Budgets)
	case stReserving:
		e.releaseHolds(en)
		e.nudge(en.resv.bindings[en.resv.idx+1:])
		e.endReservation(en)
	case stParked:
		e.out.toBudget(en.parkedOn, &UnparkJob{JobID: en.job.ID, Priority: en.parkedPrio})
	case stScheduled:
		e.out.unschedule(en.job.ID)
	case stInFlight:
		e.leaveInFlight(en)
	}
}

// ---------------------------------------------------------------- streams

func (e *engine) openStream(now uint64, m *OpenStream, reply func(any)) {
	e.nextStream++
	s := &stream{id: e.nextStream, prefetch: m.Prefetch, workerID: m.WorkerID, inFlight: make(map[string]*entry), deliver: m.Deliver}
	if len(m.Queues) > 0 {
		s.queues = make(map[string]bool, len(m.Queues))
		for _, q := range m.Queues {
			s.queues[q] = true
		}
	}
	e.streams[s.id] = s
	e.order = append(e.order, s)
	e.publishConsumed()
	reply(&OpenStreamResponse{StreamID: s.id})
	e.pump(now)
}

func (e *engine) streamWritten(now uint64, id uint64) {
	if s := e.streams[id]; s != nil {
		s.writerBusy = false
		if len(s.outbox) > 0 {
			e.flushPending = append(e.flushPending, s)
		}
		e.pump(now)
	}
}

func (e *engine) closeStream(now uint64, id uint64, reply func(any)) {
	s := e.streams[id]
	if s == nil {
		reply(&Done{})
		return
	}
	s.closed = true
	delete(e.streams, id)
	for i, o := range e.order {
		if o == s {
			e.order = append(e.order[:i], e.order[i+1:]...)
			break
		}
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	ids := make([]string, 0, len(s.inFlight))
	for id := range s.inFlight {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		en := s.inFlight[id]
		e.leaveInFlight(en)
		en.job.Status = protocol.StatusReady
		e.putRecord(en, batch)
		e.reclaimUnique(en.job)
		e.makeReady(en)
		e.tracer.job(EventRequeued, en.job, s.id)
	}
	s.outbox = nil
	e.publishConsumed()
	e.out.persist(batch, func(error) { reply(&Done{}) })
	e.pump(now)
}

// publishConsumed recomputes the set of consumed queues and tells budgets
// when it changed.
func (e *engine) publishConsumed() {
	all := false
	queues := make(map[string]bool)
	for _, s := range e.order {
		if s.queues == nil {
			all = true
		}
		for q := range s.queues {
			queues[q] = true
		}
	}
	if e.consumed.set(all, queues) {
		e.out.queuesChanged()
	}
}

// ---------------------------------------------------------------- acks and failures

func (e *engine) ack(now uint64, ids []string, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	var notFound []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		en := e.jobs[id]
		if en == nil || en.state != stInFlight {
			notFound = append(notFound, id)
			continue
		}
		e.observeAcked(en)
		e.leaveInFlight(en)
		retention := uint64(e.cfg.CompletedRetention / time.Millisecond)
		if r := en.job.Retention; r != nil && r.CompletedMs != nil {
			retention = *r.CompletedMs
		}
		en.job.Status = protocol.StatusCompleted
		e.finish(now, en, retention, batch, true)
	}
	e.persistThenReply(batch, reply, &AckJobsResponse{NotFound: notFound})
	e.pump(now)
}

// finish ends an unfinished job as completed or dead: it is deleted at once
// when retention is 0, else kept until now+retention.
func (e *engine) finish(now uint64, en *entry, retention uint64, batch *persistence.Batch, completed bool) {
	j := en.job
	delete(e.jobs, j.ID)
	en.state = stGone
	defer e.dropPayload(j)
	e.unsched(en)
	e.unbind(j)
	e.releaseUniqueOnFinish(j)
	if retention == 0 {
		e.releaseUnique(j)
		e.decStored(j)
		deleteRecord(j, en.grp, en.override, batch)
		return
	}
	if completed {
		j.CompletedAt = now
	}
	j.PurgeAt = now + retention
	e.putRecord(en, batch)
	e.addTerminal(j, en.grp)
}

// addTerminal keeps what memory needs of a retained finished job; g is its
// stored group, if any.
func (e *engine) addTerminal(j *protocol.Job, g *persistence.Group) {
	t := terminalJob{id: j.ID, queue: j.Queue, purgeAt: j.PurgeAt, attempts: j.Attempts, apart: g == nil && j.Payload == nil, dead: j.Status == protocol.StatusDead, grp: g}
	c := *j
	c.Payload = nil
	t.meta = &c
	if j.UniqueKey != "" && j.UniqueWhile == protocol.UniqueExists {
		t.job = &c
	}
	if old, ok := e.terminal[j.ID]; ok {
		e.countTerminal(old, -1)
	}
	e.terminal[j.ID] = t
	e.countTerminal(t, 1)
	if t.purgeAt != 0 {
		e.purgeOrder.ReplaceOrInsert(t)
	}
}

func (e *engine) fail(now uint64, m *FailJob, reply func(any)) {
	en := e.jobs[m.ID]
	if en == nil || en.state != stInFlight {
		reply(protocol.ErrNotInFlight)
		return
	}
	j := en.job
	e.observeFailed(j)
	e.leaveInFlight(en)
	j.Attempts++
	j.FailedAt = now
	rec := &protocol.ErrorRecord{Attempt: j.Attempts, Message: *m.Req.Message, DequeuedAt: j.DequeuedAt, FailedAt: now}
	if m.Req.ErrorType != nil {
		rec.ErrorType = *m.Req.ErrorType
	}
	if m.Req.Backtrace != nil {
		rec.Backtrace = *m.Req.Backtrace
	}
	retryLimit := e.cfg.DefaultRetryLimit
	if j.RetryLimit != nil {
		retryLimit = *j.RetryLimit
	}
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	var view *protocol.JobView
	switch {
	case m.Req.Kill != nil && *m.Req.Kill, m.Req.RetryAt == nil && j.Attempts > retryLimit:
		j.Status = protocol.StatusDead
		retention := uint64(e.cfg.DeadRetention / time.Millisecond)
		if r := j.Retention; r != nil && r.DeadMs != nil {
			retention = *r.DeadMs
		}
		if retention > 0 {
			batch.PutError(j.ID, rec)
		}
		e.finish(now, en, retention, batch, false)
		view = j.View(now, false)
	default:
		if m.Req.RetryAt != nil {
			j.ReadyAt = *m.Req.RetryAt
		} else {
			j.ReadyAt = now + e.backoff(j)
		}
		j.Status = protocol.StatusScheduled
		batch.PutError(j.ID, rec)
		e.putRecord(en, batch)
		view = j.View(now, false)
		view.Status = protocol.StatusScheduled
		en.state = stScheduled
		e.syncSched(en)
		e.reclaimUnique(j)
		e.out.schedule(j.ID, j.ReadyAt)
	}
	e.persistThenReply(batch, reply, &JobResponse{Job: view})
	e.pump(now)
}

// backoff is delay_ms = floor(attempts^exponent*1000 + base_ms + U*jitter_ms*attempts).
func (e *engine) backoff(j *protocol.Job) uint64 {
	b := e.cfg.DefaultBackoff
	if j.Backoff != nil {
		b = *j.Backoff
	}
	a := float64(j.Attempts)
	d := math.Pow(a, b.Exponent)*1000 + float64(b.BaseMs) + e.cfg.Random()*float64(b.JitterMs)*a
	if d > float64(math.MaxInt64/2) || math.IsNaN(d) {
		d = float64(math.MaxInt64 / 2)
	}
	return uint64(math.Floor(d))
}

// ---------------------------------------------------------------- deletes

func (e *engine) deleteJob(now uint64, id string, reply func(any)) {
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	if !e.removeJob(now, id, batch) {
		reply(protocol.ErrJobNotFound)
		return
	}
	e.persistThenReply(batch, reply, &Done{})
	e.pump(now)
}

// removeJob deletes a job in any status into batch: it leaves wherever it
// waits (in-flight tokens go back), stops counting against its budgets and
// releases its unique key. It reports false for an unknown or purged job.
// Requests that waited for the job's reservation run after it.
func (e *engine) removeJob(now uint64, id string, batch *persistence.Batch) bool {
	defer e.runDeferred(now, id)
	if en := e.jobs[id]; en != nil {
		e.detach(en)
		delete(e.jobs, id)
		en.state = stGone
		e.unsched(en)
		e.unbind(en.job)
		e.releaseUnique(en.job)
		e.decStored(en.job)
		deleteRecord(en.job, en.grp, en.override, batch)
		e.dropPayload(en.job)
		return true
	}
	if t, ok := e.terminal[id]; ok && (t.purgeAt == 0 || t.purgeAt > now) {
		e.dropTerminal(t)
		deleteTerminal(t, batch)
		return true
	}
	return false
}

func (e *engine) dropTerminal(t terminalJob) {
	if t.job != nil {
		e.releaseUnique(t.job)
	}
	if _, ok := e.terminal[t.id]; ok {
		e.countTerminal(t, -1)
	}
	delete(e.terminal, t.id)
	e.purgeOrder.Delete(t)
	e.decStored(t.meta)
}

// The ID indexes hold jobs' IDs as protocol.IDKeys: compared without
// reading the ID strings, and nothing for the collector to scan.
func keyLess(a, b protocol.IDKey) bool { return a.Less(b) }

// idKey is the key of a job ID the engine stores (minted, or loaded after
// loadJob checked it).
func idKey(id string) protocol.IDKey {
	k, ok := protocol.ParseIDKey(id)
	if !ok {
		panic(fmt.Sprintf("actors: %q is not a job ID", id))
	}
	return k
}

// addStored counts a stored job in its queue and adds it to the indexes.
func (e *engine) addStored(j *protocol.Job) {
	k := idKey(j.ID)
	e.queueCounts[j.Queue]++
	e.byID.ReplaceOrInsert(k)
	addToIndex(e.byQueue, j.Queue, k)
	addToIndex(e.byType, j.Type, k)
	e.indexKeys(j, k, true)
}

// indexKeys adds j (whose ID's key is k) to, or drops it from, the indexes
// of its budget keys.
func (e *engine) indexKeys(j *protocol.Job, k protocol.IDKey, add bool) {
	for _, b := range j.Budgets {
		if add {
			addToIndex(e.byKey, b.Key, k)
		} else {
			dropFromIndex(e.byKey, b.Key, k)
		}
	}
}

func addToIndex(m map[string]*orderedSet[protocol.IDKey], name string, k protocol.IDKey) {
	t := m[name]
	if t == nil {
		t = newOrderedSet(keyLess)
		m[name] = t
	}
	t.ReplaceOrInsert(k)
}

func dropFromIndex(m map[string]*orderedSet[protocol.IDKey], name string, k protocol.IDKey) {
	if t := m[name]; t != nil {
		t.Delete(k)
		if t.Len() == 0 {
			delete(m, name)
		}
	}
}

// decStored uncounts a stored job that is deleted and drops it from the
// indexes.
func (e *engine) decStored(j *protocol.Job) {
	k := idKey(j.ID)
	dropFromIndex(e.byType, j.Type, k)
	e.indexKeys(j, k, false)
	if e.queueCounts[j.Queue]--; e.queueCounts[j.Queue] <= 0 {
		delete(e.queueCounts, j.Queue)
	}
	e.byID.Delete(k)
	dropFromIndex(e.byQueue, j.Queue, k)
}

// moveQueue moves a stored job's ID from one queue's index and count to
// another's.
func (e *engine) moveQueue(id, from, to string) {
	k := idKey(id)
	if e.queueCounts[from]--; e.queueCounts[from] <= 0 {
		delete(e.queueCounts, from)
	}
	dropFromIndex(e.byQueue, from, k)
	e.queueCounts[to]++
	addToIndex(e.byQueue, to, k)
}

// reap deletes retained finished jobs past purge_at, up to 1000 per call.
func (e *engine) reap(now uint64) {
	batch := persistence.NewBatch(false)
	n := 0
	for n < 1000 {
		t, ok := e.purgeOrder.Min()
		if !ok || t.purgeAt > now {
			break
		}
		e.dropTerminal(t)
		deleteTerminal(t, batch)
		n++
	}
	e.out.persist(batch, nil)
}

func (e *engine) reset(now uint64, reply func(any)) {
	defer func() {
		for id := range e.deferred {
			e.runDeferred(now, id)
		}
	}()
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	for _, en := range e.jobs {
		deleteRecord(en.job, en.grp, en.override, batch)
		en.state = stGone
	}
	for _, t := range e.terminal {
		deleteTerminal(t, batch)
	}
	for key := range e.budgets {
		batch.DeleteBudget(key)
		e.out.stopBudget(key)
	}
	e.jobs = make(map[string]*entry)
	e.payloadBytes = 0
	e.ready = newReadyIndex()
	e.terminal = make(map[string]terminalJob)
	e.purgeOrder.Clear(false)
	e.sched.Clear(false)
	e.completedTotal, e.deadTotal = 0, 0
	e.queueCounts = make(map[string]int)
	e.byID.Clear()
	e.byQueue = make(map[string]*orderedSet[protocol.IDKey])
	e.byType = make(map[string]*orderedSet[protocol.IDKey])
	e.byKey = make(map[string]*orderedSet[protocol.IDKey])
	e.budgets = make(map[string]*budgetEntry)
	e.unique = make(map[string]string)
	for _, s := range e.streams {
		s.inFlight = make(map[string]*entry)
		s.reserving = 0
		s.outbox = nil
	}
	e.inFlightTotal = 0
	e.reservingTotal = 0
	e.out.clearSchedule()
	e.persistThenReply(batch, reply, &Done{})
}

func (e *engine) listQueues() []string {
	out := make([]string, 0, len(e.queueCounts))
	for q := range e.queueCounts {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------- budgets

func budgetNotFound(key string) error {
	return &protocol.Error{Code: protocol.CodeNotFound, Message: fmt.Sprintf("budget '%s' not found", key)}
}

func (e *engine) getBudget(key string) (any, error) {
	be := e.budgets[key]
	if be == nil {
		return nil, budgetNotFound(key)
	}
	return &BudgetResponse{Budget: be.budget}, nil
}

func (e *engine) listBudgets() *BudgetsResponse {
	keys := make([]string, 0, len(e.budgets))
	for k := range e.budgets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]protocol.Budget, len(keys))
	for i, k := range keys {
		out[i] = e.budgets[k].budget
	}
	return &BudgetsResponse{Budgets: out}
}

func (e *engine) createBudget(now uint64, m *CreateBudget, reply func(any)) {
	if be := e.budgets[m.Key]; be != nil {
		if !m.Replace {
			reply(protocol.Errorf(protocol.CodeConflict, "budget '%s' already exists", m.Key))
			return
		}
		e.replaceBudget(now, be, m.Definition, reply)
		return
	}
	if err := e.checkBudgetLimit(m.Key, 0); err != nil {
		reply(err)
		return
	}
	b := protocol.Budget{Key: m.Key, Allocation: m.Definition.Allocation, Strategy: m.Definition.Strategy, CreatedAt: now, UpdatedAt: now}
	e.budgets[m.Key] = &budgetEntry{budget: b, bound: make(map[uint32]int)}
	e.out.spawnBudget(b)
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.PutBudget(&b)
	e.persistThenReply(batch, reply, &BudgetResponse{Budget: b, Created: true})
}

func (e *engine) patchBudget(now uint64, m *PatchBudget, reply func(any)) {
	be := e.budgets[m.Key]
	if be == nil {
		reply(budgetNotFound(m.Key))
		return
	}
	def, err := m.Patch.Apply(be.budget.Definition())
	if err != nil {
		reply(err)
		return
	}
	e.replaceBudget(now, be, def, reply)
}

// replaceBudget applies a new definition after checking that every bound
// unfinished job still fits (allocation first, then burst).
func (e *engine) replaceBudget(now uint64, be *budgetEntry, def protocol.Definition, reply func(any)) {
	key := be.budget.Key
	if n, c := be.costsAbove(def.Allocation); n > 0 {
		reply(protocol.Unprocessable("budget '%s' cannot allocate %d: %d unfinished %s draw up to %d from it. Raise the allocation, delete them, or wait for them to drain.", key, def.Allocation, n, plural(n, "job", "jobs"), c))
		return
	}
	if def.Strategy.Type == protocol.TimeBased && def.Strategy.Burst > 0 {
		if n, c := be.costsAbove(def.Strategy.Burst); n > 0 {
			reply(protocol.Unprocessable("budget '%s' cannot burst %d: %d unfinished %s draw up to %d from it. Raise the burst, delete them, or wait for them to drain.", key, def.Strategy.Burst, n, plural(n, "job", "jobs"), c))
			return
		}
	}
	be.budget.Allocation = def.Allocation
	be.budget.Strategy = def.Strategy
	be.budget.UpdatedAt = now
	b := be.budget
	e.out.toBudget(key, &ApplyDefinition{Definition: def})
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.PutBudget(&b)
	e.persistThenReply(batch, reply, &BudgetResponse{Budget: b})
}

// costsAbove counts bound unfinished jobs costing more than limit and
// returns the largest such cost.
func (be *budgetEntry) costsAbove(limit uint32) (n int, largest uint32) {
	if limit < 1 && be.boundOne > 0 {
		n, largest = be.boundOne, 1
	}
	for cost, count := range be.bound {
		if cost > limit {
			n += count
			if cost > largest {
				largest = cost
			}
		}
	}
	return n, largest
}

func (e *engine) deleteBudget(m *DeleteBudget, reply func(any)) {
	be := e.budgets[m.Key]
	if be == nil {
		reply(budgetNotFound(m.Key))
		return
	}
	if be.boundTotal > 0 {
		reply(protocol.Errorf(protocol.CodeConflict, "budget '%s' is referenced by %d unfinished %s. Delete them or wait for them to finish before deleting it.", m.Key, be.boundTotal, plural(be.boundTotal, "job", "jobs")))
		return
	}
	delete(e.budgets, m.Key)
	e.out.stopBudget(m.Key)
	batch := persistence.NewBatch(e.cfg.DefaultSync)
	batch.DeleteBudget(m.Key)
	e.persistThenReply(batch, reply, &Done{})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
