package http

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/actors"
	"github.com/tollgate/tollgate/protocol"
)

// Table tests of request decoding, content negotiation and error mapping
// (SPEC §1.2, §1.4, §1.5, §5, §6, §4.10) for the main handlers, on a fake
// engine: no actors, no store.

const testID = "03fr1jkpcsipbsckqj0y6pgr7"

// echoJobs answers an enqueue with one ready view per job, echoing its
// type and queue.
func echoJobs(t *testing.T, wantBulk bool) func([]*protocol.NewJob, bool) ([]*protocol.JobView, error) {
	return func(jobs []*protocol.NewJob, bulk bool) ([]*protocol.JobView, error) {
		if bulk != wantBulk {
			t.Errorf("Enqueue bulk = %v, want %v", bulk, wantBulk)
		}
		views := make([]*protocol.JobView, len(jobs))
		for i, j := range jobs {
			views[i] = &protocol.JobView{ID: fmt.Sprintf("%s%d", testID[:24], i), Type: j.Job.Type, Queue: j.Job.Queue, Status: protocol.StatusReady}
		}
		return views, nil
	}
}

func jsonHeader() map[string]string { return map[string]string{"Content-Type": "application/json"} }

func TestHandlersNegotiation(t *testing.T) {
	job := func(t *testing.T, f *fakeEngine) {
		f.getJob = func(id string) (*protocol.JobView, error) {
			return &protocol.JobView{ID: id, Type: "t", Queue: "q", Status: protocol.StatusReady}, nil
		}
	}
	runHandlerCases(t, []handlerCase{
		{name: "no Accept is JSON", method: "GET", path: "/jobs/" + testID, engine: job, status: 200,
			check: wantContentType("application/json")},
		{name: "Accept */* is JSON", method: "GET", path: "/jobs/" + testID, header: map[string]string{"Accept": "text/html, */*"}, engine: job, status: 200,
			check: wantContentType("application/json")},
		{name: "Accept msgpack wins over json", method: "GET", path: "/jobs/" + testID, header: map[string]string{"Accept": "application/json, application/msgpack"}, engine: job, status: 200,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				wantContentType("application/msgpack")(t, rec)
				var v protocol.JobView
				if err := protocol.Decode(protocol.Msgpack, rec.Body.Bytes(), &v); err != nil || v.ID != testID || v.Type != "t" {
					t.Fatalf("msgpack body %x decodes to %+v, %v", rec.Body.Bytes(), v, err)
				}
			}},
		{name: "Accept unsupported is 406 before the engine", method: "GET", path: "/jobs/" + testID, header: map[string]string{"Accept": "text/html"}, status: 406,
			wantBody: `{"error":"not acceptable","supported":["application/json","application/msgpack"]}` + "\n"},
		{name: "Content-Type unsupported is 415", method: "POST", path: "/jobs", header: map[string]string{"Content-Type": "text/plain"}, body: `{}`, status: 415,
			wantBody: `{"error":"unsupported media type","supported":["application/json","application/msgpack"]}` + "\n"},
		{name: "406 is checked before 415", method: "POST", path: "/jobs", header: map[string]string{"Content-Type": "text/plain", "Accept": "text/html"}, body: `{}`, status: 406,
			wantBody: `{"error":"not acceptable","supported":["application/json","application/msgpack"]}` + "\n"},
		{name: "415 answers in msgpack when asked", method: "POST", path: "/jobs", header: map[string]string{"Content-Type": "text/plain", "Accept": "application/msgpack"}, body: `{}`, status: 415,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				wantContentType("application/msgpack")(t, rec)
				var eb errorBody
				if err := protocol.Decode(protocol.Msgpack, rec.Body.Bytes(), &eb); err != nil || eb.Error != "unsupported media type" || len(eb.Supported) != 2 {
					t.Fatalf("msgpack error body decodes to %+v, %v", eb, err)
				}
			}},
		{name: "merge-patch+json is JSON", method: "PATCH", path: "/jobs/" + testID, header: map[string]string{"Content-Type": "application/merge-patch+json"}, body: `{"priority":7}`,
			engine: func(t *testing.T, f *fakeEngine) {
				f.patchJob = func(id string, p *protocol.JobPatch) (*protocol.JobView, error) {
					if !p.Priority.Present || p.Priority.Value != 7 {
						t.Errorf("patch priority %+v, want 7", p.Priority)
					}
					return &protocol.JobView{ID: id, Priority: 7}, nil
				}
			}, status: 200},
		{name: "unknown route", method: "GET", path: "/nope", status: 404, wantError: "not found"},
		{name: "known route, other method", method: "PUT", path: "/jobs/" + testID + "/success", status: 405, wantError: "method not allowed",
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if rec.Header().Get("Allow") == "" {
					t.Fatalf("405 without Allow")
				}
			}},
	})
}

