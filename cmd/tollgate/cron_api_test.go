package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestCronRoutes drives every route of SPEC §8.1.3 in JSON and msgpack
// and checks the objects of §8.1.1 field by field.
func TestCronRoutes(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	for _, f := range apitest.Formats {
		t.Run(string(f), func(t *testing.T) {
			do := func(method, path string, body any) apitest.Response {
				return apitest.Call(t, s.URL, f, method, path, body)
			}
			group := "g-" + string(f)
			before := apitest.NowMS()
			g := cronDecodeGroup(t, do("PUT", "/crons/"+group, map[string]any{
				"timezone": "Europe/Rome",
				"entries": []any{
					map[string]any{"name": "zeta", "expression": "0 6 * * *", "paused": true,
						"job": map[string]any{"type": "refresh", "queue": "wh", "priority": 1000, "payload": map[string]any{"incremental": true},
							"unique_key": "u", "retry_limit": 3, "budgets": []any{map[string]any{"key": "b-" + string(f), "create_with": map[string]any{"allocation": 5, "strategy": map[string]any{"type": "while_in_flight"}}}}}},
					map[string]any{"name": "alpha", "expression": "*/30 * * * *", "timezone": "UTC",
						"job": map[string]any{"type": "t", "queue": "wh", "payload": nil}},
				},
			}), http.StatusOK)
			after := apitest.NowMS()
			require.Equal(t, group, g.Name)
			require.False(t, g.Paused)
			require.False(t, g.Has("paused_at"))
			require.Equal(t, "Europe/Rome", g.Timezone)
			require.Len(t, g.Entries, 2)
			alpha, zeta := g.Entries[0], g.Entries[1]
			require.Equal(t, "alpha", alpha.Name)
			require.Equal(t, "UTC", alpha.Timezone)
			require.False(t, zeta.Has("timezone"), "an entry's own zone only")
			require.True(t, zeta.Paused)
			require.True(t, zeta.PausedAt >= before && zeta.PausedAt <= after, "created paused: paused_at = now")
			require.False(t, alpha.Has("paused_at"))
			require.False(t, alpha.Has("last_enqueue_at"))
			require.False(t, alpha.Has("resumed_at"))
			require.Greater(t, alpha.NextEnqueueAt, before)
			require.Zero(t, alpha.NextEnqueueAt%(30*60_000), "*/30 minutes in UTC")
			// the template as stored: priority filled, budgets with cost, no create_with, unique_while only if sent
			require.EqualValues(t, 32768, toU64(t, alpha.Job["priority"]))
			require.Contains(t, alpha.Job, "payload")
			require.Nil(t, alpha.Job["payload"])
			require.EqualValues(t, 1000, toU64(t, zeta.Job["priority"]))
			require.Equal(t, "u", zeta.Job["unique_key"])
			require.NotContains(t, zeta.Job, "unique_while")
			budgets := zeta.Job["budgets"].([]any)
			require.Len(t, budgets, 1)
			b0 := budgets[0].(map[string]any)
			require.Equal(t, "b-"+string(f), b0["key"])
			require.EqualValues(t, 1, toU64(t, b0["cost"]))
			require.NotContains(t, b0, "create_with")
			// the budget was created by create_with
			apitest.RequireStatus(t, do("GET", "/budgets/b-"+string(f), nil), http.StatusOK)

			require.Equal(t, g.Entries, cronDecodeGroup(t, do("GET", "/crons/"+group, nil), http.StatusOK).Entries)
			var list struct {
				Crons []string `json:"crons" msgpack:"crons"`
			}
			r := do("GET", "/crons", nil)
			apitest.RequireStatus(t, r, http.StatusOK)
			r.Decode(t, &list)
			require.Contains(t, list.Crons, group)

			// POST an entry: 201, then 409
			e := cronDecodeEntry(t, do("POST", "/crons/"+group+"/entries", cronEntryBody("mid", "0 0 * * *", "wh")), http.StatusCreated)
			require.Equal(t, "mid", e.Name)
			apitest.RequireError(t, do("POST", "/crons/"+group+"/entries", cronEntryBody("mid", "0 0 * * *", "wh")),
				http.StatusConflict, "cron entry 'mid' already exists in group '"+group+"'")
			// PUT an entry: the path names it; a body name is ignored
			body := cronEntryBody("ignored", "0 1 * * *", "wh")
			e = cronDecodeEntry(t, do("PUT", "/crons/"+group+"/entries/mid", body), http.StatusOK)
			require.Equal(t, "mid", e.Name)
			require.Equal(t, "0 1 * * *", e.Expression)
			delete(body, "name")
			cronDecodeEntry(t, do("PUT", "/crons/"+group+"/entries/put-made", body), http.StatusOK)
			require.Equal(t, e, cronDecodeEntry(t, do("GET", "/crons/"+group+"/entries/mid", nil), http.StatusOK))

			// PATCH an entry: pause, resume, {} a no-op
			p := cronDecodeEntry(t, do("PATCH", "/crons/"+group+"/entries/mid", map[string]any{"paused": true}), http.StatusOK)
			require.True(t, p.Paused)
			require.NotZero(t, p.PausedAt)
			q := cronDecodeEntry(t, do("PATCH", "/crons/"+group+"/entries/mid", map[string]any{"paused": false}), http.StatusOK)
			require.False(t, q.Paused)
			require.Equal(t, p.PausedAt, q.PausedAt, "paused_at kept after a resume")
			require.GreaterOrEqual(t, q.ResumedAt, p.PausedAt)
			require.Equal(t, q, cronDecodeEntry(t, do("PATCH", "/crons/"+group+"/entries/mid", map[string]any{}), http.StatusOK))
			require.Equal(t, q, cronDecodeEntry(t, do("PATCH", "/crons/"+group+"/entries/mid", map[string]any{"paused": false}), http.StatusOK),
				"setting the current value changes no timestamp")

			// PATCH the group: pause, zone cleared
			pg := cronDecodeGroup(t, do("PATCH", "/crons/"+group, map[string]any{"paused": true}), http.StatusOK)
			require.True(t, pg.Paused)
			require.NotZero(t, pg.PausedAt)
			require.Len(t, pg.Entries, 4)
			require.False(t, pg.Entry(t, "mid").Paused, "a group pause leaves the entries' own flags alone")
			cg := cronDecodeGroup(t, do("PATCH", "/crons/"+group, map[string]any{"timezone": nil}), http.StatusOK)
			require.False(t, cg.Has("timezone"))
			require.Equal(t, pg.Entry(t, "alpha"), cg.Entry(t, "alpha"), "an entry with its own zone is untouched")
			require.Equal(t, cg.Entries, cronDecodeGroup(t, do("PATCH", "/crons/"+group, map[string]any{}), http.StatusOK).Entries)

			// DELETE an entry, then the group
			apitest.RequireNoContent(t, do("DELETE", "/crons/"+group+"/entries/mid", nil))
			apitest.RequireError(t, do("GET", "/crons/"+group+"/entries/mid", nil), http.StatusNotFound, "cron entry 'mid' not found in group '"+group+"'")
			require.Len(t, cronDecodeGroup(t, do("GET", "/crons/"+group, nil), http.StatusOK).Entries, 3)
			apitest.RequireNoContent(t, do("DELETE", "/crons/"+group, nil))
			apitest.RequireError(t, do("GET", "/crons/"+group, nil), http.StatusNotFound, "cron group '"+group+"' not found")
			apitest.RequireError(t, do("DELETE", "/crons/"+group, nil), http.StatusNotFound, "cron group '"+group+"' not found")
			apitest.RequireError(t, do("GET", "/crons/"+group+"/entries/alpha", nil), http.StatusNotFound, "cron entry 'alpha' not found in group '"+group+"'")
		})
	}
}

