package actors

import (
	"log/slog"
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
	// BudgetIdleTTL collects a budget made by a create_with once it has
	// been idle and full this long (0: never; SPEC §10.3).
	BudgetIdleTTL time.Duration
	// EnqueueSync and DefaultSync ask for fsync before acknowledging.
	EnqueueSync, DefaultSync bool
	// ReaperInterval is how often finished jobs past purge_at are removed.
	ReaperInterval time.Duration
	// Random returns a uniform float in [0, 1) for backoff jitter.
	Random func() float64
	// PayloadCacheBytes bounds the memory that keeping payloads of
	// unfinished jobs costs (default 8 MiB): each kept payload counts its
	// bytes and the ~290 bytes its job then costs more (cachedJobBytes).
	// A job enqueued while there is room keeps its payload in memory until
	// it finishes; beyond it, only the store has it, read when the job is
	// written to its stream (Engine.LoadPayloads). Negative: none is kept.
	PayloadCacheBytes int
	// CompactFrom is the count of unfinished jobs from which a waiting job
	// is kept in its compact form (default 4096; queued_compact.go): below
	// it, jobs are mostly dispatched soon after they come, and rebuilding
	// them would cost more than the little memory it saves.
	CompactFrom int
	// DefaultJobTimeout fails a job in flight longer than this when it
	// sets no timeout_ms of its own (0: none; SPEC §10.5).
	DefaultJobTimeout time.Duration
	// GroupMinJobs is handed to the store (persistence.Batch.Enqueued): the
	// size from which the jobs of one enqueue request may be stored
	// together (default persistence.DefaultGroupFrom).
	GroupMinJobs int
	// DurablePools keeps time_based pool levels across restarts (SPEC
	// §10.4, --budget-pools durable; budget_pools.go).
	DurablePools bool
}

// outbox is how the engine acts on the world; the queue actor implements
// it with protoactor and the store, tests with a recorder.
type outbox interface {
	persist(b *persistence.Batch, done func(error))
	// toSelf sends a message to the queue actor; it may be called from
	// any goroutine (commit callbacks use it to come back).
	toSelf(m queueMsg)
	toBudget(key string, msg budgetMsg)
	spawnBudget(b protocol.Budget)
	stopBudget(key string)
	schedule(id string, readyAt uint64)
	unschedule(id string)
	clearSchedule()
	queuesChanged()
	scheduleCron(s CronSlot)
	// foldCron plans the firing of a batched template off the actor; the
	// planned enqueue comes back as an EnqueueJobs with Cron set, a
	// failure as a cronFoldFailed (cron_fold.go).
	foldCron(s CronSlot, job *protocol.NewJob)
	clearCrons()
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
	// jb is the job, or nil while it is compact (en.q; queued_compact.go):
	// use en.full(), en.peek or the accessors there.
	jb *protocol.Job
	q  *queuedJob
	// parkedOn is the key of the budget the job is parked on (zero: none;
	// en.parkedKey), a handle so that the entry stays 64 bytes.
	parkedOn unique.Handle[string]
	stream   *stream
	resv     *reservation
	// ref is where the store keeps the job (records.go)
	ref   persistence.Ref
	state jobState
	// flags are entryInSched and entryUnlink (bits, so that the entry
	// stays 64 bytes, a whole allocation class).
	flags entryFlags
	// parkedPrio is the priority the job parked with on parkedOn (its
	// place in that budget's list).
	parkedPrio uint16
	// slot is the entry's place in queueCore.slots (0: none), given when
	// it first asks a budget (entry_slots.go).
	slot uint32
}

// entryFlags are an entry's boolean marks.
type entryFlags uint8

const (
	// entryInSched: the job is in e.sched (statusindex.go).
	entryInSched entryFlags = 1 << iota
	// entryUnlink: the job's dispatch sealed its batch, and the write of
	// its in-flight state removes the key's pending link (batch_core.go).
	entryUnlink
	// entryCounted: the job is counted in its queue's queueStates
	// (queue_states.go).
	entryCounted
)

// has reports whether every flag of f is set.
func (f entryFlags) has(g entryFlags) bool { return f&g == g }

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
	job      *protocol.Job // without payload; kept only for unique-key holders
	meta     *protocol.Job // without payload, for the query filters
	dead     bool
	ref      persistence.Ref // where the store keeps it
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
	life       budgetLife // hold and idle collection (budget_collect.go)
	pool       *poolMark  // durable pools: its latest level (budget_pools.go)
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

