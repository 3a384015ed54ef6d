package http

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// routeStatuses are the codes each route's handler can answer with,
// beyond the ones every route shares (docs/API.md, "Errors common to
// every route"). docs/API.md must list each of them under the route.
// A route missing here (a new one) must still be documented with at
// least one success code.
var routeStatuses = map[string][]int{
	"GET /health":                           {200},
	"GET /version":                          {200},
	"GET /queues":                           {200},
	"POST /reset":                           {204},
	"POST /jobs":                            {200, 201, 400, 422},
	"POST /jobs/bulk":                       {200, 201, 400, 422},
	"GET /jobs/take":                        {200, 400, 406},
	"POST /jobs/success":                    {204, 400, 422},
	"GET /jobs":                             {200, 400},
	"GET /jobs/count":                       {200, 400},
	"DELETE /jobs":                          {200, 400},
	"PATCH /jobs":                           {200, 400, 422},
	"PATCH /jobs/{id}":                      {200, 400, 404, 422},
	"GET /jobs/{id}/errors":                 {200, 400, 404},
	"GET /jobs/{id}/errors/{attempt}":       {200, 400, 404},
	"POST /jobs/budgets/{key}":              {200, 400, 422},
	"PUT /jobs/budgets/{key}":               {200, 400, 422},
	"PATCH /jobs/budgets/{key}":             {200, 400, 422},
	"DELETE /jobs/budgets/{key}":            {200, 400},
	"DELETE /jobs/budgets":                  {200, 400},
	"POST /jobs/{id}/budgets/{key}":         {200, 400, 404, 409, 422},
	"PUT /jobs/{id}/budgets/{key}":          {200, 400, 404, 422},
	"PATCH /jobs/{id}/budgets/{key}":        {200, 400, 404, 422},
	"DELETE /jobs/{id}/budgets/{key}":       {200, 404, 422},
	"PUT /jobs/{id}/budgets":                {200, 400, 404, 422},
	"DELETE /jobs/{id}/budgets":             {200, 404, 422},
	"GET /jobs/{id}":                        {200, 404},
	"DELETE /jobs/{id}":                     {204, 404},
	"POST /jobs/{id}/success":               {204, 400, 404, 422},
	"POST /jobs/{id}/failure":               {200, 400, 404, 422},
	"GET /budgets":                          {200, 400},
	"PUT /budgets/{key}/hold":               {200, 400, 404},
	"DELETE /budgets/{key}/hold":            {204, 404},
	"GET /budgets/{key}":                    {200, 404},
	"POST /budgets/{key}":                   {201, 400, 409, 422},
	"PUT /budgets/{key}":                    {200, 400, 422},
	"PATCH /budgets/{key}":                  {200, 400, 404, 422},
	"DELETE /budgets/{key}":                 {204, 404, 409},
	"GET /budgets/{key}/state":              {200, 404},
	"GET /debug/trace":                      {200, 400, 406},
	"GET /metrics":                          {200},
	"GET /stats":                            {200, 400},
	"GET /budgets/{key}/parked":             {200, 400, 404},
	"GET /ui":                               {301},
	"GET /ui/*":                             {200, 404},
	"GET /crons":                            {200},
	"DELETE /crons":                         {200},
	"GET /crons/{group}":                    {200, 404},
	"PUT /crons/{group}":                    {200, 400, 422},
	"PATCH /crons/{group}":                  {200, 400, 404},
	"DELETE /crons/{group}":                 {204, 404},
	"POST /crons/{group}/entries":           {201, 400, 409, 422},
	"GET /crons/{group}/entries/{entry}":    {200, 404},
	"PUT /crons/{group}/entries/{entry}":    {200, 400, 422},
	"PATCH /crons/{group}/entries/{entry}":  {200, 400, 404},
	"DELETE /crons/{group}/entries/{entry}": {204, 404},
}

var (
	docRouteHeading = regexp.MustCompile("^#{3,5} `([A-Z]+ /[^`]*)`\\s*$")
	docHeading      = regexp.MustCompile(`^#{1,5} `)
	docStatusLine   = regexp.MustCompile(`Status codes: ([^\n]*(?:\n[^\n#]+)*)`)
	docCode         = regexp.MustCompile(`\b[1-5]\d\d\b`)
	echoParam       = regexp.MustCompile(`:([a-z]+)`)
)

// docSections maps "METHOD /path" headings of docs/API.md to the text
// under each, up to the next heading.
func docSections(t *testing.T, doc string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var cur string
	var body strings.Builder
	flush := func() {
		if cur != "" {
			out[cur] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.Split(doc, "\n") {
		if docHeading.MatchString(line) {
			flush()
			cur = ""
			if m := docRouteHeading.FindStringSubmatch(line); m != nil {
				if _, dup := out[m[1]]; dup {
					t.Errorf("docs/API.md documents %s twice", m[1])
				}
				cur = m[1]
			}
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	return out
}

// TestAPIDocCoversEveryRoute: every route the server registers has its own
// section in docs/API.md ("#### `METHOD /path`", parameters in braces) with
// a "Status codes:" line that names a success code and every code the
// handler can answer with.
func TestAPIDocCoversEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := docSections(t, string(raw))
	e, _ := New(Config{}, nil)
	var routes []string
	for _, r := range e.Routes() {
		routes = append(routes, r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}"))
	}
	sort.Strings(routes)
	if len(routes) < 30 {
		t.Fatalf("only %d routes registered: %v", len(routes), routes)
	}
	for _, route := range routes {
		body, ok := sections[route]
		if !ok {
			t.Errorf("docs/API.md has no section for %s", route)
			continue
		}
		m := docStatusLine.FindStringSubmatch(body)
		if m == nil {
			t.Errorf("docs/API.md, %s: no \"Status codes:\" line", route)
			continue
		}
		listed := map[int]bool{}
		success := false
		for _, c := range docCode.FindAllString(m[1], -1) {
			n := int(c[0]-'0')*100 + int(c[1]-'0')*10 + int(c[2]-'0')
			listed[n] = true
			success = success || (n >= 200 && n < 400) // a redirect is a route's success too
		}
		if !success {
			t.Errorf("docs/API.md, %s: no success status listed in %q", route, m[1])
		}
		for _, want := range routeStatuses[route] {
			if !listed[want] {
				t.Errorf("docs/API.md, %s: status %d is not listed (%q)", route, want, m[1])
			}
		}
	}
	for route := range routeStatuses {
		if _, ok := sections[route]; !ok {
			t.Errorf("docs/API.md has no section for %s, which the table of statuses expects", route)
		}
	}
}

// TestAPIDocSectionsParse: the parser this test relies on finds a route
// heading and fails on a missing one (the test can fail).
func TestAPIDocSectionsParse(t *testing.T) {
	doc := "## Routes\n#### `GET /a`\n\nStatus codes: 200, 404.\n#### `POST /b/{id}`\ntext\n## Other\n"
	s := docSections(t, doc)
	if len(s) != 2 || !strings.Contains(s["GET /a"], "Status codes: 200, 404.") || s["POST /b/{id}"] != "text\n" {
		t.Fatalf("sections = %q", s)
	}
}
