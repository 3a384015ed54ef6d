package http

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestRefuseCrossOrigin: state-changing requests from another origin are
// 403 (SPEC §1.5); reads, requests without Origin, the server's own origin
// (a page it serves itself) and the --allow-origin list pass.
func TestRefuseCrossOrigin(t *testing.T) {
	cases := []struct {
		name, method, host, origin string
		tls                        bool
		allow                      []string
		want                       int
	}{
		{"no origin", "POST", "127.0.0.1:7890", "", false, nil, 204},
		{"read from anywhere", "GET", "127.0.0.1:7890", "https://evil.example", false, nil, 204},
		{"foreign post", "POST", "127.0.0.1:7890", "https://evil.example", false, nil, 403},
		{"foreign put", "PUT", "127.0.0.1:7890", "http://localhost:7890", false, nil, 403},
		{"foreign patch", "PATCH", "127.0.0.1:7890", "http://127.0.0.1:7891", false, nil, 403},
		{"foreign delete", "DELETE", "127.0.0.1:7890", "http://evil.example", false, nil, 403},
		{"null origin", "POST", "127.0.0.1:7890", "null", false, nil, 403},
		{"same origin", "POST", "127.0.0.1:7890", "http://127.0.0.1:7890", false, nil, 204},
		{"same origin, case", "POST", "LocalHost:7890", "http://localhost:7890", false, nil, 204},
		{"same origin, default port", "DELETE", "queue.example", "http://queue.example:80", false, nil, 204},
		{"same origin over tls", "POST", "queue.example:8443", "https://queue.example:8443", true, nil, 204},
		{"scheme differs", "POST", "queue.example:8443", "http://queue.example:8443", true, nil, 403},
		{"ipv6 own origin", "POST", "[::1]:7890", "http://[::1]:7890", false, nil, 204},
		{"allowed", "POST", "127.0.0.1:7890", "https://ui.example", false, []string{"https://ui.example/"}, 204},
		{"allowed default port", "POST", "127.0.0.1:7890", "https://ui.example:443", false, []string{"https://UI.example"}, 204},
		{"not in the list", "POST", "127.0.0.1:7890", "https://other.example", false, []string{"https://ui.example"}, 403},
		{"any", "POST", "127.0.0.1:7890", "https://other.example", false, []string{"*"}, 204},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &API{origins: newOriginPolicy(tc.allow), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			e := echo.New()
			e.HTTPErrorHandler = a.handleError
			e.Use(a.refuseCrossOrigin)
			e.Any("/x", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
			r := httptest.NewRequest(tc.method, "/x", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d (body %s)", w.Code, tc.want, w.Body)
			}
			if tc.want == 403 && w.Body.String() != `{"error":"cross-origin request refused"}`+"\n" {
				t.Errorf("body %s", w.Body)
			}
		})
	}
}
