// tollgate dashboard: a hash-routed page over the server's own HTTP API.
// No framework and no build step; every page is a function that draws into
// #view and returns a cleanup that stops its timers and streams.
"use strict";

// ------------------------------------------------------------ helpers

// h builds an element: h("td", {class: "num"}, "3", otherNode).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "style") el.style.cssText = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// api calls the server and returns the decoded JSON (null on 204); a
// non-2xx answer throws an Error carrying the server's text and status.
async function api(method, path, body) {
  const opts = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!res.ok) {
    const err = new Error((data && data.error) || `${res.status} ${res.statusText}`);
    err.status = res.status;
    throw err;
  }
  return data;
}

const enc = encodeURIComponent;

function showError(err) {
  const box = document.getElementById("error");
  if (!err) { box.hidden = true; box.textContent = ""; return; }
  box.hidden = false;
  box.textContent = err.message || String(err);
}

function pad(n, w) { return String(n).padStart(w || 2, "0"); }

// clockTime formats Unix ms as local HH:MM:SS.mmm (as `tollgate trace`).
function clockTime(ms) {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function dateTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// relative says how far ms is from now: "in 4.2s", "3m ago".
function relative(ms, now) {
  if (!ms) return "";
  const d = ms - (now || Date.now());
  const a = Math.abs(d);
  let s;
  if (a < 1000) s = `${Math.round(a)}ms`;
  else if (a < 60e3) s = `${(a / 1000).toFixed(1)}s`;
  else if (a < 3600e3) s = `${Math.floor(a / 60e3)}m${pad(Math.floor((a % 60e3) / 1000))}s`;
  else if (a < 86400e3) s = `${Math.floor(a / 3600e3)}h${pad(Math.floor((a % 3600e3) / 60e3))}m`;
  else s = `${Math.floor(a / 86400e3)}d${Math.floor((a % 86400e3) / 3600e3)}h`;
  return d >= 0 ? `in ${s}` : `${s} ago`;
}

function fmtNum(v) {
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? String(v) : String(Math.round(v * 1000) / 1000);
}

function link(hash, text, attrs) { return h("a", Object.assign({ href: hash }, attrs || {}), text); }
function jobLink(id) { return link(`#/job/${enc(id)}`, id, { class: "mono" }); }
function budgetLink(key) { return link(`#/budget/${enc(key)}`, key); }
function badge(text, cls) { return h("span", { class: `badge ${cls || text}` }, text); }

// duration formats ms as Go prints a time.Duration rounded to the
// millisecond: 850ms, 29.17s, 4m55.2s, 1h0m0s.
function duration(ms) {
  const a = Math.abs(ms), sign = ms < 0 ? "-" : "";
  if (a < 1000) return `${sign}${Math.round(a)}ms`;
  const secs = (x) => String(Math.round(x * 1000) / 1000);
  if (a < 60e3) return `${sign}${secs(a / 1000)}s`;
  const hrs = Math.floor(a / 3600e3), mins = Math.floor((a % 3600e3) / 60e3), rest = (a % 60e3) / 1000;
  return `${sign}${hrs ? `${hrs}h` : ""}${mins}m${secs(rest)}s`;
}

// per says a time_based window in words: "10 min", "1 s", "1500 ms".
function per(ms) {
  if (ms % 86400e3 === 0) return `${ms / 86400e3} d`;
  if (ms % 3600e3 === 0) return `${ms / 3600e3} h`;
  if (ms % 60e3 === 0) return `${ms / 60e3} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

function strategyText(s) {
  if (!s) return "";
  if (s.type === "time_based") return `time_based, per ${per(s.duration_ms)}`;
  return s.type;
}

// every runs fn now and then again and again until the returned stop is
// called; a run never overlaps the previous one. The pause is ms, or five
// times what the last run took when that is longer (up to maxPause): a
// server slow to answer (GET /stats walks every job to count them) spends
// a sixth of its time on this page at most, unless a single answer takes
// longer than a second.
const maxPause = 5000;
function every(ms, fn) {
  let stopped = false, running = false, again = false, timer = null;
  const loop = async () => {
    if (stopped) return;
    running = true;
    const started = performance.now();
    try { await fn(); showError(null); } catch (e) { if (!stopped) showError(e); }
    running = false;
    if (stopped) return;
    if (again) { again = false; loop(); return; }
    timer = setTimeout(loop, Math.max(ms, Math.min(5 * (performance.now() - started), maxPause)));
  };
  loop();
  const stop = () => { stopped = true; clearTimeout(timer); };
  // stop.now runs fn again at once (after the run in progress, if any):
  // an action calls it so that its effect shows without waiting a pause.
  stop.now = () => {
    if (stopped) return;
    if (running) { again = true; return; }
    clearTimeout(timer);
    loop();
  };
  return stop;
}

// ------------------------------------------------------------ router

const view = () => document.getElementById("view");
let cleanup = null;

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const q = raw.indexOf("?");
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1));
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params };
}

const routes = {
  "": overviewPage,
  budgets: budgetsPage,
  budget: budgetPage,
  jobs: jobsPage,
  job: jobPage,
  crons: cronsPage,
  batches: batchesPage,
};

function route() {
  if (cleanup) { cleanup(); cleanup = null; }
  showError(null);
  const { parts, params } = parseHash();
  const name = parts[0] || "";
  const page = routes[name] || notFoundPage;
  const nav = { "": "overview", budget: "budgets", job: "jobs" }[name] || name;
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === nav);
  const root = view();
  root.replaceChildren();
  root.dataset.page = name || "overview";
  cleanup = page(root, parts.slice(1), params) || null;
}

function notFoundPage(root) {
  root.append(h("h1", {}, "Not found"), h("p", {}, link("#/", "Back to the overview")));
}

// ------------------------------------------------------------ overview

const sparkColors = { enqueue: "#2f6fde", dispatch: "#d68a00", ack: "#1f9d55" };

// sparkline draws the last samples of three rate series as an SVG.
function sparkline(samples) {
  const w = 160, hgt = 30;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w);
  svg.setAttribute("height", hgt);
  const top = Math.max(1, ...samples.flatMap((s) => [s.enqueue, s.dispatch, s.ack]));
  for (const series of ["enqueue", "dispatch", "ack"]) {
    const pts = samples.map((s, i) => {
      const x = samples.length < 2 ? 0 : (i * (w - 2)) / (samples.length - 1) + 1;
      const y = hgt - 2 - (s[series] / top) * (hgt - 4);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", sparkColors[series]);
    line.setAttribute("stroke-width", "1.5");
    svg.append(line);
  }
  return svg;
}

const historyLength = 60;

function overviewPage(root) {
  const cards = h("div", { class: "cards" });
  const body = h("div", {});
  root.append(
    h("h1", {}, "Queues"),
    cards,
    body,
    h("p", { class: "note" }, "Counts by status come from the server's memory at each poll (about once a second); rates are per second between two polls. ",
      h("span", { class: "legend" },
        ...Object.entries(sparkColors).map(([k, c]) => h("span", {}, h("i", { style: `background:${c}` }), k)))),
  );
  let prev = null;
  const history = new Map();
  return every(1000, async () => {
    const s = await api("GET", "/stats");
    const rates = new Map();
    for (const q of s.queues) {
      // a queue new since the last poll started from zero
      const p = prev && (prev.queues.find((x) => x.queue === q.queue) || { enqueued: 0, dispatched: 0, acked: 0 });
      const dt = prev ? (s.at - prev.at) / 1000 : 0;
      const r = p && dt > 0
        ? { enqueue: (q.enqueued - p.enqueued) / dt, dispatch: (q.dispatched - p.dispatched) / dt, ack: (q.acked - p.acked) / dt }
        : { enqueue: 0, dispatch: 0, ack: 0 };
      rates.set(q.queue, r);
      const hist = history.get(q.queue) || [];
      hist.push(r);
      if (hist.length > historyLength) hist.shift();
      history.set(q.queue, hist);
    }
    prev = s;
    const total = (k) => s.queues.reduce((n, q) => n + q[k], 0);
    cards.replaceChildren(
      ...[["queues", s.queues.length], ["ready", total("ready")], ["parked", total("parked")], ["in flight", total("in_flight")],
        ["dead", total("dead")], ["budgets", s.budgets.length], ["take streams", s.streams]]
        .map(([label, v]) => h("div", { class: "stat", "data-stat": label }, h("b", {}, v), h("span", {}, label))),
    );
    if (s.queues.length === 0) {
      body.replaceChildren(h("div", { class: "empty" }, "No queues yet: enqueue a job (POST /jobs) and it shows here."));
      return;
    }
    const cols = ["ready", "parked", "scheduled", "in_flight", "completed", "dead"];
    body.replaceChildren(h("table", { id: "queues" },
      h("thead", {}, h("tr", {}, h("th", {}, "queue"), ...cols.map((c) => h("th", { class: "num" }, c.replace("_", " "))),
        h("th", { class: "num" }, "enqueue/s"), h("th", { class: "num" }, "dispatch/s"), h("th", { class: "num" }, "ack/s"), h("th", {}, "recent"))),
      h("tbody", {}, ...s.queues.map((q) => {
        const r = rates.get(q.queue), hist = history.get(q.queue);
        const peak = (k) => Math.max(...hist.map((x) => x[k])).toFixed(1);
        return h("tr", { "data-queue": q.queue, "data-peak-enqueue": peak("enqueue"), "data-peak-dispatch": peak("dispatch"), "data-peak-ack": peak("ack") },
          h("td", {}, link(`#/jobs?queue=${enc(q.queue)}`, q.queue)),
          ...cols.map((c) => h("td", { class: "num", "data-col": c }, q[c])),
          h("td", { class: "num", "data-col": "enqueue_rate" }, r.enqueue.toFixed(1)),
          h("td", { class: "num", "data-col": "dispatch_rate" }, r.dispatch.toFixed(1)),
          h("td", { class: "num", "data-col": "ack_rate" }, r.ack.toFixed(1)),
          h("td", {}, sparkline(hist)));
      }))));
  });
}

