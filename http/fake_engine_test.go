package http

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

// fakeEngine stands in for the actors facade in handler tests. Each test
// sets the functions its requests reach and no others: a call to an unset
// one hits the embedded nil Engine, panics, and comes back as a 500, so a
// handler that asks the engine something unexpected fails its test.
type fakeEngine struct {
	Engine // nil

	enqueue      func(jobs []*protocol.NewJob, bulk bool) ([]*protocol.JobView, error)
	getJob       func(id string) (*protocol.JobView, error)
	patchJob     func(id string, p *protocol.JobPatch) (*protocol.JobView, error)
	deleteJob    func(id string) error
	listJobs     func(f *protocol.JobFilter, from string, desc bool, limit int) ([]*protocol.JobView, bool, error)
	countJobs    func(f *protocol.JobFilter) (uint64, error)
	deleteJobs   func(f *protocol.JobFilter) (int, error)
	patchJobs    func(f *protocol.JobFilter, p *protocol.JobPatch) (int, error)
	ack          func(ids []string) ([]string, error)
	fail         func(id string, req *protocol.FailureRequest) (*protocol.JobView, error)
	openStream   func(m *actors.OpenStream) (uint64, error)
	closeStream  func(id uint64) (int, error)
	written      func(id uint64)
	loadPayloads func(jobs []protocol.Job) ([]protocol.Job, error)
	budgets      func() ([]protocol.Budget, error)
	getBudget    func(key string) (*protocol.Budget, error)
	createBudget func(key string, def protocol.Definition, replace bool) (*protocol.Budget, bool, error)
	patchBudget  func(key string, p *protocol.BudgetPatch) (*protocol.Budget, error)
	deleteBudget func(key string) error
}

func (f *fakeEngine) Enqueue(_ context.Context, jobs []*protocol.NewJob, bulk bool) ([]*protocol.JobView, error) {
	return f.enqueue(jobs, bulk)
}
func (f *fakeEngine) GetJob(_ context.Context, id string) (*protocol.JobView, error) {
	return f.getJob(id)
}
func (f *fakeEngine) PatchJob(_ context.Context, id string, p *protocol.JobPatch) (*protocol.JobView, error) {
	return f.patchJob(id, p)
}
func (f *fakeEngine) DeleteJob(_ context.Context, id string) error { return f.deleteJob(id) }
func (f *fakeEngine) ListJobs(_ context.Context, fl *protocol.JobFilter, from string, desc bool, limit int) ([]*protocol.JobView, bool, error) {
	return f.listJobs(fl, from, desc, limit)
}
func (f *fakeEngine) CountJobs(_ context.Context, fl *protocol.JobFilter) (uint64, error) {
	return f.countJobs(fl)
}
func (f *fakeEngine) DeleteJobs(_ context.Context, fl *protocol.JobFilter) (int, error) {
	return f.deleteJobs(fl)
}
func (f *fakeEngine) PatchJobs(_ context.Context, fl *protocol.JobFilter, p *protocol.JobPatch) (int, error) {
	return f.patchJobs(fl, p)
}
func (f *fakeEngine) AckSettling(_ context.Context, ids []string, _ map[string][]protocol.Settlement) ([]string, error) {
	return f.ack(ids)
}
func (f *fakeEngine) FailSettling(_ context.Context, id string, req *protocol.FailureRequest, _ []protocol.Settlement) (*protocol.JobView, error) {
	return f.fail(id, req)
}
func (f *fakeEngine) OpenStream(_ context.Context, m *actors.OpenStream) (uint64, error) {
	return f.openStream(m)
}
func (f *fakeEngine) CloseStream(_ context.Context, id uint64) (int, error) { return f.closeStream(id) }
func (f *fakeEngine) StreamWritten(id uint64)                               { f.written(id) }
func (f *fakeEngine) LoadPayloads(jobs []protocol.Job) ([]protocol.Job, error) {
	return f.loadPayloads(jobs)
}
func (f *fakeEngine) Budgets(context.Context) ([]protocol.Budget, error) { return f.budgets() }
func (f *fakeEngine) GetBudget(_ context.Context, key string) (*protocol.Budget, error) {
	return f.getBudget(key)
}
func (f *fakeEngine) CreateBudget(_ context.Context, key string, def protocol.Definition, replace bool) (*protocol.Budget, bool, error) {
	return f.createBudget(key, def, replace)
}
func (f *fakeEngine) PatchBudget(_ context.Context, key string, p *protocol.BudgetPatch) (*protocol.Budget, error) {
	return f.patchBudget(key, p)
}
func (f *fakeEngine) DeleteBudget(_ context.Context, key string) error { return f.deleteBudget(key) }

// handlerCase is one request to the API on a fake engine and what must
// come back.
type handlerCase struct {
	name   string
	method string
	path   string
	header map[string]string // Content-Type, Accept, ...
	body   string
	// engine sets the fake's answers (and checks what it was asked)
	engine func(t *testing.T, f *fakeEngine)
	status int
	// body is the exact response body when wantBody is set; wantError is
	// the error text of a JSON error body
	wantBody  string
	wantError string
	// wantErrorPrefix is the start of the error text, for texts that quote
	// a decoder's detail
	wantErrorPrefix string
	// check inspects the response further
	check func(t *testing.T, rec *httptest.ResponseRecorder)
}

// serveFake answers one request with the API on f, in process.
func serveFake(t *testing.T, f *fakeEngine, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, _ := New(Config{Version: "test", Logger: log}, f)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

// runHandlerCases runs each case as a subtest.
func runHandlerCases(t *testing.T, cases []handlerCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{}
			if tc.engine != nil {
				tc.engine(t, f)
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := httptest.NewRequest(tc.method, tc.path, body)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := serveFake(t, f, req)
			if rec.Code != tc.status {
				t.Fatalf("%s %s: status %d, want %d; body %q", tc.method, tc.path, rec.Code, tc.status, rec.Body.String())
			}
			if tc.wantBody != "" && rec.Body.String() != tc.wantBody {
				t.Fatalf("%s %s: body\n%q\nwant\n%q", tc.method, tc.path, rec.Body.String(), tc.wantBody)
			}
			if tc.wantError != "" {
				want := `{"error":` + jsonString(tc.wantError) + "}\n"
				if got := rec.Body.String(); got != want {
					t.Fatalf("%s %s: error body\n%s\nwant\n%s", tc.method, tc.path, got, want)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Fatalf("error Content-Type %q, want application/json", ct)
				}
			}
			if tc.wantErrorPrefix != "" {
				var eb errorBody
				if err := protocol.Decode(protocol.JSON, rec.Body.Bytes(), &eb); err != nil || !strings.HasPrefix(eb.Error, tc.wantErrorPrefix) {
					t.Fatalf("%s %s: error body %q, want an error starting %q", tc.method, tc.path, rec.Body.String(), tc.wantErrorPrefix)
				}
			}
			if tc.check != nil {
				tc.check(t, rec)
			}
		})
	}
}

// jsonString quotes s as encoding/json does for ASCII text.
func jsonString(s string) string {
	b, err := protocol.Encode(protocol.JSON, s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