func wantContentType(ct string) func(*testing.T, *httptest.ResponseRecorder) {
	return func(t *testing.T, rec *httptest.ResponseRecorder) {
		t.Helper()
		if got := rec.Header().Get("Content-Type"); got != ct {
			t.Fatalf("Content-Type %q, want %q", got, ct)
		}
	}
}

func TestHandlersErrorMapping(t *testing.T) {
	getFails := func(err error) func(*testing.T, *fakeEngine) {
		return func(_ *testing.T, f *fakeEngine) {
			f.getJob = func(string) (*protocol.JobView, error) { return nil, err }
		}
	}
	runHandlerCases(t, []handlerCase{
		{name: "not found", method: "GET", path: "/jobs/" + testID, engine: getFails(protocol.ErrJobNotFound), status: 404, wantError: "job not found"},
		{name: "wrapped domain error keeps its status", method: "GET", path: "/jobs/" + testID,
			engine: getFails(fmt.Errorf("actors: get: %w", protocol.Errorf(protocol.CodeConflict, "busy"))), status: 409, wantError: "busy"},
		{name: "storage unavailable is 503 with Retry-After", method: "GET", path: "/jobs/" + testID,
			engine: getFails(protocol.StorageUnavailable(errors.New("disk full"))), status: 503, wantError: "storage unavailable: disk full",
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if rec.Header().Get("Retry-After") == "" {
					t.Fatalf("503 without Retry-After")
				}
			}},
		{name: "unknown error is a generic 500", method: "GET", path: "/jobs/" + testID, engine: getFails(errors.New("badger: secret detail")), status: 500, wantError: "internal server error"},
		{name: "a handler panic is a generic 500", method: "GET", path: "/jobs/" + testID,
			engine: func(_ *testing.T, f *fakeEngine) {
				f.getJob = func(string) (*protocol.JobView, error) { panic("boom") }
			}, status: 500, wantError: "internal server error"},
		{name: "invalid UTF-8 in an error text is replaced", method: "GET", path: "/jobs/" + testID,
			engine: getFails(protocol.Invalid("bad \xff")), status: 400, wantError: "bad \uFFFD"},
	})
}

