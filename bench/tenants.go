package main

// The tenants scenario: one budget per tenant, made by create_with, and
// one job each (SPEC §10.3). It runs many-budgets' phases with an
// allocation of 1 and nothing parked, so rss1 is the server with every
// tenant live (a budget and a job in flight each); the drain acks them;
// then the server, started with --budget-idle-ttl, collects the idle
// budgets, and rss_collected is read once none of this run's is left.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// tenantsTTL is the idle TTL a started server gets unless a --server-flag
// sets one.
const tenantsTTL = "10s"

// TenantsReport is what tenants measured after the drain.
type TenantsReport struct {
	IdleTTL   string `json:"idle_ttl"`
	Collected bool   `json:"collected"` // none of this run's budgets is left
	Left      int    `json:"left"`      // this run's budgets still listed when the wait ended (0 or 1: the wait reads a page of one)
	// CollectS is from the end of the drain to the moment none was left.
	CollectS        float64 `json:"collect_s"`
	RSSCollectedMiB float64 `json:"rss_collected_mib"` // settled RSS once collected
	// RSSLaterMiB is the lowest RSS read over --collect-wait after that
	// (the runtime gives freed pages back after a collection, and with
	// nothing allocating the next one is its periodic one, every 2 min).
	RSSLaterMiB float64 `json:"rss_later_mib,omitempty"`
	// ReturnedPct is the share of what the tenants added to the RSS
	// (parked rss1 - rss0: every tenant live, against streams open and
	// nothing made) that rss_later_mib gave back.
	ReturnedPct float64 `json:"returned_pct,omitempty"`
	Failed      string  `json:"failed,omitempty"`
}

// noteReturned sets ReturnedPct from the parked phase's RSS, when both
// were read.
func (tr *TenantsReport) noteReturned(p *ParkedReport) {
	if p == nil || tr.RSSLaterMiB == 0 || p.RSS1MiB <= p.RSS0MiB {
		return
	}
	tr.ReturnedPct = round3(100 * (p.RSS1MiB - tr.RSSLaterMiB) / (p.RSS1MiB - p.RSS0MiB))
}

// tenantFlags gives a started server what tenants needs: no budget limit
// and an idle TTL, unless a --server-flag sets them.
func (c *Config) tenantFlags() {
	if c.Scenario != scenarioTenants {
		return
	}
	has := func(name string) bool {
		for _, f := range c.ServerFlags {
			if strings.Contains(f, name) {
				return true
			}
		}
		return false
	}
	if !has("max-budgets") {
		c.ServerFlags = append(c.ServerFlags, "--max-budgets=0")
	}
	if !has("budget-idle-ttl") {
		c.ServerFlags = append(c.ServerFlags, "--budget-idle-ttl="+tenantsTTL)
	}
	if !has("metrics-budget-series") {
		c.ServerFlags = append(c.ServerFlags, "--metrics-budget-series=100")
	}
}

// measureCollected waits until GET /budgets lists none of this run's
// budgets (paging from the run's prefix, one at a time), within the idle
// TTL plus the idle timeout, then reads the settled RSS.
func (r *runner) measureCollected(ctx context.Context, proc *serverProc) *TenantsReport {
	tr := &TenantsReport{IdleTTL: tenantsTTL}
	for _, f := range r.cfg.ServerFlags {
		if v, ok := strings.CutPrefix(f, "--budget-idle-ttl="); ok {
			tr.IdleTTL = v
		}
	}
	ttl, err := time.ParseDuration(tr.IdleTTL)
	if err != nil {
		ttl = 10 * time.Second
	}
	prefix := "bench-" + r.runID + "-"
	start := time.Now()
	deadline := start.Add(ttl + r.idleTimeout() + time.Minute)
	path := "/budgets?limit=1&from=" + url.QueryEscape(prefix)
	for {
		resp, err := r.cl.do(ctx, http.MethodGet, path, nil)
		if err != nil {
			tr.Failed = fmt.Sprintf("GET %s: %v", path, err)
			return tr
		}
		var page struct {
			Budgets []struct {
				Key string `json:"key"`
			} `json:"budgets"`
		}
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &page) != nil {
			tr.Failed = fmt.Sprintf("GET %s: status %d: %s", path, resp.status, clip(resp.body, 200))
			return tr
		}
		tr.Left = 0
		if len(page.Budgets) > 0 && strings.HasPrefix(page.Budgets[0].Key, prefix) {
			tr.Left = 1
		}
		if tr.Left == 0 {
			tr.Collected = true
			tr.CollectS = round3(time.Since(start).Seconds())
			break
		}
		if time.Now().After(deadline) {
			tr.Failed = fmt.Sprintf("budgets of this run still listed %s after the drain", time.Since(start).Round(time.Second))
			return tr
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			tr.Failed = err.Error()
			return tr
		}
	}
	rss, _ := r.settledRSS(ctx, proc)
	tr.RSSCollectedMiB = mib(rss)
	if proc != nil && r.cfg.CollectWait > 0 {
		low := rss
		end := time.Now().Add(r.cfg.CollectWait)
		for time.Now().Before(end) && sleepCtx(ctx, time.Second) == nil {
			if s, ok := proc.sample(); ok && s.rss < low {
				low = s.rss
			}
		}
		tr.RSSLaterMiB = mib(low)
	}
	r.log.Info("tenants collected", "seconds", tr.CollectS, "rss_collected_mib", tr.RSSCollectedMiB)
	return tr
}
