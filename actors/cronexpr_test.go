package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// nextN returns n successive next times from after, as wall-clock readings
// with their zone abbreviation.
func nextN(t *testing.T, expr string, after time.Time, loc *time.Location, n int) []string {
	t.Helper()
	x, err := parseCronExpr(expr)
	require.NoError(t, err)
	var out []string
	at := after
	for range n {
		next := cronNext(x, at, loc)
		require.False(t, next.IsZero())
		require.True(t, next.After(at), "next %v not after %v", next, at)
		require.Zero(t, next.Nanosecond())
		out = append(out, next.In(loc).Format("2006-01-02 15:04:05 MST"))
		at = next
	}
	return out
}

func TestCronNextDST(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	mel := mustZone(t, "Australia/Melbourne")
	cases := []struct {
		name, expr string
		after      time.Time
		loc        *time.Location
		want       []string
	}{
		{"gap skipped, not moved", "30 2 * * *", time.Date(2026, 3, 7, 12, 0, 0, 0, ny), ny,
			[]string{"2026-03-07 02:30:00 EST", "2026-03-09 02:30:00 EDT"}[1:]},
		{"quarter hours across the gap", "*/15 * * * *", time.Date(2026, 3, 8, 1, 40, 0, 0, ny), ny,
			[]string{"2026-03-08 01:45:00 EST", "2026-03-08 03:00:00 EDT", "2026-03-08 03:15:00 EDT"}},
		{"repeated time fires once", "30 1 * * *", time.Date(2026, 10, 31, 12, 0, 0, 0, ny), ny,
			[]string{"2026-11-01 01:30:00 EDT", "2026-11-02 01:30:00 EST"}},
		{"full hour field fires in both passes", "*/15 * * * *", time.Date(2026, 11, 1, 0, 50, 0, 0, ny), ny,
			[]string{"2026-11-01 01:00:00 EDT", "2026-11-01 01:15:00 EDT", "2026-11-01 01:30:00 EDT", "2026-11-01 01:45:00 EDT",
				"2026-11-01 01:00:00 EST", "2026-11-01 01:15:00 EST", "2026-11-01 01:30:00 EST", "2026-11-01 01:45:00 EST",
				"2026-11-01 02:00:00 EST"}},
		{"hour range 0-23 is full", "0 0-23 * * *", time.Date(2026, 11, 1, 0, 30, 0, 0, ny), ny,
			[]string{"2026-11-01 01:00:00 EDT", "2026-11-01 01:00:00 EST", "2026-11-01 02:00:00 EST"}},
		{"hour 1 only: first pass", "0,30 1 * * *", time.Date(2026, 11, 1, 0, 30, 0, 0, ny), ny,
			[]string{"2026-11-01 01:00:00 EDT", "2026-11-01 01:30:00 EDT", "2026-11-02 01:00:00 EST"}},
		{"seconds field", "*/20 * * * * *", time.Date(2026, 1, 1, 0, 0, 0, 500e6, time.UTC), time.UTC,
			[]string{"2026-01-01 00:00:20 UTC", "2026-01-01 00:00:40 UTC", "2026-01-01 00:01:00 UTC"}},
		{"strictly after the reference second", "* * * * * *", time.Date(2026, 1, 1, 0, 0, 0, 999e6, time.UTC), time.UTC,
			[]string{"2026-01-01 00:00:01 UTC", "2026-01-01 00:00:02 UTC"}},
		// Melbourne: forward on 2026-10-04 at 02:00 AEST -> 03:00 AEDT,
		// back on 2026-04-05 at 03:00 AEDT -> 02:00 AEST.
		{"Melbourne gap", "30 2 * * *", time.Date(2026, 10, 3, 12, 0, 0, 0, mel), mel,
			[]string{"2026-10-05 02:30:00 AEDT"}},
		{"Melbourne repeated hour once", "30 2 * * *", time.Date(2026, 4, 4, 12, 0, 0, 0, mel), mel,
			[]string{"2026-04-05 02:30:00 AEDT", "2026-04-06 02:30:00 AEST"}},
		{"Melbourne repeated hour, full hour field", "30 * * * *", time.Date(2026, 4, 5, 1, 45, 0, 0, mel), mel,
			[]string{"2026-04-05 02:30:00 AEDT", "2026-04-05 02:30:00 AEST", "2026-04-05 03:30:00 AEST"}},
		{"dow 7 is Sunday", "0 9 * * 7", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-03-08 09:00:00 UTC", "2026-03-15 09:00:00 UTC"}},
		{"dow range to 7", "0 9 * * 6-7", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-03-07 09:00:00 UTC", "2026-03-08 09:00:00 UTC", "2026-03-14 09:00:00 UTC"}},
		{"dow names, case-insensitive", "0 9 * * mon,FRI", time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-03-06 09:00:00 UTC", "2026-03-09 09:00:00 UTC"}},
		{"month names", "0 0 1 jul,DEC *", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-07-01 00:00:00 UTC", "2026-12-01 00:00:00 UTC"}},
		{"both day fields restricted: either", "0 0 13 * 5", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-03-06 00:00:00 UTC", "2026-03-13 00:00:00 UTC", "2026-03-20 00:00:00 UTC"}},
		{"dom restricted, dow ?", "0 0 13 * ?", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-03-13 00:00:00 UTC", "2026-04-13 00:00:00 UTC"}},
		{"a/s runs to the maximum", "0 50/5 * * * *", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-01-01 00:50:00 UTC", "2026-01-01 00:55:00 UTC", "2026-01-01 01:50:00 UTC"}},
		{"a-b/s", "0 10-20/5 * * * *", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-01-01 00:10:00 UTC", "2026-01-01 00:15:00 UTC", "2026-01-01 00:20:00 UTC", "2026-01-01 01:10:00 UTC"}},
		{"tabs and surrounding space", " 0\t12 * * * ", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC,
			[]string{"2026-01-01 12:00:00 UTC"}},
		{"@yearly", "@yearly", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), time.UTC, []string{"2027-01-01 00:00:00 UTC"}},
		{"@annually", "@annually", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), time.UTC, []string{"2027-01-01 00:00:00 UTC"}},
		{"@monthly", "@monthly", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), time.UTC, []string{"2026-06-01 00:00:00 UTC"}},
		{"@weekly", "@weekly", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), time.UTC, []string{"2026-03-08 00:00:00 UTC"}},
		{"@daily", "@daily", time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC), time.UTC, []string{"2026-03-03 00:00:00 UTC"}},
		{"@midnight", "@midnight", time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC), time.UTC, []string{"2026-03-03 00:00:00 UTC"}},
		{"@hourly", "@hourly", time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC), time.UTC, []string{"2026-03-02 06:00:00 UTC"}},
		{"leap day", "0 0 29 2 *", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.UTC, []string{"2028-02-29 00:00:00 UTC"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, nextN(t, tc.expr, tc.after, tc.loc, len(tc.want)))
		})
	}
}

// The zone decides the instant: 0 9 * * * differs between Melbourne and UTC.
func TestCronNextZones(t *testing.T) {
	x, err := parseCronExpr("0 9 * * *")
	require.NoError(t, err)
	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	mel := cronNext(x, from, mustZone(t, "Australia/Melbourne"))
	utc := cronNext(x, from, time.UTC)
	require.True(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC).Equal(utc), "%v", utc)
	require.True(t, time.Date(2026, 6, 1, 23, 0, 0, 0, time.UTC).Equal(mel), "%v", mel) // 09:00 AEST on 06-02
}

func TestParseCronExprRefusals(t *testing.T) {
	for expr, want := range map[string]string{
		"0 0 L * *":             "invalid cron expression: ",
		"0 0 15W * *":           "invalid cron expression: ",
		"0 0 * * 5#2":           "invalid cron expression: ",
		"0 0 0 1 1 * 2027":      "invalid cron expression: expected 5 or 6 fields, found 7",
		"* * * *":               "invalid cron expression: expected 5 or 6 fields, found 4",
		"@every 5m":             "invalid cron expression: @every is not supported",
		"@reboot":               "invalid cron expression: @reboot is not supported",
		"TZ=UTC 0 0 * * *":      "invalid cron expression: a TZ= or CRON_TZ= prefix",
		"CRON_TZ=UTC 0 0 * * *": "invalid cron expression: a TZ= or CRON_TZ= prefix",
		"0 0 * * 8":             "invalid cron expression: day-of-week",
		"61 * * * *":            "invalid cron expression: ",
		"0 24 * * *":            "invalid cron expression: ",
		"0 0 0 * *":             "invalid cron expression: ",
		"0 0 * 13 *":            "invalid cron expression: ",
		"*/0 * * * *":           "invalid cron expression: ",
		"@fortnightly":          "invalid cron expression: ",
		"0 0 * * 5-2":           "invalid cron expression: day-of-week",
	} {
		_, err := parseCronExpr(expr)
		require.Error(t, err, expr)
		require.Contains(t, err.Error(), want, expr)
	}
	x, err := parseCronExpr("0 0 30 2 *")
	require.NoError(t, err)
	require.True(t, cronNext(x, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC).IsZero())
	require.Equal(t, `invalid cron expression: "0 0 30 2 *" never matches`, cronNeverMatches("0 0 30 2 *").Error())
}

func TestLoadZone(t *testing.T) {
	for _, ok := range []string{"UTC", "Australia/Melbourne", "US/Eastern", "Europe/Rome"} {
		_, err := loadZone(ok)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{"", "Local", "europe/rome", "Mars/Base", "+02:00"} {
		_, err := loadZone(bad)
		require.EqualError(t, err, `invalid timezone: "`+bad+`"`)
	}
}