func TestHandlersEnqueue(t *testing.T) {
	ok := func(t *testing.T, f *fakeEngine) { f.enqueue = echoJobs(t, false) }
	runHandlerCases(t, []handlerCase{
		{name: "created", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":{"a":1}}`,
			engine: func(t *testing.T, f *fakeEngine) {
				f.enqueue = func(jobs []*protocol.NewJob, bulk bool) ([]*protocol.JobView, error) {
					if len(jobs) != 1 || bulk || jobs[0].Job.Type != "t" || jobs[0].Job.Queue != "q" || string(jobs[0].Job.Payload) != `{"a":1}` {
						t.Errorf("Enqueue(%+v, %v)", jobs[0].Job, bulk)
					}
					return echoJobs(t, false)(jobs, bulk)
				}
			}, status: 201,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var v protocol.JobView
				if err := protocol.Decode(protocol.JSON, rec.Body.Bytes(), &v); err != nil || v.Type != "t" || v.Status != protocol.StatusReady {
					t.Fatalf("body %s: %+v, %v", rec.Body.String(), v, err)
				}
			}},
		{name: "msgpack body", method: "POST", path: "/jobs", header: map[string]string{"Content-Type": "application/msgpack"},
			body:   string([]byte{0x83, 0xa4, 't', 'y', 'p', 'e', 0xa1, 't', 0xa5, 'q', 'u', 'e', 'u', 'e', 0xa1, 'q', 0xa7, 'p', 'a', 'y', 'l', 'o', 'a', 'd', 0x01}),
			engine: ok, status: 201},
		{name: "a duplicate is 200", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":1,"unique_key":"k"}`,
			engine: func(_ *testing.T, f *fakeEngine) {
				f.enqueue = func([]*protocol.NewJob, bool) ([]*protocol.JobView, error) {
					dup := true
					return []*protocol.JobView{{ID: testID, Type: "t", Queue: "q", Duplicate: &dup}}, nil
				}
			}, status: 200},
		{name: "missing payload", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q"}`, status: 400, wantErrorPrefix: "invalid JSON: "},
		{name: "empty body", method: "POST", path: "/jobs", header: jsonHeader(), status: 400, wantErrorPrefix: "invalid JSON: "},
		{name: "bad msgpack", method: "POST", path: "/jobs", header: map[string]string{"Content-Type": "application/msgpack"}, body: "\xc1", status: 400, wantErrorPrefix: "invalid MessagePack: "},
		{name: "number out of range", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":1e400}`, status: 400, wantError: "invalid JSON: number 1e400 out of range"},
		{name: "priority over 65535", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":1,"priority":65536}`, status: 400, wantErrorPrefix: "invalid JSON: "},
		{name: "empty type", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"","queue":"q","payload":1}`, status: 400, wantError: "type must not be empty"},
		{name: "queue with a comma", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"a,b","payload":1}`, status: 400, wantError: "queue must not contain ','"},
		{name: "unique_while without unique_key", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":1,"unique_while":"queued"}`, status: 400, wantError: "unique_while requires unique_key"},
		{name: "unknown unique_while", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":1,"unique_key":"k","unique_while":"always"}`, status: 400,
			wantError: `invalid unique_while: "always" (expected "queued", "active", or "exists")`},
		{name: "negative backoff exponent", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":1,"backoff":{"exponent":-1,"base_ms":1,"jitter_ms":1}}`, status: 400,
			wantError: "backoff.exponent must be a finite number >= 0"},
		{name: "engine refuses with 422", method: "POST", path: "/jobs", header: jsonHeader(), body: `{"type":"t","queue":"q","payload":1,"budgets":[{"key":"k"}]}`,
			engine: func(_ *testing.T, f *fakeEngine) {
				f.enqueue = func([]*protocol.NewJob, bool) ([]*protocol.JobView, error) {
					return nil, protocol.Unprocessable("budget 'k' not found")
				}
			}, status: 422, wantError: "budget 'k' not found"},
	})
}

func TestHandlersEnqueueBulk(t *testing.T) {
	runHandlerCases(t, []handlerCase{
		{name: "created", method: "POST", path: "/jobs/bulk", header: jsonHeader(), body: `{"jobs":[{"type":"a","queue":"q","payload":1},{"type":"b","queue":"q","payload":2}]}`,
			engine: func(t *testing.T, f *fakeEngine) { f.enqueue = echoJobs(t, true) }, status: 201,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var r struct{ Jobs []protocol.JobView }
				if err := protocol.Decode(protocol.JSON, rec.Body.Bytes(), &r); err != nil || len(r.Jobs) != 2 || r.Jobs[1].Type != "b" {
					t.Fatalf("body %s: %+v, %v", rec.Body.String(), r, err)
				}
			}},
		{name: "no jobs asks nothing", method: "POST", path: "/jobs/bulk", header: jsonHeader(), body: `{"jobs":[]}`, status: 201, wantBody: `{"jobs":[]}` + "\n"},
		{name: "missing jobs", method: "POST", path: "/jobs/bulk", header: jsonHeader(), body: `{}`, status: 400, wantErrorPrefix: "invalid JSON: "},
		{name: "a bad job names its index", method: "POST", path: "/jobs/bulk", header: jsonHeader(), body: `{"jobs":[{"type":"a","queue":"q","payload":1},{"type":"","queue":"q","payload":2}]}`,
			status: 400, wantError: "jobs[1]: type must not be empty"},
	})
}

func TestHandlersFinish(t *testing.T) {
	acks := func(notFound ...string) func(*testing.T, *fakeEngine) {
		return func(_ *testing.T, f *fakeEngine) {
			f.ack = func(ids []string) ([]string, error) { return notFound, nil }
		}
	}
	runHandlerCases(t, []handlerCase{
		{name: "ack", method: "POST", path: "/jobs/" + testID + "/success",
			engine: func(t *testing.T, f *fakeEngine) {
				f.ack = func(ids []string) ([]string, error) {
					if !reflect.DeepEqual(ids, []string{testID}) {
						t.Errorf("Ack(%v)", ids)
					}
					return nil, nil
				}
			}, status: 204, wantBody: ""},
		{name: "ack of a job not in flight", method: "POST", path: "/jobs/" + testID + "/success", engine: acks(testID), status: 404, wantError: "job not found in in-flight set"},
		{name: "bulk ack", method: "POST", path: "/jobs/success", header: jsonHeader(), body: `{"ids":["` + testID + `"]}`, engine: acks(), status: 204},
		{name: "bulk ack, some not in flight", method: "POST", path: "/jobs/success", header: jsonHeader(), body: `{"ids":["` + testID + `","x"]}`, engine: acks("x"), status: 422,
			wantBody: `{"not_found":["x"]}` + "\n"},
		{name: "bulk ack without ids", method: "POST", path: "/jobs/success", header: jsonHeader(), body: `{"ids":[]}`, status: 400, wantError: "ids must not be empty"},
		{name: "failure", method: "POST", path: "/jobs/" + testID + "/failure", header: jsonHeader(), body: `{"message":"m","retry_at":5}`,
			engine: func(t *testing.T, f *fakeEngine) {
				f.fail = func(id string, req *protocol.FailureRequest) (*protocol.JobView, error) {
					if id != testID || req.Message == nil || *req.Message != "m" || req.RetryAt == nil || *req.RetryAt != 5 {
						t.Errorf("Fail(%s, %+v)", id, req)
					}
					return &protocol.JobView{ID: id, Status: protocol.StatusScheduled}, nil
				}
			}, status: 200},
		{name: "failure without message", method: "POST", path: "/jobs/" + testID + "/failure", header: jsonHeader(), body: `{}`, status: 400, wantErrorPrefix: "invalid JSON: "},
		{name: "failure of a job not in flight", method: "POST", path: "/jobs/" + testID + "/failure", header: jsonHeader(), body: `{"message":"m"}`,
			engine: func(_ *testing.T, f *fakeEngine) {
				f.fail = func(string, *protocol.FailureRequest) (*protocol.JobView, error) { return nil, protocol.ErrNotInFlight }
			}, status: 404, wantError: "job not found in in-flight set"},
	})
}

func TestHandlersJob(t *testing.T) {
	runHandlerCases(t, []handlerCase{
		{name: "get", method: "GET", path: "/jobs/" + testID,
			engine: func(_ *testing.T, f *fakeEngine) {
				f.getJob = func(id string) (*protocol.JobView, error) { return &protocol.JobView{ID: id, Type: "t"}, nil }
			}, status: 200},
		{name: "delete", method: "DELETE", path: "/jobs/" + testID,
			engine: func(t *testing.T, f *fakeEngine) {
				f.deleteJob = func(id string) error {
					if id != testID {
						t.Errorf("DeleteJob(%q)", id)
					}
					return nil
				}
			}, status: 204, wantBody: ""},
		{name: "delete unknown", method: "DELETE", path: "/jobs/" + testID,
			engine: func(_ *testing.T, f *fakeEngine) { f.deleteJob = func(string) error { return protocol.ErrJobNotFound } },
			status: 404, wantError: "job not found"},
		{name: "patch", method: "PATCH", path: "/jobs/" + testID, header: jsonHeader(), body: `{"queue":"other","ready_at":null}`,
			engine: func(t *testing.T, f *fakeEngine) {
				f.patchJob = func(id string, p *protocol.JobPatch) (*protocol.JobView, error) {
					if !p.Queue.Present || p.Queue.Value != "other" || !p.ReadyAt.Present || !p.ReadyAt.Null || p.Priority.Present {
						t.Errorf("PatchJob(%s, %+v)", id, p)
					}
					return &protocol.JobView{ID: id, Queue: "other"}, nil
				}
			}, status: 200},
		{name: "patch to a bad queue name is 422", method: "PATCH", path: "/jobs/" + testID, header: jsonHeader(), body: `{"queue":"a,b"}`, status: 422, wantError: "queue must not contain ','"},
		{name: "patch with a bad body", method: "PATCH", path: "/jobs/" + testID, header: jsonHeader(), body: `{"priority":"high"}`, status: 400, wantErrorPrefix: "invalid JSON: "},
	})
}

func TestHandlersQueryFilters(t *testing.T) {
	list := func(check func(t *testing.T, f *protocol.JobFilter, from string, desc bool, limit int)) func(*testing.T, *fakeEngine) {
		return func(t *testing.T, fe *fakeEngine) {
			fe.listJobs = func(f *protocol.JobFilter, from string, desc bool, limit int) ([]*protocol.JobView, bool, error) {
				check(t, f, from, desc, limit)
				return []*protocol.JobView{{ID: testID}}, true, nil
			}
		}
	}
	runHandlerCases(t, []handlerCase{
		{name: "filters and paging", method: "GET", path: "/jobs?queue=a,,b&status=in_flight,ready&priority=2..9&order=desc&limit=10",
			engine: list(func(t *testing.T, f *protocol.JobFilter, from string, desc bool, limit int) {
				if !reflect.DeepEqual(f.Queues, []string{"a", "b"}) || !reflect.DeepEqual(f.Statuses, []protocol.Status{protocol.StatusInFlight, protocol.StatusReady}) ||
					!f.Priority.Set || f.Priority.Min != 2 || f.Priority.Max != 9 || from != "" || !desc || limit != 10 {
					t.Errorf("ListJobs(%+v, %q, %v, %d)", f, from, desc, limit)
				}
			}), status: 200,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var p struct {
					Pages struct{ Self, Next string }
				}
				if err := protocol.Decode(protocol.JSON, rec.Body.Bytes(), &p); err != nil || p.Pages.Next == "" || p.Pages.Self == "" {
					t.Fatalf("body %s: %+v, %v", rec.Body.String(), p, err)
				}
			}},
		{name: "defaults", method: "GET", path: "/jobs",
			engine: list(func(t *testing.T, _ *protocol.JobFilter, from string, desc bool, limit int) {
				if from != "" || desc || limit != 50 {
					t.Errorf("ListJobs(_, %q, %v, %d), want asc, 50", from, desc, limit)
				}
			}), status: 200},
		{name: "unknown parameter", method: "GET", path: "/jobs?colour=red", status: 400, wantErrorPrefix: "invalid query parameters: "},
		{name: "parameter given twice", method: "GET", path: "/jobs?queue=a&queue=b", status: 400, wantErrorPrefix: "invalid query parameters: "},
		{name: "undecodable query", method: "GET", path: "/jobs?%zz=1", status: 400, wantErrorPrefix: "invalid query parameters: "},
		{name: "unknown status", method: "GET", path: "/jobs?status=sleeping", status: 400, wantErrorPrefix: "invalid query parameters: "},
		{name: "range upside down", method: "GET", path: "/jobs?priority=9..2", status: 400, wantErrorPrefix: "invalid query parameters: "},
		{name: "bad job id", method: "GET", path: "/jobs?id=nope", status: 400, wantError: `invalid job ID: "nope"`},
		{name: "bad order", method: "GET", path: "/jobs?order=up", status: 400, wantError: "invalid query parameters: order: expected `asc` or `desc`, got \"up\""},
		{name: "limit out of range", method: "GET", path: "/jobs?limit=0", status: 400, wantError: "limit must be between 1 and 2000"},
		{name: "count", method: "GET", path: "/jobs/count?type=x",
			engine: func(t *testing.T, fe *fakeEngine) {
				fe.countJobs = func(f *protocol.JobFilter) (uint64, error) {
					if !reflect.DeepEqual(f.Types, []string{"x"}) {
						t.Errorf("CountJobs(%+v)", f)
					}
					return 7, nil
				}
			}, status: 200, wantBody: `{"count":7}` + "\n"},
		{name: "count refuses paging parameters", method: "GET", path: "/jobs/count?limit=5", status: 400, wantErrorPrefix: "invalid query parameters: "},
		{name: "delete by filter", method: "DELETE", path: "/jobs?queue=q",
			engine: func(_ *testing.T, fe *fakeEngine) {
				fe.deleteJobs = func(*protocol.JobFilter) (int, error) { return 3, nil }
			}, status: 200, wantBody: `{"deleted":3}` + "\n"},
		{name: "patch by filter", method: "PATCH", path: "/jobs?queue=q", header: jsonHeader(), body: `{"priority":1}`,
			engine: func(_ *testing.T, fe *fakeEngine) {
				fe.patchJobs = func(*protocol.JobFilter, *protocol.JobPatch) (int, error) { return 2, nil }
			}, status: 200},
		{name: "patch of completed jobs is 422", method: "PATCH", path: "/jobs?status=completed", header: jsonHeader(), body: `{"priority":1}`, status: 422,
			wantError: "cannot patch jobs in completed status"},
	})
}

