package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// queueActor owns every unfinished job, the ready index, the take streams
// and the budget catalog (definitions and bound-job counts), so enqueue
// checks, budget updates and deletes are serialised in one place.
//
// Owns: an engine (the plain state machine) and the PIDs of its children:
// one budget actor per budget and the scheduler.
// Accepts: the queueMsg set in messages.go (from the facade, budget actors
// and the scheduler). Answers the facade's requests, after their writes are
// durable, with the matching response or a *protocol.Error.
// Supervisor: the root; it supervises its children one-for-one.
// Writes: j/, e/ and b/ keys through the group committer (persistence).
type queueActor struct {
	cfg    EngineConfig
	store  persistence.JobStore
	clock  Clock
	timers Timers
	log    *slog.Logger
	tracer *Tracer

	// wakeTimers arm the budgets' wake timers (ExactTimers in production)
	wakeTimers Timers

	eng       *queueCore
	consumed  *consumedSet
	ctx       actor.Context
	root      *actor.RootContext
	self      *actor.PID
	scheduler *actor.PID
	crons     *actor.PID // the cron actor
	cronSlots []CronSlot // for the cron actor, sent at the end of Receive
	cronStats *CronStats
	folds     *folder // the facade's fold coordinator, for batched cron firings
	// timeout is the one timer for the earliest in-flight deadline
	// (timeouts.go).
	timeout timeoutTimer
	// budgets links each budget key to its actor; toBudgets lists the
	// links with messages pending, flushed at the end of each Receive
	// (batching.go).
	budgets   map[string]*outLink[budgetMsg]
	toBudgets []*outLink[budgetMsg]
	// budgetDispatch are the options budget actors are spawned with: the
	// engine's worker pool (budget_dispatcher.go), none in tests that
	// make the actor without an engine.
	budgetDispatch []actor.PropsOption
	// incarnations is the incarnation of each key's budget actor now: a
	// failure reported by an earlier one is old news.
	incarnations map[string]uint64
	peaks        actorPeaks // for making sparse maps afresh (map_shrink.go)
	stats        StartupStats
	loadErr      error // the start's own loads failed (budgets, crons)
	// gate opens when the background load of jobs ends (background_load.go);
	// loadBatch collects that load's writes, lateCron the cron firings due
	// while it runs; scanGen numbers the scans, so a restarted actor drops
	// the chunks of the scan before it, which scanCancel ends.
	gate        *loadGate
	loadBatch   *persistence.Batch
	loadStarted time.Time
	lateCron    []CronSlot
	scanGen     uint64
	scanCancel  chan struct{}
	// collectCancel cancels the armed collect timer (budget_collect.go).
	collectCancel func()
	// releaseCancel cancels the armed release timer (memory_release.go).
	releaseCancel func()
	// budgetLogger is the logger every budget actor shares (a logger of
	// its own, with its key, cost each budget a few hundred bytes).
	budgetLogger *slog.Logger
}

// loadChunkBytes and loadChunkWrites bound one commit of the writes made
// while loading (badger takes ~9.6 MiB or ~100k writes per transaction with
// 64 MiB memtables).
const (
	loadChunkBytes  = 4 << 20
	loadChunkWrites = 20000
)

// StartupStats describes what recovery found.
type StartupStats struct {
	Recovered int // in-flight jobs returned to ready
	// Ready and Scheduled count the unfinished jobs in memory when the
	// load ends: those enqueued meanwhile too; Ready includes those parked,
	// reserving or dispatched meanwhile, but not those already finished.
	Ready     int
	Scheduled int
	Retained  int // finished jobs kept for retention
	Budgets   int
}

// startedRequest asks whether the queue actor started: it answers nil, or
// the error that stopped it from loading the budgets and cron groups.
type startedRequest struct{}

func (*startedRequest) isQueueMsg() {}

func (a *queueActor) Receive(ctx actor.Context) {
	a.ctx = ctx
	now := millis(a.clock.Now())
	a.handle(ctx, ctx.Message(), now)
	if a.eng != nil {
		a.eng.flushIdle(now) // budget_collect.go
		a.eng.noteChurn(now) // memory_release.go
	}
	a.shrinkMaps() // map_shrink.go
	flushLinks(ctx, &a.toBudgets, newBudgetBatch)
	a.flushCrons(ctx)
	a.syncTimeoutTimer(ctx)
}