// queueCore is the queue actor's state machine: every unfinished job, the ready
// index, the take streams, the budget catalog and the retained finished jobs.
// It never reads the clock (methods take now in Unix ms) and never blocks:
// writes go to the outbox's group committer and replies are sent when they
// are durable.
type queueCore struct {
	cfg EngineConfig
	out outbox
	log *slog.Logger
	ids *protocol.IDGenerator

	jobs jobMap
	// prepaid holds the jobs a budget's wake debited, from JobsWoken to the
	// end of the pump that dispatches or refunds them (prepaid.go)
	prepaid map[string]prepaidJob
	// payloadBytes is what the payloads jobs hold in memory cost
	// (payloadCost; bounded by cfg.PayloadCacheBytes).
	payloadBytes int
	ready        *readyIndex
	terminal     map[string]terminalJob
	purgeOrder   *btree.BTreeG[terminalJob]
	// sched, completedTotal and deadTotal index statuses (statusindex.go).
	sched          *btree.BTreeG[schedItem]
	completedTotal int
	deadTotal      int
	queueCounts    map[string]int
	// queueStates counts each queue's jobs by state for /metrics
	// (queue_states.go).
	queueStates map[string]*queueStates
	lastStates  lastQueueStates
	// byQueue is every stored job's ID (unfinished and retained finished)
	// per queue and type, in ID order: with byKey, the indexes of the
	// query endpoints (query.go; the jobs of a queue, of a type or all of
	// them in ID order are a merge of these, idwalk.go and kindSets).
	byQueue map[string]map[string]*orderedSet[protocol.IDKey]
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
	// loading is set while the stored jobs are read back in the background
	// (background_load.go): no budget is collected until the last is in,
	// and only the jobs frontier says come first are dispatched
	// (load_frontier.go).
	loading  bool
	frontier loadFrontier

	budgets map[string]*budgetEntry
	unique  map[string]string // unique key -> holder job id
	cron    cronCatalog       // cron groups (cron_groups.go)
	pending map[string]string // batch key -> its pending job's id (batch_core.go)
	tracer  *Tracer
	obs     engineObs       // counters for metrics (observe.go)
	collect budgetCollector // idle budgets, hold counters (budget_collect.go)
	peaks   corePeaks       // for making sparse maps afresh (map_shrink.go)
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
	// slots makes entries addressable by value, for budget answers
	// (entry_slots.go)
	slots entrySlots
	// reservations are short-lived too (a job holds one between leaving
	// the ready index and its dispatch or parking)
	reservations slab[reservation]

	recoveredUnique []*protocol.Job   // queued-scope jobs recovered from in flight
	loadLatest      map[string]string // unique key -> latest stored job id with it (load only)

	// timeouts is the deadlines of in-flight jobs (timeouts.go).
	timeouts jobTimeouts

	// deferred holds requests about a job that wait for its reservation to
	// end (dispatched, parked or deleted).
	deferred map[string][]func(now uint64)
}

// afterReservation runs f once the job's current reservation has ended.
func (e *queueCore) afterReservation(id string, f func(now uint64)) {
	if e.deferred == nil {
		e.deferred = make(map[string][]func(now uint64))
	}
	e.deferred[id] = append(e.deferred[id], f)
}

// runDeferred runs what waited for the job's reservation, if it has ended.
func (e *queueCore) runDeferred(now uint64, id string) {
	fns, ok := e.deferred[id]
	if !ok {
		return
	}
	if en := e.jobs.get(id); en != nil && en.state == stReserving {
		return
	}
	delete(e.deferred, id)
	for _, f := range fns {
		f(now)
	}
}

// engineEpochs numbers engines (engine.epoch).
var engineEpochs atomic.Uint64

func newQueueCore(cfg EngineConfig, out outbox, log *slog.Logger, consumed *consumedSet, tracer *Tracer) *queueCore {
	e := &queueCore{
		epoch:       engineEpochs.Add(1),
		cfg:         cfg,
		out:         out,
		log:         log,
		ids:         protocol.NewIDGenerator(),
		ready:       newReadyIndex(),
		terminal:    make(map[string]terminalJob),
		purgeOrder:  btree.NewG(16, terminalLess),
		sched:       newSchedSet(),
		queueCounts: make(map[string]int),
		queueStates: make(map[string]*queueStates),
		byQueue:     make(map[string]map[string]*orderedSet[protocol.IDKey]),
		byKey:       make(map[string]*orderedSet[protocol.IDKey]),
		streams:     make(map[uint64]*stream),
		consumed:    consumed,
		budgets:     make(map[string]*budgetEntry),
		unique:      make(map[string]string),
		pending:     make(map[string]string),
		tracer:      tracer,
	}
	// a thawed job's ID goes back in its ID index (coldjobs.go)
	e.jobs.thawed = func(q *queuedJob) {
		kind := q.kind.Value()
		e.addToKind(kind.queue, kind.typ, q.key)
	}
	return e
}
