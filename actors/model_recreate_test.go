package actors

// The recreate-budget operation of the model test: an operator deletes a
// budget's jobs and the budget, creates it again and submits new work to
// it, one request after the other. When a final reservation of a deleted
// job was answered but not yet read, the queue refunds it to the new budget
// of the same key, which must ignore it: it never made that debit. The
// generator aims at such a key when there is one.

// genRecreate fills op as a recreate-budget operation.
func (s *sim) genRecreate(op *simOp) {
	r := s.rng
	op.Kind = opRecreateBudget
	op.Key = s.keyWithCommittedAnswer()
	if op.Key == "" {
		op.Key = simKeys[r.IntN(len(simKeys))]
	}
	op.Def = s.genDef(1)
	op.Drain = r.IntN(3) // leave the answer unread for now, often
	for range 1 + r.IntN(3) {
		op.Jobs = append(op.Jobs, jobSpec{
			Queue:      simQueues[r.IntN(len(simQueues))],
			Prio:       simPrios[r.IntN(len(simPrios))],
			RetryLimit: -1,
			Bindings:   []bindSpec{{Key: op.Key, Cost: 1}},
		})
	}
}

// keyWithCommittedAnswer returns the key of a budget whose committed answer
// waits in the queue's mailbox, or "".
func (s *sim) keyWithCommittedAnswer() string {
	key := ""
	var look func(m queueMsg)
	look = func(m queueMsg) {
		switch x := m.(type) {
		case *ReserveResponse:
			if _, ok := s.mbudgets[x.Key]; ok && x.Committed && key == "" {
				key = x.Key
			}
		case *queueBatch:
			for _, inner := range x.Msgs {
				look(inner)
			}
		}
	}
	mb := s.mail.queue
	for _, m := range mb.msgs[mb.head:] {
		if qm, ok := m.qm.(queueMsg); ok {
			look(qm)
		}
	}
	return key
}

func (s *sim) doRecreateBudget(op simOp) {
	bound := func(mj *mJob) bool {
		for _, b := range mj.bindings {
			if b.Key == op.Key {
				return true
			}
		}
		return false
	}
	for s.viol == nil {
		list := s.unfinished()
		i := 0
		for i < len(list) && !bound(list[i]) {
			i++
		}
		if i == len(list) {
			break
		}
		s.doDelete(simOp{Kind: opDelete, Picks: []int{i}})
		if !list[i].finished {
			return // doDelete reported why
		}
	}
	if _, ok := s.mbudgets[op.Key]; ok {
		s.doDeleteBudget(simOp{Kind: opDeleteBudget, Key: op.Key})
	}
	s.doCreateBudget(simOp{Kind: opCreateBudget, Key: op.Key, Def: op.Def})
	if def, ok := s.mbudgets[op.Key]; ok && def == op.Def && len(op.Jobs) > 0 {
		s.doEnqueue(simOp{Kind: opEnqueue, Jobs: op.Jobs})
	}
}
