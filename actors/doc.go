// Package actors is tollgate's dispatch engine, built on protoactor-go.
//
// # Actors
//
//   - queue actor: every unfinished job, the ready index in (priority, id)
//     order, the take streams and their in-flight sets, and the budget
//     catalog (definitions and counts of bound unfinished jobs by cost). It
//     serialises enqueue checks, budget updates and deletes.
//   - budget actor, one per budget: its token pool, its reservations, its
//     parked jobs in (priority, id) order and one wake timer.
//   - scheduler actor: the scheduled set by (ready_at, id) and one timer.
//   - cron actor: every cron entry by (next_enqueue_at, group, entry) and
//     one timer, re-armed at least every 60 s to notice clock jumps. It
//     only keeps time: the queue actor owns the groups and entries (their
//     records, templates and budget claims) and fires due entries through
//     its ordinary enqueue, the job and the entry's new times in one
//     transaction (cron_groups.go).
//
// # Dispatch
//
// When a stream has room, the queue actor takes the best ready job across
// the stream's queues. An unbudgeted job is marked in flight at once. A
// budgeted job reserves its cost on each of its budgets in ascending key
// order; when all grant, each reservation is committed (tokens debited) and
// the job is marked in flight; at the first refusal the holds are released
// and the job parks on the refusing budget, which wakes it when its tokens
// allow. Tokens are therefore debited only when a worker slot is free.
//
// Every actor keeps its decisions in a plain struct (queueCore; budgetCore,
// whose one entry point is its step function) whose methods take the time
// as an argument, so the rules are tested without an actor system or a
// clock.
package actors
