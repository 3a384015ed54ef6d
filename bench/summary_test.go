package main

import (
	"strings"
	"testing"
)

// TestEarlyDeliveriesJudgedByServerClock: early deliveries are an anomaly
// when only delivery times are known; with a usable server clock, the
// server's dispatch times decide (as for the window bound).
func TestEarlyDeliveriesJudgedByServerClock(t *testing.T) {
	r := &runner{sc: &scenario{}}
	budget := BudgetReport{Key: "k", Strategy: strategyTimeBased, WindowBound: 4000, WindowSlack: 3,
		MaxInWindow: 4000, MaxInWindowServer: 3998, Early: 100, DeviationMinMs: -3}
	cases := []struct {
		serverClock bool
		serverEarly int64
		want        string
	}{
		{serverClock: false, want: "deliveries ahead"},
		{serverClock: true, want: ""},
		{serverClock: true, serverEarly: 5, want: "dispatches ahead"},
	}
	for _, c := range cases {
		b := budget
		b.ServerClock, b.ServerEarly = c.serverClock, c.serverEarly
		got := strings.Join(r.anomalies(&Report{Budgets: []BudgetReport{b}}), "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("server clock %v, server early %d: anomalies %q, want %q", c.serverClock, c.serverEarly, got, c.want)
		}
	}
}
