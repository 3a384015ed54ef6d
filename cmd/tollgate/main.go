// Command tollgate is the tollgate job-queue server: a persistent job queue
// with server-side budgets (concurrency and rate limits), speaking the Zizq
// HTTP API. Run `tollgate --help` for its flags.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	// the IANA zone database, for cron zones on hosts without zone files
	_ "time/tzdata"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad command line: one line on stderr, exit status 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func errorf(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }
