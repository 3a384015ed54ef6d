// Batched enqueues, the facade's side (SPEC §8.2): the checks of every
// batched enqueue, the evaluation of when and fold programs on a small
// bounded pool of workers, the serialisation of enqueues per batch key and
// the cache of pending payloads kept decoded. The queue actor never waits
// on jq: it gets a plan with the merged payloads and applies it only if
// the pending jobs it assumed are still pending (batch_core.go).

package actors

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// foldCacheBytes bounds the pending payloads the facade keeps decoded.
const foldCacheBytes = 64 << 20

// foldAttempts bounds how often one enqueue plans again because a pending
// job it assumed sealed meanwhile (each retry starts from the fresh state).
const foldAttempts = 32

// folder coordinates batched enqueues outside the queue actor.
type folder struct {
	// workers bounds the enqueues evaluating jq programs at once: a slot
	// is held while a request's programs run, never while it waits on
	// the queue actor.
	workers chan struct{}
	busy    atomic.Int64 // slots in use (the metrics gauge)

	mu    sync.Mutex
	locks map[string]*keyLock
	cache pendingCache
}

func newFolder() *folder {
	return &folder{
		workers: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		locks:   make(map[string]*keyLock),
		cache:   pendingCache{max: foldCacheBytes, m: make(map[string]*simPending)},
	}
}

// keyLock serialises the enqueues of one batch key.
type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lockKeys locks the given keys (sorted, so that requests naming several
// keys cannot deadlock) and returns the function that unlocks them.
func (f *folder) lockKeys(keys []string) func() {
	held := make([]*keyLock, len(keys))
	f.mu.Lock()
	for i, k := range keys {
		l := f.locks[k]
		if l == nil {
			l = &keyLock{}
			f.locks[k] = l
		}
		l.refs++
		held[i] = l
	}
	f.mu.Unlock()
	for _, l := range held {
		l.mu.Lock()
	}
	return func() {
		for _, l := range held {
			l.mu.Unlock()
		}
		f.mu.Lock()
		for i, k := range keys {
			if held[i].refs--; held[i].refs == 0 {
				delete(f.locks, k)
			}
		}
		f.mu.Unlock()
	}
}

// work runs fn on a worker slot.
func (f *folder) work(ctx context.Context, fn func() error) error {
	select {
	case f.workers <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("actors: waiting for a fold worker: %w", ctx.Err())
	}
	f.busy.Add(1)
	defer func() {
		f.busy.Add(-1)
		<-f.workers
	}()
	return fn()
}

// FoldWorkersBusy returns how many fold workers are evaluating batch
// programs now.
func (e *Engine) FoldWorkersBusy() int { return int(e.folds.busy.Load()) }

// simPending is a key's pending job as a plan sees it.
type simPending struct {
	id    string // the job's id; "" for one started in this request
	index int    // the request item that started it, -1 if it existed before
	batch protocol.Batch
	value any    // its payload, decoded
	js    []byte // its payload as canonical JSON once a fold changed it
	size  int    // bytes of its payload (cache accounting)
}

// pendingCache keeps pending payloads decoded, bounded by their size.
type pendingCache struct {
	mu    sync.Mutex
	max   int
	total int
	m     map[string]*simPending
}

func (c *pendingCache) get(key string) (simPending, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.m[key]
	if p == nil {
		return simPending{}, false
	}
	return *p, true
}

func (c *pendingCache) put(key string, p simPending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(key)
	if p.size > c.max/4 {
		return
	}
	for k := range c.m {
		if c.total+p.size <= c.max {
			break
		}
		c.dropLocked(k)
	}
	c.m[key] = &p
	c.total += p.size
}

func (c *pendingCache) drop(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.dropLocked(k)
	}
}

func (c *pendingCache) dropLocked(key string) {
	if p := c.m[key]; p != nil {
		c.total -= p.size
		delete(c.m, key)
	}
}

// checkBatches runs SPEC §8.2.2's checks on every batched job and returns
// the payloads decoded (by request index; nil for unbatched jobs).
func (f *folder) checkBatches(ctx context.Context, jobs []*protocol.NewJob, bulk bool) ([]any, error) {
	values := make([]any, len(jobs))
	err := f.work(ctx, func() error {
		for i, nj := range jobs {
			if nj.Job.Batch == nil {
				continue
			}
			v, err := protocol.CheckBatch(nj.Job.Batch, nj.Job.Payload)
			if err != nil {
				return prefixBulk(err, bulk, i)
			}
			values[i] = v
		}
		return nil
	})
	return values, err
}

func prefixBulk(err error, bulk bool, i int) error {
	if bulk {
		return protocol.Prefixed(fmt.Sprintf("jobs[%d]: ", i), err)
	}
	return err
}

// enqueue is Engine.Enqueue for a request with batched jobs.
func (f *folder) enqueue(ctx context.Context, e *Engine, jobs []*protocol.NewJob, bulk bool) ([]*protocol.JobView, error) {
	values, err := f.checkBatches(ctx, jobs, bulk)
	if err != nil {
		return nil, err
	}
	send := func(ctx context.Context, m *EnqueueJobs) (any, error) { return e.call(ctx, m) }
	return f.plan(ctx, send, e.store, jobs, values, bulk, e.now())
}

