// The torchx dashboard. Every element is built with createElement and every string a job
// gave (names, arguments, messages, log lines) goes in as a text node: nothing is ever parsed
// as markup. The server's Content-Security-Policy forbids inline script on top of that.
"use strict";

const POLL_MS = 2000;
const PAGE_ROWS = 500;
const LOG_KEEP = 5000;
const ORDER = ["FAILED", "CANCELLED", "UNKNOWN", "RUNNING", "PENDING", "SUBMITTED", "UNSUBMITTED", "SUCCEEDED"];

let info = null;
let leave = () => {};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "onclick" || k === "oninput" || k === "onchange" || k === "onkeydown") node[k] = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function route(kind, handle, params) {
  let r = "#/" + kind + "/" + encodeURIComponent(handle);
  if (params) r += "?" + new URLSearchParams(params).toString();
  return r;
}

function badge(state) {
  return el("span", { class: "state state-" + state, "data-state": state }, state);
}

function when(t) {
  return t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z" : "-";
}

function took(s) {
  if (s === null || s === undefined) return "-";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return h ? `${h}h${m}m` : m ? `${m}m${sec}s` : `${sec}s`;
}

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  const body = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
  return body;
}

async function act(what, handle, question) {
  if (!window.confirm(question)) return null;
  const r = await fetch("/api/" + what, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Torchx-Token": info.csrf },
    body: JSON.stringify({ handle }),
  });
  const body = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  if (!r.ok) {
    window.alert(`${what} failed: ${body.error || r.status}`);
    return null;
  }
  return body;
}