func (a *queueActor) handle(ctx actor.Context, msg any, now uint64) {
	switch m := msg.(type) {
	case *actor.Started:
		a.start(ctx, now)
	case *actor.Stopping, *actor.Restarting:
		a.stopBudgetActors() // they are not its children (spawnBudget)
		a.cancelScan()
	case *actor.Stopped, *actor.Terminated:
		// A child (scheduler, cron actor) stopped: shutdown stops them on
		// purpose.
	case *startedRequest:
		ctx.Respond(a.loadErr) // nil: started, and loading jobs
	case *loadChunk:
		if m.gen == a.scanGen {
			a.onLoadChunk(m, now)
		}
	case *loadScanned:
		if m.gen == a.scanGen {
			a.onLoadScanned(m, now)
		}
	case *loadCommitted:
		if m.gen == a.scanGen { // not the commit of a load before a restart
			a.onLoadCommitted(m)
		}
	case *EnqueueJobs:
		if m.Cron != nil {
			a.eng.fireCronPlanned(now, m, a.replier(ctx))
			return
		}
		a.eng.enqueue(now, m, a.replier(ctx))
	case *cronFoldFailed:
		a.eng.onCronFoldFailed(now, m)
	case *AckJobs:
		a.eng.ackSettling(now, m, a.replier(ctx))
	case *FailJob:
		a.eng.failSettling(now, m, a.replier(ctx))
	case *DeleteJob:
		a.eng.deleteJob(now, m.ID, a.replier(ctx))
	case *DeleteJobs:
		a.eng.deleteJobs(now, m, a.replier(ctx))
	case *SelectJobs:
		ctx.Respond(a.eng.selectJobs(now, m))
	case *PatchJobs:
		a.eng.patchJobs(now, m, a.replier(ctx))
	case *RebindJob:
		a.eng.rebindJob(now, m, a.replier(ctx))
	case *RebindJobs:
		a.eng.rebindJobs(now, m, a.replier(ctx))
	case *ResetAll:
		a.eng.reset(now, a.replier(ctx))
	case *ListQueues:
		ctx.Respond(&QueuesResponse{Queues: a.eng.listQueues()})
	case *OpenStream:
		a.eng.openStream(now, m, a.replier(ctx))
	case *StreamWritten:
		a.eng.streamWritten(now, m.StreamID)
	case *CloseStream:
		a.eng.closeStream(now, m.StreamID, a.replier(ctx))
	case *ReserveResponse:
		a.eng.onReserveResponse(now, m)
	case *JobsWoken:
		a.eng.onJobsWoken(now, m)
	case *BudgetFailed:
		if a.incarnations[m.Key] == m.Incarnation {
			a.eng.onBudgetFailed(m)
		}
	case *queueBatch:
		a.eng.beginBatch()
		for _, inner := range m.Msgs {
			a.handle(ctx, inner, now)
		}
		a.eng.endBatch(now)
	case *commitDone:
		m.then(now, m.err)
	case *JobsDue:
		a.eng.onJobsDue(now, m.IDs)
	case *timeoutTick:
		a.onTimeoutTick(m, now)
	case *reapTick:
		a.eng.reap(now)
		a.armReaper()
	case *GetBudget:
		res, err := a.eng.getBudget(m.Key)
		if err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Respond(res)
	case *ListBudgets:
		ctx.Respond(a.eng.listBudgets())
	case *BudgetPage:
		ctx.Respond(a.eng.budgetPage(m))
	case *CreateBudget:
		a.eng.createBudget(now, m, a.replier(ctx))
	case *PatchBudget:
		a.eng.patchBudget(now, m, a.replier(ctx))
	case *DeleteBudget:
		a.eng.deleteBudget(m, a.replier(ctx))
	case *budgetStateQuery:
		l := a.budgets[m.Key]
		if l == nil {
			ctx.Respond(budgetNotFound(m.Key))
			return
		}
		ctx.Forward(l.pid)
	case *budgetLineQuery:
		l := a.budgets[m.Key]
		if l == nil {
			ctx.Respond(budgetNotFound(m.Key))
			return
		}
		ctx.Forward(l.pid)
	case *JobWaitingRequest:
		a.onJobWaiting(ctx, m)
	case *CronDue:
		if a.eng.loading { // fired once the unique keys are known
			a.lateCron = append(a.lateCron, m.Slots...)
			return
		}
		a.eng.onCronDue(now, m.Slots)
	case *ListCronGroups:
		ctx.Respond(a.eng.listCronGroups())
	case *GetCronGroup:
		ctx.Respond(a.eng.getCronGroup(m.Group))
	case *GetCronEntry:
		ctx.Respond(a.eng.getCronEntry(m.Group, m.Entry))
	case *PutCronGroup:
		a.eng.putCronGroup(now, m, a.replier(ctx))
	case *PutCronEntry:
		a.eng.putCronEntry(now, m, a.replier(ctx))
	case *PatchCronGroup:
		a.eng.patchCronGroup(now, m, a.replier(ctx))
	case *PatchCronEntry:
		a.eng.patchCronEntry(now, m, a.replier(ctx))
	case *DeleteCronGroup:
		a.eng.deleteCronGroup(m, a.replier(ctx))
	case *DeleteCronEntry:
		a.eng.deleteCronEntry(m, a.replier(ctx))
	case *DeleteCronGroups:
		n, batches := a.eng.deleteCronGroups()
		reply := a.replier(ctx)
		a.eng.persistAll(batches, func(err error) {
			if err != nil {
				reply(err)
				return
			}
			reply(&DeletedResponse{Deleted: n})
		})
	case *MetricsRequest:
		ctx.Respond(a.eng.metrics(now, m))
	case *PutHold:
		a.eng.putHold(now, m, a.replier(ctx))
	case *DeleteHold:
		a.eng.deleteHold(now, m, a.replier(ctx))
	case *budgetIdleAnswer:
		a.eng.onBudgetIdle(now, m)
	case *poolSettled:
		a.eng.onPoolSettled(m)
	case *collectTick:
		a.collectCancel = nil
		a.eng.onCollectTick(now)
	case *releaseTick:
		a.releaseCancel = nil
		a.eng.onReleaseTick(now)
	default:
		a.log.Warn("queue actor: unknown message", "type", fmt.Sprintf("%T", m))
	}
}

