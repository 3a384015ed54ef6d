// Background load: the server serves while its jobs are read back from the
// store (SPEC §3.9). A scanner goroutine reads the stored jobs in ID order,
// from a snapshot taken before the queue actor serves anything, and hands
// them to the queue actor in chunks, one at a time; the queue actor adds
// each chunk between the requests it serves. Meanwhile a queue dispatches
// the jobs known to come before every job of their queue and budgets not
// loaded yet, without a unique key or batch (load_frontier.go), cron
// firings wait, and the facade holds back every request that needs a
// complete index (loadGate.wait).

package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tollgate/tollgate/persistence"
	"github.com/tollgate/tollgate/protocol"
)

// loadChunkJobs is how many stored jobs the scanner hands the queue actor
// at once: enough that the hand-over costs little, few enough that a
// request arriving meanwhile waits a few milliseconds, not the whole load.
const loadChunkJobs = 2048

// errEngineStopped ends a load the engine's stop interrupted.
var errEngineStopped = errors.New("the engine stopped")

// loadGate is shared by the facade, the queue actor and the scanner: it
// opens once every stored job is in memory and the writes of its recovery
// are durable, or reports why the load failed.
type loadGate struct {
	done  chan struct{} // closed when the load ends, either way
	once  sync.Once
	err   error        // why the load failed; set before done closes
	stats StartupStats // what it found; set before done closes
	// failed is closed when the engine cannot serve: its load failed, or
	// the reload after a restart of the queue actor did (failErr says why).
	failed   chan struct{}
	failOnce sync.Once
	failErr  error
	// stop is closed when the engine stops, so a scanner waiting for the
	// queue actor ends; scanning counts the running scanners, which the
	// engine waits for before its store may close. mu orders a scanner's
	// start against halt.
	mu       sync.Mutex
	stop     chan struct{}
	stopped  bool
	scanning sync.WaitGroup
}

func newLoadGate() *loadGate {
	return &loadGate{done: make(chan struct{}), failed: make(chan struct{}), stop: make(chan struct{})}
}

// finish opens the gate with the load's outcome; later calls change
// nothing.
func (g *loadGate) finish(stats StartupStats, err error) {
	g.once.Do(func() {
		g.stats, g.err = stats, err
		close(g.done)
	})
}

// fail reports that the engine cannot serve, and opens the gate with err
// if it was still closed.
func (g *loadGate) fail(stats StartupStats, err error) {
	g.failOnce.Do(func() {
		g.failErr = err
		close(g.failed)
	})
	g.finish(stats, err) // after failed, so a reader of done sees failErr
}

// wait returns once the load has ended (its error, if it failed) or ctx is
// done.
func (g *loadGate) wait(ctx context.Context) error {
	select {
	case <-g.done:
		return g.err
	default:
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the stored jobs to load: %w", ctx.Err())
	}
}

// startScan counts a scanner about to start, unless the engine stops.
func (g *loadGate) startScan() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.scanning.Add(1)
	return true
}

// halt ends the load for a stopping engine: requests that wait for it are
// answered that the server shuts down, the scanner (if one runs) ends, and
// halt returns once it has.
func (g *loadGate) halt() {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		close(g.stop)
	}
	g.mu.Unlock()
	g.finish(StartupStats{}, protocol.ErrShuttingDown)
	g.scanning.Wait()
}

// loadChunk is a run of stored jobs, in ID order, with where each is
// stored; the queue actor answers on ack once it has added them.
type loadChunk struct {
	gen  uint64 // the scan's number (queueActor.scanGen)
	jobs []*protocol.Job
	refs []persistence.Ref
	ack  chan struct{}
}

// loadScanned ends the scan: its error, or the batch links to restore.
type loadScanned struct {
	gen   uint64
	links map[string]string
	err   error
}

// loadCommitted reports the outcome of a commit of the load's writes.
type loadCommitted struct {
	gen  uint64 // the scan whose writes they were
	last bool   // the final commit: the load is complete once it is durable
	err  error
}

func (*loadChunk) isQueueMsg()     {}
func (*loadScanned) isQueueMsg()   {}
func (*loadCommitted) isQueueMsg() {}

// startJobScan starts the scanner; the queue actor is in loading mode
// until loadScanned arrives.
func (a *queueActor) startJobScan() {
	a.eng.loading = true
	a.loadStarted = time.Now()
	a.loadBatch = persistence.NewBatch(true)
	a.scanGen++
	// The snapshot holds every write submitted before (an actor restarted
	// after a panic may have left some with the store) and nothing the
	// actor does from now on: the scan never finds a job enqueued
	// meanwhile, nor an earlier state of one dispatched meanwhile.
	scan := a.store.NewJobScan()
	a.eng.frontier = newLoadFrontier(scan.Priorities())
	a.eng.frontier.scan = scan
	if !a.gate.startScan() {
		scan.Close()
		return // the engine stops: nothing to load for
	}
	a.scanCancel = make(chan struct{})
	go scanJobs(a.store, scan, a.root, a.self, a.gate, a.scanGen, a.scanCancel)
}