func toU64(t testing.TB, v any) uint64 {
	t.Helper()
	switch x := v.(type) {
	case interface{ Int64() (int64, error) }:
		n, err := x.Int64()
		require.NoError(t, err)
		return uint64(n)
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		var n uint64
		switch y := x.(type) {
		case int8:
			n = uint64(y)
		case int16:
			n = uint64(y)
		case int32:
			n = uint64(y)
		case int64:
			n = uint64(y)
		case uint8:
			n = uint64(y)
		case uint16:
			n = uint64(y)
		case uint32:
			n = uint64(y)
		case uint64:
			n = y
		}
		return n
	}
	require.Failf(t, "not an integer", "%T %v", v, v)
	return 0
}

// TestCronDeleteAll: DELETE /crons answers {"deleted":n} and GET /crons is
// then empty; POST /reset removes every group too (SPEC §8.1.9, §6.8).
func TestCronDeleteAllAndReset(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	for _, g := range []string{"one", "two"} {
		cronPut(t, s.URL, g, map[string]any{"entries": []any{}})
	}
	r := apitest.DoJSON(t, s.URL, "GET", "/crons", nil)
	require.JSONEq(t, `{"crons":["one","two"]}`, string(r.Body), "empty groups are listed, ascending")
	r = apitest.DoJSON(t, s.URL, "DELETE", "/crons", nil)
	apitest.RequireStatus(t, r, http.StatusOK)
	require.JSONEq(t, `{"deleted":2}`, string(r.Body))
	require.JSONEq(t, `{"crons":[]}`, string(apitest.DoJSON(t, s.URL, "GET", "/crons", nil).Body))
	require.JSONEq(t, `{"deleted":0}`, string(apitest.DoJSON(t, s.URL, "DELETE", "/crons", nil).Body))

	cronPut(t, s.URL, "a/b", map[string]any{"entries": []any{cronEntryBody("e", "* * * * * *", "reset-q")}})
	cronWaitFor(t, func() bool { return len(cronJobs(t, s.URL, "reset-q")) > 0 })
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "POST", "/reset", nil))
	require.JSONEq(t, `{"crons":[]}`, string(apitest.DoJSON(t, s.URL, "GET", "/crons", nil).Body))
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/crons/a%2Fb", nil), http.StatusNotFound, "cron group 'a/b' not found")
	// nothing fires after the reset
	waitMS := apitest.NowMS() + 2200
	apitest.WaitUntilMS(t, waitMS)
	require.Empty(t, cronJobs(t, s.URL, "reset-q"))
}

