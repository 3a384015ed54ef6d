package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// Config configures the engine.
type Config struct {
	Engine EngineConfig
	Store  persistence.JobStore
	Logger *slog.Logger
	// Clock defaults to the system clock; Timers to protoactor's scheduler.
	Clock  Clock
	Timers Timers
	// Tracer receives dispatch events (optional).
	Tracer *Tracer
	// RequestTimeout bounds one request to the queue actor (default 60 s).
	RequestTimeout time.Duration
}

// WithDefaults fills in zero values.
func (c EngineConfig) WithDefaults() EngineConfig {
	if c.DefaultRetryLimit == 0 {
		c.DefaultRetryLimit = 25
	}
	if c.Random == nil {
		c.Random = rand.Float64
	}
	if c.PayloadCacheBytes == 0 {
		c.PayloadCacheBytes = 8 << 20
	}
	if c.GroupMinJobs == 0 {
		c.GroupMinJobs = persistence.DefaultGroupFrom
	}
	if c.CompactFrom == 0 {
		c.CompactFrom = 4096
	}
	return c
}

// Engine is the facade other packages call: typed methods that ask the
// queue actor and wait for its answer. It runs outside any actor, so it may
// block.
type Engine struct {
	system  *actor.ActorSystem
	queue   *actor.PID
	store   persistence.JobStore
	clock   Clock
	timeout time.Duration
	tracer  *Tracer
	// gate opens once the stored jobs are loaded (background_load.go)
	gate *loadGate
	// cronStats counts cron firings (cron_groups.go)
	cronStats *CronStats
	folds     *folder // batched enqueues (fold.go)

	// budgetPool runs the budget actors (budget_dispatcher.go)
	budgetPool *workerPool
	// exact arms the budgets' wake timers; stopped last (nil when injected)
	exact    *ExactTimers
	stopOnce sync.Once
}

// startTimeout bounds the part of the start that reads the store before
// serving (budgets, pool levels, holds, cron groups): far above what a
// store this server can hold takes, only so that a wedged start ends.
const startTimeout = time.Hour

// Start spawns the actors, reads the budgets and cron groups back from the
// store and returns when the engine serves; the stored jobs load in the
// background (Loaded), and requests that need them wait.
func Start(cfg Config) (*Engine, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 60 * time.Second
	}
	if cfg.Tracer == nil {
		cfg.Tracer = NewTracer()
	}
	log := cfg.Logger
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		// protoactor logs every spawn and stop at info; keep only its warnings.
		return slog.New(minLevel{log.Handler(), slog.LevelWarn}).With("component", "protoactor")
	}))
	narrowRegistry(system)
	// budgets' wake timers are exact (exact_timers.go) unless timers are injected
	wakeTimers := cfg.Timers
	var exact *ExactTimers
	if cfg.Timers == nil {
		cfg.Timers = NewActorTimers(system.Root)
		exact = NewExactTimers(system.Root, log.With("component", "budget"))
		wakeTimers = exact
	}
	qa := &queueActor{
		cfg:          cfg.Engine.WithDefaults(),
		store:        cfg.Store,
		clock:        cfg.Clock,
		timers:       cfg.Timers,
		wakeTimers:   wakeTimers,
		log:          log.With("component", "queue"),
		budgetLogger: log.With("component", "budget"),
		tracer:       cfg.Tracer,
		consumed:     newConsumedSet(),
		root:         system.Root,
		cronStats:    &CronStats{},
		folds:        newFolder(),
		gate:         newLoadGate(),
	}
	pool := newWorkerPool(budgetThroughput)
	qa.budgetDispatch = []actor.PropsOption{actor.WithDispatcher(pool)}
	props := actor.PropsFromProducer(func() actor.Actor { return qa },
		actor.WithSupervisor(actor.NewOneForOneStrategy(3, time.Minute, actor.DefaultDecider)))
	pid, err := system.Root.SpawnNamed(props, "queue")
	if err != nil {
		system.Shutdown()
		pool.Stop()
		return nil, fmt.Errorf("actors.Start: spawn queue: %w", err)
	}
	e := &Engine{system: system, queue: pid, store: cfg.Store, clock: cfg.Clock, timeout: cfg.RequestTimeout, tracer: cfg.Tracer, cronStats: qa.cronStats,
		folds: qa.folds, exact: exact, gate: qa.gate, budgetPool: pool}
	// budgets and cron groups are read as the actor starts: not a
	// request, so RequestTimeout does not bound it (startTimeout does)
	res, err := e.system.Root.RequestFuture(e.queue, &startedRequest{}, startTimeout).Result()
	if err == nil {
		if rerr, ok := res.(error); ok {
			err = rerr
		}
	}
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("actors.Start: load: %w", err)
	}
	return e, nil
}

