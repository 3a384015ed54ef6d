// Operator logs: the lines an operator reads to learn what changed on the
// server and who asked for it. Each says what happened in plain words;
// keys are snake_case and the same everywhere (budget, cron_group,
// cron_entry, remote_addr, worker_id).

package http

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// budgetSummary renders a definition the way the API describes it:
// "5 in flight" or "100 per 1m0s (burst 20)".
func budgetSummary(def protocol.Definition) string {
	alloc := strconv.FormatUint(uint64(def.Allocation), 10)
	if def.Strategy.Type != protocol.TimeBased {
		return alloc + " in flight"
	}
	s := alloc + " per " + (time.Duration(def.Strategy.DurationMs) * time.Millisecond).String()
	if def.Strategy.Burst != 0 {
		s += " (burst " + strconv.FormatUint(uint64(def.Strategy.Burst), 10) + ")"
	}
	return s
}

// logBudgetChange logs a budget written or deleted through the API; b is
// nil for a deletion. what is "created", "replaced", "updated" or "deleted".
func (a *API) logBudgetChange(c echo.Context, what, key string, b *protocol.Budget) {
	attrs := []slog.Attr{slog.String("budget", key), slog.String("remote_addr", c.Request().RemoteAddr)}
	if b != nil {
		attrs = append(attrs, slog.String("strategy", string(b.Strategy.Type)),
			slog.String("limit", budgetSummary(b.Definition())))
	}
	a.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "budget "+what, attrs...)
}

// logCronChange logs a cron group or entry written, paused, resumed or
// deleted through the API (SPEC §8.1). entry is "" for a change to a whole
// group; what is a past participle ("replaced", "paused", "deleted", ...).
// The cron routes call it after each successful write.
func (a *API) logCronChange(c echo.Context, what, group, entry string, attrs ...slog.Attr) {
	subject := "cron group " + what
	base := []slog.Attr{slog.String("cron_group", group)}
	if entry != "" {
		subject = "cron entry " + what
		base = append(base, slog.String("cron_entry", entry))
	}
	base = append(base, slog.String("remote_addr", c.Request().RemoteAddr))
	a.log.LogAttrs(c.Request().Context(), slog.LevelInfo, subject, append(base, attrs...)...)
}

// logReset logs POST /reset at warn: it deletes everything.
func (a *API) logReset(c echo.Context) {
	a.log.LogAttrs(c.Request().Context(), slog.LevelWarn,
		"reset: every cron group, job and budget was deleted on request",
		slog.String("remote_addr", c.Request().RemoteAddr))
}

// accessLog logs each request once answered: method, path with query,
// status, duration and response size. Errors are rendered first (as echo's
// own logger middleware does) so the line shows the status sent.
func (a *API) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	log := a.cfg.Logger.With("component", "access")
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		r, w := c.Request(), c.Response()
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("path", r.URL.RequestURI()),
			slog.Int("status", w.Status), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.Int64("bytes", w.Size), slog.String("remote_addr", r.RemoteAddr),
		}
		if id := r.Header.Get("Worker-Id"); id != "" {
			attrs = append(attrs, slog.String("worker_id", id))
		}
		log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
		return nil
	}
}
