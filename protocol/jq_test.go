package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/stretchr/testify/require"
)

// runAll runs a bounded program and collects its outputs.
func runAll(t *testing.T, src string, input any, limit time.Duration) ([]any, error) {
	t.Helper()
	p, err := CompileJQ(src)
	require.NoError(t, err, src)
	var out []any
	err = p.Run(context.Background(), limit, input, nil, func(v any) bool {
		out = append(out, v)
		return true
	})
	return out, err
}

// plainAll runs the same program in plain gojq (no bounds).
func plainAll(t *testing.T, src string, input any) ([]any, error) {
	t.Helper()
	q, err := gojq.Parse(src)
	require.NoError(t, err, src)
	code, err := gojq.Compile(q)
	require.NoError(t, err, src)
	var out []any
	iter := code.Run(input)
	for {
		v, ok := iter.Next()
		if !ok {
			return out, nil
		}
		if err, ok := v.(error); ok {
			return out, err
		}
		out = append(out, v)
	}
}

// TestJQBoundedAnswersLikePlainJQ: the rewritten operators and guarded
// builtins answer exactly as gojq's own, outputs and their order included.
func TestJQBoundedAnswersLikePlainJQ(t *testing.T) {
	var input any
	require.NoError(t, json.Unmarshal([]byte(`{"a":1,"b":2.5,"s":"x,y,z","arr":[1,2,3],"o":{"k":{"d":1}},"n":null,"big":12345678901234567890}`), &input))
	for _, src := range []string{
		`.a + .b`, `.a * 3`, `.b / 2`, `.s / ","`, `.s * 3`, `3 * .s`, `.s * 0`, `.s * -1`, `.arr + [4]`, `.o * {"k":{"e":2}}`,
		`(1,2) + (10,20)`, `(1,2) * (10,20)`, `[.arr[] | . * 2]`, `"v=\(.a) w=\(.arr)"`, `@base64 "x\(.s)y"`, `@json "j\(.o)"`,
		`.a += 1`, `.arr[1] *= 10`, `.b /= 2`, `.arr[0] = 9`, `.x.y = 1`, `.arr[5] = 1`, `.arr |= map(. + 1)`, `.arr[] |= . * 2`,
		`setpath(["q", 2]; 1)`, `pick(.o.k)`, `[.arr | tostream] | fromstream(.[])`, `.arr | join("-")`, `["a","b"] | join(", ")`,
		`.arr | add`, `add(.arr[])`, `[] | add`, `.s | split(",")`, `.s | split("")`, `.s | explode`, `.s | explode | implode`,
		`.big + 1`, `.a - 1`, `10 % 3`, `.a == 1 and .b > 2`, `to_entries | length`, `with_entries(.value |= tostring) | keys`,
		`reduce .arr[] as $x (0; . + $x)`, `[limit(3; repeat(1))]`, `.s | sub(","; ";")`, `.s | gsub(","; ";")`, `"abc" | ascii_upcase`,
		`{} + null`, `null + 1`, `"a" + null`, `[1] - [1]`, `.o + {"z":1}`, `.s / .a`, `1 / 0`, `{} * 2`, `[] * 2`,
		`null | add`, `.o | add`, `"abc" | add`, `add(empty)`, `[[1], [2]] | add`, `path(.a)`, `[paths]`, `del(.arr[0])`, `to_entries[0]`,
		`.arr | .[1:] = ["z"]`, `.arr[-1] = 0`, `try error("x") catch .`, `[.arr[] as $x | $x * $x]`, `"\(1,2)-\(3,4)"`, `@text "a\(.a)"`,
		`.s | split(",";null)`, `.s | splits(",")`, `.s | ascii_downcase | explode | implode`, `[.arr[] | tostring] | join(",")`,
		`{"a":{"b":1}} * {"a":{"c":2}}`, `"x" * 1.5`, `"x" * 0.5`, `.arr | .[1] += 5`, `getpath(["o","k","d"])`, `setpath([]; 1)`,
	} {
		want, wantErr := plainAll(t, src, input)
		got, err := runAll(t, src, input, time.Second)
		if wantErr != nil {
			require.Error(t, err, src)
			require.Equal(t, wantErr.Error(), err.Error(), src)
		} else {
			require.NoError(t, err, src)
		}
		require.Equal(t, want, got, src)
	}
}

// errStopped stands for "either bound": which comes first for a program
// that takes many steps depends on the machine's speed (and the race
// detector); TestJQMemoryBoundComesFirst checks the memory bound of those
// without a deadline.
var errStopped = errors.New("stopped by either bound")

