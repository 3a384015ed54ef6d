package http

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

// Trace stream limits.
const (
	defaultTraceBuffer = 4096
	maxTraceBuffer     = 1 << 16
	// traceBatch is the most events written (and flushed) at once.
	traceBatch = 256
)

// traceParams are the query parameters of GET /debug/trace.
type traceParams struct {
	filter actors.TraceFilter
	buffer int
}

func parseTraceParams(c echo.Context) (traceParams, error) {
	p := traceParams{buffer: defaultTraceBuffer}
	q, err := protocol.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return p, err
	}
	for name, values := range q {
		v := values[0]
		switch name {
		case "job":
			p.filter.Jobs = splitList(v)
		case "budget":
			p.filter.Budgets = splitList(v)
		case "queue":
			p.filter.Queues = splitList(v)
		case "buffer":
			n, err := strconv.ParseUint(v, 10, 31)
			if err != nil || n < 1 || n > maxTraceBuffer {
				return p, protocol.Invalid("invalid query parameters: buffer: expected an integer from 1 to %d, got %q", maxTraceBuffer, v)
			}
			p.buffer = int(n)
		default:
			return p, protocol.Invalid("invalid query parameters: unknown field `%s`, expected one of `job`, `budget`, `queue`, `buffer`", name)
		}
	}
	return p, nil
}

// traceFrame is one trace event on the wire. Times are Unix milliseconds
// (SPEC §2.2); token levels are rounded to 1e-6.
type traceFrame struct {
	Time         uint64   `json:"time" msgpack:"time"`
	Kind         string   `json:"kind" msgpack:"kind"`
	Actor        string   `json:"actor" msgpack:"actor"`
	JobID        string   `json:"job_id,omitempty" msgpack:"job_id,omitempty"`
	Queue        string   `json:"queue,omitempty" msgpack:"queue,omitempty"`
	Budget       string   `json:"budget,omitempty" msgpack:"budget,omitempty"`
	Budgets      []string `json:"budgets,omitempty" msgpack:"budgets,omitempty"`
	Cost         uint32   `json:"cost,omitempty" msgpack:"cost,omitempty"`
	TokensBefore *float64 `json:"tokens_before,omitempty" msgpack:"tokens_before,omitempty"`
	Tokens       *float64 `json:"tokens,omitempty" msgpack:"tokens,omitempty"`
	DueAt        uint64   `json:"due_at,omitempty" msgpack:"due_at,omitempty"`
	Reason       string   `json:"reason,omitempty" msgpack:"reason,omitempty"`
	WorkerID     string   `json:"worker_id,omitempty" msgpack:"worker_id,omitempty"`
	Stream       uint64   `json:"stream,omitempty" msgpack:"stream,omitempty"`
	Position     int      `json:"position,omitempty" msgpack:"position,omitempty"`
	Count        uint64   `json:"count,omitempty" msgpack:"count,omitempty"`
	Group        string   `json:"group,omitempty" msgpack:"group,omitempty"` // cron events
	Entry        string   `json:"entry,omitempty" msgpack:"entry,omitempty"`
	Slot         uint64   `json:"slot,omitempty" msgpack:"slot,omitempty"`
	// settled events (SPEC §10.1)
	Reserved *uint32 `json:"reserved,omitempty" msgpack:"reserved,omitempty"`
	RealCost *uint32 `json:"real_cost,omitempty" msgpack:"real_cost,omitempty"`
}

func roundTokens(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := math.Round(*p*1e6) / 1e6
	if v == 0 {
		v = 0 // no -0
	}
	return &v
}

func toTraceFrame(e *actors.Event) *traceFrame {
	return &traceFrame{
		Time: uint64(e.Time.UnixMilli()), Kind: string(e.Kind), Actor: e.Actor,
		JobID: e.JobID, Queue: e.Queue, Budget: e.Budget, Budgets: e.Budgets, Cost: e.Cost,
		TokensBefore: roundTokens(e.TokensBefore), Tokens: roundTokens(e.Tokens),
		DueAt: e.DueAt, Reason: e.Reason, WorkerID: e.WorkerID, Stream: e.Stream,
		Position: e.Position, Count: e.Count, Group: e.CronGroup, Entry: e.CronEntry, Slot: e.Slot,
		Reserved: e.Reserved, RealCost: e.RealCost,
	}
}