// cancelScan ends the running scanner, if any (the actor stops or
// restarts).
func (a *queueActor) cancelScan() {
	if a.scanCancel != nil {
		close(a.scanCancel)
		a.scanCancel = nil
	}
}

// scanJobs runs on its own goroutine: it reads every job of the scan's
// snapshot and sends them to the queue actor (self) in chunks, waiting for
// each to be taken before reading on, so memory holds at most one chunk in
// transit.
func scanJobs(store persistence.JobStore, scan persistence.JobScan, root *actor.RootContext, self *actor.PID, gate *loadGate, gen uint64, cancel <-chan struct{}) {
	defer gate.scanning.Done()
	ack := make(chan struct{}, 1)
	chunk := &loadChunk{gen: gen, ack: ack}
	send := func() error {
		root.Send(self, chunk)
		select {
		case <-ack:
		case <-cancel:
			return errEngineStopped
		case <-gate.stop:
			return errEngineStopped
		case <-gate.done: // the load failed meanwhile
			return errEngineStopped
		}
		chunk = &loadChunk{gen: gen, ack: ack, jobs: make([]*protocol.Job, 0, loadChunkJobs), refs: make([]persistence.Ref, 0, loadChunkJobs)}
		return nil
	}
	err := scan.Run(func(j *protocol.Job, ref persistence.Ref) error {
		chunk.jobs = append(chunk.jobs, j)
		chunk.refs = append(chunk.refs, ref)
		if len(chunk.jobs) == loadChunkJobs {
			return send()
		}
		return nil
	})
	if err == nil && len(chunk.jobs) > 0 {
		err = send()
	}
	if errors.Is(err, errEngineStopped) {
		return
	}
	var links map[string]string
	if err == nil {
		links, err = store.LoadBatchLinks()
	}
	root.Send(self, &loadScanned{gen: gen, links: links, err: err})
}

// reloadJobs loads the jobs within the Receive that restarts the actor
// after a panic: the server already serves a complete state, which must not
// be seen half loaded. Blocking here is deliberate and bounded (it reads
// the store once), as every start did before loads ran in the background.
func (a *queueActor) reloadJobs(now uint64) {
	a.eng.loading = true
	a.loadStarted = time.Now()
	a.loadBatch = persistence.NewBatch(true)
	a.scanGen++
	chunk := &loadChunk{gen: a.scanGen, ack: make(chan struct{}, 1)}
	add := func() {
		a.onLoadChunk(chunk, now)
		<-chunk.ack
		chunk.jobs, chunk.refs = chunk.jobs[:0], chunk.refs[:0]
	}
	// a snapshot after every write the actor made before its restart;
	// nothing is dispatched before the reload ends (the frontier knows
	// nothing), but its end prunes the stored pairs as any load's does
	scan := a.store.NewJobScan()
	a.eng.frontier = loadFrontier{scan: scan}
	err := scan.Run(func(j *protocol.Job, ref persistence.Ref) error {
		chunk.jobs = append(chunk.jobs, j)
		chunk.refs = append(chunk.refs, ref)
		if len(chunk.jobs) == loadChunkJobs {
			add()
		}
		return nil
	})
	var links map[string]string
	if err == nil {
		add()
		links, err = a.store.LoadBatchLinks()
	}
	a.onLoadScanned(&loadScanned{gen: a.scanGen, links: links, err: err}, now)
}

// onLoadChunk adds a chunk of stored jobs. Their recovery writes (jobs
// that were in flight, payloads let go) are committed in chunks cut between
// jobs, so each job's writes stay in one transaction and none grows past
// what badger takes in one.
func (a *queueActor) onLoadChunk(m *loadChunk, now uint64) {
	for i, j := range m.jobs {
		if a.eng.loadJob(now, j, m.refs[i], a.loadBatch) {
			a.stats.Recovered++
		}
		if k, ok := protocol.ParseIDKey(j.ID); ok && a.eng.frontier.loaded(k) {
			a.log.Warn("stored jobs read out of ID order; no queue dispatches until the load ends", "job_id", j.ID)
		}
		if a.loadBatch.Size() >= loadChunkBytes || a.loadBatch.Len() >= loadChunkWrites {
			a.commitLoad(false)
		}
	}
	m.ack <- struct{}{} // buffered: the scanner waits for exactly this one
	// What loading the chunk wrote (jobs that were in flight are ready
	// again) is submitted before any of its jobs can be dispatched, so the
	// dispatch's write, submitted later, is stored after it.
	if !a.loadBatch.Empty() {
		a.commitLoad(false)
	}
	a.eng.pump(now)
}

