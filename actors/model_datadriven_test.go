package actors

// Directed scenarios of the model test, read as data: the files under
// testdata/model drive the same simulation and checks as the randomized
// run (model_test.go), one command per step, and the output of each step is
// what an observer sees after it. Any invariant the sim checks failing fails
// the test, whatever the expected output says.
//
// Commands (every one that acts takes drain=N: deliver at most N messages
// after it instead of all of them):
//
//	sim [order=fifo|random] [seed=N] [batching=on|off] [ignore=(cat, ...)]
//	budget key=K strategy=while_in_flight|time_based allocation=N [duration=D] [burst=N] [replace]
//	patch-budget key=K [allocation=N] [strategy=S] [duration=D|null] [burst=N|null]
//	delete-budget key=K
//	open [queues=(q0, ...)] [prefetch=N] [slow]      a take stream (slow: its writer finishes when the clock moves)
//	close stream=N
//	enqueue                                          one job a line: LABEL [queue=Q] [prio=P] [bind=(K:COST, ...)] [delay=D] [retries=N]
//	ack LABEL...  |  ack-missing LABEL  |  delete LABEL  |  fail LABEL [kill] [retry_in=D]
//	                                                 ack and fail take settle=(K:COST, ...): the real cost of the first job
//	hold key=K for=D|until=T [empty]  |  unhold key=K  (until=T: on the scenario's clock; empty: with drain)
//	advance D  |  restart  |  reset
//	drain [n=N]                                      deliver messages (all, or N)
//	deliver to=queue|K [n=N]                         deliver the next N messages of one actor's mailbox
//	liveness [prefetch=N]                            a stream on every queue acks everything until no job is left
//	state                                            print the state only
//
// Rewrite expected outputs with: go test -run TestModelScenarios ./actors/ -rewrite

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/tollgate/tollgate/protocol"
)

func TestModelScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/model", func(t *testing.T, path string) {
		var sc *modelScenario
		defer func() {
			if sc != nil {
				sc.s.close()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd == "sim" {
				if sc != nil {
					sc.s.close()
				}
				sc = newModelScenario(t, td)
				return sc.state()
			}
			if sc == nil {
				td.Fatalf(t, "the file must start with sim")
			}
			sc.t = t
			out := sc.run(td)
			if v := sc.s.viol; v != nil && !sc.reported {
				sc.reported = true
				t.Errorf("%s: invariant violated: %v", td.Pos, v)
			}
			return out
		})
	})
}

// modelScenario is one sim driven by commands, with job labels.
type modelScenario struct {
	t        *testing.T
	s        *sim
	ids      map[string]string // label -> job id
	labels   map[string]string // job id -> label
	order    []string          // labels in creation order
	reported bool
}

func newModelScenario(t *testing.T, td *datadriven.TestData) *modelScenario {
	seed := uint64(1)
	td.MaybeScanArgs(t, "seed", &seed)
	s := newSim(t, seed, t.TempDir())
	order, batching := "fifo", "on"
	td.MaybeScanArgs(t, "order", &order)
	td.MaybeScanArgs(t, "batching", &batching)
	switch order {
	case "fifo":
		s.mail.rng = nil
	case "random":
	default:
		td.Fatalf(t, "order=%s: want fifo or random", order)
	}
	s.mail.batching = batching == "on"
	if a, ok := td.Arg("ignore"); ok {
		for _, c := range a.Vals {
			s.ignore[c] = true
		}
	}
	return &modelScenario{t: t, s: s, ids: make(map[string]string), labels: make(map[string]string)}
}

