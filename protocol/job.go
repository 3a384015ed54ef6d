package protocol

// Status is a job's lifecycle state (SPEC §2.5).
type Status string

// The job statuses.
const (
	StatusScheduled Status = "scheduled"
	StatusReady     Status = "ready"
	StatusInFlight  Status = "in_flight"
	StatusCompleted Status = "completed"
	StatusDead      Status = "dead"
)

// ParseStatus returns the status named s, or false for an unknown name.
func ParseStatus(s string) (Status, bool) {
	switch st := Status(s); st {
	case StatusScheduled, StatusReady, StatusInFlight, StatusCompleted, StatusDead:
		return st, true
	}
	return "", false
}

// Terminal reports whether the status is completed or dead.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusDead }

// DefaultPriority is the priority of a job that sets none.
const DefaultPriority = 32768

// Backoff overrides the server's retry backoff for one job.
type Backoff struct {
	Exponent float64 `json:"exponent" msgpack:"exponent"`
	BaseMs   uint32  `json:"base_ms" msgpack:"base_ms"`
	JitterMs uint32  `json:"jitter_ms" msgpack:"jitter_ms"`
}

// Retention overrides how long a finished job stays visible.
type Retention struct {
	CompletedMs *uint64 `json:"completed_ms,omitempty" msgpack:"completed_ms,omitempty"`
	DeadMs      *uint64 `json:"dead_ms,omitempty" msgpack:"dead_ms,omitempty"`
}

// Batch is a batched job's configuration (SPEC §8.2): successive ready
// enqueues with the same Key fold into one pending job with the programs
// of the job that started the batch.
type Batch struct {
	Key  string `json:"key" msgpack:"key"`
	When string `json:"when" msgpack:"when"`
	Fold string `json:"fold" msgpack:"fold"`
}

// Binding ties a job to a budget with a cost (SPEC §4.5).
type Binding struct {
	Cost uint32 `json:"cost" msgpack:"cost"`
	Key  string `json:"key" msgpack:"key"`
}

// Job is the stored record of a job. Payload is canonical JSON.
type Job struct {
	ID       string `msgpack:"id"`
	Type     string `msgpack:"type"`
	Queue    string `msgpack:"queue"`
	Priority uint16 `msgpack:"priority"`
	// InGroup reports that the job belongs to a stored job group
	// (persistence), which holds its payload; it is not part of the
	// record (and sits in Priority's padding).
	InGroup bool `msgpack:"-"`
	// Attempts sits here, not after ReadyAt, so that it fills the padding
	// after Priority: the struct is then 224 bytes, a smaller allocation
	// class than 232 (a queued job's largest part in memory).
	Attempts    uint32     `msgpack:"attempts"`
	Status      Status     `msgpack:"status"`
	Payload     []byte     `msgpack:"payload,omitempty"` // nil when only the store holds it
	ReadyAt     uint64     `msgpack:"ready_at"`
	RetryLimit  *uint32    `msgpack:"retry_limit,omitempty"`
	Backoff     *Backoff   `msgpack:"backoff,omitempty"`
	Retention   *Retention `msgpack:"retention,omitempty"`
	DequeuedAt  uint64     `msgpack:"dequeued_at,omitempty"`
	FailedAt    uint64     `msgpack:"failed_at,omitempty"`
	CompletedAt uint64     `msgpack:"completed_at,omitempty"`
	PurgeAt     uint64     `msgpack:"purge_at,omitempty"`
	UniqueKey   string     `msgpack:"unique_key,omitempty"`
	UniqueWhile string     `msgpack:"unique_while,omitempty"`
	Batch       *Batch     `msgpack:"batch,omitempty"`
	Budgets     []Binding  `msgpack:"budgets,omitempty"`
	// TimeoutMs fails the job when it stays in flight longer (SPEC §10.5);
	// nil: the server default.
	TimeoutMs *uint32 `msgpack:"timeout_ms,omitempty"`
}

// VisibleStatus is the status a reader sees at time now: a scheduled job
// whose ready_at has passed reads as ready even before the scheduler runs.
func (j *Job) VisibleStatus(now uint64) Status {
	if j.Status == StatusScheduled && j.ReadyAt <= now {
		return StatusReady
	}
	return j.Status
}

// Purged reports whether a finished job is past its purge_at and therefore
// invisible.
func (j *Job) Purged(now uint64) bool {
	return j.Status.Terminal() && j.PurgeAt != 0 && j.PurgeAt <= now
}

