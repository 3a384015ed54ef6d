// Per-queue job counts by state, for /metrics: kept as jobs come, change
// state and go (O(1) each), where a scrape used to walk every unfinished
// job in the queue actor (~300 ms at a million queued jobs, during which
// the queue actor served nothing else).

package actors

// queueStates counts a queue's jobs: its unfinished jobs, and of those the
// ones in flight, scheduled and parked (the rest are ready or reserving,
// which read as ready); and its retained finished jobs.
type queueStates struct {
	unfinished, inFlight, scheduled, parked int
	completed, dead                         int
}

// stateClass is the count a job's state falls in besides unfinished.
type stateClass uint8

const (
	classReady stateClass = iota // ready and reserving
	classInFlight
	classScheduled
	classParked
)

func classOf(st jobState) stateClass {
	switch st {
	case stInFlight:
		return classInFlight
	case stScheduled:
		return classScheduled
	case stParked:
		return classParked
	}
	return classReady
}

// add adds d jobs of class c.
func (c *queueStates) add(class stateClass, d int) {
	switch class {
	case classInFlight:
		c.inFlight += d
	case classScheduled:
		c.scheduled += d
	case classParked:
		c.parked += d
	}
}

// statesOf returns queue's counts, made on first use. The last queue asked
// for is remembered: most jobs that move at a time share their queue, and
// its (interned) name compares faster than the map looks it up.
func (e *queueCore) statesOf(queue string) *queueStates {
	if last := &e.lastStates; last.c != nil && last.queue == queue {
		return last.c
	}
	c := e.queueStates[queue]
	if c == nil {
		c = &queueStates{}
		e.queueStates[queue] = c
	}
	e.lastStates.queue, e.lastStates.c = queue, c
	return c
}

// dropEmptyStates forgets queue's counts once it holds no job.
func (e *queueCore) dropEmptyStates(queue string, c *queueStates) {
	if c.unfinished == 0 && c.completed == 0 && c.dead == 0 {
		delete(e.queueStates, queue)
		if e.lastStates.c == c {
			e.lastStates = lastQueueStates{}
		}
	}
}

// lastQueueStates is the queue statesOf was last asked for, and its counts.
type lastQueueStates struct {
	queue string
	c     *queueStates
}

// countEntry adds en (d = 1) to its queue's counts, in its current state,
// or takes it out (d = -1); the entry's entryCounted flag says which it is
// in.
func (e *queueCore) countEntry(en *entry, d int) {
	if (d > 0) == en.flags.has(entryCounted) {
		return
	}
	en.flags ^= entryCounted
	q := en.queue()
	c := e.statesOf(q)
	c.unfinished += d
	c.add(classOf(en.state), d)
	e.dropEmptyStates(q, c)
}

// setState moves en to state st, keeping its queue's counts.
func (e *queueCore) setState(en *entry, st jobState) {
	from, to := classOf(en.state), classOf(st)
	en.state = st
	if from == to || !en.flags.has(entryCounted) {
		return
	}
	c := e.statesOf(en.queue())
	c.add(from, -1)
	c.add(to, 1)
}

// addEntry adds en as the entry of job id, counted in its queue.
func (e *queueCore) addEntry(id string, en *entry) {
	e.jobs.put(id, en)
	e.countEntry(en, 1)
	e.collect.release.moved++
}

// removeEntry removes en, the entry of job id, and its count.
func (e *queueCore) removeEntry(id string, en *entry) {
	e.countEntry(en, -1)
	e.jobs.drop(id)
	e.collect.release.moved++
}

// countTerminalIn adds (d = 1) or removes (d = -1) a retained finished job
// from its queue's counts.
func (e *queueCore) countTerminalIn(t terminalJob, d int) {
	c := e.statesOf(t.queue)
	if t.dead {
		c.dead += d
	} else {
		c.completed += d
	}
	e.dropEmptyStates(t.queue, c)
}

// metricsOf returns queue's metrics in per, added if absent.
func metricsOf(per map[string]*QueueMetrics, queue string) *QueueMetrics {
	m := per[queue]
	if m == nil {
		m = &QueueMetrics{Queue: queue}
		per[queue] = m
	}
	return m
}

// queueMetrics is every queue's counts as a reader sees them at now: a
// scheduled job past its ready_at reads as ready until the scheduler
// promotes it, and a retained job past purge_at is gone though the reaper
// has not dropped it yet; both are the few at the front of their ordered
// sets.
func (e *queueCore) queueMetrics(now uint64) map[string]*QueueMetrics {
	per := make(map[string]*QueueMetrics, len(e.queueStates))
	for q, c := range e.queueStates {
		per[q] = &QueueMetrics{Queue: q, InFlight: c.inFlight, Scheduled: c.scheduled, Parked: c.parked,
			Ready: c.unfinished - c.inFlight - c.scheduled, Completed: c.completed, Dead: c.dead}
	}
	e.sched.Ascend(func(it schedItem) bool {
		if it.readyAt > now {
			return false
		}
		if en := e.jobs.get(it.id); en != nil && en.state == stScheduled {
			m := metricsOf(per, en.queue())
			m.Scheduled--
			m.Ready++
		}
		return true
	})
	e.purgeOrder.Ascend(func(t terminalJob) bool {
		if t.purgeAt > now {
			return false
		}
		if t.purgeAt == 0 {
			return true // kept for good
		}
		if m := metricsOf(per, t.queue); t.dead {
			m.Dead--
		} else {
			m.Completed--
		}
		return true
	})
	return per
}