// ------------------------------------------------------------ budgets

// poolBar shows the level against the capacity.
function poolBar(tokens, capacity) {
  const frac = capacity > 0 ? Math.max(0, Math.min(1, tokens / capacity)) : 0;
  const cls = frac === 0 ? "bar empty0" : frac < 0.25 ? "bar low" : "bar";
  return h("span", { class: cls, title: `${fmtNum(tokens)} of ${capacity}`, "data-level": frac.toFixed(4) },
    h("i", { style: `width:${(frac * 100).toFixed(1)}%` }));
}

function budgetsPage(root) {
  const body = h("div", {});
  root.append(h("h1", {}, "Budgets"), body,
    h("p", { class: "note" }, "Pools are read live (once a second). Tokens of a time_based budget drip back continuously; a while_in_flight budget gets its tokens back when jobs finish."));
  return every(1000, async () => {
    const s = await api("GET", "/stats?include=budgets");
    if (s.budgets.length === 0) {
      body.replaceChildren(h("div", { class: "empty" }, "No budgets: create one with PUT /budgets/{key}."));
      return;
    }
    body.replaceChildren(h("table", { id: "budgets" },
      h("thead", {}, h("tr", {}, ...["budget", "strategy", "allocation", "tokens", "level", "in flight", "held", "parked", "head", "head ETA", "next wake"]
        .map((c, i) => h("th", { class: i >= 2 && i <= 7 && i !== 4 ? "num" : "" }, c)))),
      h("tbody", {}, ...s.budgets.map((b) => h("tr", { "data-budget": b.key },
        h("td", {}, budgetLink(b.key)),
        h("td", {}, strategyText(b.strategy)),
        h("td", { class: "num", "data-col": "allocation" }, b.allocation),
        h("td", { class: "num", "data-col": "tokens" }, fmtNum(b.tokens)),
        h("td", {}, poolBar(b.tokens, b.capacity), " ", h("span", { class: "muted" }, `/ ${b.capacity}`)),
        h("td", { class: "num", "data-col": "in_flight" }, b.in_flight),
        h("td", { class: "num", "data-col": "held" }, b.held),
        h("td", { class: "num", "data-col": "parked" }, b.parked),
        h("td", { "data-col": "head" }, b.head ? jobLink(b.head.id) : "—"),
        h("td", { "data-col": "head_eta" }, b.head && b.head.affordable_at ? relative(b.head.affordable_at, s.at) : b.head ? "when a job finishes" : "—"),
        h("td", { "data-col": "wake", title: b.wake_at ? clockTime(b.wake_at) : "" }, b.wake_at ? relative(b.wake_at, s.at) : "—"))))));
  });
}

