// leadpipe's front page: plain JavaScript, no build step, no external
// resources. Everything it shows comes from the documented API
// (/openapi.json) called with the token the user pasted.
"use strict";

const TOKEN_KEY = "leadpipe.token";

// The lead status machine (README "Sales API"); the server enforces it, this
// only decides which buttons to offer.
const NEXT_STATUS = {
  new: ["contacted", "lost"],
  contacted: ["qualified", "lost"],
  qualified: ["converted", "lost"],
  lost: ["new"],
  converted: [],
};

const state = {
  leadsCursor: null,
  lead: null, // the lead shown in the detail panel
  etag: null, // its ETag, sent back as If-Match
};

// ---------------------------------------------------------------- helpers

function $(id) {
  return document.getElementById(id);
}

/** A DOM element; children are nodes or text (never parsed as HTML). */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function uuid() {
  if (window.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  // Outside a secure context randomUUID is missing: build a v4 UUID by hand.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function when(value) {
  if (!value) return "";
  const d = new Date(value);
  return isNaN(d) ? String(value) : d.toLocaleString();
}

function cell(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** An API error: the problem+json body when there is one. */
class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Calls the API with the token; returns {status, headers, body} or throws ApiError. */
async function api(method, path, { body, headers } = {}) {
  const init = { method, headers: Object.assign({ Accept: "application/json" }, headers) };
  const t = token();
  if (t) init.headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, { title: "Network error", detail: String(err) });
  }
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch (_) {
    parsed = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, parsed || { title: `HTTP ${response.status}`, detail: text });
  }
  return { status: response.status, headers: response.headers, body: parsed };
}

/** A problem+json, readably. */
function problemView(err) {
  const p = err.problem || {};
  const box = el(
    "div",
    { class: "problem-body" },
    el("strong", {}, `${err.status || ""} ${p.title || "Error"}`.trim()),
    p.detail ? el("p", {}, p.detail) : null,
    p.type ? el("p", { class: "muted" }, "type: ", el("code", {}, p.type)) : null,
  );
  if (Array.isArray(p.errors) && p.errors.length) {
    box.append(el("ul", {}, p.errors.map((e) => el("li", {}, el("code", {}, e.field), ": ", e.message))));
  }
  if (Array.isArray(p.allowed)) {
    box.append(el("p", {}, "allowed: ", p.allowed.length ? p.allowed.join(", ") : "none"));
  }
  if (p.current_version !== undefined) {
    box.append(el("p", {}, `current version: ${p.current_version} — reload the lead and try again`));
  }
  return box;
}

function showProblem(err) {
  const box = $("problem");
  box.replaceChildren(
    problemView(err),
    el("button", { type: "button", class: "small", onclick: () => (box.hidden = true) }, "Dismiss"),
  );
  box.hidden = false;
  if (err.status === 401) signOut("Your token was not accepted; sign in again.");
}

function clearProblem() {
  $("problem").hidden = true;
}

/** A table of objects: the union of their keys as columns. */
function genericTable(rows, extra) {
  const keys = [];
  for (const row of rows) for (const k of Object.keys(row)) if (!keys.includes(k)) keys.push(k);
  const head = el("tr", {}, keys.map((k) => el("th", {}, k)), extra ? el("th", {}) : null);
  const body = rows.map((row) =>
    el("tr", {}, keys.map((k) => el("td", {}, cell(row[k]))), extra ? el("td", {}, extra(row)) : null),
  );
  return el("table", { class: "generic" }, el("thead", {}, head), el("tbody", {}, body));
}

/** Loads an optional endpoint into `target`; 404 means "not available" (yet). */
async function optional(target, path, render) {
  target.replaceChildren(el("p", { class: "muted" }, "loading…"));
  try {
    const { body } = await api("GET", path);
    target.replaceChildren(render(body));
  } catch (err) {
    if (err.status === 404) target.replaceChildren(el("p", { class: "muted" }, "not available"));
    else target.replaceChildren(problemView(err));
  }
}

// ---------------------------------------------------------------- session

function signIn(t) {
  sessionStorage.setItem(TOKEN_KEY, t);
  showApp();
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("login").hidden = false;
  $("tabs").hidden = true;
  $("session").hidden = true;
  $("leads-tab").hidden = true;
  $("ops-tab").hidden = true;
  if (message) {
    $("problem").replaceChildren(el("strong", {}, message));
    $("problem").hidden = false;
  }
}

function showApp() {
  $("login").hidden = true;
  $("tabs").hidden = false;
  $("session").hidden = false;
  showTab("leads");
}

function showTab(name) {
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  $("leads-tab").hidden = name !== "leads";
  $("ops-tab").hidden = name !== "ops";
  clearProblem();
  if (name === "leads") loadLeads(false);
  else loadOps();
}

// ---------------------------------------------------------------- leads

