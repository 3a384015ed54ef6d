package protocol

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/itchyny/gojq"
)

// Bounded jq (SPEC §6.1, Decision "bounds"): every jq program the server
// runs (filters, and the batch programs of §8.2) is compiled by CompileJQ
// and run by JQProgram.Run, which stops it when it runs out of time or
// makes a value too large.
//
// Time: gojq checks its context between two operations, so a deadline stops
// any program that keeps stepping. Memory: one operation can allocate
// gigabytes at once ("a" * 2147483646, .[500000000] = 1, join over a long
// string), which no deadline interrupts. So the program is rewritten before
// it is compiled: the operators + * / and the builtins that can build a
// value much larger than their inputs (setpath and the assignments and pick
// and fromstream built on it, join, add, split/1, explode) go through guards
// that estimate the size of the result before making it, and refuse it over
// JQMaxValueBytes. The guards also count what they let through: a run that
// makes more than JQMaxRunBytes in guarded values is stopped too (many values
// each under the bound). Values built step by step (an array collecting a
// long range) cost one operation per step, and the deadline bounds them:
// measured, [range(2e7)] holds about 5 MiB when 100 ms run out.

// Bounds of every jq evaluation.
const (
	// FilterTimeLimit is the time limit of a §6.1 filter on one job.
	FilterTimeLimit = 100 * time.Millisecond
	// JQMaxValueBytes is the largest value a program may make, in the
	// estimate of jqSize (about what the value takes in memory).
	JQMaxValueBytes = 8 << 20
	// JQMaxRunBytes bounds the guarded values one run makes in total.
	JQMaxRunBytes = 128 << 20
)

// Errors of a bounded run; both are runtime errors of the program.
var (
	// ErrJQTimeout: the program ran past its time limit.
	ErrJQTimeout = errors.New("jq program exceeded its time limit")
	// ErrJQTooLarge: the program made (or was about to make) a value over
	// JQMaxValueBytes, or too many large values in one run.
	ErrJQTooLarge = errors.New("jq program exceeded its memory bound")
)

// runVar is the hidden variable that carries a run's state to the guards.
const runVar = "$__tollgate_run"

// reservedPrefixes are names a program may not use: the guards' own.
var reservedPrefixes = []string{"$__tollgate", "_tollgate"}

// jqPrelude replaces the allocating builtins with guarded ones. User
// definitions shadow builtins, and the compiler resolves the update
// operators (|=, +=, ...) and non-constant assignments by the names
// _modify, _assign, _add, _multiply and _divide, so these reach the guards
// too. The bodies follow jq 1.7's definitions with setpath guarded.
const jqPrelude = `
def setpath($p; $v): _tollgate_setpath($p; $v; ` + runVar + `);
def _assign(paths; $v): reduce path(paths) as $p (.; setpath($p; $v));
def _modify(paths; update): reduce path(paths) as $p (.; . as $x | label $out | (setpath($p; $x | getpath($p) | update) | ., break $out), delpaths([$p]));
def _add($a; $b): _tollgate_add($a; $b; ` + runVar + `);
def _multiply($a; $b): _tollgate_multiply($a; $b; ` + runVar + `);
def _divide($a; $b): _tollgate_divide($a; $b; ` + runVar + `);
def pick(f): . as $v | reduce path(f) as $p (null; setpath($p; $v | getpath($p)));
def fromstream(f): foreach f as $pv (null; if .e then null end | $pv as [$p, $v] | if $pv | length == 2 then setpath(["v"] + $p; $v) | setpath(["e"]; $p | length == 0) else setpath(["e"]; $p | length == 1) end; if .e then .v else empty end);
def join($x): _tollgate_join($x; ` + runVar + `);
def add: _tollgate_addall(` + runVar + `);
def add(f): [f] | add;
def split($s): _tollgate_split($s; ` + runVar + `);
def explode: _tollgate_explode(` + runVar + `);
.`

// JQProgram is a compiled, bounded jq program. It is safe for concurrent
// runs.
type JQProgram struct {
	code  *gojq.Code
	nvars int
}

