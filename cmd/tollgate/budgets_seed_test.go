package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

var budJobIDRe = regexp.MustCompile(`^[0-9a-z]{25}$`)

// budCheckEnqueued checks an enqueue response against the seed's shape:
// exactly attempts, budgets, duplicate, folded, id, priority, queue,
// ready_at, status, type (no payload).
func budCheckEnqueued(t *testing.T, j map[string]any, queue, typ, budgets string, before, after int64) {
	t.Helper()
	want := "attempts,budgets,duplicate,folded,id,priority,queue,ready_at,status,type"
	if got := strings.Join(budKeys(j), ","); got != want {
		t.Fatalf("enqueue response fields %s, want %s: %v", got, want, j)
	}
	if n := budInt(t, j, "attempts"); n != 0 {
		t.Fatalf("attempts %d, want 0", n)
	}
	if got := budCanon(t, j["budgets"]); got != budgets {
		t.Fatalf("budgets %s, want %s", got, budgets)
	}
	if j["duplicate"] != false || j["folded"] != false {
		t.Fatalf("duplicate/folded %v/%v, want false/false", j["duplicate"], j["folded"])
	}
	if id := budStr(t, j, "id"); !budJobIDRe.MatchString(id) {
		t.Fatalf("id %q is not a 25-char base-36 id", id)
	}
	if p := budInt(t, j, "priority"); p != 32768 {
		t.Fatalf("priority %d, want 32768", p)
	}
	if q := budStr(t, j, "queue"); q != queue {
		t.Fatalf("queue %q, want %q", q, queue)
	}
	if ty := budStr(t, j, "type"); ty != typ {
		t.Fatalf("type %q, want %q", ty, typ)
	}
	if st := budStr(t, j, "status"); st != "ready" {
		t.Fatalf("status %q, want ready", st)
	}
	if ra := budInt(t, j, "ready_at"); ra < before || ra > after {
		t.Fatalf("ready_at %d not within [%d, %d]", ra, before, after)
	}
}