// TestCronReplaceRules covers SPEC §8.1.4 and what the Node client relies
// on (§8.1.9).
func TestCronReplaceRules(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	entries := func(es ...map[string]any) []any {
		out := make([]any, len(es))
		for i, e := range es {
			out[i] = e
		}
		return out
	}
	daily := cronEntryBody("daily", "0 9 * * *", "rr")
	hourly := cronEntryBody("hourly", "0 * * * *", "rr")
	g1 := cronPut(t, s.URL, "rr", map[string]any{"timezone": "Australia/Melbourne", "entries": entries(daily, hourly)})
	require.Equal(t, "Australia/Melbourne", g1.Timezone)
	// Melbourne and UTC differ for 0 9 * * *
	u := cronPut(t, s.URL, "rr-utc", map[string]any{"timezone": "UTC", "entries": entries(daily)})
	require.NotEqual(t, u.Entries[0].NextEnqueueAt, g1.Entry(t, "daily").NextEnqueueAt)
	require.Zero(t, u.Entries[0].NextEnqueueAt%3_600_000)

	// the same body twice leaves the group as the first call left it
	g2 := cronPut(t, s.URL, "rr", map[string]any{"timezone": "Australia/Melbourne", "entries": entries(daily, hourly)})
	require.Equal(t, g1, g2)

	// a re-PUT without timezone removes the key and reschedules exactly
	// the entries that inherit it
	hourlyOwn := cronEntryBody("hourly", "0 * * * *", "rr")
	hourlyOwn["timezone"] = "Australia/Melbourne"
	g3 := cronPut(t, s.URL, "rr", map[string]any{"entries": entries(daily, hourlyOwn)})
	require.False(t, g3.Has("timezone"))
	require.NotEqual(t, g1.Entry(t, "daily").NextEnqueueAt, g3.Entry(t, "daily").NextEnqueueAt, "inherits: rescheduled")
	require.Equal(t, g1.Entry(t, "hourly").NextEnqueueAt, g3.Entry(t, "hourly").NextEnqueueAt, "same effective zone: kept")
	require.Equal(t, "Australia/Melbourne", g3.Entry(t, "hourly").Timezone)
	require.False(t, g3.Entry(t, "daily").Has("timezone"))
	require.False(t, cronGet(t, s.URL, "rr").Has("timezone"))

	// a changed expression is rescheduled; paused absent keeps the state
	cronDecodeEntry(t, apitest.DoJSON(t, s.URL, "PATCH", "/crons/rr/entries/hourly", map[string]any{"paused": true}), http.StatusOK)
	hourly2 := cronEntryBody("hourly", "30 * * * *", "rr")
	hourly2["timezone"] = "Australia/Melbourne"
	g4 := cronPut(t, s.URL, "rr", map[string]any{"entries": entries(hourly2, daily)})
	h := g4.Entry(t, "hourly")
	require.True(t, h.Paused)
	require.NotEqual(t, g3.Entry(t, "hourly").NextEnqueueAt, h.NextEnqueueAt)
	require.Equal(t, uint64(30*60_000), h.NextEnqueueAt%3_600_000)

	// a group PUT removes absent entries
	g5 := cronPut(t, s.URL, "rr", map[string]any{"entries": entries(daily)})
	require.Len(t, g5.Entries, 1)
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/crons/rr/entries/hourly", nil), http.StatusNotFound, "cron entry 'hourly' not found in group 'rr'")
	// paused on a group PUT sets the group state; a new group created paused gets paused_at
	g6 := cronPut(t, s.URL, "rr-paused", map[string]any{"paused": true, "entries": entries(daily)})
	require.True(t, g6.Paused)
	require.NotZero(t, g6.PausedAt)
	// PATCH of the group zone reschedules the inheriting entries from now
	g7 := cronDecodeGroup(t, apitest.DoJSON(t, s.URL, "PATCH", "/crons/rr-utc", map[string]any{"timezone": "Australia/Melbourne"}), http.StatusOK)
	require.Equal(t, g1.Entry(t, "daily").NextEnqueueAt, g7.Entries[0].NextEnqueueAt)
}