// CompileJQ parses and compiles a jq program with the given variable names
// ("$existing", ...). $ENV and env see an empty environment (SPEC §8.2.8).
// The error is the parser's or compiler's, for the caller to wrap.
func CompileJQ(src string, variables ...string) (*JQProgram, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, err
	}
	if name := reservedName(q); name != "" {
		return nil, fmt.Errorf("%s is a reserved name", name)
	}
	rewriteJQ(reflect.ValueOf(q))
	prelude, err := gojq.Parse(jqPrelude)
	if err != nil {
		panic(fmt.Sprintf("jq prelude: %v", err)) // a programmer error, caught by every test
	}
	q.FuncDefs = append(prelude.FuncDefs, q.FuncDefs...)
	opts := []gojq.CompilerOption{
		gojq.WithVariables(append(append([]string{}, variables...), runVar)),
		gojq.WithEnvironLoader(func() []string { return nil }),
	}
	opts = append(opts, jqGuards...)
	code, err := gojq.Compile(q, opts...)
	if err != nil {
		return nil, err
	}
	return &JQProgram{code: code, nvars: len(variables)}, nil
}

// Run runs the program on input with the values of its variables, for at
// most limit, and calls yield with each output until yield returns false.
// A runtime error of the program (an error value, ErrJQTimeout or
// ErrJQTooLarge) ends the run and is returned; the outputs yielded before
// it stand. A cancelled ctx ends the run with ctx's error.
func (p *JQProgram) Run(ctx context.Context, limit time.Duration, input any, vars []any, yield func(any) bool) error {
	if len(vars) != p.nvars {
		return fmt.Errorf("jq program takes %d variables, given %d", p.nvars, len(vars))
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	st := &jqRun{cancel: cancel}
	values := append(append(make([]any, 0, len(vars)+1), vars...), st)
	iter := p.code.RunWithContext(rctx, input, values...)
	for {
		out, ok := iter.Next()
		if !ok {
			return st.err()
		}
		if err, isErr := out.(error); isErr {
			if e := st.err(); e != nil {
				return e
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if rctx.Err() != nil {
				return ErrJQTimeout
			}
			return err
		}
		if e := st.err(); e != nil {
			return e
		}
		if !yield(out) {
			return nil
		}
	}
}

// reservedName returns the first name in q that the guards reserve.
func reservedName(q *gojq.Query) string {
	found := ""
	walkJQ(reflect.ValueOf(q), func(v reflect.Value) {
		var names []string
		switch x := v.Interface().(type) {
		case *gojq.Func:
			names = []string{x.Name}
		case *gojq.Pattern:
			names = []string{x.Name}
		case *gojq.FuncDef:
			names = append([]string{x.Name}, x.Args...)
		}
		for _, n := range names {
			for _, p := range reservedPrefixes {
				if found == "" && strings.HasPrefix(n, p) {
					found = n
				}
			}
		}
	})
	return found
}

// walkJQ calls fn on every pointer to a struct reachable from v, children
// before parents.
func walkJQ(v reflect.Value, fn func(reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return
		}
		walkJQ(v.Elem(), fn)
		fn(v)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkJQ(v.Field(i), fn)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkJQ(v.Index(i), fn)
		}
	}
}

// rewriteJQ routes the program's allocating operators through the guards:
// a + b, a * b and a / b become guarded calls (the compiler calls the
// builtin operator directly, which no definition can shadow), an
// assignment becomes a call of _assign (its constant-path form calls the
// builtin setpath directly) and a string interpolation becomes the
// guarded sum of its parts.
func rewriteJQ(root reflect.Value) {
	walkJQ(root, func(v reflect.Value) {
		switch x := v.Interface().(type) {
		case *gojq.Query:
			name := ""
			switch x.Op {
			case gojq.OpAdd:
				name = "_tollgate_add"
			case gojq.OpMul:
				name = "_tollgate_multiply"
			case gojq.OpDiv:
				name = "_tollgate_divide"
			case gojq.OpAssign:
				*x = *jqCall("_assign", x.Left, x.Right)
				return
			default:
				return
			}
			*x = *jqCall(name, x.Left, x.Right, jqCall(runVar))
		case *gojq.Term:
			if (x.Type == gojq.TermTypeString || x.Type == gojq.TermTypeFormat) && x.Str != nil && x.Str.Queries != nil {
				x.Query = interpolation(x)
				x.Type, x.Str, x.Format = gojq.TermTypeQuery, nil, ""
			}
		}
	})
}