// JobView is the job object of SPEC §2.6 as responses carry it. Fields are in
// alphabetical order, as the seed's examples print them.
type JobView struct {
	Attempts    uint32     `json:"attempts" msgpack:"attempts"`
	Backoff     *Backoff   `json:"backoff,omitempty" msgpack:"backoff,omitempty"`
	Batch       *Batch     `json:"batch,omitempty" msgpack:"batch,omitempty"`
	Budgets     []Binding  `json:"budgets,omitempty" msgpack:"budgets,omitempty"`
	CompletedAt uint64     `json:"completed_at,omitempty" msgpack:"completed_at,omitempty"`
	DequeuedAt  uint64     `json:"dequeued_at,omitempty" msgpack:"dequeued_at,omitempty"`
	Duplicate   *bool      `json:"duplicate,omitempty" msgpack:"duplicate,omitempty"`
	FailedAt    uint64     `json:"failed_at,omitempty" msgpack:"failed_at,omitempty"`
	Folded      *bool      `json:"folded,omitempty" msgpack:"folded,omitempty"`
	ID          string     `json:"id" msgpack:"id"`
	Payload     *Payload   `json:"payload,omitempty" msgpack:"payload,omitempty"`
	Priority    uint16     `json:"priority" msgpack:"priority"`
	PurgeAt     uint64     `json:"purge_at,omitempty" msgpack:"purge_at,omitempty"`
	Queue       string     `json:"queue" msgpack:"queue"`
	ReadyAt     uint64     `json:"ready_at" msgpack:"ready_at"`
	Retention   *Retention `json:"retention,omitempty" msgpack:"retention,omitempty"`
	RetryLimit  *uint32    `json:"retry_limit,omitempty" msgpack:"retry_limit,omitempty"`
	Status      Status     `json:"status" msgpack:"status"`
	TimeoutMs   *uint32    `json:"timeout_ms,omitempty" msgpack:"timeout_ms,omitempty"`
	Type        string     `json:"type" msgpack:"type"`
	UniqueKey   string     `json:"unique_key,omitempty" msgpack:"unique_key,omitempty"`
	UniqueWhile string     `json:"unique_while,omitempty" msgpack:"unique_while,omitempty"`
	Waiting     *Waiting   `json:"waiting,omitempty" msgpack:"waiting,omitempty"`
}

// View builds the response object for the job as seen at now. withPayload
// selects the "with payload" variant of SPEC §2.6.
func (j *Job) View(now uint64, withPayload bool) *JobView {
	v := new(JobView)
	var p *Payload
	if withPayload {
		p = new(Payload)
	}
	j.FillView(v, p, now, withPayload)
	return v
}

// FillView overwrites *v with View(now, withPayload); the payload, when
// asked for, is referenced through p. Streams reuse one v and p for every
// job they write.
func (j *Job) FillView(v *JobView, p *Payload, now uint64, withPayload bool) {
	*v = JobView{
		Attempts:    j.Attempts,
		Backoff:     j.Backoff,
		Batch:       j.Batch,
		Budgets:     j.Budgets,
		CompletedAt: j.CompletedAt,
		DequeuedAt:  j.DequeuedAt,
		FailedAt:    j.FailedAt,
		ID:          j.ID,
		Priority:    j.Priority,
		PurgeAt:     j.PurgeAt,
		Queue:       j.Queue,
		ReadyAt:     j.ReadyAt,
		Retention:   j.Retention,
		RetryLimit:  j.RetryLimit,
		Status:      j.VisibleStatus(now),
		TimeoutMs:   j.TimeoutMs,
		Type:        j.Type,
		UniqueKey:   j.UniqueKey,
		UniqueWhile: j.UniqueWhile,
	}
	if withPayload {
		*p = Payload(j.Payload)
		v.Payload = p
	}
}

// EnqueueView is the enqueue-response variant: no payload, duplicate and
// folded always present.
func (j *Job) EnqueueView(now uint64, duplicate, folded bool) *JobView {
	v := new(JobView)
	j.FillEnqueueView(v, now, duplicate, folded)
	return v
}

// FillEnqueueView overwrites *v with EnqueueView(now, duplicate, folded),
// so that a bulk enqueue can fill one array of views.
func (j *Job) FillEnqueueView(v *JobView, now uint64, duplicate, folded bool) {
	j.FillView(v, nil, now, false)
	v.Duplicate = boolRef(duplicate)
	v.Folded = boolRef(folded)
}

// the two values a view's optional flags point to; views are read-only
var viewTrue, viewFalse = true, false

func boolRef(b bool) *bool {
	if b {
		return &viewTrue
	}
	return &viewFalse
}

// ErrorRecord is one failure of a job (SPEC §6.5).
type ErrorRecord struct {
	Attempt    uint32 `json:"attempt" msgpack:"attempt"`
	Backtrace  string `json:"backtrace,omitempty" msgpack:"backtrace,omitempty"`
	DequeuedAt uint64 `json:"dequeued_at" msgpack:"dequeued_at"`
	ErrorType  string `json:"error_type,omitempty" msgpack:"error_type,omitempty"`
	FailedAt   uint64 `json:"failed_at" msgpack:"failed_at"`
	Message    string `json:"message" msgpack:"message"`
}
