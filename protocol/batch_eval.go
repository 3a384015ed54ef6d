package protocol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// How a batch's when and fold programs are evaluated (SPEC §8.2.8): every
// evaluation goes through evalBatchProgram, which runs the shared bounded
// evaluator (jq.go): $existing and $new defined, an empty environment, at
// most BatchEvalTimeout, and no value over JQMaxValueBytes.

// BatchEvalTimeout bounds one evaluation of a batch program; past it the
// evaluation is a runtime error.
const BatchEvalTimeout = 500 * time.Millisecond

// batchCacheMax bounds the compiled programs kept; the cache starts over
// when it is full.
const batchCacheMax = 4096

var batchCache = struct {
	sync.RWMutex
	m map[string]*JQProgram
}{m: make(map[string]*JQProgram)}

// compileBatchProgram compiles a batch program, caching it by its source
// text.
func compileBatchProgram(src string) (*JQProgram, error) {
	batchCache.RLock()
	code := batchCache.m[src]
	batchCache.RUnlock()
	if code != nil {
		return code, nil
	}
	code, err := CompileJQ(src, "$existing", "$new")
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
// within the bounds. It returns once it has max outputs, at the end of the
// outputs or at the first runtime error.
func evalBatchProgram(code *JQProgram, existing, new any, max int) (outs []any, err error) {
	err = code.Run(context.Background(), BatchEvalTimeout, nil, []any{existing, new}, func(v any) bool {
		outs = append(outs, v)
		return len(outs) < max
	})
	if errors.Is(err, ErrJQTimeout) {
		err = errBatchTimeout
	}
	return outs, err
}