// plan plans a checked batched enqueue at now and sends it with send until
// the queue actor applies it (planning again while it answers foldStale).
// The facade sends the plain request; a cron firing sends it with its
// entry's times (cron_fold.go).
func (f *folder) plan(ctx context.Context, send func(context.Context, *EnqueueJobs) (any, error), store persistence.JobStore,
	jobs []*protocol.NewJob, values []any, bulk bool, now uint64) ([]*protocol.JobView, error) {
	keys := planBatchKeys(jobs, now)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	unlock := f.lockKeys(keys)
	defer unlock()
	state := make(map[string]simPending, len(keys))
	for _, k := range keys {
		if p, ok := f.cache.get(k); ok {
			state[k] = p
		}
	}
	for range foldAttempts {
		var plan *foldPlan
		var planned []*protocol.NewJob
		var final map[string]*simPending
		err := f.work(ctx, func() (err error) {
			plan, planned, final, err = makePlan(jobs, values, bulk, now, state)
			return err
		})
		if err != nil {
			return nil, err
		}
		res, err := send(ctx, &EnqueueJobs{Jobs: planned, Bulk: bulk, Plan: plan})
		if err != nil {
			f.cache.drop(keys)
			return nil, err
		}
		switch r := res.(type) {
		case *EnqueueJobsResponse:
			f.remember(final, r.Jobs)
			return r.Jobs, nil
		case *foldStale:
			if state, err = fromStale(store, r, keys); err != nil {
				f.cache.drop(keys)
				return nil, err
			}
		default:
			return nil, fmt.Errorf("actors: enqueue: unexpected answer %T", res)
		}
	}
	f.cache.drop(keys)
	return nil, fmt.Errorf("actors: enqueue: the pending jobs of %v kept changing; gave up after %d plans", keys, foldAttempts)
}

// remember caches each key's pending job after an applied plan.
func (f *folder) remember(final map[string]*simPending, views []*protocol.JobView) {
	for key, p := range final {
		if p.index >= 0 {
			p.id = views[p.index].ID
			p.index = -1
		}
		if p.js != nil {
			p.size = len(p.js)
		}
		p.js = nil
		f.cache.put(key, *p)
	}
}

// fromStale turns the queue actor's account of the pending jobs into plan
// state, reading payloads stored apart from the store.
func fromStale(store persistence.JobStore, r *foldStale, keys []string) (map[string]simPending, error) {
	state := make(map[string]simPending, len(keys))
	for _, k := range keys {
		pj, ok := r.Pending[k]
		if !ok {
			continue
		}
		payload := pj.Payload
		if payload == nil {
			got, err := store.LoadPayloads([]protocol.Job{{ID: pj.ID}})
			if err != nil {
				return nil, fmt.Errorf("actors: enqueue: read the payload of pending job %s: %w", pj.ID, err)
			}
			if len(got) == 0 {
				return nil, fmt.Errorf("actors: enqueue: pending job %s has no stored payload", pj.ID)
			}
			payload = got[0].Payload
		}
		v, err := protocol.DecodeBatchValue(payload)
		if err != nil {
			return nil, fmt.Errorf("actors: enqueue: pending job %s: %w", pj.ID, err)
		}
		state[k] = simPending{id: pj.ID, index: -1, batch: pj.Batch, value: v, size: len(payload)}
	}
	return state, nil
}

// makePlan decides, in request order, what each job does given the
// pending jobs in state (SPEC §8.2.3, §8.2.6): join a pending job when its
// stored when admits the payload (the fold then runs), else start a new
// batch. It returns the plan, the jobs to send (a job that started a batch
// and took folds in this request carries the merged payload) and each
// key's pending job at the end.
func makePlan(jobs []*protocol.NewJob, values []any, bulk bool, now uint64, state map[string]simPending) (*foldPlan, []*protocol.NewJob, map[string]*simPending, error) {
	plan := &foldPlan{Expect: make(map[string]string), Items: make([]foldAction, len(jobs))}
	cur := make(map[string]*simPending, len(state))
	for _, nj := range jobs {
		if !joinsBatch(nj, now) {
			continue
		}
		key := nj.Job.Batch.Key
		if _, seen := plan.Expect[key]; seen {
			continue
		}
		plan.Expect[key] = ""
		if p, ok := state[key]; ok {
			plan.Expect[key] = p.id
			cur[key] = &p
		}
	}
	finals := make(map[int][]byte)
	settle := func(p *simPending) {
		if p.js == nil {
			return
		}
		if p.index >= 0 {
			finals[p.index] = p.js
			return
		}
		if plan.Payloads == nil {
			plan.Payloads = make(map[string][]byte)
		}
		plan.Payloads[p.id] = p.js
	}
	for i, nj := range jobs {
		plan.Items[i].IntoIndex = -1
		if !joinsBatch(nj, now) {
			continue
		}
		key := nj.Job.Batch.Key
		newv := values[i]
		if p := cur[key]; p != nil && protocol.BatchJoins(&p.batch, p.value, newv) {
			v, js, err := protocol.FoldBatch(&p.batch, p.value, newv, p.size+len(nj.Job.Payload))
			if err != nil {
				return nil, nil, nil, prefixBulk(err, bulk, i)
			}
			p.value, p.js, p.size = v, js, len(js)
			plan.Items[i] = foldAction{Kind: foldInto, Into: p.id, IntoIndex: p.index}
			continue
		}
		if p := cur[key]; p != nil {
			settle(p)
		}
		plan.Items[i].Kind = foldStart
		cur[key] = &simPending{index: i, batch: *nj.Job.Batch, value: newv, size: len(nj.Job.Payload)}
	}
	for _, p := range cur {
		settle(p)
	}
	planned := jobs
	if len(finals) > 0 {
		planned = slices.Clone(jobs)
		for i, js := range finals {
			c := *jobs[i]
			c.Job.Payload = js
			planned[i] = &c
		}
	}
	return plan, planned, cur, nil
}
