package protocol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/itchyny/gojq"
)

// How a batch's when and fold programs are evaluated (SPEC §8.2.8): every
// evaluation goes through evalBatchProgram, so a shared, bounded jq
// evaluator can later take its place in this one file.

// BatchEvalTimeout bounds one evaluation of a batch program; past it the
// evaluation is a runtime error.
const BatchEvalTimeout = 500 * time.Millisecond

// batchCacheMax bounds the compiled programs kept; the cache starts over
// when it is full.
const batchCacheMax = 4096

var batchCache = struct {
	sync.RWMutex
	m map[string]*gojq.Code
}{m: make(map[string]*gojq.Code)}

// compileBatchProgram parses and compiles a batch program in which $existing
// and $new are defined and the environment is empty, caching it by its
// source text.
func compileBatchProgram(src string) (*gojq.Code, error) {
	batchCache.RLock()
	code := batchCache.m[src]
	batchCache.RUnlock()
	if code != nil {
		return code, nil
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, err
	}
	code, err = gojq.Compile(q,
		gojq.WithVariables([]string{"$existing", "$new"}),
		gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, err
	}
	batchCache.Lock()
	if len(batchCache.m) >= batchCacheMax {
		clear(batchCache.m)
	}
	batchCache.m[src] = code
	batchCache.Unlock()
	return code, nil
}

// errBatchTimeout is the runtime error of an evaluation past the limit.
var errBatchTimeout = fmt.Errorf("evaluation exceeded the time limit of %v", BatchEvalTimeout)

// evalBatchProgram runs code with null as input and $existing, $new bound,
// within BatchEvalTimeout. It returns once it has max outputs, at the end of
// the outputs or at the first runtime error.
func evalBatchProgram(code *gojq.Code, existing, new any, max int) (outs []any, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), BatchEvalTimeout)
	defer cancel()
	iter := code.RunWithContext(ctx, nil, existing, new)
	for {
		v, ok := iter.Next()
		if !ok {
			return outs, nil
		}
		if e, isErr := v.(error); isErr {
			if errors.Is(e, context.DeadlineExceeded) {
				return outs, errBatchTimeout
			}
			return outs, e
		}
		if outs = append(outs, v); len(outs) == max {
			return outs, nil
		}
	}
}
