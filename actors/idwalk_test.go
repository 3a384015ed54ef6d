package actors

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// TestWalkIDsMergesInOrder checks walkIDs against a sorted slice of the
// union: sets of a few to thousands of keys (several chunks, some left
// part-full by deletes) and the runs of a ready index of several
// priorities (the keys coldRuns keeps: those marked cold, less a third that
// keep refuses), every
// direction, pivots on, between, before and after the keys, and a stop
// part-way.
func TestWalkIDsMergesInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		nsets := 1 + rng.IntN(5)
		sets := make([]*orderedSet[protocol.IDKey], nsets)
		for i := range sets {
			sets[i] = newOrderedSet(keyLess)
		}
		ready := newReadyIndex()
		keep := func(k protocol.IDKey) bool { return k.Lo%3 != 0 }
		var inSets, all []protocol.IDKey
		seen := make(map[protocol.IDKey]bool)
		for range rng.IntN(3000) {
			k := protocol.IDKey{Hi: rng.Uint64N(1000), Lo: rng.Uint64N(4)}
			if seen[k] {
				continue
			}
			seen[k] = true
			if round%2 == 1 && rng.IntN(2) == 0 {
				// a walk gives the items marked cold that keep accepts
				cold := rng.IntN(4) > 0
				it := readyItem{key: k, priority: uint16(rng.IntN(4))}
				ready.add(it, "q")
				if cold {
					ready.markCold(it, "q")
				}
				if cold && keep(k) {
					all = append(all, k)
				}
				continue
			}
			inSets = append(inSets, k)
			sets[rng.IntN(nsets)].ReplaceOrInsert(k)
		}
		for _, k := range inSets[:len(inSets)/3] { // thin some chunks
			for _, s := range sets {
				s.Delete(k)
			}
		}
		all = append(all, inSets[len(inSets)/3:]...)
		slices.SortFunc(all, func(a, b protocol.IDKey) int {
			if a.Less(b) {
				return -1
			}
			return 1
		})
		pivots := []protocol.IDKey{{}, protocol.MaxIDKey, {Hi: rng.Uint64N(1000), Lo: rng.Uint64N(5)}}
		if len(all) > 0 {
			pivots = append(pivots, all[rng.IntN(len(all))])
		}
		for _, pivot := range pivots {
			for _, desc := range []bool{false, true} {
				var want []protocol.IDKey
				for _, k := range all {
					if !desc && !k.Less(pivot) || desc && !pivot.Less(k) {
						want = append(want, k)
					}
				}
				if desc {
					slices.Reverse(want)
				}
				stop := len(want) + 1
				if rng.IntN(2) == 0 && len(want) > 0 {
					stop = rng.IntN(len(want)) + 1
				}
				var got []protocol.IDKey
				walkIDs(sets, coldRuns(queueReadyOf(ready, "q"), pivot, desc, func() func(protocol.IDKey) bool { return keep }), pivot, desc, func(k protocol.IDKey) bool {
					got = append(got, k)
					return len(got) < stop
				})
				want = want[:min(stop, len(want))]
				if !slices.Equal(got, want) {
					t.Fatalf("round %d, %d sets, pivot %v, desc %v: got %d keys, want %d (%v... vs %v...)",
						round, nsets, pivot, desc, len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
				}
			}
		}
	}
}

// queueReadyOf is the ready jobs of queue in r, an empty set if none.
func queueReadyOf(r *readyIndex, queue string) *queueReady {
	if q := r.byQueue[queue]; q != nil {
		return q
	}
	return &queueReady{}
}