// TestBudgetsSeedExamples replays every example of seed/budgets.txt in the
// seed's own chronological order (create, duplicate, replace, create
// while_in_flight, patch burst, list, delete, enqueue on two budgets,
// create_with, delete referenced, reduce below cost) and compares every
// field and error text.
func TestBudgetsSeedExamples(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)

	const tbStrategy = `{"duration_ms":3600000,"type":"time_based"}`
	const tbBurst = `{"burst":50000,"duration_ms":3600000,"type":"time_based"}`
	const wifStrategy = `{"type":"while_in_flight"}`

	// Create a time_based budget.
	before := budNowMs()
	r := apitest.DoJSON(t, s.URL, "POST", "/budgets/image-service", `{
    "allocation": 10000,
    "strategy": {
        "type": "time_based",
        "duration_ms": 3600000
    }
}`)
	after := budNowMs()
	img := apitest.Object(t, r, http.StatusCreated)
	imgCreated, imgUpdated := budCheckBudget(t, img, "image-service", 10000, tbStrategy)
	if imgCreated != imgUpdated {
		t.Fatalf("new budget: created_at %d != updated_at %d", imgCreated, imgUpdated)
	}
	if imgCreated < before || imgCreated > after {
		t.Fatalf("created_at %d not within [%d, %d]", imgCreated, before, after)
	}

	// Duplicate create rejected (the seed's body ends with a newline).
	r = apitest.DoJSON(t, s.URL, "POST", "/budgets/image-service", `{
    "allocation": 10000,
    "strategy": {
        "type": "time_based",
        "duration_ms": 7200000
    }
}
`)
	apitest.RequireError(t, r, http.StatusConflict, "budget 'image-service' already exists")
	got := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/image-service", nil), http.StatusOK)
	c, u := budCheckBudget(t, got, "image-service", 10000, tbStrategy)
	if c != imgCreated || u != imgUpdated {
		t.Fatalf("409 changed the stored budget: %v", got)
	}

	// Replace an existing budget.
	before = budNowMs()
	r = apitest.DoJSON(t, s.URL, "PUT", "/budgets/image-service", `{
    "allocation": 10000,
    "strategy": {
        "type": "time_based",
        "duration_ms": 3600000
    }
}`)
	after = budNowMs()
	img = apitest.Object(t, r, http.StatusOK)
	c, u = budCheckBudget(t, img, "image-service", 10000, tbStrategy)
	if c != imgCreated {
		t.Fatalf("PUT replace changed created_at %d -> %d", imgCreated, c)
	}
	if u < before || u > after || u < imgUpdated {
		t.Fatalf("PUT replace updated_at %d, want now within [%d, %d] and >= %d", u, before, after, imgUpdated)
	}
	imgUpdated = u

	// Create a while_in_flight budget (PUT on a missing key: 200, not 201).
	before = budNowMs()
	r = apitest.DoJSON(t, s.URL, "PUT", "/budgets/schema-bot", `{
    "allocation": 10,
    "strategy": {
        "type": "while_in_flight"
    }
}`)
	after = budNowMs()
	sb := apitest.Object(t, r, http.StatusOK)
	sbCreated, sbUpdated := budCheckBudget(t, sb, "schema-bot", 10, wifStrategy)
	if sbCreated != sbUpdated || sbCreated < before || sbCreated > after {
		t.Fatalf("PUT create: created_at %d updated_at %d, want equal and within [%d, %d]", sbCreated, sbUpdated, before, after)
	}

	// Patch an existing budget.
	before = budNowMs()
	r = apitest.DoJSON(t, s.URL, "PATCH", "/budgets/image-service", `{
    "strategy": {
        "burst": 50000
    }
}`)
	after = budNowMs()
	img = apitest.Object(t, r, http.StatusOK)
	c, u = budCheckBudget(t, img, "image-service", 10000, tbBurst)
	if c != imgCreated {
		t.Fatalf("PATCH changed created_at %d -> %d", imgCreated, c)
	}
	if u < before || u > after || u < imgUpdated {
		t.Fatalf("PATCH updated_at %d, want now within [%d, %d]", u, before, after)
	}
	imgUpdated = u

	// List budgets: {"budgets":[...]} sorted by key.
	list := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets", nil), http.StatusOK)
	if ks := strings.Join(budKeys(list), ","); ks != "budgets" {
		t.Fatalf("list fields %s, want budgets", ks)
	}
	items, ok := list["budgets"].([]any)
	if !ok || len(items) != 2 {
		t.Fatalf("list %v: want 2 budgets", list)
	}
	c, u = budCheckBudget(t, items[0].(map[string]any), "image-service", 10000, tbBurst)
	if c != imgCreated || u != imgUpdated {
		t.Fatalf("listed image-service timestamps %d/%d, want %d/%d", c, u, imgCreated, imgUpdated)
	}
	c, u = budCheckBudget(t, items[1].(map[string]any), "schema-bot", 10, wifStrategy)
	if c != sbCreated || u != sbUpdated {
		t.Fatalf("listed schema-bot timestamps %d/%d, want %d/%d", c, u, sbCreated, sbUpdated)
	}

	// Delete a budget.
	apitest.RequireNoContent(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/schema-bot", nil))
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/schema-bot", nil), http.StatusNotFound, "budget 'schema-bot' not found")
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/schema-bot", nil), http.StatusNotFound, "budget 'schema-bot' not found")

	// The seed enqueues against schema-bot again later, so it was re-created.
	budMustPut(t, s, "schema-bot", budWIF(10))

	// Enqueue a job against multiple budgets.
	before = budNowMs()
	r = apitest.DoJSON(t, s.URL, "POST", "/jobs", `{
    "type": "example",
    "queue": "example",
    "payload": {},
    "budgets": [
        {
            "key": "schema-bot",
            "cost": 2
        },
        {"key": "image-service"}
    ]
}`)
	after = budNowMs()
	multi := apitest.Object(t, r, http.StatusCreated)
	budCheckEnqueued(t, multi, "example", "example",
		`[{"cost":2,"key":"schema-bot"},{"cost":1,"key":"image-service"}]`, before, after)
	// GET /jobs/{id} shows the same bindings (and the payload).
	gj := budGetJob(t, s, budStr(t, multi, "id"))
	if b := budCanon(t, gj["budgets"]); b != `[{"cost":2,"key":"schema-bot"},{"cost":1,"key":"image-service"}]` {
		t.Fatalf("GET /jobs/{id} budgets %s", b)
	}
	if p := budCanon(t, gj["payload"]); p != `{}` {
		t.Fatalf("GET /jobs/{id} payload %s, want {}", p)
	}
	if _, has := gj["duplicate"]; has {
		t.Fatalf("GET /jobs/{id} carries duplicate: %v", gj)
	}

	// Enqueue a job using create_with.
	before = budNowMs()
	r = apitest.DoJSON(t, s.URL, "POST", "/jobs", `{
    "type": "example",
    "queue": "example",
    "payload": {},
    "budgets": [
        {
            "key": "cpu-intensive",
            "create_with": {
                "allocation": 100,
                "strategy": {
                    "type": "while_in_flight"
                }
            }
        }
    ]
}`)
	after = budNowMs()
	cw := apitest.Object(t, r, http.StatusCreated)
	budCheckEnqueued(t, cw, "example", "example", `[{"cost":1,"key":"cpu-intensive"}]`, before, after)
	cpu := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/cpu-intensive", nil), http.StatusOK)
	c, u = budCheckBudget(t, cpu, "cpu-intensive", 100, wifStrategy)
	if c != u || c < before || c > after {
		t.Fatalf("create_with budget created_at %d updated_at %d, want equal and within [%d, %d]", c, u, before, after)
	}
	// ... and subsequent enqueues see it: a second create_with is ignored.
	r = apitest.DoJSON(t, s.URL, "POST", "/jobs", budJob("example", map[string]any{"key": "cpu-intensive",
		"create_with": budWIF(5)}))
	apitest.Object(t, r, http.StatusCreated)
	cpu = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/cpu-intensive", nil), http.StatusOK)
	if c2, u2 := budCheckBudget(t, cpu, "cpu-intensive", 100, wifStrategy); c2 != c || u2 != u {
		t.Fatalf("ignored create_with touched the budget: %v", cpu)
	}

	// Delete a referenced budget rejected.
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "DELETE", "/budgets/image-service", nil), http.StatusConflict,
		"budget 'image-service' is referenced by 1 unfinished job. Delete them or wait for them to finish before deleting it.")
	apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/image-service", nil), http.StatusOK)

	// Reduce a budget below a job's cost rejected.
	r = apitest.DoJSON(t, s.URL, "PATCH", "/budgets/schema-bot", `{
    "allocation": 1
}`)
	apitest.RequireError(t, r, http.StatusUnprocessableEntity,
		"budget 'schema-bot' cannot allocate 1: 1 unfinished job draw up to 2 from it. Raise the allocation, delete them, or wait for them to drain.")
	sb = apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/schema-bot", nil), http.StatusOK)
	budCheckBudget(t, sb, "schema-bot", 10, wifStrategy)

	// The seed's create_with example misspells allocation ("allocaton"):
	// Decision 4.13#1 / §4.6 — 400, nothing written.
	r = apitest.DoJSON(t, s.URL, "POST", "/jobs", `{
    "type": "example",
    "queue": "typo-queue",
    "payload": {},
    "budgets": [
        {"key": "image-service"},
        {
            "key": "notifications",
            "cost": 5,
            "create_with": {
                "allocaton": 50000,
                "strategy": {
                    "type": "while_in_flight"
                }
            }
        }
    ]
}`)
	msg := apitest.RequireErrorPrefix(t, r, http.StatusBadRequest, "invalid JSON: ")
	if !regexp.MustCompile(`missing field .?allocation`).MatchString(msg) {
		t.Fatalf("typo error %q should name the missing field 'allocation' (§4.6)", msg)
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets/notifications", nil), http.StatusNotFound, "budget 'notifications' not found")
	queues := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/queues", nil), http.StatusOK)
	if q := budCanon(t, queues["queues"]); q != `["example"]` {
		t.Fatalf("queues %s: the rejected enqueue wrote a job", q)
	}
}