// ------------------------------------------------------------ one budget

// traceKinds colours trace steps as `tollgate trace` does.
const traceKinds = {
  ready: "cyan", reserve_requested: "cyan",
  reserve_granted: "green", commit: "green", dispatched: "green", acked: "green", woken: "green", returned: "green",
  reserve_refused: "red", parked: "red", failed: "red", dropped: "red",
  timer_armed: "yellow", timer_fired: "yellow", timer_cancelled: "yellow", requeued: "yellow", release: "yellow", unparked: "yellow",
  budget_created: "blue", budget_updated: "blue", budget_deleted: "blue",
};

// traceLine renders one event as the CLI's line: time, actor, step, fields.
function traceLine(ev) {
  const line = h("div", { class: "ev", "data-kind": ev.kind });
  line.append(h("span", { class: "dim" }, clockTime(ev.time)), "  ");
  if (ev.kind === "dropped") {
    line.append(h("span", { class: "k-red" }, `!! ${ev.count} events dropped: this reader was too slow`));
    return line;
  }
  line.append(ev.actor.padEnd(20), " ", h("span", { class: `k-${traceKinds[ev.kind] || ""}` }, ev.kind.padEnd(17)));
  const field = (k, v) => line.append(" ", h("span", { class: "dim" }, `${k}=`), v);
  if (ev.job_id) field("job", ev.job_id);
  if (ev.queue) field("queue", ev.queue);
  if (ev.budget && ev.actor !== `budget/${ev.budget}`) field("budget", ev.budget);
  if (!ev.budget && ev.budgets && ev.budgets.length) field("budgets", ev.budgets.join(","));
  if (ev.cost) field("cost", ev.cost);
  if (ev.tokens_before !== undefined && ev.tokens !== undefined) field("tokens", `${ev.tokens_before}→${ev.tokens}`);
  else if (ev.tokens !== undefined) field("tokens", ev.tokens);
  if (ev.position) field("position", ev.position);
  if (ev.due_at) {
    let v = clockTime(ev.due_at);
    if (ev.kind === "timer_armed") v += ` (in ${duration(ev.due_at - ev.time)})`;
    if (ev.kind === "timer_fired") v += ` (${duration(ev.time - ev.due_at)} late)`;
    field("due", v);
  }
  if (ev.reason) field("reason", ev.reason);
  if (ev.worker_id) field("worker", ev.worker_id);
  if (ev.stream) field("stream", ev.stream);
  return line;
}