// TestCronErrors checks the texts and order of SPEC §8.1.5; a failed
// request writes nothing, not even the group.
func TestCronErrors(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, "--max-budgets", "2")
	ok := cronEntryBody("ok", "* * * * *", "q")
	withJob := func(name string, job map[string]any) map[string]any {
		return map[string]any{"name": name, "expression": "* * * * *", "job": job}
	}
	job := func(extra map[string]any) map[string]any {
		j := map[string]any{"type": "t", "queue": "q", "payload": 1}
		for k, v := range extra {
			j[k] = v
		}
		return j
	}
	group := func(es ...any) map[string]any { return map[string]any{"entries": es} }
	long := strings.Repeat("x", 256)
	apitest.RequireStatus(t, apitest.DoJSON(t, s.URL, "POST", "/budgets/small", map[string]any{"allocation": 2, "strategy": map[string]any{"type": "while_in_flight"}}), http.StatusCreated)
	cases := []struct {
		name, method, path string
		body               any
		status             int
		text               string
	}{
		{"entries missing", "PUT", "/crons/g", map[string]any{}, 400, "invalid JSON: missing field 'entries'"},
		{"entries null", "PUT", "/crons/g", map[string]any{"entries": nil}, 400, "invalid JSON: missing field 'entries'"},
		{"entry expression missing", "PUT", "/crons/g", group(map[string]any{"name": "a", "job": job(nil)}), 400, "invalid JSON: missing field 'expression'"},
		{"entry job missing", "POST", "/crons/g/entries", map[string]any{"name": "a", "expression": "* * * * *"}, 400, "invalid JSON: missing field 'job'"},
		{"entry name missing", "POST", "/crons/g/entries", map[string]any{"expression": "* * * * *", "job": job(nil)}, 400, "invalid JSON: missing field 'name'"},
		{"payload missing", "POST", "/crons/g/entries", withJob("a", map[string]any{"type": "t", "queue": "q"}), 400, "invalid JSON: missing field 'payload'"},
		{"group name", "PUT", "/crons/a,b", group(ok), 400, "cron group name must not contain ','"},
		{"group name long", "PUT", "/crons/" + long, group(ok), 400, "cron group name must be at most 255 bytes"},
		{"group name reserved", "POST", "/crons/a*/entries", ok, 400, "cron group name must not contain '*' (reserved)"},
		{"group zone", "PUT", "/crons/g", map[string]any{"timezone": "Mars/Base", "entries": []any{ok}}, 400, `invalid timezone: "Mars/Base"`},
		{"group zone Local", "PUT", "/crons/g", map[string]any{"timezone": "Local", "entries": []any{ok}}, 400, `invalid timezone: "Local"`},
		{"group zone before duplicates", "PUT", "/crons/g", map[string]any{"timezone": "", "entries": []any{ok, ok}}, 400, `invalid timezone: ""`},
		{"duplicate names", "PUT", "/crons/g", group(ok, cronEntryBody("b", "bad", "q"), ok), 400, `duplicate cron entry name: "ok"`},
		{"entry name", "PUT", "/crons/g", group(ok, cronEntryBody("", "* * * * *", "q")), 400, "entries[1]: cron entry name must not be empty"},
		{"entry name on POST", "POST", "/crons/g/entries", cronEntryBody("a?", "* * * * *", "q"), 400, "cron entry name must not contain '?' (reserved)"},
		{"entry name on PUT path", "PUT", "/crons/g/entries/a%5B", ok, 400, "cron entry name must not contain '[' (reserved)"},
		{"entry name long", "PUT", "/crons/g/entries/" + long, ok, 400, "cron entry name must be at most 255 bytes"},
		{"expression", "PUT", "/crons/g", group(ok, cronEntryBody("b", "0 0 L * *", "q")), 400, "entries[1]: invalid cron expression: "},
		{"expression 7 fields", "POST", "/crons/g/entries", cronEntryBody("b", "0 0 0 1 1 * 2030", "q"), 400, "invalid cron expression: "},
		{"expression every", "POST", "/crons/g/entries", cronEntryBody("b", "@every 1m", "q"), 400, "invalid cron expression: "},
		{"expression TZ", "POST", "/crons/g/entries", cronEntryBody("b", "CRON_TZ=UTC * * * * *", "q"), 400, "invalid cron expression: "},
		{"never matches", "PUT", "/crons/g", group(cronEntryBody("b", "0 0 30 2 *", "q")), 400, `entries[0]: invalid cron expression: "0 0 30 2 *" never matches`},
		{"entry zone", "POST", "/crons/g/entries", map[string]any{"name": "a", "expression": "* * * * *", "timezone": "utc", "job": job(nil)}, 400, `invalid timezone: "utc"`},
		{"template type", "POST", "/crons/g/entries", withJob("a", job(map[string]any{"type": ""})), 400, "type must not be empty"},
		{"template queue", "POST", "/crons/g/entries", withJob("a", job(map[string]any{"queue": "a,b", "ready_at": 5})), 400, "queue must not contain ','"},
		{"template ready_at", "PUT", "/crons/g", group(withJob("a", job(map[string]any{"ready_at": 5}))), 400, "entries[0]: ready_at is not supported for cron entries"},
		{"template unique_while", "POST", "/crons/g/entries", withJob("a", job(map[string]any{"unique_while": "active"})), 400, "unique_while requires unique_key"},
		{"template binding shape", "POST", "/crons/g/entries", withJob("a", job(map[string]any{"budgets": []any{map[string]any{"key": "k", "cost": 0}}})), 400, "budgets[0]: cost must be at least 1"},
		{"400s of every entry before 422s", "PUT", "/crons/g", group(
			withJob("a", job(map[string]any{"budgets": []any{map[string]any{"key": "missing"}}})),
			withJob("b", job(map[string]any{"ready_at": 1}))), 400, "entries[1]: ready_at is not supported for cron entries"},
		{"budget missing", "PUT", "/crons/g", group(ok, withJob("a", job(map[string]any{"budgets": []any{map[string]any{"key": "missing"}}}))), 422,
			"entries[1]: budget 'missing' does not exist. Create it first or pass create_with."},
		{"cost above allocation", "POST", "/crons/g/entries", withJob("a", job(map[string]any{"budgets": []any{map[string]any{"key": "small", "cost": 3}}})), 422, ""},
		{"create_with value", "POST", "/crons/g/entries", withJob("a", job(map[string]any{"budgets": []any{map[string]any{"key": "new", "create_with": map[string]any{"allocation": 0, "strategy": map[string]any{"type": "while_in_flight"}}}}})), 422, ""},
		{"budget limit", "PUT", "/crons/g", group(
			withJob("a", job(map[string]any{"budgets": []any{map[string]any{"key": "n1", "create_with": map[string]any{"allocation": 1, "strategy": map[string]any{"type": "while_in_flight"}}}}})),
			withJob("b", job(map[string]any{"budgets": []any{map[string]any{"key": "n2", "create_with": map[string]any{"allocation": 1, "strategy": map[string]any{"type": "while_in_flight"}}}}}))), 422,
			"entries[1]: budget 'n2' cannot be created: the limit of 2 budgets has been reached"},
		{"patch group 404", "PATCH", "/crons/nope", map[string]any{"paused": true}, 404, "cron group 'nope' not found"},
		{"patch group zone", "PATCH", "/crons/nope", map[string]any{"timezone": "Nowhere"}, 400, `invalid timezone: "Nowhere"`},
		{"patch group type", "PATCH", "/crons/nope", map[string]any{"paused": "yes"}, 400, "invalid JSON: "},
		{"patch entry 404", "PATCH", "/crons/nope/entries/x", map[string]any{"paused": true}, 404, "cron entry 'x' not found in group 'nope'"},
		{"patch entry type", "PATCH", "/crons/nope/entries/x", map[string]any{"paused": 1}, 400, "invalid JSON: "},
		{"delete entry 404", "DELETE", "/crons/nope/entries/x", nil, 404, "cron entry 'x' not found in group 'nope'"},
		{"get invalid name", "GET", "/crons/a,b", nil, 404, "cron group 'a,b' not found"},
	}
	for _, tc := range cases {
		for _, f := range apitest.Formats {
			r := apitest.Call(t, s.URL, f, tc.method, tc.path, tc.body)
			text := tc.text
			if f == apitest.Msgpack {
				text = strings.Replace(text, "invalid JSON: ", "invalid MessagePack: ", 1)
			}
			if strings.HasSuffix(text, ": ") || text == "" {
				apitest.RequireStatus(t, r, tc.status)
				m := r.Map(t)
				require.Len(t, m, 1, "%s: %s", tc.name, r)
				require.True(t, strings.HasPrefix(m["error"].(string), text), "%s: %s", tc.name, r)
			} else {
				apitest.RequireError(t, r, tc.status, text)
			}
		}
	}
	// nothing was written: no group, no budget beyond the one made above
	require.JSONEq(t, `{"crons":[]}`, string(apitest.DoJSON(t, s.URL, "GET", "/crons", nil).Body))
	var bl struct {
		Budgets []map[string]any `json:"budgets"`
	}
	apitest.DoJSON(t, s.URL, "GET", "/budgets", nil).Decode(t, &bl)
	require.Len(t, bl.Budgets, 1)
}