function say(text) {
  document.getElementById("status").textContent = text;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

function every(ms, tick) {
  let stopped = false, timer = null;
  const run = async () => {
    if (stopped) return;
    try {
      await tick();
      say("updated " + new Date().toLocaleTimeString());
    } catch (e) {
      say("error: " + e.message);
    }
    if (!stopped) timer = setTimeout(run, ms);
  };
  run();
  return () => { stopped = true; clearTimeout(timer); };
}

// ---- jobs -------------------------------------------------------------------------------

function jobsPage() {
  const view = { scheduler: "", state: "", name: "", sort: "start", asc: false, rows: PAGE_ROWS };
  let data = { apps: [], errors: [] };
  const errors = el("div");
  const tbody = el("tbody");
  const count = el("span", { class: "muted", id: "count" });
  const more = el("button", { onclick: () => { view.rows += PAGE_ROWS; render(); } }, "show more");
  const pick = (key, options) => el("select", { id: "filter-" + key, onchange: (e) => { view[key] = e.target.value; render(); } },
    el("option", { value: "" }, "any " + key), options.map((o) => el("option", { value: o }, o)));
  const head = [["name", "name"], ["handle", "handle"], ["scheduler", "scheduler"], ["state", "state"], ["start", "start"], ["duration", "duration"]]
    .map(([key, label]) => el("th", { "data-key": key, onclick: () => { view.asc = view.sort === key ? !view.asc : key !== "start" && key !== "duration"; view.sort = key; render(); } }, label));
  const table = el("table", { id: "jobs" }, el("thead", {}, el("tr", {}, head)), tbody);
  show(el("h1", {}, "Jobs"), errors,
    el("div", { class: "filters" },
      pick("scheduler", [...info.schedulers, "pipeline"]),
      pick("state", ORDER),
      el("input", { id: "filter-name", type: "search", placeholder: "name or handle", oninput: (e) => { view.name = e.target.value.toLowerCase(); render(); } }),
      count),
    table, more);

  function render() {
    let rows = data.apps.filter((a) =>
      (!view.scheduler || a.scheduler === view.scheduler) &&
      (!view.state || a.state === view.state) &&
      (!view.name || a.name.toLowerCase().includes(view.name) || a.handle.toLowerCase().includes(view.name)));
    const key = view.sort;
    const cmp = (a, b) => {
      const x = a[key] ?? "", y = b[key] ?? "";
      return x < y ? -1 : x > y ? 1 : 0;
    };
    rows.sort((a, b) => (view.asc ? cmp(a, b) : cmp(b, a)));
    for (const th of head) th.className = th.dataset.key === key ? "sorted" + (view.asc ? " asc" : "") : "";
    count.textContent = `${rows.length} of ${data.apps.length} jobs`;
    more.hidden = rows.length <= view.rows;
    tbody.replaceChildren(...rows.slice(0, view.rows).map((a) =>
      el("tr", { "data-handle": a.handle, "data-kind": a.kind },
        el("td", {}, el("a", { href: route("app", a.handle) }, a.name || "(unnamed)"), a.kind === "app" ? null : el("span", { class: "muted" }, " " + a.kind)),
        el("td", { class: "handle" }, a.handle),
        el("td", {}, a.scheduler),
        el("td", {}, badge(a.state)),
        el("td", {}, when(a.start)),
        el("td", {}, took(a.duration)))));
  }

  return every(POLL_MS, async () => {
    data = await api("/api/apps");
    errors.replaceChildren(...data.errors.map((e) => el("div", { class: "errors" }, `${e.scheduler}: ${e.error}`)));
    render();
  });
}

// ---- one job, group or pipeline ------------------------------------------------------------

function appPage(handle) {
  const top = el("div");
  const body = el("div");
  show(top, body);
  let full = null;
  return every(POLL_MS, async () => {
    const d = await api("/api/apps/" + encodeURIComponent(handle) + (full ? "" : "?full=true"));
    if (!full) full = d;
    top.replaceChildren(...header(d, full));
    if (d.kind === "group") body.replaceChildren(...groupBody(d));
    else if (d.kind === "pipeline") body.replaceChildren(...pipelineBody(d));
    else body.replaceChildren(...appBody(d, full));
  });
}

function header(d, full) {
  const buttons = [];
  if (d.kind === "app") buttons.push(el("a", { href: route("logs", d.handle), id: "logs-link" }, "logs"));
  if (!info.read_only) {
    if (!d.terminal && d.state !== undefined && !["SUCCEEDED", "FAILED", "CANCELLED"].includes(d.state))
      buttons.push(el("button", { class: "danger", id: "cancel", onclick: async () => { if (await act("cancel", d.handle, `Cancel ${d.handle}?`)) say("cancel requested"); } }, "cancel"));
    if (d.kind !== "app" && Object.keys(d.counts || {}).some((s) => s === "FAILED" || s === "CANCELLED"))
      buttons.push(el("button", { id: "rerun", onclick: async () => {
        const r = await act("rerun", d.handle, `Run the failed part of ${d.handle} again?`);
        if (r) say("rerun: " + JSON.stringify(r.rerun));
      } }, "rerun --failed"));
    buttons.push(el("button", { class: "danger", id: "delete", onclick: async () => { if (await act("delete", d.handle, `Delete ${d.handle} and its logs?`)) location.hash = "#/"; } }, "delete"));
  }
  return [
    el("h1", {}, (full.name || d.name || d.handle) + " ", badge(d.state)),
    el("dl", { class: "kv" },
      el("dt", {}, "handle"), el("dd", { class: "handle" }, d.handle),
      el("dt", {}, "kind"), el("dd", {}, d.kind),
      d.msg ? [el("dt", {}, "message"), el("dd", { id: "msg" }, d.msg)] : null,
      d.parent ? [el("dt", {}, "rerun of"), el("dd", {}, el("a", { href: route("app", d.parent) }, d.parent))] : null),
    el("div", { class: "actions" }, buttons),
  ];
}

function appBody(d, full) {
  const rows = [];
  for (const role of d.roles || []) {
    for (const r of role.replicas) {
      const attempts = r.attempts || [];
      rows.push(el("tr", { "data-replica": `${role.role}/${r.id}` },
        el("td", {}, role.role), el("td", {}, r.id), el("td", {}, badge(r.state)), el("td", {}, r.hostname),
        el("td", {}, attempts.length ? el("table", { class: "attempts" },
          el("tr", {}, ["attempt", "start", "end", "exit", "reason"].map((h) => el("th", {}, h))),
          attempts.map((a) => el("tr", {},
            el("td", {}, a.attempt), el("td", {}, when(a.started)), el("td", {}, when(a.ended)),
            el("td", {}, a.exit_code ?? (a.signal ? "signal " + a.signal : "-")),
            el("td", {}, a.reason || "running")))) : "-"),
        el("td", {}, el("a", { href: route("logs", d.handle, { role: role.role, replica: r.id }) }, "logs"))));
    }
  }
  const out = [
    el("h2", {}, "Replicas"),
    el("table", { id: "replicas" }, el("tr", {}, ["role", "replica", "state", "host", "attempts", ""].map((h) => el("th", {}, h))), rows),
  ];
  if (d.structured_error_msg && d.structured_error_msg !== "<NONE>") out.push(el("h2", {}, "Error"), el("pre", {}, d.structured_error_msg));
  if (d.stacks && d.stacks.length) out.push(el("h2", {}, "Stacks of the hung replicas"),
    ...d.stacks.map((s) => el("div", { class: "stacks", "data-replica": `${s.role}/${s.replica}` },
      el("h3", {}, `${s.role}/${s.replica}, attempt ${s.attempt}`), el("pre", {}, s.text))));
  if (full.appdef) out.push(el("h2", {}, "AppDef"), el("pre", { id: "appdef" }, full.appdef));
  if (full.native) out.push(el("h2", {}, "Native request (a dry run of this AppDef with the configured options)"),
    el("pre", { id: "native" }, full.native.text || full.native.error));
  if (full.rerun) out.push(el("h2", {}, "Run it again"), el("pre", {}, full.rerun.join("\n")));
  return out;
}

function bar(counts) {
  const total = Object.values(counts).reduce((a, b) => a + b, 0) || 1;
  const states = Object.keys(counts).sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b));
  return [
    el("div", { class: "bar", id: "progress" }, states.map((s) => el("span", { class: "fill-" + s, title: `${s} ${counts[s]}`, style: null, "data-width": counts[s] / total }))),
    el("div", { class: "legend" }, states.map((s) => el("span", {}, badge(s), " " + counts[s]))),
  ];
}