const traceTail = 300;

// followTrace opens GET /debug/trace as server-sent events and appends each
// event to pre; it returns the function that closes the stream.
function followTrace(query, pre) {
  const es = new EventSource(`/debug/trace?${query}`);
  es.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(traceLine(ev));
    while (pre.childElementCount > traceTail) pre.firstElementChild.remove();
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  };
  return () => es.close();
}

function budgetPage(root, [key]) {
  const def = h("div", { class: "card", id: "definition" });
  const state = h("div", { class: "card", id: "state" });
  const line = h("div", { id: "line" });
  const pre = h("pre", { class: "trace", id: "trace" });
  const input = h("input", { type: "number", min: "0", id: "allocation-input", style: "width:110px" });
  const saved = h("span", { class: "muted", id: "allocation-saved" });
  const form = h("form", { class: "actions", id: "allocation-form" },
    h("label", {}, "Allocation "), input, h("button", { class: "primary", type: "submit" }, "Save"), saved);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    saved.textContent = "";
    try {
      const b = await api("PATCH", `/budgets/${enc(key)}`, { allocation: Number(input.value) });
      saved.textContent = `saved: allocation ${b.allocation}`;
      showError(null);
      stopPoll.now();
    } catch (err) { showError(err); }
  });
  root.append(h("h1", {}, "Budget ", h("span", { class: "mono" }, key)),
    h("div", { class: "grid2" }, h("div", {}, h("h2", {}, "Definition"), def, form), h("div", {}, h("h2", {}, "Live pool"), state)),
    h("h2", {}, "Parked line ", h("span", { class: "muted" }, "(in the order the budget serves them)")), line,
    h("h2", {}, "Trace ", h("span", { class: "muted" }, "(live, as `tollgate trace --budget` prints it)")), pre);
  let filled = false;
  const stopPoll = every(1000, async () => {
    const [b, s, l] = await Promise.all([
      api("GET", `/budgets/${enc(key)}`),
      api("GET", `/budgets/${enc(key)}/state`),
      api("GET", `/budgets/${enc(key)}/parked?limit=100`),
    ]);
    if (!filled) { input.value = b.allocation; filled = true; }
    def.replaceChildren(h("dl", { class: "fields" },
      h("dt", {}, "key"), h("dd", {}, b.key),
      h("dt", {}, "allocation"), h("dd", { "data-field": "allocation" }, b.allocation),
      h("dt", {}, "strategy"), h("dd", {}, strategyText(b.strategy)),
      b.burst !== undefined && [h("dt", {}, "burst"), h("dd", {}, b.burst)]),
    h("pre", { class: "json", style: "margin-top:10px" }, JSON.stringify(b, null, 2)));
    state.replaceChildren(h("dl", { class: "fields" },
      h("dt", {}, "tokens"), h("dd", { "data-field": "tokens" }, fmtNum(s.tokens), " ", poolBar(s.tokens, s.capacity), ` / ${s.capacity}`),
      h("dt", {}, "in flight"), h("dd", { "data-field": "in_flight" }, s.in_flight),
      h("dt", {}, "held"), h("dd", {}, s.held),
      h("dt", {}, "parked"), h("dd", { "data-field": "parked" }, s.parked),
      h("dt", {}, "head"), h("dd", {}, s.head ? [jobLink(s.head.id), ` cost ${s.head.cost}`, s.head.affordable_at ? `, affordable ${relative(s.head.affordable_at, s.at)}` : ""] : "—"),
      h("dt", {}, "next wake"), h("dd", {}, s.wake_at ? `${clockTime(s.wake_at)} (${relative(s.wake_at, s.at)})` : "—"),
      h("dt", {}, "dispatches"), h("dd", {}, s.dispatches),
      h("dt", {}, "refusals"), h("dd", {}, s.refusals)));
    if (l.jobs.length === 0) {
      line.replaceChildren(h("div", { class: "empty" }, "Nothing parked on this budget."));
      return;
    }
    line.replaceChildren(h("table", { id: "parked" },
      h("thead", {}, h("tr", {}, h("th", { class: "num" }, "#"), h("th", {}, "job"), h("th", {}, "queue"), h("th", { class: "num" }, "priority"), h("th", { class: "num" }, "cost"), h("th", {}, ""))),
      h("tbody", {}, ...l.jobs.map((j, i) => h("tr", { "data-job": j.id },
        h("td", { class: "num" }, i + 1), h("td", {}, jobLink(j.id)), h("td", {}, j.queue),
        h("td", { class: "num" }, j.priority), h("td", { class: "num" }, j.cost),
        h("td", { class: "muted" }, j.holds_back ? "" : "no worker on this queue: does not hold the line"))))),
    ...(l.total > l.jobs.length ? [h("p", { class: "note" }, `… and ${l.total - l.jobs.length} more`)] : []));
  });
  const stopTrace = followTrace(`budget=${enc(key)}`, pre);
  return () => { stopPoll(); stopTrace(); };
}

