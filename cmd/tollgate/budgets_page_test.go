package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestBudgetsPaging: GET /budgets with limit and from pages through every
// budget in key order by following next; without them the answer is the
// whole list, as before, with no pages field.
func TestBudgetsPaging(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t)
	var want []string
	for i := range 7 {
		key := fmt.Sprintf("k/%02d", 6-i) // created out of order; '/' needs escaping in links
		budMustPut(t, s, key, budWIF(1))
	}
	for i := range 7 {
		want = append(want, fmt.Sprintf("k/%02d", i))
	}
	all := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", "/budgets?unrelated=1", nil), http.StatusOK)
	if _, ok := all["pages"]; ok || len(all["budgets"].([]any)) != 7 {
		t.Fatalf("GET /budgets without paging answered %v", all)
	}
	var got []string
	path := "/budgets?limit=3"
	pages := 0
	for {
		m := apitest.Object(t, apitest.DoJSON(t, s.URL, "GET", path, nil), http.StatusOK)
		pages++
		for _, b := range m["budgets"].([]any) {
			got = append(got, budStr(t, b.(map[string]any), "key"))
		}
		p := m["pages"].(map[string]any)
		if p["self"] != path {
			t.Fatalf("self %v, want %s", p["self"], path)
		}
		next, ok := p["next"].(string)
		if !ok {
			if p["next"] != nil {
				t.Fatalf("next %v", p["next"])
			}
			break
		}
		path = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || pages != 3 {
		t.Fatalf("paged %v in %d pages, want %v in 3", got, pages, want)
	}
	apitest.RequireError(t, apitest.DoJSON(t, s.URL, "GET", "/budgets?limit=0", nil), http.StatusBadRequest, "limit must be between 1 and 2000")
	m := apitest.Object(t, apitest.DoMsgpack(t, s.URL, "GET", "/budgets?from=k%2F05", nil), http.StatusOK)
	if bs := m["budgets"].([]any); len(bs) != 1 || budStr(t, bs[0].(map[string]any), "key") != "k/06" {
		t.Fatalf("from k/05 answered %v", m)
	}
}
