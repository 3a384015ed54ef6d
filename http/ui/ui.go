// Package ui holds the operator dashboard served at /ui/: one HTML page, a
// stylesheet and a small script, embedded in the binary so the dashboard
// works offline and needs no build step. The script reads the same HTTP API
// every client uses (GET /stats, /budgets/{key}/state, /debug/trace,
// /jobs...) from the server's own origin.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// files are the dashboard's files, at the root.
var files = func() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("ui: embedded assets missing: " + err.Error()) // programmer error: the embed pattern above
	}
	return sub
}()

// Has reports whether the dashboard has a file at path (a path below /ui/,
// without its leading slash; "" is the page itself).
func Has(path string) bool {
	if path == "" {
		return true
	}
	_, err := fs.Stat(files, path)
	return err == nil
}

// Handler serves the dashboard's files; mount it with its prefix stripped
// (a request for "/" gets index.html). Every answer says no-cache so that a
// browser picks up a new binary's files at once.
func Handler() http.Handler {
	server := http.FileServer(http.FS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		server.ServeHTTP(w, r)
	})
}