// ------------------------------------------------------------ jobs

const jobFilters = [
  ["status", "status", "ready,in_flight"],
  ["queue", "queue", "emails"],
  ["type", "type", "send_email"],
  ["budgets.key", "budget key", "smtp-rate"],
  ["filter", "jq filter (on payload)", ".to == \"a@example.com\""],
];

function jobsPage(root, _parts, params) {
  const form = h("form", { class: "filters", id: "job-filters" },
    ...jobFilters.map(([name, label, ph]) => h("label", {}, label,
      h("input", { name, value: params.get(name) || "", placeholder: ph, class: name === "filter" ? "wide" : "" }))),
    h("label", {}, "order", h("select", { name: "order" },
      h("option", { value: "asc", selected: params.get("order") !== "desc" }, "oldest first"),
      h("option", { value: "desc", selected: params.get("order") === "desc" }, "newest first"))),
    h("button", { class: "primary", type: "submit" }, "Search"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const el of form.elements) if (el.name && el.value) q.set(el.name, el.value);
    location.hash = `#/jobs?${q}`;
  });
  const count = h("span", { class: "muted", id: "job-count" });
  const body = h("div", {});
  root.append(h("h1", {}, "Jobs ", count), form, body);
  const query = new URLSearchParams();
  for (const [name] of jobFilters) if (params.get(name)) query.set(name, params.get(name));
  const filterOnly = query.toString();
  for (const name of ["from", "order"]) if (params.get(name)) query.set(name, params.get(name));
  query.set("limit", params.get("limit") || "50");
  const pageLink = (p) => p ? `#/jobs?${p.slice(p.indexOf("?") + 1)}` : null;
  return every(1000, async () => {
    const [page, n] = await Promise.all([api("GET", `/jobs?${query}`), api("GET", `/jobs/count?${filterOnly}`)]);
    count.textContent = `(${n.count} matching)`;
    const prev = pageLink(page.pages.prev), next = pageLink(page.pages.next);
    const pager = h("div", { class: "pager" },
      prev ? link(prev, "← previous", { id: "prev-page" }) : h("span", { class: "muted" }, "← previous"),
      next ? link(next, "next →", { id: "next-page" }) : h("span", { class: "muted" }, "next →"));
    if (page.jobs.length === 0) {
      body.replaceChildren(h("div", { class: "empty" }, "No job matches."), pager);
      return;
    }
    body.replaceChildren(h("table", { id: "jobs" },
      h("thead", {}, h("tr", {}, ...["id", "type", "queue", "status", "priority", "attempts", "ready at", "budgets"].map((c) => h("th", {}, c)))),
      h("tbody", {}, ...page.jobs.map((j) => h("tr", { "data-job": j.id },
        h("td", {}, jobLink(j.id)), h("td", {}, j.type), h("td", {}, j.queue),
        h("td", { "data-col": "status" }, badge(j.status)), h("td", {}, j.priority), h("td", {}, j.attempts),
        h("td", {}, dateTime(j.ready_at)),
        h("td", {}, ...(j.budgets || []).flatMap((b, i) => [i ? ", " : "", budgetLink(b.key), b.cost !== 1 ? ` ×${b.cost}` : ""])))))),
    pager);
  });
}