func (sc *modelScenario) run(td *datadriven.TestData) string {
	t, s := sc.t, sc.s
	op := simOp{Drain: -1}
	td.MaybeScanArgs(t, "drain", &op.Drain)
	var result string
	switch td.Cmd {
	case "budget":
		op.Kind = opCreateBudget
		td.ScanArgs(t, "key", &op.Key)
		op.Def = sc.definition(td)
		op.Replace = td.HasArg("replace")
		before, had := s.mbudgets[op.Key]
		s.exec(op)
		result = sc.budgetResult(op.Key, before, had)
	case "patch-budget":
		op.Kind = opPatchBudget
		td.ScanArgs(t, "key", &op.Key)
		var n int64
		if td.MaybeScanArgs(t, "allocation", &n) {
			op.Patch.Alloc = n
		}
		var st string
		if td.MaybeScanArgs(t, "strategy", &st) {
			op.Patch.SetType = st
		}
		op.Patch.Duration = sc.nullable(td, "duration", true)
		op.Patch.Burst = sc.nullable(td, "burst", false)
		before, had := s.mbudgets[op.Key]
		s.exec(op)
		result = sc.budgetResult(op.Key, before, had)
	case "delete-budget":
		op.Kind = opDeleteBudget
		td.ScanArgs(t, "key", &op.Key)
		_, had := s.mbudgets[op.Key]
		s.exec(op)
		_, has := s.mbudgets[op.Key]
		result = verdict(had && !has, "deleted", "refused")
	case "open":
		op.Kind = opOpen
		if a, ok := td.Arg("queues"); ok {
			op.Queues = append(op.Queues, a.Vals...)
		}
		td.MaybeScanArgs(t, "prefetch", &op.Prefetch)
		op.Slow = td.HasArg("slow")
		known := make(map[uint64]bool)
		for id := range s.streams {
			known[id] = true
		}
		s.exec(op)
		result = "refused"
		for id := range s.streams {
			if !known[id] {
				result = fmt.Sprintf("opened s%d", id)
			}
		}
	case "close":
		op.Kind = opClose
		var id uint64
		td.ScanArgs(t, "stream", &id)
		op.Picks = []int{-1}
		for i, ms := range s.openStreams() {
			if ms.id == id {
				op.Picks[0] = i
			}
		}
		if op.Picks[0] < 0 {
			td.Fatalf(t, "stream %d is not open", id)
		}
		s.exec(op)
		result = fmt.Sprintf("closed s%d", id)
	case "enqueue":
		op.Kind = opEnqueue
		var labels []string
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			label, js := sc.jobLine(td, line)
			labels = append(labels, label)
			op.Jobs = append(op.Jobs, js)
		}
		n := len(s.order)
		s.exec(op)
		if len(s.order) == n {
			result = "refused"
			break
		}
		for i, mj := range s.order[n:] {
			sc.ids[labels[i]], sc.labels[mj.id] = mj.id, labels[i]
			sc.order = append(sc.order, labels[i])
		}
		result = "enqueued " + strings.Join(labels, " ")
	case "ack":
		op.Kind = opAck
		for _, a := range td.CmdArgs {
			if a.Key != "drain" && a.Key != "settle" {
				op.Picks = append(op.Picks, sc.pick(td, a.Key, s.delivered(), "delivered"))
			}
		}
		op.Settle = sc.settle(td, op.Picks)
		s.exec(op)
		result = sc.finished(td)
	case "ack-missing":
		op.Kind = opAckMissing
		var list []*mJob
		for _, mj := range s.order {
			if en := s.eng.jobs.get(mj.id); !mj.finished && mj.stream == 0 && en != nil && en.state != stInFlight {
				list = append(list, mj)
			}
		}
		op.Picks = []int{sc.pick(td, td.CmdArgs[0].Key, list, "waiting")}
		s.exec(op)
		result = "not found"
	case "delete":
		op.Kind = opDelete
		op.Picks = []int{sc.pick(td, td.CmdArgs[0].Key, s.unfinished(), "unfinished")}
		s.exec(op)
		result = sc.finished(td)
	case "fail":
		op.Kind = opFail
		label := td.CmdArgs[0].Key
		op.Picks = []int{sc.pick(td, label, s.delivered(), "delivered")}
		op.Fail.Kill = td.HasArg("kill")
		var d string
		if td.MaybeScanArgs(t, "retry_in", &d) {
			op.Fail.HasRetry = true
			op.Fail.RetryIn = int64(sc.millis(td, d))
		}
		op.Settle = sc.settle(td, op.Picks)
		s.exec(op)
		if mj := s.jobs[sc.ids[label]]; mj.finished {
			result = label + " dead"
		} else {
			result = fmt.Sprintf("%s retries at +%dms", label, mj.readyAt-s.now)
		}
	case "hold", "unhold":
		op.Kind = opUnhold
		td.ScanArgs(t, "key", &op.Key)
		if td.Cmd == "hold" {
			op.Kind = opHold
			var d string
			switch {
			case td.MaybeScanArgs(t, "for", &d):
				op.Hold.ForMs, op.Hold.In = true, int64(sc.millis(td, d))
			case td.MaybeScanArgs(t, "until", &d):
				op.Hold.In = int64(sc.millis(td, d)) - int64(s.now-simEpoch)
			default:
				td.Fatalf(t, "hold needs for= or until=")
			}
			op.Hold.Drain = td.HasArg("empty") // "drain" is taken (drain=N)
		}
		s.exec(op)
	case "advance":
		op.Kind = opAdvance
		op.Dt = sc.millis(td, td.CmdArgs[0].Key)
		s.exec(op)
	case "restart":
		op.Kind = opRestart
		s.exec(op)
	case "reset":
		op.Kind = opReset
		s.exec(op)
	case "drain":
		op.Kind = opDrain
		td.MaybeScanArgs(t, "n", &op.Drain)
		s.exec(op)
	case "deliver":
		var to string
		n := 1
		td.ScanArgs(t, "to", &to)
		td.MaybeScanArgs(t, "n", &n)
		mb := s.mail.queue
		if to != "queue" {
			sb := s.budgets[to]
			if sb == nil || s.mail.budgets[sb] == nil {
				td.Fatalf(t, "no mailbox for budget %s", to)
			}
			mb = s.mail.budgets[sb]
		}
		for range n {
			if mb.len() == 0 {
				td.Fatalf(t, "the mailbox of %s is empty", to)
			}
			s.stepFrom(mb)
		}
		if s.pending() == 0 {
			s.checkQuiescent()
		}
	case "liveness":
		prefetch := 1000
		td.MaybeScanArgs(t, "prefetch", &prefetch)
		s.liveness(prefetch)
		result = verdict(s.viol == nil, "every job finished", "stuck")
	case "state":
	default:
		td.Fatalf(t, "unknown command %s", td.Cmd)
	}
	if result != "" {
		return result + "\n" + sc.state()
	}
	return sc.state()
}

