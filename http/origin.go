package http

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/protocol"
)

// errCrossOrigin answers a state-changing request sent by a page of
// another origin (SPEC §1.5): a web page must not be able to drive a
// server on the visitor's machine (POST /reset).
var errCrossOrigin = &protocol.Error{Code: protocol.CodeForbidden, Message: "cross-origin request refused"}

// originPolicy decides which Origin headers may send state-changing
// requests: the server's own origin always, plus the configured ones.
type originPolicy struct {
	any     bool
	allowed map[string]bool // normalised origins
}

func newOriginPolicy(origins []string) originPolicy {
	p := originPolicy{allowed: make(map[string]bool, len(origins))}
	for _, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		if n, ok := normalOrigin(o); ok {
			p.allowed[n] = true
		}
	}
	return p
}

// allows reports whether a request carrying origin may change state. r
// gives the server's own origin: its scheme and the Host it was asked by,
// so a dashboard served by the server itself keeps working.
func (p originPolicy) allows(origin string, r *http.Request) bool {
	if p.any {
		return true
	}
	n, ok := normalOrigin(origin)
	if !ok {
		return false // "null" (sandboxed frames, file: pages) or garbage
	}
	if p.allowed[n] {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own, ok := normalOrigin(scheme + "://" + r.Host)
	return ok && own == n
}

// normalOrigin lowercases scheme://host[:port] and drops the scheme's
// default port, as browsers do when they write an Origin header.
func normalOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false
	}
	host := strings.ToLower(u.Host)
	if h, port, err := net.SplitHostPort(host); err == nil &&
		((u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443")) {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + host, true
}

// refuseCrossOrigin answers 403 to POST, PUT, PATCH and DELETE requests
// whose Origin header names another origin. Requests without Origin (every
// API client) and reads are unaffected.
func (a *API) refuseCrossOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return next(c)
		}
		origin, present := r.Header["Origin"]
		if !present {
			return next(c)
		}
		if len(origin) != 1 || !a.origins.allows(origin[0], r) {
			return errCrossOrigin
		}
		return next(c)
	}
}