function leadQuery() {
  const q = new URLSearchParams({ limit: "50" });
  const status = $("filter-status").value;
  const text = $("filter-q").value.trim();
  const owner = $("filter-owner").value;
  if (status) q.set("status", status);
  if (text) q.set("q", text);
  if (owner) q.set("owner", owner);
  if (state.leadsCursor) q.set("cursor", state.leadsCursor);
  return q;
}

async function loadLeads(more) {
  if (!more) state.leadsCursor = null;
  try {
    const { body } = await api("GET", `/api/leads?${leadQuery()}`);
    const tbody = $("lead-table").querySelector("tbody");
    const rows = body.data.map(leadRow);
    if (more) tbody.append(...rows);
    else tbody.replaceChildren(...rows);
    state.leadsCursor = body.next_cursor;
    $("more-leads").hidden = !body.next_cursor;
    $("lead-empty").hidden = tbody.children.length > 0;
  } catch (err) {
    showProblem(err);
  }
}

function leadRow(lead) {
  const row = el(
    "tr",
    { dataset: { leadId: String(lead.id) }, onclick: () => openLead(lead.id), tabindex: "0" },
    el("td", {}, lead.id),
    el("td", {}, lead.name || ""),
    el("td", {}, lead.email || ""),
    el("td", {}, lead.company || ""),
    el("td", {}, lead.source),
    el("td", {}, el("span", { class: `status status-${lead.status}` }, lead.status)),
    el("td", {}, lead.owner_id === null || lead.owner_id === undefined ? "—" : lead.owner_id),
    el("td", {}, when(lead.updated_at)),
  );
  row.addEventListener("keydown", (e) => {
    if (e.key === "Enter") openLead(lead.id);
  });
  if (state.lead && state.lead.id === lead.id) row.classList.add("selected");
  return row;
}

async function openLead(id) {
  clearProblem();
  try {
    const { body, headers } = await api("GET", `/api/leads/${id}`);
    state.lead = body;
    state.etag = headers.get("ETag");
    renderLead();
    await loadTimeline();
  } catch (err) {
    showProblem(err);
  }
}

function renderLead() {
  const lead = state.lead;
  $("lead-detail").hidden = false;
  $("lead-title").textContent = lead.name || lead.email || `Lead ${lead.id}`;
  const fields = [
    ["id", lead.id],
    ["source", `${lead.source} / ${lead.source_ref}`],
    ["email", lead.email],
    ["phone", lead.phone],
    ["company", lead.company],
    ["owner", lead.owner_id],
    ["created", when(lead.created_at)],
    ["updated", when(lead.updated_at)],
  ];
  $("lead-fields").replaceChildren(
    ...fields.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v === null || v === undefined ? "—" : v)]),
  );
  if (Array.isArray(lead.possible_duplicates) && lead.possible_duplicates.length) {
    $("lead-fields").append(
      el("dt", {}, "possible duplicates"),
      el(
        "dd",
        {},
        lead.possible_duplicates.map((d) =>
          el("button", { type: "button", class: "link", onclick: () => openLead(d.lead_id) }, `#${d.lead_id} (${d.reason})`),
        ),
      ),
    );
  }
  const status = $("lead-status");
  status.textContent = lead.status;
  status.className = `status status-${lead.status}`;
  $("lead-version").textContent = state.etag ? `ETag ${state.etag}` : "";
  const next = NEXT_STATUS[lead.status] || [];
  $("transitions").replaceChildren(
    ...(next.length
      ? next.map((to) =>
          el("button", { type: "button", dataset: { to }, onclick: () => transition(to) }, `→ ${to}`),
        )
      : [el("span", { class: "muted" }, "final status")]),
  );
  for (const row of $("lead-table").querySelectorAll("tbody tr")) {
    row.classList.toggle("selected", row.dataset.leadId === String(lead.id));
  }
}

async function transition(to) {
  clearProblem();
  const lead = state.lead;
  const reason = $("transition-reason").value.trim();
  const body = { to };
  if (reason) body.reason = reason;
  const headers = { "Idempotency-Key": uuid() };
  if (state.etag) headers["If-Match"] = state.etag;
  for (const b of $("transitions").querySelectorAll("button")) b.disabled = true;
  try {
    // `converted` is reached only by converting (which records the contact
    // and company the lead became); every other move is a transition.
    const converting = to === "converted";
    const path = converting ? `/api/leads/${lead.id}/convert` : `/api/leads/${lead.id}/transitions`;
    const response = await api("POST", path, { body: converting ? {} : body, headers });
    state.lead = Object.assign({}, state.lead, converting ? response.body.lead : response.body);
    state.etag = response.headers.get("ETag");
    $("transition-reason").value = "";
    renderLead();
    await loadTimeline();
    const row = $("lead-table").querySelector(`tbody tr[data-lead-id="${lead.id}"]`);
    if (row) row.replaceWith(leadRow(state.lead));
  } catch (err) {
    showProblem(err);
    renderLead();
  }
}