function sizeBars(root) {
  // Widths go in through the CSSOM (a style attribute would need 'unsafe-inline').
  for (const span of root.querySelectorAll("[data-width]")) span.style.width = (100 * Number(span.dataset.width)) + "%";
}

function groupBody(d) {
  const tasks = [...d.tasks].sort((a, b) => ORDER.indexOf(a.state) - ORDER.indexOf(b.state) || a.index - b.index);
  const progress = bar(d.counts);
  sizeBars(progress[0]);
  return [
    el("h2", {}, `Tasks (${d.tasks.length})`), ...progress,
    el("p", { class: "muted" }, "spec: " + d.spec, d.native_array ? " · native array " + d.native_array : ""),
    el("table", { id: "tasks" }, el("tr", {}, ["task", "state", "parameters", "job"].map((h) => el("th", {}, h))),
      tasks.map((t) => el("tr", { "data-task": t.index },
        el("td", {}, t.index), el("td", {}, badge(t.state)),
        el("td", {}, Object.entries(t.params || {}).map(([k, v]) => `${k}=${v}`).join(" ")),
        el("td", { class: "handle" }, t.handle ? el("a", { href: route("app", t.handle) }, t.handle) : t.error || "-")))),
    el("h2", {}, "Run it again"), el("pre", {}, d.rerun.join("\n")),
  ];
}

function pipelineBody(d) {
  const names = new Set(d.steps.map((s) => s.name));
  const parents = (s) => s.after.map((a) => a.replace(/:(ok|notok|any)$/, "")).filter((n) => names.has(n));
  const depth = {};
  const depthOf = (s, seen = new Set()) => {
    if (depth[s.name] !== undefined) return depth[s.name];
    if (seen.has(s.name)) return 0;
    seen.add(s.name);
    const ps = parents(s).map((p) => depthOf(d.steps.find((x) => x.name === p), seen));
    return (depth[s.name] = ps.length ? Math.max(...ps) + 1 : 0);
  };
  d.steps.forEach((s) => depthOf(s));
  const columns = {};
  const at = {};
  for (const s of d.steps) {
    const col = depth[s.name];
    const row = (columns[col] = (columns[col] || 0) + 1) - 1;
    at[s.name] = { x: 20 + col * 210, y: 20 + row * 70 };
  }
  const width = 20 + (Math.max(...Object.keys(columns).map(Number)) + 1) * 210;
  const height = 20 + Math.max(...Object.values(columns)) * 70;
  const graph = svg("svg", { class: "dag", id: "dag", width, height, viewBox: `0 0 ${width} ${height}` });
  for (const s of d.steps)
    for (const p of parents(s))
      graph.appendChild(svg("line", { x1: at[p].x + 170, y1: at[p].y + 22, x2: at[s.name].x, y2: at[s.name].y + 22 }));
  const fill = { SUCCEEDED: "#dcfce7", FAILED: "#fee2e2", RUNNING: "#dbeafe", CANCELLED: "#f1f5f9", PENDING: "#fef9c3", SUBMITTED: "#fef9c3" };
  for (const s of d.steps) {
    const g = svg("g", { "data-step": s.name, "data-state": s.state });
    g.appendChild(svg("rect", { x: at[s.name].x, y: at[s.name].y, width: 170, height: 44, fill: fill[s.state] || "#ede9fe" }));
    g.appendChild(svg("text", { x: at[s.name].x + 8, y: at[s.name].y + 18 }, s.name));
    g.appendChild(svg("text", { x: at[s.name].x + 8, y: at[s.name].y + 36 }, `${s.state} · ${s.scheduler}`));
    if (s.handle) {
      g.style.cursor = "pointer";
      g.addEventListener("click", () => { location.hash = route("app", s.handle); });
    }
    graph.appendChild(g);
  }
  return [
    el("h2", {}, `Steps (${d.steps.length})`), graph,
    el("table", { id: "steps" }, el("tr", {}, ["step", "state", "scheduler", "after", "job", "message"].map((h) => el("th", {}, h))),
      d.steps.map((s) => el("tr", { "data-step": s.name },
        el("td", {}, s.name), el("td", {}, badge(s.state)), el("td", {}, s.scheduler), el("td", {}, s.after.join(", ")),
        el("td", { class: "handle" }, s.handle ? el("a", { href: route("app", s.handle) }, s.handle) : "-"),
        el("td", {}, s.msg)))),
    el("h2", {}, "Run it again"), el("pre", {}, d.rerun.join("\n")),
  ];
}

