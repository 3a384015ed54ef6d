package actors

import (
	"math/rand/v2"
	"os"
)

// Mailboxes of the model test's simulated actors.
//
// protoactor gives every actor one FIFO mailbox; what different actors
// handle interleaves arbitrarily. The sim keeps one mailbox for the queue
// actor and one per budget actor (per spawned budget: a budget replaced
// under the same key is a new actor with a new mailbox), and picks the
// mailbox to deliver from next either at random from the seed or, for
// directed scenarios, oldest message first (one global FIFO).
//
// Sends are batched as batching.go does: what one actor sends another while
// handling one message leaves as one mailbox message when the handling ends
// (alone as it is, several in a budgetBatch or queueBatch). Stream writers,
// the scheduler and timers send straight to the mailbox, as they do.

// newSimMail is the delivery policy of a randomized run: the next mailbox
// picked at random from the seed, and sends batched except on every fourth
// seed (batching only merges what the unbatched schedules already allow, so
// those seeds keep the finer interleavings covered). MODEL_FIFO=1 delivers
// oldest first instead; MODEL_BATCHING=0 or 1 overrides batching.
func newSimMail(seed uint64) simMail {
	m := simMail{rng: rand.New(rand.NewPCG(seed, 0x1a7e)), batching: seed%4 != 3}
	if os.Getenv("MODEL_FIFO") == "1" {
		m.rng = nil
	}
	switch os.Getenv("MODEL_BATCHING") {
	case "0":
		m.batching = false
	case "1":
		m.batching = true
	}
	return m
}

// simMailbox is one actor's FIFO mailbox.
type simMailbox struct {
	to   *simBudget // nil: the queue actor
	msgs []simMsg
	seqs []uint64 // push order of each message, for the FIFO policy
	head int
	out  []simMsg // sent to this actor during the current Receive (batching)
}

func (mb *simMailbox) len() int { return len(mb.msgs) - mb.head }

func (mb *simMailbox) pop() simMsg {
	m := mb.msgs[mb.head]
	mb.msgs[mb.head] = simMsg{}
	mb.head++
	if mb.head == len(mb.msgs) {
		mb.msgs, mb.seqs, mb.head = mb.msgs[:0], mb.seqs[:0], 0
	}
	return m
}

// simMail is every mailbox of the sim and the delivery policy.
type simMail struct {
	queue   *simMailbox
	budgets map[*simBudget]*simMailbox
	active  []*simMailbox // mailboxes with messages, in no particular order
	n       int           // messages in mailboxes
	seq     uint64

	// rng picks the next mailbox; nil: the one holding the oldest message.
	rng *rand.Rand
	// batching buffers an actor's sends until its Receive ends.
	batching bool
	// receiving is set while an actor handles a message (or the queue
	// actor a facade request): sends then wait in out until endReceive.
	receiving bool
	dirty     []*simMailbox // mailboxes with sends buffered, in first-send order

	overtaken int // deliveries that went ahead of an older message elsewhere
}

// reset empties every mailbox: the actors of a former life are gone.
func (m *simMail) reset() {
	m.queue = &simMailbox{}
	m.budgets = make(map[*simBudget]*simMailbox)
	m.active, m.dirty, m.n = nil, nil, 0
}

func (m *simMail) box(to *simBudget) *simMailbox {
	if to == nil {
		return m.queue
	}
	mb := m.budgets[to]
	if mb == nil {
		mb = &simMailbox{to: to}
		m.budgets[to] = mb
	}
	return mb
}

// put appends one message to a mailbox.
func (m *simMail) put(mb *simMailbox, msg simMsg) {
	if mb.len() == 0 {
		m.active = append(m.active, mb)
	}
	m.seq++
	mb.msgs = append(mb.msgs, msg)
	mb.seqs = append(mb.seqs, m.seq)
	m.n++
}