// TestCronBudgetGuards: a template is a standing claim on its budgets
// (SPEC §8.1.8): delete is 409, shrinking below its cost 422, and the
// texts name the first entry in (group, entry) order.
func TestCronBudgetGuards(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	bind := func(name string, cost int) map[string]any {
		e := cronEntryBody(name, "0 0 1 1 *", "guard")
		e["job"].(map[string]any)["budgets"] = []any{map[string]any{"key": "pool", "cost": cost,
			"create_with": map[string]any{"allocation": 10, "strategy": map[string]any{"type": "time_based", "duration_ms": 60000, "burst": 10}}}}
		return e
	}
	cronPut(t, s.URL, "zz", map[string]any{"entries": []any{bind("a", 2)}})
	cronPut(t, s.URL, "aa", map[string]any{"entries": []any{bind("z", 4), bind("b", 6)}})
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/pool", nil), http.StatusConflict,
		"budget 'pool' is referenced by 3 cron entries, including 'aa/b'. Remove them before deleting it.")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/pool", map[string]any{"allocation": 5}), http.StatusUnprocessableEntity,
		"budget 'pool' cannot allocate 5: cron entry 'aa/b' draws 6 from it. Lower the entry's cost or remove it first.")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/pool", map[string]any{"allocation": 5, "strategy": map[string]any{"burst": 3}}), http.StatusUnprocessableEntity,
		"budget 'pool' cannot allocate 5: cron entry 'aa/b' draws 6 from it. Lower the entry's cost or remove it first.")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/pool", map[string]any{"strategy": map[string]any{"burst": 3}}), http.StatusUnprocessableEntity,
		"budget 'pool' cannot burst 3: cron entry 'aa/b' draws 6 from it. Lower the entry's cost or remove it first.")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "PUT", "/budgets/pool", map[string]any{"allocation": 1, "strategy": map[string]any{"type": "while_in_flight"}}), http.StatusUnprocessableEntity,
		"budget 'pool' cannot allocate 1: cron entry 'aa/b' draws 6 from it. Lower the entry's cost or remove it first.")
	apitest.RequireStatus(t, apitest.DoJSON(t, s.URL, "PATCH", "/budgets/pool", map[string]any{"allocation": 6, "strategy": map[string]any{"burst": 6}}), http.StatusOK)
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/crons/aa", nil))
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/pool", nil), http.StatusConflict,
		"budget 'pool' is referenced by 1 cron entry, including 'zz/a'. Remove them before deleting it.")
	cronPut(t, s.URL, "zz", map[string]any{"entries": []any{}})
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/pool", nil))
}