// ---- logs -------------------------------------------------------------------------------

function logsPage(handle, params) {
  const pick = { role: params.get("role") || "", replica: params.get("replica") || "0", stream: params.get("stream") || "", regex: params.get("regex") || "" };
  const out = el("pre", { class: "log", id: "log" });
  const note = el("span", { class: "muted", id: "log-note" });
  const follow = el("input", { type: "checkbox", id: "follow", checked: true, onchange: () => start() });
  const stream = el("select", { id: "stream", onchange: (e) => { pick.stream = e.target.value; start(); } },
    ["", "stdout", "stderr", "combined"].map((s) => el("option", { value: s }, s || "default stream")));
  stream.value = pick.stream;
  const search = el("input", { id: "search", type: "search", placeholder: "regex (Enter)", value: pick.regex,
    onkeydown: (e) => { if (e.key === "Enter") { pick.regex = e.target.value; start(); } } });
  const replica = el("select", { id: "replica", onchange: (e) => { [pick.role, pick.replica] = e.target.value.split("\u0000"); start(); } });
  show(el("h1", {}, "Logs of ", el("a", { href: route("app", handle) }, handle)),
    el("div", { class: "filters" }, replica, stream, search, el("label", {}, follow, " follow"), note), out);
  let lines = [], partial = "", dirty = false, abort = null;
  api("/api/apps/" + encodeURIComponent(handle)).then((d) => {
    for (const role of d.roles || [])
      for (const r of role.replicas) {
        const value = role.role + "\u0000" + r.id;
        replica.appendChild(el("option", { value }, `${role.role}/${r.id}`));
        if (!pick.role) [pick.role, pick.replica] = [role.role, String(r.id)];
      }
    replica.value = pick.role + "\u0000" + pick.replica;
  }).catch((e) => say(e.message));
  const paint = setInterval(() => {
    if (!dirty) return;
    dirty = false;
    out.textContent = lines.join("\n") + (partial ? "\n" + partial : "");
    out.scrollTop = out.scrollHeight;
    note.textContent = `last ${lines.length} lines (the page keeps at most ${LOG_KEEP})`;
  }, 200);
  async function start() {
    if (abort) abort.abort();
    abort = new AbortController();
    lines = []; partial = ""; dirty = true;
    const q = new URLSearchParams({ replica: pick.replica, lines: LOG_KEEP, follow: follow.checked ? "true" : "false" });
    if (pick.role) q.set("role", pick.role);
    if (pick.stream) q.set("stream", pick.stream);
    if (pick.regex) q.set("regex", pick.regex);
    try {
      const r = await fetch("/api/logs/" + encodeURIComponent(handle) + "?" + q, { signal: abort.signal, credentials: "same-origin" });
      if (!r.ok) {
        const body = await r.json().catch(() => ({}));
        throw new Error(body.error || `HTTP ${r.status}`);
      }
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const parts = (partial + value).split("\n");
        partial = parts.pop();
        for (const p of parts) lines.push(p);
        if (lines.length > LOG_KEEP) lines.splice(0, lines.length - LOG_KEEP);
        dirty = true;
      }
      say("log ended");
    } catch (e) {
      if (e.name !== "AbortError") { say("log: " + e.message); lines.push(`[${e.message}]`); dirty = true; }
    }
  }
  start();
  return () => { clearInterval(paint); if (abort) abort.abort(); };
}

// ---- routing ----------------------------------------------------------------------------

function go() {
  leave();
  const hash = location.hash || "#/";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const m = path.match(/^\/(app|logs)\/(.+)$/);
  if (m && m[1] === "app") leave = appPage(decodeURIComponent(m[2]));
  else if (m) leave = logsPage(decodeURIComponent(m[2]), params);
  else leave = jobsPage();
}

window.addEventListener("hashchange", go);
window.addEventListener("DOMContentLoaded", async () => {
  try {
    info = await api("/api/info");
  } catch (e) {
    show(el("p", { class: "errors" }, "cannot reach the server: " + e.message));
    return;
  }
  if (info.read_only) say("read-only");
  go();
});
