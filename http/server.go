// Package http is tollgate's HTTP API on echo: routing, content
// negotiation, request decoding, DTO mapping and the one error handler that
// turns domain errors into SPEC statuses and {"error": ...} bodies. Handlers
// are thin: decode, validate (protocol), one call to the actors facade, map
// the result.
package http

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/http/ui"
)

// APIVersion is the upstream API level tollgate implements (GET /version).
const APIVersion = "0.7.0"

// DefaultMaxBodyMemory is the default bound on request-body bytes held
// across all connections.
const DefaultMaxBodyMemory = 256 << 20

// Config configures the HTTP API.
type Config struct {
	// Version is tollgate's release, sent in the Server header.
	Version string
	// BodyLimit is the largest request body accepted (default 8 MiB).
	BodyLimit int64
	// HeartbeatInterval is the idle time before a take-stream heartbeat (3 s).
	HeartbeatInterval time.Duration
	// WriteTimeout bounds one write to a take stream (default 30 s).
	WriteTimeout time.Duration
	// AllowOrigins lists the origins ("https://ui.example:8443", or "*"
	// for any) whose browsers may send state-changing requests besides
	// the server's own origin (SPEC §1.5); empty: only the own origin.
	AllowOrigins []string
	// StreamStallTimeout closes a take stream whose frames stay unwritten
	// this long (SPEC §1.4); 0 never does.
	StreamStallTimeout time.Duration
	// StreamBufferLimit closes a take stream whose unwritten frames exceed
	// it, in bytes (default 4 MiB).
	StreamBufferLimit int64
	Logger            *slog.Logger
	// AccessLog logs one info line per request once it is answered (a
	// take stream's when it ends).
	AccessLog bool
	// BodyReadTimeout bounds reading one request body (default 30 s).
	BodyReadTimeout time.Duration
	// MaxBodyMemory bounds the request-body bytes held in memory across
	// all connections together (default 256 MiB).
	MaxBodyMemory int64
	// MetricsBudgetSeries bounds /metrics' per-budget series to this many
	// budgets, those with the most unfinished jobs bound (0: all).
	MetricsBudgetSeries int
}

// API holds the handlers' dependencies.
type API struct {
	cfg      Config
	engine   Engine
	log      *slog.Logger
	shutdown chan struct{}
	origins  originPolicy
	bodies   *bodyMemory
}