// send delivers msg to its recipient's mailbox, or buffers it there when
// an actor is handling a message and batching is on. Messages that do not
// come from an actor's Receive (stream writes, due jobs, timers) are never
// buffered.
func (m *simMail) send(msg simMsg) {
	mb := m.box(msg.to)
	direct := true
	if m.batching && m.receiving {
		switch msg.qm.(type) {
		case *StreamWritten, *JobsDue:
		default:
			direct = false
		}
	}
	if direct {
		m.put(mb, msg)
		return
	}
	if len(mb.out) == 0 {
		m.dirty = append(m.dirty, mb)
	}
	mb.out = append(mb.out, msg)
}

func (m *simMail) beginReceive() { m.receiving = true }

// endReceive flushes what the actor sent: one message per recipient.
func (m *simMail) endReceive() {
	m.receiving = false
	for _, mb := range m.dirty {
		switch len(mb.out) {
		case 0:
		case 1:
			m.put(mb, mb.out[0])
		default:
			if mb.to != nil {
				msgs := make([]budgetMsg, len(mb.out))
				for i, o := range mb.out {
					msgs[i] = o.bm
				}
				m.put(mb, simMsg{to: mb.to, bm: &budgetBatch{Msgs: msgs}})
			} else {
				msgs := make([]queueMsg, len(mb.out))
				for i, o := range mb.out {
					msgs[i] = o.qm.(queueMsg)
				}
				m.put(mb, simMsg{qm: &queueBatch{Msgs: msgs}})
			}
		}
		mb.out = nil
	}
	m.dirty = m.dirty[:0]
}

// next takes the next message to deliver, false when every mailbox is empty.
func (m *simMail) next() (simMsg, bool) {
	if len(m.active) == 0 {
		return simMsg{}, false
	}
	i := 0
	if m.rng != nil {
		i = m.rng.IntN(len(m.active))
	} else {
		for j, mb := range m.active {
			if mb.seqs[mb.head] < m.active[i].seqs[m.active[i].head] {
				i = j
			}
		}
	}
	return m.take(m.active[i]), true
}

// take takes the next message of mailbox mb, which is not empty.
func (m *simMail) take(mb *simMailbox) simMsg {
	i := 0
	for j, o := range m.active {
		if o == mb {
			i = j
		}
	}
	for _, o := range m.active {
		if o.seqs[o.head] < mb.seqs[mb.head] {
			m.overtaken++ // an older message of another actor waits
			break
		}
	}
	msg := mb.pop()
	m.n--
	if mb.len() == 0 {
		m.active = append(m.active[:i], m.active[i+1:]...)
		if mb.to != nil && mb.to.stopped {
			delete(m.budgets, mb.to)
		}
	}
	return msg
}

// stepFrom delivers the next message of mailbox mb (directed scenarios).
func (s *sim) stepFrom(mb *simMailbox) {
	s.handleMsg(s.mail.take(mb))
}

// receive hands one message to its actor; a batch is handled in order, as
// the actors do (the queue actor pumps once at the end of the batch).
func (s *sim) receive(m simMsg) {
	switch {
	case m.to != nil:
		if b, ok := m.bm.(*budgetBatch); ok {
			s.stats.batches++
			for _, inner := range b.Msgs {
				s.traceMsg(simMsg{to: m.to, bm: inner})
				s.stepBudget(m.to, inner)
			}
			return
		}
		s.traceMsg(m)
		s.stepBudget(m.to, m.bm)
	default:
		if b, ok := m.qm.(*queueBatch); ok {
			s.stats.batches++
			s.eng.beginBatch()
			for _, inner := range b.Msgs {
				s.traceMsg(simMsg{qm: inner})
				s.handleQueue(inner)
			}
			s.eng.endBatch(s.now)
			s.eng.flushIdle(s.now)
			s.afterEngine()
			return
		}
		s.traceMsg(m)
		s.handleQueue(m.qm)
		s.eng.flushIdle(s.now) // as the queue actor, after each Receive
	}
}

func (s *sim) traceMsg(m simMsg) {
	if s.trace != nil {
		s.trace(s.describe(m))
	}
}