function describeActivity(a) {
  const d = a.detail || {};
  switch (a.kind) {
    case "status_changed":
      return `status ${d.from} → ${d.to}${d.reason ? ` (${d.reason})` : ""}`;
    case "ingest":
      return `${a.origin || "intake"}: ${a.outcome || ""}`;
    case "note":
      return `note: ${d.text || ""}`;
    case "assigned":
      return `owner → ${d.to === null || d.to === undefined ? "nobody" : d.to}${d.by ? ` (${d.by})` : ""}`;
    default:
      return `${a.kind}${a.detail ? ` ${JSON.stringify(a.detail)}` : ""}`;
  }
}

async function loadTimeline() {
  const id = state.lead.id;
  try {
    const { body } = await api("GET", `/api/leads/${id}/activities?limit=50`);
    $("timeline").replaceChildren(
      ...body.data.map((a) =>
        el(
          "li",
          { dataset: { kind: a.kind } },
          el("time", {}, when(a.created_at)),
          " ",
          el("span", { class: "kind" }, a.kind),
          " ",
          describeActivity(a),
          a.author_id ? el("span", { class: "muted" }, ` by #${a.author_id}`) : null,
        ),
      ),
    );
  } catch (err) {
    showProblem(err);
  }
}

// ---------------------------------------------------------------- ops

function loadOps() {
  loadStats();
  loadDeadEvents();
  loadDeadDeliveries();
  loadReconcileRuns();
}

function loadStats() {
  return optional($("stats"), "/api/ops/stats", (body) => {
    const parts = [];
    const sources = Array.isArray(body && body.sources) ? body.sources : null;
    if (sources) {
      parts.push(sources.length ? genericTable(sources) : el("p", { class: "muted" }, "no sources yet"));
    }
    const rest = Object.entries(body || {}).filter(([k]) => k !== "sources");
    if (rest.length) {
      parts.push(el("dl", { class: "totals" }, rest.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, cell(v))])));
    }
    return el("div", {}, parts.length ? parts : el("pre", {}, JSON.stringify(body, null, 2)));
  });
}

function retryButton(label, path, reload) {
  return (row) =>
    el(
      "button",
      {
        type: "button",
        class: "small",
        onclick: async (e) => {
          e.target.disabled = true;
          try {
            await api("POST", path(row), { headers: { "Idempotency-Key": uuid() } });
            await reload();
          } catch (err) {
            showProblem(err);
            e.target.disabled = false;
          }
        },
      },
      label,
    );
}

function loadDeadEvents() {
  return optional($("dead-events"), "/api/ops/inbox?state=dead&limit=50", (body) => {
    if (!body.data.length) return el("p", { class: "muted" }, "none");
    const rows = body.data.map((e) => ({
      id: e.id,
      source: e.source,
      event_id: e.event_id,
      event_type: e.event_type,
      attempts: e.attempts,
      last_error: e.last_error,
      received_at: when(e.received_at),
    }));
    return genericTable(rows, retryButton("Retry", (r) => `/api/ops/inbox/${r.id}/retry`, loadDeadEvents));
  });
}

function loadDeadDeliveries() {
  return optional($("dead-deliveries"), "/api/ops/deliveries?state=dead&limit=50", (body) => {
    if (!body.data.length) return el("p", { class: "muted" }, "none");
    const rows = body.data.map((d) => ({
      id: d.id,
      subscription_id: d.subscription_id,
      lead_id: d.lead_id,
      attempts: d.attempts,
      last_status: d.last_status,
      last_error: d.last_error,
      updated_at: when(d.updated_at),
    }));
    return genericTable(rows, retryButton("Retry", (r) => `/api/ops/deliveries/${r.id}/retry`, loadDeadDeliveries));
  });
}

function loadReconcileRuns() {
  return optional($("reconcile-runs"), "/api/ops/reconcile-runs", (body) => {
    const runs = Array.isArray(body) ? body : Array.isArray(body && body.data) ? body.data : null;
    if (!runs) return el("pre", {}, JSON.stringify(body, null, 2));
    return runs.length ? genericTable(runs) : el("p", { class: "muted" }, "no runs yet");
  });
}

async function startReconcile(source) {
  clearProblem();
  try {
    await api("POST", `/api/ops/reconcile/${encodeURIComponent(source)}`, {
      headers: { "Idempotency-Key": uuid() },
    });
    await loadReconcileRuns();
  } catch (err) {
    // The route itself missing (an older server) is "not available"; a 404
    // from the endpoint (no such source) is a problem to show.
    if (err.status === 404 && err.problem && err.problem.detail === "no such route") {
      $("reconcile-runs").prepend(el("p", { class: "muted" }, "reconcile: not available"));
    } else {
      showProblem(err);
    }
  }
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("token").value.trim();
    $("token").value = "";
    if (t) signIn(t);
  });
  $("sign-out").addEventListener("click", () => signOut());
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  $("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    loadLeads(false);
  });
  $("more-leads").addEventListener("click", () => loadLeads(true));
  $("refresh-ops").addEventListener("click", loadOps);
  $("reconcile-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const source = $("reconcile-source").value.trim();
    if (source) startReconcile(source);
  });
  if (token()) showApp();
});
