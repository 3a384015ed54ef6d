// Command bench is tollgate's load-testing harness.
//
// It is a pure HTTP client of the server: it never imports the server's
// packages, so it runs against any build. Without --url it builds
// ./cmd/tollgate, starts it on a temporary root directory and a free
// loopback port, and stops it with SIGTERM at the end; with --url it drives
// an already running server on 127.0.0.1.
//
// Producers enqueue jobs (POST /jobs, or POST /jobs/bulk with --batch > 1),
// workers hold NDJSON take streams (GET /jobs/take?prefetch=P) and ack what
// they receive (POST /jobs/{id}/success, or POST /jobs/success with
// --ack-batch > 1), over HTTP/1.1 keep-alive or HTTP/2 cleartext (--h2).
// Every job carries a sequence number and its enqueue time in its payload,
// which is how the harness measures latency, duplicates and losses without
// trusting the server.
//
// # Scenarios
//
//	lifecycle     unbudgeted enqueue -> take -> ack
//	inflight      one while_in_flight budget; each job "works" for --sleep
//	rate          one time_based budget (--budget-alloc per --budget-duration)
//	multi         every job on two budgets loose enough never to bind
//	many-budgets  --parked jobs parked on each of --budgets budgets made by
//	              create_with: RSS per budget and per parked job, then the drain
//	backlog       enqueue everything first, restart the server on it (start-up
//	              time, RSS while serving), then time the drain
//	restart       kill -9 the server under load, restart it, count losses
//	ceiling       the same HTTP shapes against a trivial in-process handler
//	cron          --cron-entries entries firing every second for --duration:
//	              lateness from slot to take, firings/s, server CPU; then
//	              install time and RSS for --cron-install entries (cron.go)
//	batch         single enqueues, plain and batched (100 folds a key), in one run
//
// # Output
//
// Like river's riverbench: a progress line on stderr per --progress interval
// (log/slog), then a line-oriented summary on stdout (or JSON with --json).
// The first SIGINT stops the producers and drains; the second cancels.
// Every loop is bounded by --timeout.
//
// Examples:
//
//	go run ./bench --scenario ceiling --tiny
//	go run ./bench --scenario lifecycle --jobs 200000 --h2
//	go run ./bench --scenario rate --budget-alloc 2000 --budget-duration 1s
//	go run ./bench --url http://127.0.0.1:7890 --scenario inflight --sleep 5ms
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx := context.Background()
	// First SIGINT/SIGTERM drains, the second cancels: run watches the
	// channel itself so that it can tell the two apart.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, sigs))
}