func verdict(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// definition reads a budget definition from the command's arguments.
func (sc *modelScenario) definition(td *datadriven.TestData) protocol.Definition {
	var d protocol.Definition
	var st string
	td.ScanArgs(sc.t, "strategy", &st)
	d.Strategy.Type = protocol.StrategyType(st)
	td.ScanArgs(sc.t, "allocation", &d.Allocation)
	var dur string
	if td.MaybeScanArgs(sc.t, "duration", &dur) {
		d.Strategy.DurationMs = int64(sc.millis(td, dur))
	}
	td.MaybeScanArgs(sc.t, "burst", &d.Strategy.Burst)
	return d
}

// nullable reads a patch field: 0 absent, -1 null, else the value.
func (sc *modelScenario) nullable(td *datadriven.TestData, key string, duration bool) int64 {
	var v string
	if !td.MaybeScanArgs(sc.t, key, &v) {
		return 0
	}
	if v == "null" {
		return -1
	}
	if duration {
		return int64(sc.millis(td, v))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		td.Fatalf(sc.t, "%s=%s: %v", key, v, err)
	}
	return n
}

func (sc *modelScenario) millis(td *datadriven.TestData, v string) uint64 {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		td.Fatalf(sc.t, "%q is not a duration", v)
	}
	return uint64(d.Milliseconds())
}

// jobLine reads one job of an enqueue.
func (sc *modelScenario) jobLine(td *datadriven.TestData, line string) (string, jobSpec) {
	label, args, err := datadriven.ParseLine(line)
	if err != nil {
		td.Fatalf(sc.t, "%s: %v", line, err)
	}
	if _, dup := sc.ids[label]; dup {
		td.Fatalf(sc.t, "label %s is taken", label)
	}
	js := jobSpec{Queue: "q0", Prio: protocol.DefaultPriority, RetryLimit: -1}
	for _, a := range args {
		v := a.SingleVal
		switch a.Key {
		case "queue":
			js.Queue = v(sc.t)
		case "prio":
			a.Scan(sc.t, 0, &js.Prio)
		case "delay":
			js.Delay = sc.millis(td, v(sc.t))
		case "retries":
			a.Scan(sc.t, 0, &js.RetryLimit)
		case "bind":
			for _, b := range a.Vals {
				key, cost, ok := strings.Cut(b, ":")
				n, err := strconv.ParseUint(cost, 10, 32)
				if !ok || err != nil {
					td.Fatalf(sc.t, "bind=%s: want KEY:COST", b)
				}
				js.Bindings = append(js.Bindings, bindSpec{Key: key, Cost: uint32(n)})
			}
		default:
			td.Fatalf(sc.t, "job %s: unknown field %s", label, a.Key)
		}
	}
	return label, js
}

