package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// uiUpdate makes the browser tests write docs/screenshots/*.png.
var uiUpdate = flag.Bool("update", false, "browser tests: write the dashboard screenshots to docs/screenshots/")

// uiWait bounds every wait for the page to show something: generous, as
// the page polls every second or, when the server is slow to answer, up to
// every 5 s.
const uiWait = 20 * time.Second

// uiChromium finds a Chromium to drive. Without one the browser tests skip,
// except on CI (CI=true), where they fail.
func uiChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH and CI=true: the dashboard's browser tests must run (.ci/run installs Debian's chromium)")
	}
	t.Skip("no chromium on PATH: the dashboard's browser tests are skipped (apt-get install -y chromium)")
	return ""
}

// uiBrowser is one headless Chromium shared by the subtests, each of which
// opens its own tab.
type uiBrowser struct {
	ctx  context.Context
	base string
}

func uiStartBrowser(t *testing.T, base string) *uiBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(uiChromium(t)),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	started := time.Now()
	require.NoError(t, chromedp.Do(bctx), "starting chromium")
	t.Logf("chromium started in %s", time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	return &uiBrowser{ctx: bctx, base: base}
}

// uiTab is one page under test, with the console errors it logged.
type uiTab struct {
	t      *testing.T
	b      *uiBrowser
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// open loads /ui/#<hash> in a new tab and collects its console errors and
// uncaught exceptions. allow, when set, tells which error lines are
// expected. When the subtest ends, any other error fails it.
func (b *uiBrowser) open(t *testing.T, hash string, allow func(string) bool) *uiTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	tab := &uiTab{t: t, b: b, ctx: ctx}
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				line := fmt.Sprintf("%s: %s (%s)", m.Type, m.Text, m.URL)
				if allow == nil || !allow(line) {
					tab.mu.Lock()
					tab.errors = append(tab.errors, line)
					tab.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() {
		// a last round trip, so that events sent before it have arrived
		_, _ = chromedp.Run(ctx, chromedp.Evaluate[int]("1"))
		cancel()
		<-done
		tab.mu.Lock()
		defer tab.mu.Unlock()
		if len(tab.errors) > 0 {
			t.Errorf("the page logged console errors:\n%s", strings.Join(tab.errors, "\n"))
		}
	})
	tab.visit(hash)
	return tab
}

// visit navigates the tab to /ui/#<hash> and waits for the page to draw.
func (tab *uiTab) visit(hash string) {
	tab.t.Helper()
	page := strings.SplitN(strings.TrimPrefix(hash, "/"), "/", 2)[0]
	page = strings.SplitN(page, "?", 2)[0]
	if page == "" {
		page = "overview"
	}
	require.NoError(tab.t, chromedp.Do(tab.ctx, chromedp.Navigate(tab.b.base+"/ui/#"+hash)))
	tab.wait(fmt.Sprintf(`document.getElementById("view").dataset.page === %q`, page), "the "+page+" page drawn")
}

// wait polls a JavaScript predicate until it holds or uiWait passes.
func (tab *uiTab) wait(expr, what string) {
	tab.t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, uiWait)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		tab.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, tab.text("body"))
	}
}

// text returns an element's innerText ("" when absent).
func (tab *uiTab) text(sel string) string {
	ctx, cancel := context.WithTimeout(tab.ctx, uiWait)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel)))
	return s
}

// cellIs is the predicate "the element's text is want".
func cellIs(sel, want string) string {
	return fmt.Sprintf(`((document.querySelector(%q) || {}).innerText || "").trim() === %q`, sel, want)
}

func (tab *uiTab) click(sel string) {
	tab.t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, uiWait)
	defer cancel()
	require.NoError(tab.t, chromedp.Do(ctx, chromedp.Click(sel, chromedp.NodeVisible)), "click %s", sel)
}

