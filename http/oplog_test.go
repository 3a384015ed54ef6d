package http

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// TestBudgetSummary: a budget's limit reads as a person would say it.
func TestBudgetSummary(t *testing.T) {
	for _, tc := range []struct {
		def  protocol.Definition
		want string
	}{
		{protocol.Definition{Allocation: 5, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}}, "5 in flight"},
		{protocol.Definition{Allocation: 100, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 60000}}, "100 per 1m0s"},
		{protocol.Definition{Allocation: 50, Strategy: protocol.Strategy{Type: protocol.TimeBased, DurationMs: 1000, Burst: 1}}, "50 per 1s (burst 1)"},
	} {
		if got := budgetSummary(tc.def); got != tc.want {
			t.Errorf("budgetSummary(%+v) = %q, want %q", tc.def, got, tc.want)
		}
	}
}

// TestLogCronChange: the helper the cron routes call writes one info line
// naming the group, the entry when there is one, and the caller.
func TestLogCronChange(t *testing.T) {
	var buf bytes.Buffer
	_, api := New(Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, nil)
	req := httptest.NewRequest("PATCH", "/crons/nightly/entries/refresh", nil)
	req.RemoteAddr = "127.0.0.1:5555"
	c := echo.New().NewContext(req, httptest.NewRecorder())
	api.logCronChange(c, "paused", "nightly", "refresh", slog.Bool("paused", true))
	api.logCronChange(c, "deleted", "nightly", "")
	dec := json.NewDecoder(&buf)
	var lines []map[string]any
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %v", len(lines), lines)
	}
	if l := lines[0]; l["msg"] != "cron entry paused" || l["level"] != "INFO" || l["cron_group"] != "nightly" ||
		l["cron_entry"] != "refresh" || l["paused"] != true || l["remote_addr"] != "127.0.0.1:5555" || l["component"] != "http" {
		t.Errorf("entry line: %v", l)
	}
	if l := lines[1]; l["msg"] != "cron group deleted" || l["cron_group"] != "nightly" || l["cron_entry"] != nil {
		t.Errorf("group line: %v", l)
	}
}