func TestHandlersBudgets(t *testing.T) {
	budget := func(key string, def protocol.Definition) *protocol.Budget {
		return &protocol.Budget{Key: key, Allocation: def.Allocation, Strategy: def.Strategy}
	}
	create := func(wantReplace, created bool) func(*testing.T, *fakeEngine) {
		return func(t *testing.T, f *fakeEngine) {
			f.createBudget = func(key string, def protocol.Definition, replace bool) (*protocol.Budget, bool, error) {
				if key != "api/x" || replace != wantReplace || def.Allocation != 5 || def.Strategy.Type != protocol.WhileInFlight {
					t.Errorf("CreateBudget(%q, %+v, %v)", key, def, replace)
				}
				return budget(key, def), created, nil
			}
		}
	}
	wif5 := `{"allocation":5,"strategy":{"type":"while_in_flight"}}`
	runHandlerCases(t, []handlerCase{
		{name: "list, none", method: "GET", path: "/budgets",
			engine: func(_ *testing.T, f *fakeEngine) { f.budgets = func() ([]protocol.Budget, error) { return nil, nil } },
			status: 200, wantBody: `{"budgets":[]}` + "\n"},
		{name: "get", method: "GET", path: "/budgets/api%2Fx",
			engine: func(t *testing.T, f *fakeEngine) {
				f.getBudget = func(key string) (*protocol.Budget, error) {
					if key != "api/x" {
						t.Errorf("GetBudget(%q), want the decoded key", key)
					}
					return budget(key, protocol.Definition{Allocation: 1}), nil
				}
			}, status: 200},
		{name: "get with an invalid key is 404", method: "GET", path: "/budgets/a%2Cb", status: 404, wantError: "budget 'a,b' not found"},
		{name: "create", method: "POST", path: "/budgets/api%2Fx", header: jsonHeader(), body: wif5, engine: create(false, true), status: 201},
		{name: "put", method: "PUT", path: "/budgets/api%2Fx", header: jsonHeader(), body: wif5, engine: create(true, false), status: 200},
		{name: "create with an invalid key is 422", method: "POST", path: "/budgets/a%2Cb", header: jsonHeader(), body: wif5, status: 422, wantErrorPrefix: "invalid budget key 'a,b': "},
		{name: "missing allocation", method: "POST", path: "/budgets/k", header: jsonHeader(), body: `{"strategy":{"type":"while_in_flight"}}`, status: 400, wantError: "invalid JSON: missing field 'allocation'"},
		{name: "allocation 0", method: "POST", path: "/budgets/k", header: jsonHeader(), body: `{"allocation":0,"strategy":{"type":"while_in_flight"}}`, status: 422, wantError: "allocation must be at least 1"},
		{name: "unknown strategy", method: "PUT", path: "/budgets/k", header: jsonHeader(), body: `{"allocation":1,"strategy":{"type":"leaky"}}`, status: 422,
			wantError: "unknown budget strategy 'leaky' (expected 'while_in_flight' or 'time_based')"},
		{name: "time_based without duration", method: "PUT", path: "/budgets/k", header: jsonHeader(), body: `{"allocation":1,"strategy":{"type":"time_based"}}`, status: 422,
			wantError: "time_based strategy requires duration_ms"},
		{name: "while_in_flight with burst", method: "PUT", path: "/budgets/k", header: jsonHeader(), body: `{"allocation":1,"strategy":{"type":"while_in_flight","burst":2}}`, status: 422,
			wantError: "while_in_flight strategy does not accept burst"},
		{name: "create over an existing key", method: "POST", path: "/budgets/k", header: jsonHeader(), body: `{"allocation":1,"strategy":{"type":"while_in_flight"}}`,
			engine: func(_ *testing.T, f *fakeEngine) {
				f.createBudget = func(key string, _ protocol.Definition, _ bool) (*protocol.Budget, bool, error) {
					return nil, false, protocol.Errorf(protocol.CodeConflict, "budget '%s' already exists", key)
				}
			}, status: 409, wantError: "budget 'k' already exists"},
		{name: "patch", method: "PATCH", path: "/budgets/k", header: jsonHeader(), body: `{"allocation":9}`,
			engine: func(t *testing.T, f *fakeEngine) {
				f.patchBudget = func(key string, p *protocol.BudgetPatch) (*protocol.Budget, error) {
					def, err := p.Apply(protocol.Definition{Allocation: 1, Strategy: protocol.Strategy{Type: protocol.WhileInFlight}})
					if key != "k" || err != nil || def.Allocation != 9 {
						t.Errorf("PatchBudget(%q) applies to %+v, %v", key, def, err)
					}
					return budget(key, def), nil
				}
			}, status: 200},
		{name: "patch with an invalid key is 404", method: "PATCH", path: "/budgets/a%2Cb", header: jsonHeader(), body: `{"allocation":9}`, status: 404, wantError: "budget 'a,b' not found"},
		{name: "patch with a bad body is 400 before the key", method: "PATCH", path: "/budgets/a%2Cb", header: jsonHeader(), body: `[]`, status: 400, wantErrorPrefix: "invalid JSON: "},
		{name: "delete", method: "DELETE", path: "/budgets/k",
			engine: func(_ *testing.T, f *fakeEngine) { f.deleteBudget = func(string) error { return nil } }, status: 204},
		{name: "delete unknown", method: "DELETE", path: "/budgets/k",
			engine: func(_ *testing.T, f *fakeEngine) {
				f.deleteBudget = func(key string) error { return protocol.Errorf(protocol.CodeNotFound, "budget '%s' not found", key) }
			}, status: 404, wantError: "budget 'k' not found"},
	})
}