// hostilePrograms are named hostile programs; want is the bound that stops
// them on any machine (errStopped: either).
var hostilePrograms = []struct {
	name, src string
	want      error
	memory    bool // the memory bound stops it when time does not
}{
	{"range collected", `[range(2e7)] | length > 0`, ErrJQTimeout, false},
	{"range streamed", `last(range(1e10))`, ErrJQTimeout, false},
	{"string repetition", `"a" * 2147483646`, ErrJQTooLarge, true},
	{"string repetition caught", `try ("a" * 2147483646) catch "caught" | length`, ErrJQTooLarge, true},
	{"string doubling", `"a" | until(length > 1e9; . + .)`, errStopped, true},
	{"interpolation doubling", `"a" | until(length > 1e9; "\(.)\(.)")`, errStopped, true},
	{"array doubling", `[1] | until(length > 1e9; . + .)`, errStopped, true},
	{"object merge doubling", `{"a": "x"} | until(false; {"k": ., "l": .} * {"m": .})`, errStopped, true},
	{"large array by index", `.[500000000] = 1`, ErrJQTooLarge, true},
	{"large array by setpath", `setpath([400000000]; 1)`, ErrJQTooLarge, true},
	{"large array by update", `.[400000000] |= 1`, ErrJQTooLarge, true},
	{"large array by pick", `pick(.[400000000])`, ErrJQTooLarge, true},
	{"join of a long separator", `[range(1000)] | join("x" * 4000000)`, errStopped, true},
	{"add of long strings", `[range(100) | "x" * 100000] | add`, errStopped, true},
	{"many values under the bound", `[range(100) | "x" * 4000000 + "\(.)"] | length`, errStopped, true},
	{"explode of a long string", `"x" * 8000000 | explode | length`, errStopped, true},
	{"split into characters", `"x" * 8000000 | split("") | length`, errStopped, true},
	{"division into characters", `"x" * 8000000 / "" | length`, errStopped, true},
	{"deep recursion", `def f: [f]; f`, ErrJQTimeout, false},
	{"deep recursion with a sum", `def f: 1 + f; f`, ErrJQTimeout, false},
	{"large object", `reduce range(1e8) as $i ({}; .["k\($i)"] = $i)`, ErrJQTimeout, false},
	{"infinite loop", `until(false; .)`, ErrJQTimeout, false},
}

// TestJQHostilePrograms: each hostile program is stopped by the time or
// the memory bound, quickly, without the process's heap growing past a
// generous ceiling; each answer is the named error.
func TestJQHostilePrograms(t *testing.T) {
	for _, tt := range hostilePrograms {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := runAll(t, tt.src, nil, FilterTimeLimit)
			took := time.Since(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if tt.want == errStopped {
				require.True(t, errors.Is(err, ErrJQTooLarge) || errors.Is(err, ErrJQTimeout), "got %v, want either bound", err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
			// Generous: the deadline is 100 ms; a stopped program returns at
			// its next operation (the race detector slows each one).
			require.Less(t, took, 5*time.Second)
			grown := int64(after.HeapSys) - int64(before.HeapSys)
			t.Logf("%s: %v in %v, heap grew %d MiB, allocated %d MiB", tt.src, err, took.Round(time.Millisecond), grown>>20, (after.TotalAlloc-before.TotalAlloc)>>20)
			require.Less(t, grown, int64(512<<20), "heap grew by %d MiB", grown>>20)
		})
	}
}

// TestJQMemoryBoundComesFirst: without a deadline to stop them, the
// programs that build large values are stopped by the memory bound, on
// the first value over it.
func TestJQMemoryBoundComesFirst(t *testing.T) {
	for _, tt := range hostilePrograms {
		if !tt.memory {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			_, err := runAll(t, tt.src, nil, time.Minute)
			require.ErrorIs(t, err, ErrJQTooLarge)
		})
	}
}

// TestJQReservedNames: a program may not reach the guards' own names.
func TestJQReservedNames(t *testing.T) {
	for _, src := range []string{`$__tollgate_run`, `_tollgate_add(1; 2; null)`, `def _tollgate_x: 1; 2`, `1 as $__tollgate_run | 2`} {
		_, err := CompileJQ(src)
		require.Error(t, err, src)
		require.Contains(t, err.Error(), "reserved name", src)
	}
}

// TestJQVariablesAndLimit: variables reach the program; a caller's own time
// limit applies (batch programs use 500 ms).
func TestJQVariablesAndLimit(t *testing.T) {
	p, err := CompileJQ(`$existing + $new`, "$existing", "$new")
	require.NoError(t, err)
	var got []any
	require.NoError(t, p.Run(context.Background(), 500*time.Millisecond, nil, []any{[]any{1}, []any{2}}, func(v any) bool { got = append(got, v); return true }))
	require.Equal(t, []any{[]any{1, 2}}, got)
	require.Error(t, p.Run(context.Background(), time.Second, nil, nil, func(any) bool { return true }))

	slow, err := CompileJQ(`last(range(1e10))`)
	require.NoError(t, err)
	start := time.Now()
	err = slow.Run(context.Background(), 300*time.Millisecond, nil, nil, func(any) bool { return true })
	require.ErrorIs(t, err, ErrJQTimeout)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}