// commitLoad commits the load's writes so far; a refusal fails the load.
func (a *queueActor) commitLoad(last bool) {
	batch := a.loadBatch
	a.loadBatch = persistence.NewBatch(true)
	root, self, gen := a.root, a.self, a.scanGen
	a.persist(batch, func(err error) {
		if err != nil || last {
			root.Send(self, &loadCommitted{gen: gen, last: last, err: err})
		}
	})
}

// onLoadScanned completes the indexes once every job is in: unique keys,
// idle budgets and batch links; then dispatch and cron firings start, and
// the gate opens when the last writes are durable.
func (a *queueActor) onLoadScanned(m *loadScanned, now uint64) {
	if m.err != nil {
		a.failLoad(fmt.Errorf("load jobs: %w", m.err))
		return
	}
	a.eng.finishLoad()
	a.eng.loading = false
	a.eng.considerLoaded(now)
	a.eng.loadBatchLinks(m.links, a.loadBatch)
	inUse := make(map[persistence.PriorityPair]struct{})
	var last persistence.PriorityPair
	var lastBindings []protocol.Binding
	var lastPrio uint16
	for en := range a.eng.jobs.all() {
		if en.state == stScheduled {
			a.stats.Scheduled++
		} else { // ready, or parked, reserving or dispatched since
			a.stats.Ready++
		}
		prio := en.priority()
		if p := persistence.QueuePair(en.queue(), prio); p != last || len(inUse) == 0 {
			inUse[p], last = struct{}{}, p
		}
		// jobs bound alike mostly share their list (queued_compact.go)
		if bs := en.budgets(); len(bs) > 0 && (prio != lastPrio || !sameList(bs, lastBindings)) {
			for _, b := range bs {
				inUse[persistence.BudgetPair(b.Key, prio)] = struct{}{}
			}
			lastPrio, lastBindings = prio, bs
		}
	}
	a.stats.Retained = len(a.eng.terminal)
	a.stats.Budgets = len(a.eng.budgets)
	a.armReaper()
	a.commitLoad(true)
	// every job of an earlier batch is in memory, as long as its commit
	// has not been refused: the store keeps the pairs of these only
	if prune := a.eng.frontier.prune(inUse); prune != nil {
		log := a.log
		a.persist(prune, func(err error) {
			if err != nil {
				log.Warn("the queue priorities in use could not be stored; the next start may wait longer before it dispatches", "err", err)
			}
		})
	}
	if slots := a.lateCron; len(slots) > 0 {
		a.lateCron = nil
		a.eng.onCronDue(now, slots)
	}
	a.eng.pump(now)
	// what the load decoded and let go (records, the scan's buffers) is
	// garbage now, as much as the headroom the GC allows: return it, so
	// that a backlog's resident set is what memory keeps of its jobs (a
	// full collection: not worth it for a short queue)
	if a.eng.jobs.len()+len(a.eng.terminal) >= a.eng.cfg.CompactFrom {
		a.releaseMemory(false)
		a.eng.collect.release.loaded()
	}
}

// onLoadCommitted opens the gate after the final commit, or fails the load
// on a refused one.
func (a *queueActor) onLoadCommitted(m *loadCommitted) {
	if m.err != nil {
		a.failLoad(fmt.Errorf("load jobs: commit what recovery changed: %w", m.err))
		return
	}
	if m.last {
		a.log.Info("stored jobs loaded", "duration_ms", time.Since(a.loadStarted).Milliseconds(),
			"recovered_in_flight", a.stats.Recovered, "ready", a.stats.Ready, "scheduled", a.stats.Scheduled,
			"retained", a.stats.Retained, "budgets", a.stats.Budgets)
		if a.stats.Recovered > 0 {
			a.log.Info("recovery: jobs that were in flight when the server stopped are ready again",
				"jobs", a.stats.Recovered)
		}
		a.gate.finish(a.stats, nil)
	}
}

// failLoad ends the load with err: every request that waits for it gets
// the error, and the server stops (cmd/tollgate watches Engine.Failed),
// also when the load was a reload after a restart of the actor.
func (a *queueActor) failLoad(err error) {
	a.log.Error("the stored jobs could not be loaded", "err", err)
	a.gate.fail(a.stats, err)
}

// sameList reports whether a and b are the same slice (not merely equal).
func sameList(a, b []protocol.Binding) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}