// copyOf is the enqueue body of a copy of a job: what it was enqueued with,
// minus its identity, uniqueness and batch (the copy is a new job).
function copyOf(j) {
  const body = { type: j.type, queue: j.queue, payload: j.payload, priority: j.priority };
  for (const k of ["retry_limit", "backoff", "retention"]) if (j[k] !== undefined) body[k] = j[k];
  if (j.budgets) body.budgets = j.budgets.map((b) => ({ key: b.key, cost: b.cost }));
  return body;
}

function jobPage(root, [id]) {
  const status = h("span", { id: "job-status" });
  const waiting = h("div", { id: "waiting" });
  const fields = h("div", { class: "card" });
  const errors = h("div", { id: "errors" });
  const actions = h("div", { class: "actions", id: "job-actions" });
  root.append(h("h1", {}, "Job ", h("span", { class: "mono" }, id), " ", status), waiting, actions, fields, h("h2", {}, "Errors"), errors);
  let gone = false, lastStatus = null;
  const drawActions = (j) => {
    const del = h("button", { class: "danger", id: "delete-job" }, "Delete");
    del.addEventListener("click", () => {
      const yes = h("button", { class: "danger", id: "confirm-delete" }, "Yes, delete it");
      yes.addEventListener("click", async () => {
        try {
          await api("DELETE", `/jobs/${enc(id)}`);
          gone = true;
          actions.replaceChildren(h("span", { id: "deleted" }, "Deleted."), " ", link("#/jobs", "Back to jobs"));
        } catch (err) { showError(err); }
      });
      actions.replaceChildren(h("span", {}, "Delete this job for good?"), yes,
        h("button", { onclick: () => drawActions(j) }, "Cancel"));
    });
    const parts = [del];
    if (j.status === "dead") {
      const copy = h("button", { class: "primary", id: "copy-job" }, "Enqueue a copy");
      copy.addEventListener("click", async () => {
        try {
          const v = await api("POST", "/jobs", copyOf(j));
          location.hash = `#/job/${enc(v.id)}`;
        } catch (err) { showError(err); }
      });
      parts.push(copy, h("span", { class: "muted" }, "a dead job stays as it is; the copy is a new ready job with the same type, queue, payload and budgets"));
    }
    actions.replaceChildren(...parts);
  };
  return every(1000, async () => {
    if (gone) return;
    const j = await api("GET", `/jobs/${enc(id)}`);
    status.replaceChildren(badge(j.status), ...(j.waiting ? [" ", badge("parked")] : []));
    if (j.status !== lastStatus) { drawActions(j); lastStatus = j.status; }
    if (j.waiting) {
      const w = j.waiting;
      waiting.replaceChildren(h("div", { class: "card waiting" },
        h("b", {}, "Parked: "), "held back by budget ", budgetLink(w.budget),
        `, place ${w.position} in its line, cost ${w.cost}`,
        w.affordable_at ? h("span", { "data-field": "until" }, `; its tokens will be there at ${clockTime(w.affordable_at)} (${relative(w.affordable_at)})`)
          : h("span", { "data-field": "until" }, "; it goes when jobs ahead of it finish and give tokens back")));
    } else waiting.replaceChildren();
    const rows = [];
    for (const [k, v] of Object.entries(j)) {
      if (k === "payload" || k === "waiting") continue;
      let shown = typeof v === "object" ? JSON.stringify(v) : String(v);
      if (k.endsWith("_at") && typeof v === "number") shown = `${dateTime(v)}  (${v})`;
      rows.push(h("dt", {}, k), h("dd", { "data-field": k }, k === "budgets" ? v.map((b, i) => [i ? ", " : "", budgetLink(b.key), ` cost ${b.cost}`]).flat() : shown));
    }
    fields.replaceChildren(h("dl", { class: "fields" }, ...rows), h("h2", {}, "Payload"), h("pre", { class: "json" }, JSON.stringify(j.payload, null, 2)));
    const e = await api("GET", `/jobs/${enc(id)}/errors?order=desc&limit=20`);
    if (e.errors.length === 0) { errors.replaceChildren(h("div", { class: "empty" }, "No errors.")); return; }
    errors.replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "attempt"), h("th", {}, "failed at"), h("th", {}, "type"), h("th", {}, "message"))),
      h("tbody", {}, ...e.errors.map((r) => h("tr", {}, h("td", {}, r.attempt), h("td", {}, dateTime(r.failed_at)),
        h("td", {}, r.error_type || ""), h("td", { class: "wrap" }, r.message || ""))))));
  });
}