// takeEngine opens one stream that delivers jobs once, and ends it when the
// handler reports the batch written; what OpenStream was asked is kept.
func takeEngine(t *testing.T, f *fakeEngine, jobs []protocol.Job, opened *actors.OpenStream) {
	var deliver func([]protocol.Job)
	f.openStream = func(m *actors.OpenStream) (uint64, error) {
		*opened = *m
		deliver = m.Deliver
		if jobs == nil {
			m.Deliver(nil) // the server ends the stream at once
			return 1, nil
		}
		m.Deliver(jobs)
		return 1, nil
	}
	f.loadPayloads = func(jobs []protocol.Job) ([]protocol.Job, error) { return jobs, nil }
	f.written = func(uint64) { deliver(nil) }
	f.closeStream = func(id uint64) (int, error) {
		if id != 1 {
			t.Errorf("CloseStream(%d), want 1", id)
		}
		return 0, nil
	}
}

func TestHandlersTake(t *testing.T) {
	job := []protocol.Job{{ID: testID, Type: "t", Queue: "q", Status: protocol.StatusInFlight, Payload: []byte(`{"n":1}`)}}
	var frameJSON string
	{
		var view protocol.JobView
		job[0].FillView(&view, new(protocol.Payload), 0, true)
		b, err := protocol.StreamNDJSON.AppendFrame(nil, &view)
		if err != nil {
			t.Fatal(err)
		}
		frameJSON = string(b[:len(b)-1])
	}
	stream := func(accept, query, worker string, wantCT, wantBody string, check func(t *testing.T, m *actors.OpenStream)) handlerCase {
		var opened actors.OpenStream
		h := map[string]string{}
		if accept != "" {
			h["Accept"] = accept
		}
		if worker != "" {
			h["Worker-Id"] = worker
		}
		return handlerCase{name: fmt.Sprintf("Accept %q ?%s", accept, query), method: "GET", path: "/jobs/take?" + query, header: h,
			engine: func(t *testing.T, f *fakeEngine) { takeEngine(t, f, job, &opened) }, status: 200, wantBody: wantBody,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				wantContentType(wantCT)(t, rec)
				if check != nil {
					check(t, &opened)
				}
			}}
	}
	runHandlerCases(t, []handlerCase{
		stream("", "", "", "application/x-ndjson", frameJSON+"\n", func(t *testing.T, m *actors.OpenStream) {
			if m.Queues != nil || m.Prefetch != 1 || len(m.WorkerID) != 8 {
				t.Errorf("OpenStream(%+v), want all queues, prefetch 1 and a random worker id", m)
			}
		}),
		stream("text/event-stream", "queue=a,,b&prefetch=0", "w-1", "text/event-stream", "data: "+frameJSON+"\n\n", func(t *testing.T, m *actors.OpenStream) {
			if !reflect.DeepEqual(m.Queues, []string{"a", "b"}) || m.Prefetch != 0 || m.WorkerID != "w-1" {
				t.Errorf("OpenStream(%+v)", m)
			}
		}),
		stream("application/msgpack", "prefetch=3", "", "application/vnd.zizq.msgpack-stream", "", func(t *testing.T, m *actors.OpenStream) {
			if m.Prefetch != 3 {
				t.Errorf("OpenStream prefetch %d, want 3", m.Prefetch)
			}
		}),
		stream("application/json", "", "", "application/x-ndjson", frameJSON+"\n", nil),
		{name: "Accept unsupported", method: "GET", path: "/jobs/take", header: map[string]string{"Accept": "text/html"}, status: 406,
			wantBody: `{"error":"not acceptable","supported":["text/event-stream","application/x-ndjson","application/vnd.zizq.msgpack-stream"]}` + "\n"},
		{name: "prefetch not a number", method: "GET", path: "/jobs/take?prefetch=-1", status: 400,
			wantError: `invalid query parameters: prefetch: expected a non-negative integer, got "-1"`},
		{name: "unknown parameter", method: "GET", path: "/jobs/take?queues=a", status: 400,
			wantError: "invalid query parameters: unknown field `queues`, expected `queue` or `prefetch`"},
		{name: "ended by the server", method: "GET", path: "/jobs/take",
			engine: func(t *testing.T, f *fakeEngine) {
				var opened actors.OpenStream
				takeEngine(t, f, nil, &opened)
			}, status: 200, wantBody: ""},
	})
}