// replier returns a function that answers the current request's sender;
// it may be called later from another goroutine (the group committer).
func (a *queueActor) replier(ctx actor.Context) func(any) {
	sender := ctx.Sender()
	root := a.root
	return func(m any) {
		if sender != nil {
			root.Send(sender, m)
		}
	}
}

// start rebuilds memory from the store (SPEC §3.9): budgets, their pools
// and holds, and cron groups before the actor serves anything; then the
// jobs, in the background (background_load.go), or at once when the actor
// restarts after a panic and the server already serves a complete state.
func (a *queueActor) start(ctx actor.Context, now uint64) {
	a.budgets = make(map[string]*outLink[budgetMsg])
	a.incarnations = make(map[string]uint64)
	a.self = ctx.Self()
	a.scheduler = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newSchedulerActor(ctx.Self(), a.clock, a.timers, a.log.With("component", "scheduler"))
	}))
	a.crons = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newCronActor(ctx.Self(), a.clock, a.timers, a.log.With("component", "cron"))
	}))
	a.eng = newQueueCore(a.cfg, a, a.log, a.consumed, a.tracer)
	a.eng.cron.stats = a.cronStats
	a.stats = StartupStats{}
	a.lateCron = nil
	if err := a.load(now); err != nil {
		a.loadErr = err
		a.gate.fail(a.stats, err)
		return
	}
	select {
	case <-a.gate.stop:
		return // the engine stops: nothing to load for
	default:
	}
	select {
	case <-a.gate.done:
		a.reloadJobs(now)
	default:
		a.startJobScan()
	}
}