// ------------------------------------------------------------ cron

function cronsPage(root) {
  const body = h("div", {});
  root.append(h("h1", {}, "Cron groups"), body);
  const poll = every(1000, async () => {
    let list;
    try {
      list = await api("GET", "/crons");
    } catch (err) {
      if (err.status === 404) {
        body.replaceChildren(h("div", { class: "empty", id: "cron-unavailable" }, "Cron is not available on this server (GET /crons answers 404)."));
        return;
      }
      throw err;
    }
    if (list.crons.length === 0) {
      body.replaceChildren(h("div", { class: "empty" }, "No cron groups: create one with PUT /crons/{group}."));
      return;
    }
    const groups = await Promise.all(list.crons.map((g) => api("GET", `/crons/${enc(g)}`)));
    body.replaceChildren(...groups.map((g) => h("div", { class: "card", "data-group": g.name },
      h("h2", { style: "margin-top:0" }, g.name, " ", g.paused ? badge("paused") : "", g.timezone ? h("span", { class: "muted" }, ` (${g.timezone})`) : ""),
      g.entries.length === 0 ? h("div", { class: "muted" }, "no entries") : h("table", {},
        h("thead", {}, h("tr", {}, ...["entry", "expression", "zone", "job", "next firing", "last firing", "state", ""].map((c) => h("th", {}, c)))),
        h("tbody", {}, ...g.entries.map((en) => {
          const btn = h("button", { "data-action": en.paused ? "resume" : "pause" }, en.paused ? "Resume" : "Pause");
          btn.addEventListener("click", async () => {
            btn.disabled = true;
            try {
              await api("PATCH", `/crons/${enc(g.name)}/entries/${enc(en.name)}`, { paused: !en.paused });
              btn.textContent = en.paused ? "resumed" : "paused";
              poll.now();
            } catch (err) { showError(err); btn.disabled = false; }
          });
          return h("tr", { "data-entry": en.name },
            h("td", {}, en.name), h("td", { class: "mono" }, en.expression), h("td", {}, en.timezone || g.timezone || "server"),
            h("td", {}, `${en.job.type} → ${en.job.queue}`),
            h("td", {}, en.next_enqueue_at ? `${dateTime(en.next_enqueue_at)} (${relative(en.next_enqueue_at)})` : "—"),
            h("td", {}, en.last_enqueue_at ? `${dateTime(en.last_enqueue_at)} (${relative(en.last_enqueue_at)})` : "never"),
            h("td", { "data-col": "state" }, en.paused ? badge("paused") : badge("active", "completed")),
            h("td", {}, btn));
        }))))));
  });
  return poll;
}

