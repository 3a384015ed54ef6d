package actors

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestModelShrink reduces the failing op sequence of MODEL_SEED to a small
// one that still violates the same invariant, and prints it. It only runs
// when MODEL_SHRINK is set.
func TestModelShrink(t *testing.T) {
	if os.Getenv("MODEL_SHRINK") == "" {
		t.Skip("set MODEL_SHRINK=1 and MODEL_SEED to shrink a failing seed")
	}
	seed := uint64(modelEnvInt("MODEL_SEED", 1))
	nOps := modelEnvInt("MODEL_OPS", 4000)
	res := runModel(t, seed, nOps, nil)
	if res.viol == nil {
		t.Skipf("seed %d does not fail", seed)
	}
	cat := res.viol.cat
	t.Logf("seed %d fails with %v after %d ops", seed, res.viol, len(res.ops))
	ops := append([]simOp(nil), res.ops[:res.viol.op+1]...)
	fails := func(c []simOp) bool {
		r := runModelOpts(t, seed, 0, c, false)
		return r.viol != nil && r.viol.cat == cat
	}
	if !fails(ops) {
		t.Fatalf("replay of %d ops does not reproduce %s", len(ops), cat)
	}
	runs := 0
	for changed := true; changed; {
		changed = false
		// remove chunks of ops, large to small
		for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
			for i := 0; i+chunk <= len(ops); {
				cand := append(append([]simOp(nil), ops[:i]...), ops[i+chunk:]...)
				runs++
				if fails(cand) {
					ops = cand
					changed = true
				} else {
					i += chunk
				}
			}
		}
		// simplify single ops: drop jobs of bulk enqueues, bindings, picks;
		// make partial drains full
		for i := range ops {
			for _, cand := range simplifications(ops[i]) {
				c := append([]simOp(nil), ops...)
				c[i] = cand
				runs++
				if fails(c) {
					ops = c
					changed = true
					break
				}
			}
		}
	}
	os.Setenv("MODEL_TRACE", "1")
	r := runModelOpts(t, seed, 0, ops, false)
	os.Unsetenv("MODEL_TRACE")
	var b strings.Builder
	for i, op := range ops {
		fmt.Fprintf(&b, "  %2d: %s\n", i, op)
	}
	t.Logf("minimal sequence (%d ops, %d replays) for seed %d:\n%s=> %v", len(ops), runs, seed, b.String(), r.viol)
}

func simplifications(op simOp) []simOp {
	var out []simOp
	if op.Drain >= 0 && op.Kind != opDrain {
		c := op
		c.Drain = -1
		out = append(out, c)
	}
	if op.Kind == opEnqueue {
		for j := range op.Jobs {
			if len(op.Jobs) > 1 {
				c := op
				c.Jobs = append(append([]jobSpec(nil), op.Jobs[:j]...), op.Jobs[j+1:]...)
				out = append(out, c)
			}
			js := op.Jobs[j]
			for k := range js.Bindings {
				c := op
				c.Jobs = append([]jobSpec(nil), op.Jobs...)
				nj := js
				nj.Bindings = append(append([]bindSpec(nil), js.Bindings[:k]...), js.Bindings[k+1:]...)
				c.Jobs[j] = nj
				out = append(out, c)
			}
			if js.Delay > 0 || js.RetryLimit >= 0 {
				c := op
				c.Jobs = append([]jobSpec(nil), op.Jobs...)
				nj := js
				nj.Delay, nj.RetryLimit = 0, -1
				c.Jobs[j] = nj
				out = append(out, c)
			}
		}
	}
	if len(op.Picks) > 1 {
		c := op
		c.Picks = op.Picks[:len(op.Picks)-1]
		out = append(out, c)
	}
	if op.Kind == opOpen && len(op.Queues) > 0 {
		c := op
		c.Queues = nil
		out = append(out, c)
	}
	return out
}