// interpolation is the guarded sum of a string interpolation's parts, each
// query part formatted as the compiler would (tostring, or the format).
func interpolation(t *gojq.Term) *gojq.Query {
	format := &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: "tostring"}}
	if t.Type == gojq.TermTypeFormat {
		format = &gojq.Term{Type: gojq.TermTypeFormat, Format: t.Format}
	}
	var sum *gojq.Query
	for _, part := range t.Str.Queries {
		if part.Term == nil || part.Term.Str == nil {
			part = &gojq.Query{Left: part, Op: gojq.OpPipe, Right: &gojq.Query{Term: format}}
		}
		if sum == nil {
			sum = part
		} else {
			sum = jqCall("_tollgate_add", sum, part, jqCall(runVar))
		}
	}
	return sum
}

func jqCall(name string, args ...*gojq.Query) *gojq.Query {
	return &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: name, Args: args}}}
}

// ---------------------------------------------------------------- guards

// jqRun is one run's state, handed to the guards as the hidden variable.
type jqRun struct {
	mu     sync.Mutex
	used   int64
	tooBig bool
	cancel func()
}

// charge accounts for a value of size bytes about to be made; false (and
// the run stopped) when it is over a bound.
func (r *jqRun) charge(size int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.used += size
	if size > JQMaxValueBytes || r.used > JQMaxRunBytes {
		r.tooBig = true
		r.cancel() // a program that catches the error stops anyway
		return false
	}
	return true
}

func (r *jqRun) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tooBig {
		return ErrJQTooLarge
	}
	return nil
}

// jqGuards are the guard functions; each takes the run state as its last
// argument, checks the size of what it would make and makes it with the
// builtin.
var jqGuards = []gojq.CompilerOption{
	guard("_tollgate_add", 2, "$a + $b", func(_ any, a []any) int64 { return concatSize(a[0], a[1]) }),
	guard("_tollgate_multiply", 2, "$a * $b", func(_ any, a []any) int64 { return multiplySize(a[0], a[1]) }),
	guard("_tollgate_divide", 2, "$a / $b", func(_ any, a []any) int64 { return splitSize(a[0], a[1]) }),
	guard("_tollgate_split", 1, "split($a)", func(v any, a []any) int64 { return splitSize(v, a[0]) }),
	guard("_tollgate_join", 1, "join($a)", joinSize),
	guard("_tollgate_addall", 0, "add", func(v any, _ []any) int64 { return addAllSize(v) }),
	guard("_tollgate_explode", 0, "explode", func(v any, _ []any) int64 {
		if s, ok := v.(string); ok {
			return int64(utf8.RuneCountInString(s)+1) * 16
		}
		return 0
	}),
	guard("_tollgate_setpath", 2, "setpath($a; $b)", func(v any, a []any) int64 { return setpathGrowth(v, a[0]) }),
}

// guard defines a guarded builtin of nargs arguments (plus the run state):
// size estimates the result before it is made; the builtin program src
// (over the input and $a, $b) makes it.
func guard(name string, nargs int, src string, size func(any, []any) int64) gojq.CompilerOption {
	vars := []string{"$a", "$b"}[:nargs]
	builtin := sync.OnceValue(func() *gojq.Code {
		q, err := gojq.Parse(src)
		if err != nil {
			panic(fmt.Sprintf("jq guard %s: %v", name, err))
		}
		code, err := gojq.Compile(q, gojq.WithVariables(vars))
		if err != nil {
			panic(fmt.Sprintf("jq guard %s: %v", name, err))
		}
		return code
	})
	return gojq.WithFunction(name, nargs+1, nargs+1, func(v any, args []any) any {
		run, ok := args[nargs].(*jqRun)
		if !ok {
			return fmt.Errorf("%s is an internal function", name)
		}
		if !run.charge(size(v, args[:nargs])) {
			return ErrJQTooLarge
		}
		out, ok := builtin().Run(v, args[:nargs]...).Next()
		if !ok {
			return nil
		}
		return out
	})
}