// appendTraceFrame frames v as SPEC §1.4 frames a job.
func appendTraceFrame(sf protocol.StreamFormat, dst []byte, v any) ([]byte, error) {
	if sf == protocol.StreamMsgpack {
		b, err := protocol.MarshalMsgpack(v)
		if err != nil {
			return dst, err
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
		return append(dst, b...), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	if sf == protocol.StreamSSE {
		dst = append(dst, "data: "...)
		dst = append(dst, b...)
		return append(dst, '\n', '\n'), nil
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

// trace streams dispatch events (GET /debug/trace), filtered by job, budget
// and queue, framed like a take stream (NDJSON by default). The engine never
// waits for this reader: events that do not fit its buffer are lost, and
// the stream says so with a "dropped" event carrying how many.
func (a *API) trace(c echo.Context) error {
	sf, err := takeStreamFormat(c.Request().Header.Get("Accept"))
	if err != nil {
		return err
	}
	params, err := parseTraceParams(c)
	if err != nil {
		return err
	}
	sub := a.engine.Tracer().SubscribeFiltered(params.buffer, params.filter)
	defer sub.Close()

	w := c.Response()
	w.Header().Set("Content-Type", sf.ContentType())
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.Flush()

	log := a.log.With("stream", "trace")
	rc := http.NewResponseController(w.Writer)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	appendEvent := func(buf []byte, e *actors.Event) []byte {
		out, err := appendTraceFrame(sf, buf, toTraceFrame(e))
		if err != nil {
			log.Error("trace: encode event", "err", err, "kind", e.Kind)
			return buf
		}
		return out
	}
	// announceDrops adds a "dropped" event for losses no later event has
	// announced yet (the reader has caught up with the buffer).
	announceDrops := func(buf []byte) []byte {
		if n := sub.TakeDropped(); n > 0 {
			buf = appendEvent(buf, &actors.Event{Time: time.Now(), Kind: actors.EventDropped, Actor: "tracer", Count: n})
		}
		return buf
	}
	heartbeat := time.NewTimer(a.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	ctx := c.Request().Context()
	var buf []byte
	for {
		select {
		case e := <-sub.C:
			buf = appendEvent(buf[:0], &e)
		drain:
			for n := 1; n < traceBatch; n++ {
				select {
				case e = <-sub.C:
					buf = appendEvent(buf, &e)
				default:
					break drain
				}
			}
			if len(sub.C) == 0 {
				buf = announceDrops(buf)
			}
			if !write(buf) {
				return nil
			}
			heartbeat.Reset(a.cfg.HeartbeatInterval)
		case <-heartbeat.C:
			buf = announceDrops(buf[:0])
			if len(buf) == 0 {
				buf = append(buf, sf.Heartbeat()...)
			}
			if !write(buf) {
				return nil
			}
			heartbeat.Reset(a.cfg.HeartbeatInterval)
		case <-ctx.Done():
			return nil
		case <-a.shutdown:
			return nil
		}
	}
}

// budgetStateBody is the body of GET /budgets/{key}/state.
type budgetStateBody struct {
	Key        string            `json:"key" msgpack:"key"`
	Allocation uint32            `json:"allocation" msgpack:"allocation"`
	Strategy   protocol.Strategy `json:"strategy" msgpack:"strategy"`
	Capacity   uint32            `json:"capacity" msgpack:"capacity"`
	// At is the server time the state was read (Unix ms).
	At uint64 `json:"at" msgpack:"at"`
	// Tokens a new reservation could take now (time_based: settled to At).
	Tokens   float64 `json:"tokens" msgpack:"tokens"`
	Held     uint64  `json:"held" msgpack:"held"`
	InFlight uint64  `json:"in_flight" msgpack:"in_flight"`
	Parked   int     `json:"parked" msgpack:"parked"`
	// Head is the parked job next in line, if any.
	Head *budgetHeadBody `json:"head,omitempty" msgpack:"head,omitempty"`
	// WakeAt is when the wake timer fires; absent when none is armed.
	WakeAt     uint64 `json:"wake_at,omitempty" msgpack:"wake_at,omitempty"`
	Dispatches uint64 `json:"dispatches" msgpack:"dispatches"`
	Refusals   uint64 `json:"refusals" msgpack:"refusals"`
	// HeldUntil is the end of the hold in force (SPEC §10.2); absent
	// without one.
	HeldUntil uint64 `json:"held_until,omitempty" msgpack:"held_until,omitempty"`
}

type budgetHeadBody struct {
	ID    string `json:"id" msgpack:"id"`
	Queue string `json:"queue" msgpack:"queue"`
	Cost  uint32 `json:"cost" msgpack:"cost"`
	// AffordableAt (time_based) is when the tokens cover the head's cost.
	AffordableAt uint64 `json:"affordable_at,omitempty" msgpack:"affordable_at,omitempty"`
}

// budgetState answers GET /budgets/{key}/state: the live pool of a budget.
func (a *API) budgetState(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	key, err := existingBudgetKey(c)
	if err != nil {
		return err
	}
	s, err := a.engine.BudgetState(c.Request().Context(), key)
	if err != nil {
		return err
	}
	body := toBudgetStateBody(s)
	return a.reply(c, http.StatusOK, body)
}