// New builds the echo instance with every route.
func New(cfg Config, engine Engine) (*echo.Echo, *API) {
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 8 << 20
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 3 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.StreamBufferLimit <= 0 {
		cfg.StreamBufferLimit = 4 << 20
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = 30 * time.Second
	}
	if cfg.MaxBodyMemory <= 0 {
		cfg.MaxBodyMemory = DefaultMaxBodyMemory
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	api := &API{cfg: cfg, engine: engine, log: cfg.Logger.With("component", "http"), shutdown: make(chan struct{}),
		origins: newOriginPolicy(cfg.AllowOrigins), bodies: &bodyMemory{limit: cfg.MaxBodyMemory}}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = api.handleError
	e.Use(api.serverHeader)
	if cfg.AccessLog {
		e.Use(api.accessLog)
	}
	e.Use(api.recoverPanics, api.refuseCrossOrigin, api.releaseBody)

	e.GET("/health", api.health)
	e.GET("/version", api.version)
	e.GET("/queues", api.queues)
	e.POST("/reset", api.reset)

	e.POST("/jobs", api.enqueue)
	e.POST("/jobs/bulk", api.enqueueBulk)
	e.GET("/jobs/take", api.take)
	e.POST("/jobs/success", api.ackMany)
	e.GET("/jobs", api.listJobs)
	e.GET("/jobs/count", api.countJobs)
	e.DELETE("/jobs", api.deleteJobs)
	e.PATCH("/jobs", api.patchJobs)
	e.PATCH("/jobs/:id", api.patchJob)
	e.GET("/jobs/:id/errors", api.jobErrors)
	e.GET("/jobs/:id/errors/:attempt", api.jobError)
	e.POST("/jobs/budgets/:key", api.rebindBulkKeyed(actors.RebindAdd))
	e.PUT("/jobs/budgets/:key", api.rebindBulkKeyed(actors.RebindPut))
	e.PATCH("/jobs/budgets/:key", api.rebindBulkCost)
	e.DELETE("/jobs/budgets/:key", api.rebindBulkRemove)
	e.DELETE("/jobs/budgets", api.rebindBulkClear)
	e.POST("/jobs/:id/budgets/:key", api.rebindKeyed(actors.RebindAdd))
	e.PUT("/jobs/:id/budgets/:key", api.rebindKeyed(actors.RebindPut))
	e.PATCH("/jobs/:id/budgets/:key", api.rebindCost)
	e.DELETE("/jobs/:id/budgets/:key", api.rebindRemove)
	e.PUT("/jobs/:id/budgets", api.rebindSet)
	e.DELETE("/jobs/:id/budgets", api.rebindClear)
	e.GET("/jobs/:id", api.getJob)
	e.DELETE("/jobs/:id", api.deleteJob)
	e.POST("/jobs/:id/success", api.ack)
	e.POST("/jobs/:id/failure", api.fail)

	e.GET("/crons", api.listCrons)
	e.DELETE("/crons", api.deleteCrons)
	e.GET("/crons/:group", api.getCronGroup)
	e.PUT("/crons/:group", api.putCronGroup)
	e.PATCH("/crons/:group", api.patchCronGroup)
	e.DELETE("/crons/:group", api.deleteCronGroup)
	e.POST("/crons/:group/entries", api.postCronEntry)
	e.GET("/crons/:group/entries/:entry", api.getCronEntry)
	e.PUT("/crons/:group/entries/:entry", api.putCronEntry)
	e.PATCH("/crons/:group/entries/:entry", api.patchCronEntry)
	e.DELETE("/crons/:group/entries/:entry", api.deleteCronEntry)

	e.GET("/budgets", api.listBudgets)
	e.GET("/budgets/:key", api.getBudget)
	e.POST("/budgets/:key", api.createBudget)
	e.PUT("/budgets/:key", api.putBudget)
	e.PATCH("/budgets/:key", api.patchBudget)
	e.DELETE("/budgets/:key", api.deleteBudget)

	e.GET("/budgets/:key/state", api.budgetState)
	e.PUT("/budgets/:key/hold", api.putBudgetHold)
	e.DELETE("/budgets/:key/hold", api.deleteBudgetHold)
	e.GET("/debug/trace", api.trace)
	e.GET("/metrics", api.metricsHandler())

	// the dashboard and the read endpoints only it needed (dashboard_api.go)
	e.GET("/stats", api.stats)
	e.GET("/budgets/:key/parked", api.budgetLine)
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	e.GET("/ui/*", api.dashboard(ui.Handler()))
	return e, api
}

// dashboard serves the dashboard's files; a path that names none is the
// API's usual 404.
func (a *API) dashboard(files http.Handler) echo.HandlerFunc {
	files = http.StripPrefix("/ui", files)
	return func(c echo.Context) error {
		if !ui.Has(c.Param("*")) {
			return echo.ErrNotFound
		}
		files.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// Shutdown ends every take stream (their jobs return to ready); call it
// before http.Server.Shutdown, which waits for handlers to return.
func (a *API) Shutdown() {
	select {
	case <-a.shutdown:
	default:
		close(a.shutdown)
	}
}

func (a *API) serverHeader(next echo.HandlerFunc) echo.HandlerFunc {
	server := "tollgate/" + a.cfg.Version
	return func(c echo.Context) error {
		c.Response().Header().Set("Server", server)
		return next(c)
	}
}

func (a *API) health(c echo.Context) error {
	return a.reply(c, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *API) version(c echo.Context) error {
	return a.reply(c, http.StatusOK, map[string]string{"version": APIVersion})
}

func (a *API) queues(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	qs, err := a.engine.Queues(c.Request().Context())
	if err != nil {
		return err
	}
	return a.reply(c, http.StatusOK, map[string][]string{"queues": qs})
}

func (a *API) reset(c echo.Context) error {
	if _, err := responseFormat(c); err != nil {
		return err
	}
	if err := a.engine.Reset(c.Request().Context()); err != nil {
		return err
	}
	a.logReset(c)
	return c.NoContent(http.StatusNoContent)
}

// recoverPanics turns a handler panic into a 500 and a log line.
func (a *API) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				a.log.Error("handler panic", "panic", r, "path", c.Request().URL.Path)
				err = errPanic
			}
		}()
		return next(c)
	}
}

var errPanic = errors.New("handler panic")