// pick is the index of a labelled job in list, the list an op picks from.
func (sc *modelScenario) pick(td *datadriven.TestData, label string, list []*mJob, what string) int {
	id, ok := sc.ids[label]
	if !ok {
		td.Fatalf(sc.t, "no job %s", label)
	}
	for i, mj := range list {
		if mj.id == id {
			return i
		}
	}
	td.Fatalf(sc.t, "job %s is not %s", label, what)
	return 0
}

// finished lists the labelled jobs that finished since they were last listed.
func (sc *modelScenario) finished(td *datadriven.TestData) string {
	var done []string
	for _, a := range td.CmdArgs {
		if id, ok := sc.ids[a.Key]; ok && sc.s.jobs[id].finished {
			done = append(done, a.Key)
		}
	}
	if len(done) == 0 {
		return "nothing finished"
	}
	return "finished " + strings.Join(done, " ")
}

func (sc *modelScenario) budgetResult(key string, before protocol.Definition, had bool) string {
	after, has := sc.s.mbudgets[key]
	if has && (!had || after != before) {
		return fmt.Sprintf("%s is %s", key, modelDefString(after))
	}
	if has && after == before {
		return "unchanged"
	}
	return "refused"
}

// state renders what an observer sees: the clock, every unfinished job,
// every budget's pool, every open stream and the messages not yet delivered.
func (sc *modelScenario) state() string {
	s := sc.s
	var b strings.Builder
	fmt.Fprintf(&b, "t=%dms\n", s.now-simEpoch)
	for _, label := range sc.order {
		id := sc.ids[label]
		mj := s.jobs[id]
		if mj.finished {
			continue
		}
		en := s.eng.jobs.get(id)
		fmt.Fprintf(&b, "%s %s p%d: ", label, mj.queue, mj.prio)
		switch {
		case en == nil:
			b.WriteString("unknown to the engine")
		case en.state == stParked:
			fmt.Fprintf(&b, "parked on %s", en.parkedKey())
		case en.state == stInFlight:
			fmt.Fprintf(&b, "in flight on s%d", en.stream.id)
			if mj.stream == 0 {
				b.WriteString(" (not written yet)")
			}
		case en.state == stScheduled:
			fmt.Fprintf(&b, "scheduled in %dms", en.look().ReadyAt-s.now)
		default:
			b.WriteString(modelStateName(en.state))
		}
		b.WriteString("\n")
	}
	for _, key := range s.budgetKeys() {
		b.WriteString(sc.budgetLine(s.budgets[key]))
	}
	for _, ms := range s.openStreams() {
		var in []string
		for id := range ms.inFlight {
			in = append(in, sc.label(id))
		}
		sort.Strings(in)
		q := "all queues"
		if ms.queues != nil {
			var qs []string
			for name := range ms.queues {
				qs = append(qs, name)
			}
			sort.Strings(qs)
			q = strings.Join(qs, ",")
		}
		fmt.Fprintf(&b, "s%d %s prefetch %d: delivered [%s]\n", ms.id, q, ms.prefetch, strings.Join(in, " "))
	}
	if s.pending() > 0 {
		b.WriteString(sc.mailLine(s.mail.queue, "queue"))
		for _, key := range s.budgetKeys() {
			if mb := s.mail.budgets[s.budgets[key]]; mb != nil {
				b.WriteString(sc.mailLine(mb, key))
			}
		}
	}
	return b.String()
}

// budgetLine renders one budget's pool as an observer reads it.
func (sc *modelScenario) budgetLine(sb *simBudget) string {
	s, c := sc.s, sb.core
	var parked []string
	c.parked.Ascend(func(r JobRef) bool { parked = append(parked, sc.label(r.ID)); return true })
	tokens := strconv.FormatFloat(c.tokens(s.now*nsPerMs), 'f', -1, 64)
	if i := strings.IndexByte(tokens, '.'); i >= 0 && len(tokens) > i+4 {
		tokens = tokens[:i+4]
	}
	line := fmt.Sprintf("%s %s: tokens %s, in flight %d, held %d, parked [%s]", sb.key, modelDefString(c.def), tokens, c.inFlight, c.held, strings.Join(parked, " "))
	if h := c.heldUntil(s.now * nsPerMs); h != 0 {
		line += fmt.Sprintf(", held until t=%dms", h-simEpoch)
	}
	if sb.timerAt > s.now {
		line += fmt.Sprintf(", wakes in %dms", sb.timerAt-s.now)
	}
	return line + "\n"
}