// load rebuilds what the queue core needs before it serves: budgets, their
// stored pool levels and holds, and cron groups.
func (a *queueActor) load(now uint64) error {
	budgets, err := a.store.LoadBudgets()
	if err != nil {
		return fmt.Errorf("load budgets: %w", err)
	}
	for _, b := range budgets {
		a.eng.loadBudget(*b)
	}
	// Stored pool levels first, then holds: a drained hold still in force
	// empties whatever level was restored (SPEC §10.2, §10.4).
	if a.cfg.DurablePools {
		levels, err := a.store.LoadPools()
		if err != nil {
			return fmt.Errorf("load pool levels: %w", err)
		}
		a.eng.restorePools(levels)
	}
	extras, err := a.store.LoadBudgetExtras()
	if err != nil {
		return fmt.Errorf("load budget holds: %w", err)
	}
	a.eng.loadBudgetExtras(now, extras)
	crons, err := a.store.LoadCronGroups()
	if err != nil {
		return fmt.Errorf("load cron groups: %w", err)
	}
	for _, g := range crons {
		a.eng.loadCronGroup(g)
	}
	return nil
}

func (a *queueActor) armReaper() {
	if a.cfg.ReaperInterval > 0 {
		a.timers.SendOnce(a.cfg.ReaperInterval, a.ctx.Self(), &reapTick{})
	}
}

// outbox implementation.

func (a *queueActor) persist(b *persistence.Batch, done func(error)) {
	a.store.Submit(b, done)
}

func (a *queueActor) toSelf(m queueMsg) { a.root.Send(a.self, m) }

func (a *queueActor) toBudget(key string, msg budgetMsg) {
	if l := a.budgets[key]; l != nil && l.add(msg) {
		a.toBudgets = append(a.toBudgets, l)
	}
}

func (a *queueActor) spawnBudget(b protocol.Budget) {
	self := a.ctx.Self()
	core := newBudgetCore(b.Key, b.Definition(), nanos(a.clock.Now()), a.consumed.has)
	core.durablePools = a.cfg.DurablePools
	core.epoch = a.eng.epoch
	a.incarnations[b.Key] = core.incarnation
	props := actor.PropsFromProducer(func() actor.Actor {
		return &budgetActor{core: core, toQueue: outLink[queueMsg]{pid: self}, clock: a.clock, timers: a.wakeTimers, log: a.budgetLog(), tracer: a.tracer}
	}, a.budgetDispatch...)
	// Spawned from the root, not as the queue actor's child: a parent's
	// set of children keeps, past its length, pointers to children that
	// stopped, and each stopped budget's PID would hold its whole actor in
	// memory (the queue actor stops its budgets itself: stopBudgetActors).
	a.budgets[b.Key] = &outLink[budgetMsg]{pid: a.root.Spawn(props)}
}

func (a *queueActor) stopBudget(key string) {
	if l := a.budgets[key]; l != nil {
		l.flush(a.ctx, newBudgetBatch) // what it was sent before it stops
		a.ctx.Stop(l.pid)
		delete(a.budgets, key)
		delete(a.incarnations, key)
		a.tracer.budgetDeleted(key)
	}
}

func (a *queueActor) schedule(id string, readyAt uint64) {
	a.toScheduler(&ScheduleJob{ID: id, ReadyAt: readyAt})
}

func (a *queueActor) unschedule(id string) { a.toScheduler(&UnscheduleJob{ID: id}) }

func (a *queueActor) clearSchedule() { a.toScheduler(&ClearSchedule{}) }

// toScheduler sends m to the scheduler actor; the parameter's type keeps
// any other actor's message out.
func (a *queueActor) toScheduler(m schedulerMsg) { a.ctx.Send(a.scheduler, m) }

// scheduleCron queues a slot for the cron actor; the slots of one Receive
// go in one message (flushCrons).
func (a *queueActor) scheduleCron(s CronSlot) { a.cronSlots = append(a.cronSlots, s) }

func (a *queueActor) clearCrons() {
	a.cronSlots = nil
	a.ctx.Send(a.crons, &ClearCrons{})
}

func (a *queueActor) flushCrons(ctx actor.Context) {
	if len(a.cronSlots) > 0 {
		ctx.Send(a.crons, &ScheduleCron{Slots: a.cronSlots})
		a.cronSlots = nil
	}
}

func (a *queueActor) queuesChanged() {
	for _, l := range a.budgets {
		if l.add(&QueuesChanged{}) {
			a.toBudgets = append(a.toBudgets, l)
		}
	}
}

// budgetStateQuery asks the queue to forward a state request to a budget.
type budgetStateQuery struct{ Key string }

func (*budgetStateQuery) isQueueMsg() {}