// Loaded is closed once every stored job is loaded and what their recovery
// changed is durable, or the load failed (LoadErr).
func (e *Engine) Loaded() <-chan struct{} { return e.gate.done }

// Failed is closed when the engine cannot serve because its stored jobs
// could not be loaded, at start or when its queue actor reloaded them
// after a restart; LoadErr says why. The server then stops.
func (e *Engine) Failed() <-chan struct{} { return e.gate.failed }

// LoadErr is why the load of the stored jobs failed, once Failed is closed
// (nil otherwise).
func (e *Engine) LoadErr() error {
	select {
	case <-e.gate.failed:
		return e.gate.failErr
	default:
		return nil
	}
}

// StopLoading ends a load still running because the server stops: the
// requests waiting for it are answered that the server shuts down. Stop
// does it too; a server calls it first, so that those requests end before
// it waits for its connections to close.
func (e *Engine) StopLoading() { e.gate.halt() }

// Stats waits for the stored jobs to load and returns what recovery found.
func (e *Engine) Stats() StartupStats {
	<-e.gate.done
	return e.gate.stats
}

// whenLoaded waits for the stored jobs to load, for requests that need a
// complete index: unique keys, queries and counts, budget guards (SPEC
// §3.9). Plain enqueues, acks, failures and streams do not wait.
func (e *Engine) whenLoaded(ctx context.Context) error {
	return e.gate.wait(ctx)
}

// Tracer returns the engine's tracer.
func (e *Engine) Tracer() *Tracer { return e.tracer }

// Stop stops every actor. It is safe to call more than once.
func (e *Engine) Stop() {
	e.stopOnce.Do(func() {
		e.gate.halt() // the scanner reads the store, which closes after this
		_ = e.system.Root.StopFuture(e.queue).Wait()
		e.system.Shutdown()
		e.budgetPool.Stop()
		if e.exact != nil {
			e.exact.Stop()
		}
	})
}

// call sends msg to the queue actor and waits for the answer; an answer
// that is an error is returned as the error.
func (e *Engine) call(ctx context.Context, msg queueMsg) (any, error) {
	timeout := e.timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	res, err := e.system.Root.RequestFuture(e.queue, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("actors: %T: %w", msg, err)
	}
	if rerr, ok := res.(error); ok {
		return nil, rerr
	}
	return res, nil
}

func (e *Engine) now() uint64 { return millis(e.clock.Now()) }

// Enqueue adds validated jobs atomically; bulk prefixes errors with the
// job's index. While the disk is nearly full it refuses with the store's
// 503 (persistence.Store.Admit), as budget writes do. Every enqueue from
// outside the queue actor comes through here, so batched jobs fold (SPEC
// §8.2, fold.go).
func (e *Engine) Enqueue(ctx context.Context, jobs []*protocol.NewJob, bulk bool) ([]*protocol.JobView, error) {
	if err := e.store.Admit(); err != nil {
		return nil, err
	}
	for _, nj := range jobs {
		// a unique key is checked against every stored job, and a batch
		// against its pending job
		if nj.Job.UniqueKey != "" || nj.Job.Batch != nil {
			if err := e.whenLoaded(ctx); err != nil {
				return nil, err
			}
			break
		}
	}
	for _, nj := range jobs {
		if nj.Job.Batch != nil {
			return e.folds.enqueue(ctx, e, jobs, bulk)
		}
	}
	res, err := e.call(ctx, &EnqueueJobs{Jobs: jobs, Bulk: bulk})
	if err != nil {
		return nil, err
	}
	return res.(*EnqueueJobsResponse).Jobs, nil
}

// Ack reports success for the given in-flight jobs and returns the IDs that
// were not in flight.
func (e *Engine) Ack(ctx context.Context, ids []string) ([]string, error) {
	res, err := e.call(ctx, &AckJobs{IDs: ids})
	if err != nil {
		return nil, err
	}
	return res.(*AckJobsResponse).NotFound, nil
}

// Fail reports a failure of an in-flight job.
func (e *Engine) Fail(ctx context.Context, id string, req *protocol.FailureRequest) (*protocol.JobView, error) {
	res, err := e.call(ctx, &FailJob{ID: id, Req: req})
	if err != nil {
		return nil, err
	}
	return res.(*JobResponse).Job, nil
}

// LoadPayloads reads from the store the payloads a delivered batch lacks
// (see EngineConfig.PayloadCacheBytes), in place. A job deleted since it
// was dispatched is left out of the result.
func (e *Engine) LoadPayloads(jobs []protocol.Job) ([]protocol.Job, error) {
	for i := range jobs {
		if jobs[i].Payload == nil {
			return e.store.LoadPayloads(jobs)
		}
	}
	return jobs, nil
}