// settle reads settle=(K:COST, ...) as settle entries for the first job of
// picks (in the delivered list).
func (sc *modelScenario) settle(td *datadriven.TestData, picks []int) []settleSpec {
	a, ok := td.Arg("settle")
	if !ok {
		return nil
	}
	mj := sc.s.delivered()[picks[0]]
	var out []settleSpec
	for _, v := range a.Vals {
		key, cost, ok := strings.Cut(v, ":")
		n, err := strconv.ParseUint(cost, 10, 32)
		if !ok || err != nil {
			td.Fatalf(sc.t, "settle entry %q is not KEY:COST", v)
		}
		sp := settleSpec{Cost: uint32(n), Foreign: true}
		for i, b := range mj.bindings {
			if b.Key == key {
				sp.Bind, sp.Foreign = i, false
			}
		}
		out = append(out, sp)
	}
	return out
}

func (sc *modelScenario) label(id string) string {
	if l, ok := sc.labels[id]; ok {
		return l
	}
	return id
}

// mailLine renders the messages waiting in one mailbox.
func (sc *modelScenario) mailLine(mb *simMailbox, name string) string {
	if mb.len() == 0 {
		return ""
	}
	var msgs []string
	for _, m := range mb.msgs[mb.head:] {
		msgs = append(msgs, sc.msgName(m))
	}
	return fmt.Sprintf("mail to %s: %s\n", name, strings.Join(msgs, ", "))
}

func (sc *modelScenario) msgName(m simMsg) string {
	l := sc.label
	switch x := m.bm.(type) {
	case *budgetBatch:
		var in []string
		for _, inner := range x.Msgs {
			in = append(in, sc.msgName(simMsg{to: m.to, bm: inner}))
		}
		return "batch(" + strings.Join(in, ", ") + ")"
	case *ReserveRequest:
		if x.Commit {
			return fmt.Sprintf("Reserve(%s, %d, final)", l(x.Job.ID), x.Job.Cost)
		}
		return fmt.Sprintf("Reserve(%s, %d)", l(x.Job.ID), x.Job.Cost)
	case *CommitReservation:
		return "Commit(" + l(x.JobID) + ")"
	case *ReleaseReservation:
		return "Release(" + l(x.JobID) + ")"
	case *ReturnTokens:
		return fmt.Sprintf("ReturnTokens(%s, %d)", l(x.JobID), x.Cost)
	case *RefundTokens:
		return fmt.Sprintf("RefundTokens(%s, %d)", l(x.JobID), x.Cost)
	case *UnparkJob:
		return "Unpark(" + l(x.JobID) + ")"
	case *ApplyDefinition:
		return "Apply(" + modelDefString(x.Definition) + ")"
	case *QueuesChanged:
		return "QueuesChanged"
	case *Reevaluate:
		return "Reevaluate"
	case *budgetWake:
		return "Wake"
	}
	switch x := m.qm.(type) {
	case *queueBatch:
		var in []string
		for _, inner := range x.Msgs {
			in = append(in, sc.msgName(simMsg{qm: inner}))
		}
		return "batch(" + strings.Join(in, ", ") + ")"
	case *ReserveResponse:
		v := "refused"
		switch {
		case x.Committed:
			v = "committed"
		case x.Granted:
			v = "granted"
		}
		return fmt.Sprintf("ReserveResponse(%s %s %s)", x.Key, l(x.JobID), v)
	case *JobsWoken:
		var ids []string
		for _, id := range x.JobIDs {
			ids = append(ids, l(id))
		}
		return fmt.Sprintf("JobsWoken(%s %s)", x.Key, strings.Join(ids, " "))
	case *JobsDue:
		return fmt.Sprintf("JobsDue(%d)", len(x.IDs))
	case *StreamWritten:
		return fmt.Sprintf("StreamWritten(s%d)", x.StreamID)
	}
	return fmt.Sprintf("%T", m.bm) + fmt.Sprintf("%T", m.qm)
}