// setValue sets a form field's value, as typing it would.
func (tab *uiTab) setValue(sel, v string) {
	tab.t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, uiWait)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.value = %q; return true; })()`, sel, v)))
	require.NoError(tab.t, err, "set %s", sel)
	require.True(tab.t, ok, "no element %s", sel)
}

// screenshot writes docs/screenshots/<name>.png when run with -update.
func (tab *uiTab) screenshot(name string) {
	tab.t.Helper()
	if !*uiUpdate {
		return
	}
	// the page polls once a second: let one more draw land first
	_, err := chromedp.Run(tab.ctx, chromedp.Evaluate[bool](`new Promise((ok) => setTimeout(() => ok(true), 1100))`, chromedp.EvalAwaitPromise))
	require.NoError(tab.t, err)
	png, err := chromedp.Run(tab.ctx, chromedp.FullScreenshot(100))
	require.NoError(tab.t, err)
	dir := filepath.Join("..", "..", "docs", "screenshots")
	require.NoError(tab.t, os.MkdirAll(dir, 0o755))
	require.NoError(tab.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// uiAPI calls the server's API in JSON and decodes the answer into out.
func uiAPI(t *testing.T, base, method, path string, body, out any, want int) {
	t.Helper()
	r := apitest.DoJSON(t, base, method, path, body)
	require.Equal(t, want, r.Status, "%s %s: %s", method, path, r.Body)
	if out != nil {
		require.NoError(t, json.Unmarshal(r.Body, out))
	}
}

type uiState struct {
	Tokens   float64 `json:"tokens"`
	InFlight int     `json:"in_flight"`
	Parked   int     `json:"parked"`
	Head     *struct {
		ID string `json:"id"`
	} `json:"head"`
}

// TestUIBrowser drives the dashboard in headless Chromium against the real
// binary: each page loads without a console error, shows what the API
// says, follows changes made through the API, and its actions work.
func TestUIBrowser(t *testing.T) {
	started := time.Now()
	s := servertest.Start(t, apitest.HeartbeatFlag, apitest.Heartbeat)
	t.Logf("server (built and) started in %s", time.Since(started).Round(time.Millisecond))
	b := uiStartBrowser(t, s.URL)
	base := s.URL

	// A time_based budget of 2 per 10 minutes, 5 jobs on it and a worker: 2
	// go, 3 park (the head waits ~5 minutes for its token, longer than the test).
	uiAPI(t, base, http.MethodPut, "/budgets/image-api", map[string]any{"allocation": 2, "strategy": map[string]any{"type": "time_based", "duration_ms": 600000}}, nil, http.StatusOK)
	uiAPI(t, base, http.MethodPut, "/budgets/db-slots", map[string]any{"allocation": 4, "strategy": map[string]any{"type": "while_in_flight"}}, nil, http.StatusOK)
	for i := range 5 {
		apitest.Enqueue(t, base, map[string]any{"type": "resize", "queue": "images", "payload": map[string]any{"n": i},
			"budgets": []map[string]any{{"key": "image-api"}}})
	}
	worker := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=images&prefetch=10", WorkerID: "resizer-1"})
	defer worker.Close()
	worker.Jobs(t, 2, uiWait)
	waitState := func(key string, cond func(uiState) bool) uiState {
		t.Helper()
		deadline := time.Now().Add(uiWait)
		for {
			var st uiState
			uiAPI(t, base, http.MethodGet, "/budgets/"+key+"/state", nil, &st, http.StatusOK)
			if cond(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("budget %s: state %+v", key, st)
			}
			time.Sleep(20 * time.Millisecond) // polling the API, with a deadline
		}
	}
	waitState("image-api", func(st uiState) bool { return st.Parked == 3 && st.InFlight == 2 })

	t.Run("budgets", func(t *testing.T) {
		tab := b.open(t, "/budgets", nil)
		row := `tr[data-budget="image-api"] `
		tab.wait(cellIs(row+`td[data-col="parked"]`, "3"), "3 parked on image-api")
		st := waitState("image-api", func(uiState) bool { return true })
		tab.wait(cellIs(row+`td[data-col="in_flight"]`, fmt.Sprint(st.InFlight)), "in flight as the API says")
		tab.wait(cellIs(row+`td[data-col="head"]`, st.Head.ID), "the head job as the API says")
		require.Contains(t, tab.text(row+`td[data-col="head_eta"]`), "in ", "a time_based head has an ETA")
		require.Contains(t, tab.text(row+`td[data-col="wake"]`), "in ", "the wake timer is shown")
		tab.wait(cellIs(`tr[data-budget="db-slots"] td[data-col="tokens"]`, "4"), "db-slots full")
		tab.wait(`Number(document.querySelector('tr[data-budget="db-slots"] .bar').dataset.level) === 1`, "db-slots bar full")

		// a change through the API shows: a 6th job parks, db-slots lends a token
		apitest.Enqueue(t, base, map[string]any{"type": "resize", "queue": "images", "payload": map[string]any{"n": 5},
			"budgets": []map[string]any{{"key": "image-api"}}})
		tab.wait(cellIs(row+`td[data-col="parked"]`, "4"), "4 parked after one more enqueue")
		apitest.Enqueue(t, base, map[string]any{"type": "query", "queue": "reports", "payload": map[string]any{},
			"budgets": []map[string]any{{"key": "db-slots"}}})
		report := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=reports&prefetch=1", WorkerID: "reporter"})
		defer report.Close()
		report.NextJob(t, uiWait)
		tab.wait(cellIs(`tr[data-budget="db-slots"] td[data-col="tokens"]`, "3"), "db-slots at 3 with one job in flight")
		tab.wait(`Number(document.querySelector('tr[data-budget="db-slots"] .bar').dataset.level) === 0.75`, "db-slots bar at 3/4")
		tab.screenshot("budgets")
	})

	t.Run("budget", func(t *testing.T) {
		tab := b.open(t, "/budget/image-api", nil)
		tab.wait(cellIs(`#definition dd[data-field="allocation"]`, "2"), "the definition")
		var line struct {
			Total int `json:"total"`
			Jobs  []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		uiAPI(t, base, http.MethodGet, "/budgets/image-api/parked", nil, &line, http.StatusOK)
		require.Equal(t, 4, line.Total)
		var ids []string
		for _, j := range line.Jobs {
			ids = append(ids, j.ID)
		}
		idsJS, _ := json.Marshal(ids)
		tab.wait(fmt.Sprintf(`JSON.stringify([...document.querySelectorAll("#parked tbody tr")].map((r) => r.dataset.job)) === %q`, idsJS),
			"the parked line in the API's order")

		// the trace tail follows the budget live, one line per step as the CLI prints it
		j := apitest.Enqueue(t, base, map[string]any{"type": "resize", "queue": "images", "payload": map[string]any{"n": 6},
			"budgets": []map[string]any{{"key": "image-api"}}})
		tab.wait(fmt.Sprintf(`[...document.querySelectorAll("#trace .ev")].some((e) => e.dataset.kind === "parked" && e.innerText.includes(%q))`, "job="+j.ID),
			"a parked line for the new job in the trace")
		line5, err := chromedp.Run(tab.ctx, chromedp.Evaluate[string](fmt.Sprintf(`[...document.querySelectorAll('#trace .ev[data-kind="parked"]')].find((e) => e.innerText.includes(%q)).innerText`, j.ID)))
		require.NoError(t, err)
		require.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  budget/image-api\s+parked\s+job=`+j.ID+` queue=images cost=1 tokens=[0-9.]+ position=5$`, line5)
		tab.wait(cellIs(`#state dd[data-field="parked"]`, "5"), "5 parked in the live pool")

		// action: patch the allocation; the pool grows and parked jobs go
		tab.setValue("#allocation-input", "20")
		tab.click(`#allocation-form button[type="submit"]`)
		tab.wait(cellIs("#allocation-saved", "saved: allocation 20"), "the patch confirmed")
		var got struct {
			Allocation int `json:"allocation"`
		}
		uiAPI(t, base, http.MethodGet, "/budgets/image-api", nil, &got, http.StatusOK)
		require.Equal(t, 20, got.Allocation)
		tab.wait(cellIs(`#definition dd[data-field="allocation"]`, "20"), "the new allocation in the definition")
		tab.wait(`[...document.querySelectorAll("#trace .ev")].some((e) => e.dataset.kind === "budget_updated")`, "budget_updated in the trace")
		tab.screenshot("budget")
	})

	// the rest needs a budget that keeps jobs parked: one token per 10 minutes, spent
	uiAPI(t, base, http.MethodPut, "/budgets/partner-api", map[string]any{"allocation": 1, "strategy": map[string]any{"type": "time_based", "duration_ms": 600000}}, nil, http.StatusOK)
	var partner []apitest.Job
	for i := range 3 {
		partner = append(partner, apitest.Enqueue(t, base, map[string]any{"type": "sync", "queue": "partners", "payload": map[string]any{"account": i},
			"budgets": []map[string]any{{"key": "partner-api"}}}))
	}
	partnerWorker := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=partners&prefetch=5", WorkerID: "sync-1"})
	defer partnerWorker.Close()
	partnerWorker.NextJob(t, uiWait)
	waitState("partner-api", func(st uiState) bool { return st.Parked == 2 })

	t.Run("jobs", func(t *testing.T) {
		emails := apitest.EnqueueN(t, base, "emails", 5)
		tab := b.open(t, "/jobs?queue=emails&limit=2", nil)
		tab.wait(cellIs("#job-count", "(5 matching)"), "the count of the API")
		tab.wait(fmt.Sprintf(`document.querySelectorAll("#jobs tbody tr").length === 2 && document.querySelector("#jobs tbody tr").dataset.job === %q`, emails[0].ID), "the first page")
		tab.click("#next-page")
		tab.wait(fmt.Sprintf(`(document.querySelector("#jobs tbody tr") || {dataset: {}}).dataset.job === %q`, emails[2].ID), "the second page")
		tab.click("#prev-page")
		tab.wait(fmt.Sprintf(`[...document.querySelectorAll("#jobs tbody tr")].map((r) => r.dataset.job).join() === %q`, emails[1].ID+","+emails[0].ID), "the previous page, newest first")

		// the filter form: status and budget key
		tab.setValue(`#job-filters input[name="queue"]`, "")
		tab.setValue(`#job-filters input[name="budgets.key"]`, "partner-api")
		tab.setValue(`#job-filters input[name="status"]`, "ready")
		tab.setValue(`#job-filters select[name="order"]`, "asc")
		tab.click(`#job-filters button[type="submit"]`)
		tab.wait(cellIs("#job-count", "(2 matching)"), "2 ready jobs on partner-api")
		tab.wait(fmt.Sprintf(`[...document.querySelectorAll("#jobs tbody tr")].map((r) => r.dataset.job).join() === %q`, partner[1].ID+","+partner[2].ID), "the parked partner jobs listed")

		// a jq filter on the payload
		tab.visit("/jobs?queue=emails&filter=" + url.QueryEscape(".n >= 3"))
		tab.wait(cellIs("#job-count", "(2 matching)"), "the jq filter applied")

		// the list follows changes
		tab.visit("/jobs?queue=emails&status=ready")
		tab.wait(cellIs("#job-count", "(5 matching)"), "5 ready emails")
		uiAPI(t, base, http.MethodDelete, "/jobs/"+emails[4].ID, nil, nil, http.StatusNoContent)
		tab.wait(cellIs("#job-count", "(4 matching)"), "4 ready emails after a delete")
		tab.visit("/jobs")
		tab.wait(`document.querySelectorAll("#jobs tbody tr").length > 5`, "all jobs")
		tab.screenshot("jobs")
	})

	t.Run("job", func(t *testing.T) {
		parked := partner[2]
		tab := b.open(t, "/job/"+parked.ID, nil)
		tab.wait(`document.querySelector("#waiting a") && document.querySelector("#waiting a").innerText === "partner-api"`, "the budget holding the job")
		var v struct {
			Waiting struct {
				Budget       string `json:"budget"`
				Position     int    `json:"position"`
				AffordableAt int64  `json:"affordable_at"`
			} `json:"waiting"`
		}
		uiAPI(t, base, http.MethodGet, "/jobs/"+parked.ID, nil, &v, http.StatusOK)
		require.Equal(t, "partner-api", v.Waiting.Budget)
		require.Contains(t, tab.text("#waiting"), fmt.Sprintf("place %d in its line", v.Waiting.Position))
		until := time.UnixMilli(v.Waiting.AffordableAt).Format("15:04:05.000")
		require.Contains(t, tab.text(`#waiting [data-field="until"]`), until, "until when, as the API says")
		tab.screenshot("job-parked")

		// the page follows the job: taken, it is in flight and no longer parked
		j := apitest.Enqueue(t, base, apitest.SimpleJob("followed", map[string]any{"x": 1}))
		tab.visit("/job/" + j.ID)
		tab.wait(cellIs("#job-status", "ready"), "ready")
		w := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=followed&prefetch=1", WorkerID: "w"})
		defer w.Close()
		w.NextJob(t, uiWait)
		tab.wait(cellIs("#job-status", "in_flight"), "in flight once taken")

		// a dead job: its failure shows, and a copy can be enqueued
		dead := apitest.Enqueue(t, base, map[string]any{"type": "charge", "queue": "billing", "payload": map[string]any{"order": 42}, "retry_limit": 0,
			"budgets": []map[string]any{{"key": "db-slots", "cost": 2}}})
		bw := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=billing&prefetch=1", WorkerID: "biller"})
		bw.NextJob(t, uiWait)
		r := apitest.Fail(t, base, dead.ID, map[string]any{"message": "card declined", "error_type": "PaymentError"})
		apitest.RequireStatus(t, r, http.StatusOK)
		bw.Close()
		tab.visit("/job/" + dead.ID)
		tab.wait(cellIs("#job-status", "dead"), "dead")
		tab.wait(`document.getElementById("errors").innerText.includes("card declined")`, "the error record")
		tab.screenshot("job-dead")
		tab.click("#copy-job")
		tab.wait(fmt.Sprintf(`location.hash.startsWith("#/job/") && location.hash !== %q`, "#/job/"+dead.ID), "the copy's page")
		copyID, err := chromedp.Run(tab.ctx, chromedp.Evaluate[string](`decodeURIComponent(location.hash.slice("#/job/".length))`))
		require.NoError(t, err)
		tab.wait(cellIs("#job-status", "ready"), "the copy is ready")
		var cp, orig map[string]any
		uiAPI(t, base, http.MethodGet, "/jobs/"+copyID, nil, &cp, http.StatusOK)
		uiAPI(t, base, http.MethodGet, "/jobs/"+dead.ID, nil, &orig, http.StatusOK)
		require.Equal(t, "dead", orig["status"], "the dead job stays dead")
		for _, k := range []string{"type", "queue", "payload", "priority", "retry_limit", "budgets"} {
			require.Equal(t, orig[k], cp[k], k)
		}

		// delete, with its confirmation step
		tab.click("#delete-job")
		tab.click("#confirm-delete")
		tab.wait(`!!document.getElementById("deleted")`, "deleted")
		uiAPI(t, base, http.MethodGet, "/jobs/"+copyID, nil, nil, http.StatusNotFound)
	})

	t.Run("batches", func(t *testing.T) {
		payload := map[string]any{"device_ids": []string{"a1", "b2", "c3"}}
		j := apitest.Enqueue(t, base, map[string]any{"type": "push", "queue": "push", "payload": payload,
			"batch": map[string]any{"key": "push:apple", "when": "true", "fold": "$existing | .device_ids += ($new | .device_ids)"}})
		tab := b.open(t, "/batches", nil)
		raw, err := json.Marshal(payload)
		require.NoError(t, err)
		tab.wait(cellIs(fmt.Sprintf(`tr[data-job=%q] td[data-col="size"]`, j.ID), fmt.Sprint(len(raw))), "the batched job with its payload size")
		tab.screenshot("batches")
	})

	t.Run("crons", func(t *testing.T) {
		uiAPI(t, base, http.MethodPut, "/crons/nightly", map[string]any{"timezone": "UTC", "entries": []map[string]any{
			{"name": "refresh", "expression": "0 6 * * *", "job": map[string]any{"type": "refresh", "queue": "warehouse", "payload": map[string]any{}}},
			{"name": "cleanup", "expression": "*/15 * * * *", "paused": true, "job": map[string]any{"type": "cleanup", "queue": "maintenance", "payload": map[string]any{}}},
		}}, nil, http.StatusOK)
		tab := b.open(t, "/crons", nil)
		entry := `[data-group="nightly"] tr[data-entry="refresh"] `
		tab.wait(cellIs(entry+`td[data-col="state"]`, "active"), "the refresh entry, active")
		tab.wait(cellIs(`[data-group="nightly"] tr[data-entry="cleanup"] td[data-col="state"]`, "paused"), "the cleanup entry, paused")
		tab.screenshot("crons")
		paused := func() bool {
			var e struct {
				Paused bool `json:"paused"`
			}
			uiAPI(t, base, http.MethodGet, "/crons/nightly/entries/refresh", nil, &e, http.StatusOK)
			return e.Paused
		}
		tab.click(entry + `button[data-action="pause"]`)
		tab.wait(cellIs(entry+`td[data-col="state"]`, "paused"), "the entry paused")
		require.True(t, paused())
		tab.click(entry + `button[data-action="resume"]`)
		tab.wait(cellIs(entry+`td[data-col="state"]`, "active"), "the entry resumed")
		require.False(t, paused())
		// a change through the API shows
		uiAPI(t, base, http.MethodPatch, "/crons/nightly/entries/refresh", map[string]any{"paused": true}, nil, http.StatusOK)
		tab.wait(cellIs(entry+`td[data-col="state"]`, "paused"), "the entry paused through the API")
	})

	t.Run("overview", func(t *testing.T) {
		tab := b.open(t, "/", nil)
		var stats struct {
			Queues []struct {
				Queue     string `json:"queue"`
				Ready     int    `json:"ready"`
				Parked    int    `json:"parked"`
				Scheduled int    `json:"scheduled"`
				InFlight  int    `json:"in_flight"`
				Dead      int    `json:"dead"`
			} `json:"queues"`
		}
		uiAPI(t, base, http.MethodGet, "/stats", nil, &stats, http.StatusOK)
		for _, q := range stats.Queues {
			if q.Queue != "partners" {
				continue
			}
			row := fmt.Sprintf(`tr[data-queue=%q] `, q.Queue)
			tab.wait(cellIs(row+`td[data-col="ready"]`, fmt.Sprint(q.Ready)), "partners ready")
			tab.wait(cellIs(row+`td[data-col="parked"]`, fmt.Sprint(q.Parked)), "partners parked")
			tab.wait(cellIs(row+`td[data-col="in_flight"]`, fmt.Sprint(q.InFlight)), "partners in flight")
		}
		// enqueues, dispatches and acks show as counts and as rates (the
		// row carries each rate's peak over its chart, which a one-second
		// rate cannot miss)
		jobs := apitest.EnqueueN(t, base, "thumbnails", 30)
		row := `tr[data-queue="thumbnails"] `
		tab.wait(cellIs(row+`td[data-col="ready"]`, "30"), "30 ready thumbnails")
		tab.wait(`Number(document.querySelector('tr[data-queue="thumbnails"]').dataset.peakEnqueue) > 0`, "an enqueue rate")
		w := apitest.OpenTake(t, base, apitest.TakeOpts{Query: "queue=thumbnails&prefetch=100", WorkerID: "thumbs"})
		defer w.Close()
		got := w.Jobs(t, 30, uiWait)
		tab.wait(cellIs(row+`td[data-col="in_flight"]`, "30"), "30 in flight")
		tab.wait(`Number(document.querySelector('tr[data-queue="thumbnails"]').dataset.peakDispatch) > 0`, "a dispatch rate")
		for _, j := range got[:20] {
			apitest.Ack(t, base, j.ID)
		}
		tab.wait(cellIs(row+`td[data-col="in_flight"]`, "10"), "10 in flight after 20 acks")
		tab.wait(`Number(document.querySelector('tr[data-queue="thumbnails"]').dataset.peakAck) > 0`, "an ack rate")
		require.Len(t, jobs, 30)
		tab.screenshot("overview")
	})
}
