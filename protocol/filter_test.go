package protocol

import (
	"context"
	"math"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func parseQ(t *testing.T, raw string, extra ...string) (*JobFilter, map[string]string, error) {
	t.Helper()
	q, err := url.ParseQuery(raw)
	require.NoError(t, err)
	return ParseJobFilter(q, extra...)
}

func TestParseRange(t *testing.T) {
	cases := []struct {
		in       string
		limit    uint64
		min, max uint64
		canon    string
	}{
		{"5", math.MaxUint16, 5, 5, "5"},
		{"1..3", math.MaxUint16, 1, 3, "1..3"},
		{"..3", math.MaxUint16, 0, 3, "..3"},
		{"3..", math.MaxUint16, 3, math.MaxUint16, "3.."},
		{"..", math.MaxUint16, 0, math.MaxUint16, ".."},
		{"0..65535", math.MaxUint16, 0, math.MaxUint16, ".."},
		{"0..", math.MaxUint32, 0, math.MaxUint32, ".."},
		{"7..7", math.MaxUint32, 7, 7, "7"},
		{"18446744073709551615", math.MaxUint64, math.MaxUint64, math.MaxUint64, "18446744073709551615"},
	}
	for _, c := range cases {
		r, err := ParseRange("x", c.in, c.limit)
		require.NoError(t, err, c.in)
		require.Equal(t, c.min, r.Min, c.in)
		require.Equal(t, c.max, r.Max, c.in)
		require.Equal(t, c.canon, r.String(), c.in)
		require.True(t, r.Contains(c.min) && r.Contains(c.max), c.in)
	}
	for _, bad := range []string{"-1", "a", "1..b", "65536", "1...2", "..-3", " 1"} {
		_, err := ParseRange("priority", bad, math.MaxUint16)
		require.Error(t, err, bad)
	}
	_, err := ParseRange("priority", "5..4", math.MaxUint16)
	require.EqualError(t, err, "priority: range lower bound exceeds upper bound")
}

func TestParseJobFilter(t *testing.T) {
	f, rest, err := parseQ(t, "queue=b,,a,b&type=&status=ready,scheduled&priority=..10&attempts=1..&budgets.key=k&limit=3", "limit")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, f.Queues)
	require.Nil(t, f.Types)
	require.Equal(t, []Status{StatusReady, StatusScheduled}, f.Statuses)
	require.Equal(t, map[string]string{"limit": "3"}, rest)
	require.False(t, f.ReadyAt.Set)
	var b strings.Builder
	f.AppendQuery(&b)
	require.Equal(t, "&status=ready,scheduled&queue=a,b&priority=..10&attempts=1..&budgets.key=k", b.String())

	_, _, err = parseQ(t, "bogus=1")
	requireInvalid(t, err, "invalid query parameters: unknown field `bogus`")
	_, _, err = parseQ(t, "limit=1")
	requireInvalid(t, err, "invalid query parameters: unknown field `limit`")
	_, _, err = parseQ(t, "status=ready,nope")
	requireInvalid(t, err, "invalid query parameters: status: unknown status: nope")
	_, _, err = parseQ(t, "priority=9..2")
	requireInvalid(t, err, "invalid query parameters: priority: range lower bound exceeds upper bound")
	_, _, err = parseQ(t, "ready_at=-5")
	require.ErrorContains(t, err, "invalid query parameters: ready_at: ")
	_, _, err = parseQ(t, "attempts=4294967296")
	require.ErrorContains(t, err, "invalid query parameters: attempts: ")

	f, _, err = parseQ(t, "id=nope")
	require.NoError(t, err)
	requireInvalid(t, f.CheckIDs(), `invalid job ID: "nope"`)

	f, _, err = parseQ(t, "filter=.a+%3D%3D")
	require.NoError(t, err)
	err = f.Compile()
	require.ErrorContains(t, err, "invalid filter: ")
	require.Equal(t, CodeInvalid, err.(*Error).Code)

	f, _, err = parseQ(t, "")
	require.NoError(t, err)
	require.True(t, f.Empty())
}

func requireInvalid(t *testing.T, err error, msg string) {
	t.Helper()
	require.Error(t, err)
	pe, ok := err.(*Error)
	require.True(t, ok, "%T", err)
	require.Equal(t, CodeInvalid, pe.Code)
	require.Equal(t, msg, pe.Message)
}

func TestJobFilterMatch(t *testing.T) {
	ctx := context.Background()
	f, _, err := parseQ(t, "filter=.n+>+1")
	require.NoError(t, err)
	require.NoError(t, f.Compile())
	require.True(t, f.MatchPayload(ctx, []byte(`{"n":2}`)))
	require.False(t, f.MatchPayload(ctx, []byte(`{"n":1}`)))
	require.False(t, f.MatchPayload(ctx, []byte(`"str"`)), "runtime error is no match")
	require.False(t, f.MatchPayload(ctx, []byte(`null`)))

	// Any truthy output matches; null and false do not.
	f, _, _ = parseQ(t, "filter="+url.QueryEscape(`.[]`))
	require.NoError(t, f.Compile())
	require.True(t, f.MatchPayload(ctx, []byte(`[false,null,0]`)))
	require.False(t, f.MatchPayload(ctx, []byte(`[false,null]`)))
	require.False(t, f.MatchPayload(ctx, []byte(`[]`)))

	// Big integers keep their precision.
	f, _, _ = parseQ(t, "filter="+url.QueryEscape(`.id == 9007199254740993`))
	require.NoError(t, f.Compile())
	require.True(t, f.MatchPayload(ctx, []byte(`{"id":9007199254740993}`)))
	require.False(t, f.MatchPayload(ctx, []byte(`{"id":9007199254740992}`)))

	// env is empty: the server's environment does not leak.
	f, _, _ = parseQ(t, "filter="+url.QueryEscape(`env | length == 0`))
	require.NoError(t, f.Compile())
	require.True(t, f.MatchPayload(ctx, []byte(`1`)))

	j := &Job{ID: "0000000000000000000000001", Queue: "q", Type: "t", Priority: 10, Status: StatusScheduled, ReadyAt: 100, Attempts: 2,
		Budgets: []Binding{{Key: "b1", Cost: 1}}, Payload: []byte(`{}`)}
	for raw, want := range map[string]bool{
		"":                               true,
		"status=ready":                   true, // scheduled past ready_at reads as ready
		"status=scheduled":               false,
		"priority=10":                    true,
		"priority=11..":                  false,
		"ready_at=..100":                 true,
		"ready_at=101..":                 false,
		"attempts=0":                     false,
		"attempts=1..":                   true,
		"budgets.key=b0,b1":              true,
		"budgets.key=b2":                 false,
		"queue=q&type=t":                 true,
		"queue=q&type=u":                 false,
		"id=0000000000000000000000001":   true,
		"id=0000000000000000000000002":   false,
		"filter=" + url.QueryEscape("."): true,
	} {
		f, _, err := parseQ(t, raw)
		require.NoError(t, err)
		require.NoError(t, f.Validate())
		require.Equal(t, want, f.Match(ctx, j, 200), raw)
	}
}