// jqSize estimates what a value takes in memory: 16 bytes per scalar or
// slot, plus string bytes, plus slice and map headers. It stops counting
// past limit (and returns a size over it), so it costs O(min(size, limit)).
func jqSize(v any, limit int64) int64 {
	switch v := v.(type) {
	case string:
		return 16 + int64(len(v))
	case *big.Int:
		return 16 + int64(len(v.Bits()))*8
	case []any:
		n := int64(24)
		for _, e := range v {
			if n += jqSize(e, limit-n); n > limit {
				return n
			}
		}
		return n
	case map[string]any:
		n := int64(48)
		for k, e := range v {
			if n += 16 + int64(len(k)) + jqSize(e, limit-n); n > limit {
				return n
			}
		}
		return n
	}
	return 16
}

// sizeLimit is the counting limit of jqSize in the guards: anything over it
// is refused anyway.
const sizeLimit = JQMaxValueBytes + 1

// concatSize is the size of a + b: strings, arrays and objects allocate.
func concatSize(a, b any) int64 {
	switch a.(type) {
	case string, []any, map[string]any:
		if reflect.TypeOf(a) == reflect.TypeOf(b) {
			return jqSize(a, sizeLimit) + jqSize(b, sizeLimit)
		}
	}
	return 0
}

// multiplySize is the size of a * b: a string repeated, or two objects
// merged.
func multiplySize(a, b any) int64 {
	if _, ok := b.(string); ok {
		a, b = b, a
	}
	switch x := a.(type) {
	case string:
		n, ok := jqNumber(b)
		if !ok || !(n > 0) {
			return 0
		}
		return int64(math.Min(float64(len(x))*math.Ceil(n)+16, math.MaxInt64/2))
	case map[string]any:
		if _, ok := b.(map[string]any); ok {
			return jqSize(a, sizeLimit) + jqSize(b, sizeLimit)
		}
	}
	return 0
}

// addAllSize is the size of add over an array's (or object's) values: the
// strings, arrays and objects among them are concatenated.
func addAllSize(v any) int64 {
	var n int64
	add := func(e any) bool {
		switch e.(type) {
		case string, []any, map[string]any:
			n += jqSize(e, sizeLimit-n)
		}
		return n <= sizeLimit
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if !add(e) {
				break
			}
		}
	case map[string]any:
		for _, e := range x {
			if !add(e) {
				break
			}
		}
	}
	return n
}

// splitSize is the size of s split at sep: its pieces, each a string.
func splitSize(s, sep any) int64 {
	str, ok1 := s.(string)
	by, ok2 := sep.(string)
	if !ok1 || !ok2 {
		return 0
	}
	pieces := strings.Count(str, by) + 1
	if by == "" {
		pieces = utf8.RuneCountInString(str)
	}
	return 24 + int64(len(str)) + int64(pieces)*32
}

// joinSize is the size of an array's elements joined by a separator.
func joinSize(v any, args []any) int64 {
	arr, ok := v.([]any)
	sep, ok2 := args[0].(string)
	if !ok || !ok2 {
		return 0
	}
	return jqSize(arr, sizeLimit) + int64(len(arr))*int64(len(sep))
}

// setpathGrowth is how much setpath(path; _) grows v: the array slots it
// adds when an index lies past an array's end (or under null).
func setpathGrowth(v, path any) int64 {
	keys, ok := path.([]any)
	if !ok {
		return 0
	}
	var grow int64
	cur := v
	for _, k := range keys {
		switch key := k.(type) {
		case string:
			m, _ := cur.(map[string]any)
			cur = m[key]
		default:
			f, ok := jqNumber(key)
			if !ok || f < 0 {
				return grow
			}
			i := int64(math.Min(f, math.MaxInt64/64))
			arr, _ := cur.([]any)
			if i < int64(len(arr)) {
				cur = arr[i]
				continue
			}
			grow += (i - int64(len(arr)) + 1) * 16
			cur = nil
		}
	}
	return grow
}

// jqNumber reads a gojq number.
func jqNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case float64:
		return n, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(n).Float64()
		return f, true
	}
	return 0, false
}