// ------------------------------------------------------------ batches

const batchPages = 5; // pages of 2000 ready jobs scanned, at most

function batchesPage(root) {
  const body = h("div", {});
  root.append(h("h1", {}, "Batched jobs"), body,
    h("p", { class: "note" }, "Ready jobs that carry a batch key: while one is its key's pending job, the next enqueues with the same key fold their payload into it. Payload size is the JSON bytes the worker will receive."));
  return every(3000, async () => {
    const found = [];
    let path = "/jobs?status=ready&limit=2000";
    for (let i = 0; i < batchPages && path; i++) {
      const page = await api("GET", path);
      for (const j of page.jobs) if (j.batch) found.push(j);
      path = page.pages.next;
    }
    if (found.length === 0) {
      body.replaceChildren(h("div", { class: "empty", id: "no-batches" }, "No ready job carries a batch key."));
      return;
    }
    const size = (v) => new TextEncoder().encode(JSON.stringify(v)).length;
    body.replaceChildren(h("table", { id: "batches" },
      h("thead", {}, h("tr", {}, ...["batch key", "job", "type", "queue", "payload bytes", "when", "fold"].map((c) => h("th", {}, c)))),
      h("tbody", {}, ...found.map((j) => h("tr", { "data-job": j.id },
        h("td", { class: "mono" }, j.batch.key), h("td", {}, jobLink(j.id)), h("td", {}, j.type), h("td", {}, j.queue),
        h("td", { class: "num", "data-col": "size" }, size(j.payload)),
        h("td", { class: "mono wrap" }, j.batch.when), h("td", { class: "mono wrap" }, j.batch.fold))))));
  });
}

// ------------------------------------------------------------ start

function tick() { document.getElementById("clock").textContent = clockTime(Date.now()); }
setInterval(tick, 1000);
tick();
window.addEventListener("hashchange", route);
route();