// GetJob reads a job from the store (with payload).
func (e *Engine) GetJob(ctx context.Context, id string) (*protocol.JobView, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	j, err := e.store.GetJob(id)
	if err != nil {
		return nil, err
	}
	now := e.now()
	if j.Purged(now) {
		return nil, protocol.ErrJobNotFound
	}
	v := j.View(now, true)
	e.addWaiting(ctx, j, v)
	return v, nil
}

// DeleteJob deletes a job in any status.
func (e *Engine) DeleteJob(ctx context.Context, id string) error {
	if err := e.whenLoaded(ctx); err != nil {
		return err
	}
	_, err := e.call(ctx, &DeleteJob{ID: id})
	return err
}

// Reset deletes every job and budget.
func (e *Engine) Reset(ctx context.Context) error {
	if err := e.whenLoaded(ctx); err != nil {
		return err
	}
	_, err := e.call(ctx, &ResetAll{})
	return err
}

// Queues lists the distinct queue names of stored jobs.
func (e *Engine) Queues(ctx context.Context) ([]string, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &ListQueues{})
	if err != nil {
		return nil, err
	}
	return res.(*QueuesResponse).Queues, nil
}

// OpenStream registers a take stream; see OpenStream's fields.
func (e *Engine) OpenStream(ctx context.Context, m *OpenStream) (uint64, error) {
	res, err := e.call(ctx, m)
	if err != nil {
		return 0, err
	}
	return res.(*OpenStreamResponse).StreamID, nil
}

// StreamWritten tells the queue a stream finished writing its last batch.
func (e *Engine) StreamWritten(id uint64) {
	e.system.Root.Send(e.queue, &StreamWritten{StreamID: id})
}

// CloseStream ends a stream and waits until its in-flight jobs are durably
// back to ready; it returns how many jobs went back.
func (e *Engine) CloseStream(ctx context.Context, id uint64) (int, error) {
	res, err := e.call(ctx, &CloseStream{StreamID: id})
	if err != nil {
		return 0, err
	}
	r, _ := res.(*CloseStreamResponse)
	if r == nil {
		return 0, nil
	}
	return r.Requeued, nil
}

// Budgets lists every budget by key.
func (e *Engine) Budgets(ctx context.Context) ([]protocol.Budget, error) {
	res, err := e.call(ctx, &ListBudgets{})
	if err != nil {
		return nil, err
	}
	return res.(*BudgetsResponse).Budgets, nil
}

// GetBudget returns one budget.
func (e *Engine) GetBudget(ctx context.Context, key string) (*protocol.Budget, error) {
	res, err := e.call(ctx, &GetBudget{Key: key})
	if err != nil {
		return nil, err
	}
	b := res.(*BudgetResponse).Budget
	return &b, nil
}

// CreateBudget creates a budget (replace: or replaces it) and reports
// whether it was created.
func (e *Engine) CreateBudget(ctx context.Context, key string, def protocol.Definition, replace bool) (*protocol.Budget, bool, error) {
	if err := e.store.Admit(); err != nil {
		return nil, false, err
	}
	if replace { // a shrink is checked against the jobs bound to it
		if err := e.whenLoaded(ctx); err != nil {
			return nil, false, err
		}
	}
	res, err := e.call(ctx, &CreateBudget{Key: key, Definition: def, Replace: replace})
	if err != nil {
		return nil, false, err
	}
	r := res.(*BudgetResponse)
	return &r.Budget, r.Created, nil
}

// PatchBudget merges a patch onto a budget.
func (e *Engine) PatchBudget(ctx context.Context, key string, p *protocol.BudgetPatch) (*protocol.Budget, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	if err := e.store.Admit(); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &PatchBudget{Key: key, Patch: p})
	if err != nil {
		return nil, err
	}
	b := res.(*BudgetResponse).Budget
	return &b, nil
}

// DeleteBudget deletes a budget.
func (e *Engine) DeleteBudget(ctx context.Context, key string) error {
	if err := e.whenLoaded(ctx); err != nil {
		return err
	}
	_, err := e.call(ctx, &DeleteBudget{Key: key})
	return err
}

// BudgetState returns the live state of a budget's pool.
func (e *Engine) BudgetState(ctx context.Context, key string) (*BudgetState, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	res, err := e.call(ctx, &budgetStateQuery{Key: key})
	if err != nil {
		return nil, err
	}
	s, ok := res.(*BudgetState)
	if !ok {
		return nil, errors.New("actors: unexpected budget state answer")
	}
	return s, nil
}

// minLevel drops records below a level before they reach the handler.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}
