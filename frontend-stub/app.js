// leadpipe's front page: plain JavaScript, no build step, no external
// resources. Everything it shows comes from the documented API
// (/openapi.json) called with the token the user pasted.
"use strict";

const TOKEN_KEY = "leadpipe.token";
// Why the last session ended, shown once by the fresh page (a 401).
const NOTICE_KEY = "leadpipe.notice";
// That this browser signed in with a password (the cookie itself is
// HttpOnly): only then does a fresh page ask for the session, so a page
// that never signed in makes no refused call.
const SESSION_HINT_KEY = "leadpipe.cookie-session";

// The tabs each role may read: the roles their endpoints answer (README
// "Roles"). An intake token only posts leads, so it gets no tab at all.
const TABS_BY_ROLE = {
  intake: [],
  sales: ["my-day", "leads", "contacts", "companies", "deals", "tasks", "reports"],
  ops: ["leads", "contacts", "companies", "deals", "tasks", "reports", "ops"],
  admin: ["leads", "contacts", "companies", "deals", "tasks", "reports", "ops"],
};

// The records a page can open by address (`#deal/7`): the tab that shows
// them, where the API keeps them, and what a person calls one.
const KINDS = {
  lead: { tab: "leads", path: "/api/leads", label: (l) => leadLabel(l) },
  contact: { tab: "contacts", path: "/api/contacts", label: (c) => c.name || c.email || c.phone || `Contact ${c.id}` },
  company: { tab: "companies", path: "/api/companies", label: (c) => c.name || c.domain || `Company ${c.id}` },
  deal: { tab: "deals", path: "/api/deals", label: (d) => d.name || `Deal ${d.id}` },
};

// The deal stage machine (README "CRM"): an open deal is won or lost; a
// closed deal stays closed. The board has a column per stage.
const DEAL_STAGES = ["open", "won", "lost"];
const NEXT_STAGE = { open: ["won", "lost"], won: [], lost: [] };

// The lead status machine (README "Sales API"); the server enforces it, this
// only decides which buttons to offer.
const NEXT_STATUS = {
  new: ["contacted", "lost"],
  contacted: ["qualified", "lost"],
  // `converted` is reached by converting (the form below the buttons),
  // which records the contact and company the lead became.
  qualified: ["lost"],
  lost: ["new"],
  converted: [],
};

// A backlog is "growing" once its oldest event has waited this long.
const BACKLOG_ALERT_SECONDS = 300;
// As the LeadpipeSourceQuiet alert: 10 usual gaps, and at least 18 hours.
const QUIET_GAPS = 10;
const QUIET_FLOOR_SECONDS = 18 * 3600;

// One session's memory. Signing out never clears it piece by piece: it
// loads a fresh page, so nothing of one session reaches the next.
const state = {
  me: null, // GET /api/me: who is signed in
  token: null, // the token this page signed in with
  csrf: null, // a cookie session's CSRF token, sent with its writes
  leads: [], // the rows of the list, as loaded
  people: new Map(), // principal id -> {name, role, team, active, label}
  picked: new Set(), // lead ids ticked in the list, for bulk actions
  sort: null, // {key, dir}: the list's column order, within the loaded rows
  duplicateLeads: new Map(), // lead id -> the duplicate lead, for its name
  seriesWindow: "1h",
  leadsCursor: null,
  lead: null, // the lead shown in the detail panel
  etag: null, // its ETag, sent back as If-Match
  taskDue: "today", // the Tasks tab's list: today, overdue, upcoming or done
  tasksCursor: null,
  names: new Map(), // "lead/7", "deal/3", … -> what a person calls it (null: unreadable)
  records: { contact: [], company: [], deal: [] }, // the contact and company lists, the board's deals
  recordCursors: { contact: null, company: null },
  record: null, // {kind, body, etag}: the contact, company or deal shown
  dragging: null, // the deal whose card is being dragged on the board
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

function plural(n, one, many) {
  return `${Number(n).toLocaleString("en")} ${n === 1 ? one : many || `${one}s`}`;
}

function percent(rate) {
  return `${(rate * 100).toFixed(1)} %`;
}

/** Seconds as "45 s", "3 min 12 s", "2 h 5 min", "3 d 4 h". */
function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const two = (big, bigUnit, small, smallUnit) => `${big} ${bigUnit}${small ? ` ${small} ${smallUnit}` : ""}`;
  if (s < 60) return `${s} s`;
  if (s < 3600) return two(Math.floor(s / 60), "min", s % 60, "s");
  if (s < 86400) return two(Math.floor(s / 3600), "h", Math.floor((s % 3600) / 60), "min");
  return two(Math.floor(s / 86400), "d", Math.floor((s % 86400) / 3600), "h");
}

/** A principal id as the person's name (the id when the name is unknown). */
function person(id) {
  if (id === null || id === undefined) return "—";
  const p = state.people.get(id);
  return p ? p.label : `#${id}`;
}

/**
 * Each principal's label: the name, and where two share a name, what tells
 * them apart — the team (or role), and the id when even that is shared.
 */
function labelPeople(list) {
  const byName = new Map();
  for (const p of list) byName.set(p.name, (byName.get(p.name) || []).concat(p));
  for (const p of list) {
    const namesakes = byName.get(p.name);
    if (namesakes.length === 1) p.label = p.name;
    else {
      const where = p.team ? `team ${p.team}` : p.role;
      const sameWhere = namesakes.filter((o) => (o.team ? `team ${o.team}` : o.role) === where).length > 1;
      p.label = `${p.name} (${where}${sameWhere ? `, #${p.id}` : ""})`;
    }
    if (!p.active) p.label += " — revoked";
  }
  return list;
}

/** Who may own leads: active sales principals, by label. */
function owners() {
  return [...state.people.values()].filter((p) => p.role === "sales" && p.active).sort((a, b) => a.label.localeCompare(b.label));
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

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Every call to the API goes through here; returns {status, headers, body}
 * or throws ApiError. Signed in with a token, it sends `Authorization:
 * Bearer`. Without one, the browser's own session cookie (if any) goes
 * along (`same-origin`), and an unsafe method carries the session's
 * `X-CSRF-Token` (`state.csrf`) — the one place that knows how a call is
 * authenticated.
 */
async function api(method, path, { body, headers } = {}) {
  // `no-store`: an answer is for this session only; the browser keeps none.
  const init = {
    method,
    cache: "no-store",
    credentials: "same-origin",
    headers: Object.assign({ Accept: "application/json" }, headers),
  };
  const t = token();
  if (t) init.headers.Authorization = `Bearer ${t}`;
  else if (state.csrf && !SAFE_METHODS.has(method)) init.headers["X-CSRF-Token"] = state.csrf;
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

/** What went wrong, in words, by status (the problem's title and detail follow). */
function headline(status) {
  if (status === 0) return "The server could not be reached";
  if (status === 403) return "You may not do this";
  if (status === 404) return "Not found";
  if (status === 409) return "This clashes with what is stored now";
  if (status === 412) return "Someone else changed this meanwhile";
  if (status === 422 || status === 400) return "This was not accepted";
  if (status === 429) return "Too many requests just now; wait a moment and try again";
  if (status >= 500) return "The server failed to do this; try again later";
  return "That did not work";
}

/** A problem+json, readably: words first, then the problem's own detail. */
function problemView(err, note) {
  const p = err.problem || {};
  const box = el(
    "div",
    { class: "problem-body", dataset: { status: String(err.status || 0), type: p.type || "" } },
    el("strong", {}, headline(err.status)),
    el("p", {}, [p.title, p.detail].filter(Boolean).join(": ") || `HTTP ${err.status}`),
  );
  if (Array.isArray(p.errors) && p.errors.length) {
    box.append(el("ul", {}, p.errors.map((e) => el("li", {}, el("code", {}, e.field), ": ", e.message))));
  }
  if (Array.isArray(p.allowed)) {
    box.append(el("p", {}, "Allowed from here: ", p.allowed.length ? p.allowed.join(", ") : "nothing"));
  }
  if (note) box.append(el("p", { class: "note" }, note));
  return box;
}

/**
 * Shows a problem where the user is: at the top of the card that holds
 * `where` (the active view's first card when not given), scrolled into
 * view. Sign-in problems use the page's own box.
 */
function showProblem(err, where, note) {
  if (err.status === 401) {
    signOut(token() ? "Your token was not accepted; sign in again." : "Your session has ended; sign in again.");
    return;
  }
  const scope = (where && (where.closest(".card") || where)) || activeCard();
  let box;
  if (!scope) {
    box = $("problem");
  } else {
    box = scope.querySelector(":scope > .problem");
    if (!box) {
      box = el("div", { class: "problem", role: "alert" });
      const heading = scope.querySelector(":scope > h2");
      if (heading) heading.after(box);
      else scope.prepend(box);
    }
  }
  box.replaceChildren(
    problemView(err, note),
    el("button", { type: "button", class: "small", onclick: () => (box.hidden = true) }, "Dismiss"),
  );
  box.hidden = false;
  box.scrollIntoView({ block: "nearest" });
}

/** The first card of the view shown, where a problem without a place goes. */
function activeCard() {
  const section = [...document.querySelectorAll("main > section[id$='-tab']")].find((s) => !s.hidden);
  return section ? section.querySelector(".card") : null;
}

function clearProblem() {
  $("problem").hidden = true;
  for (const box of document.querySelectorAll(".card > .problem")) box.remove();
}

/** A table of objects: the union of their keys as columns. */
function genericTable(rows, extra) {
  const keys = [];
  for (const row of rows) for (const k of Object.keys(row)) if (!keys.includes(k)) keys.push(k);
  const head = el("tr", {}, keys.map((k) => el("th", {}, k.replace(/_/g, " "))), extra ? el("th", {}) : null);
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
    target.replaceChildren(await render(body));
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

/**
 * Signs in with email and password: the server sets its session cookie
 * (HttpOnly: this page never sees it) and answers the CSRF token that the
 * session's writes carry.
 */
async function signInWithPassword(email, password) {
  clearProblem();
  try {
    const { body } = await api("POST", "/api/session", { body: { email, password } });
    state.csrf = body.csrf_token;
    localStorage.setItem(SESSION_HINT_KEY, "1");
  } catch (err) {
    const words = err.status === 401 ? "That email and password do not match a user who may sign in" : headline(err.status);
    showLoginProblem(words, err);
    return;
  }
  showApp();
}

/** A sign-in problem, in the sign-in card. */
function showLoginProblem(words, err) {
  const box = $("problem");
  const p = (err && err.problem) || {};
  box.replaceChildren(el("strong", {}, words), p.detail ? el("p", {}, p.detail) : null);
  box.hidden = false;
}

/**
 * A session the browser still holds from before (its cookie): signed in
 * without asking again. False when there is none.
 */
async function resumeSession() {
  if (!localStorage.getItem(SESSION_HINT_KEY)) return false;
  try {
    const { body } = await api("GET", "/api/session");
    state.csrf = body.csrf_token;
    return true;
  } catch (err) {
    localStorage.removeItem(SESSION_HINT_KEY);
    return false;
  }
}

/**
 * Ends the session: forgets the token and loads the page afresh, without
 * the lead's address. The lists, the lead, every answer held in memory and
 * every request still under way go with the old page; clearing them one by
 * one would miss the next thing added to `state`.
 */
async function signOut(message) {
  // A cookie session ends on the server too, so the cookie opens nothing.
  if (!token() && state.csrf) await api("DELETE", "/api/session").catch(() => {});
  localStorage.removeItem(SESSION_HINT_KEY);
  sessionStorage.removeItem(TOKEN_KEY);
  if (message) sessionStorage.setItem(NOTICE_KEY, message);
  location.replace(location.pathname);
}

/** The tabs the signed-in role may read. */
function tabs() {
  return (state.me && TABS_BY_ROLE[state.me.role]) || [];
}

function mayRead(tab) {
  return tabs().includes(tab);
}

/** Who is signed in decides what is shown: only what the role may read. */
async function showApp() {
  state.token = token();
  try {
    state.me = (await api("GET", "/api/me")).body;
  } catch (err) {
    showProblem(err);
    return;
  }
  clearProblem();
  $("login").hidden = true;
  $("session").hidden = false;
  const shown = tabs();
  for (const b of document.querySelectorAll("#tabs button")) b.hidden = !shown.includes(b.dataset.tab);
  $("tabs").hidden = shown.length === 0;
  if (shown.length === 0) {
    $("whoami").textContent = `${state.me.name} (${state.me.role})`;
    $("no-views-role").textContent = state.me.role;
    $("no-views").hidden = false;
    return;
  }
  filtersFromAddress();
  $("deal-owner").closest("label").hidden = state.me.role !== "sales";
  // A record's address opens its view; otherwise the role's first view.
  // Read before a view is shown: showing one writes its own address.
  const named = addressed();
  showTab(named && shown.includes(KINDS[named.kind].tab) ? KINDS[named.kind].tab : shown[0]);
  // Names arrive after the first list: show them once known, without
  // taking the user back from a tab they have moved to meanwhile.
  await loadPeople();
  // In the same turn as the name in the header: once it shows, the list
  // and the lead show names too.
  renderLeadRows();
  fillOwnerChoices($("bulk-owner"), "nobody");
  if (state.lead) renderLead();
  if (!$("my-day-tab").hidden) loadMyDay();
  $("whoami").textContent = `${state.me.name} (${state.me.role})`;
  if (named) go(named.kind, named.id, { focus: false });
}

/** The names behind principal ids (every role with a tab may list them). */
async function loadPeople() {
  try {
    const { body } = await api("GET", "/api/principals");
    state.people = new Map(labelPeople(body).map((p) => [p.id, p]));
  } catch (err) {
    showProblem(err);
  }
}

/** The record the page's address names (`#lead/7`, `#deal/3`), or null. */
function addressed() {
  const m = /^#(lead|contact|company|deal)\/(\d+)$/.exec(location.hash);
  return m ? { kind: m[1], id: Number(m[2]) } : null;
}

function openFromAddress() {
  const named = addressed();
  if (named) go(named.kind, named.id, { focus: false });
}

/** Opens a record where its kind is shown (a lead link on Tasks opens Leads). */
function go(kind, id, { focus } = { focus: true }) {
  const tab = KINDS[kind].tab;
  if (!mayRead(tab)) return;
  if ($(`${tab}-tab`).hidden) showTab(tab);
  if (kind === "lead") openLead(id, { focus });
  else openRecord(kind, id, { focus });
}

/** The address of what a tab shows open, so a reload opens it again. */
function addressOf(name) {
  if (name === "leads" && state.lead) return `#lead/${state.lead.id}`;
  const r = state.record;
  if (r && KINDS[r.kind].tab === name) return `#${r.kind}/${r.body.id}`;
  return "";
}

function showTab(name) {
  if (!mayRead(name)) return;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const section of document.querySelectorAll("main > section[id$='-tab']")) section.hidden = section.id !== `${name}-tab`;
  history.replaceState(null, "", `${location.pathname}${location.search}${addressOf(name)}`);
  clearProblem();
  if (name === "leads") loadLeads(false);
  else if (name === "contacts") loadRecords("contact", false);
  else if (name === "companies") loadRecords("company", false);
  else if (name === "deals") loadBoard();
  else if (name === "tasks") loadTasks(false);
  else if (name === "reports") loadSpeedToLead();
  else if (name === "my-day") loadMyDay();
  else loadOps();
}

// ---------------------------------------------------------------- leads

/** The list's filters and order live in the page's address (`?status=…`): a reload or a link keeps them. */
const FILTERS = { status: "filter-status", q: "filter-q", owner: "filter-owner", sort: "filter-sort" };

function filtersFromAddress() {
  const q = new URLSearchParams(location.search);
  for (const [key, id] of Object.entries(FILTERS)) if (q.has(key)) $(id).value = q.get(key);
  const order = /^(\w+):(asc|desc)$/.exec(q.get("order") || "");
  state.sort = order ? { key: order[1], dir: order[2] } : null;
}

function filtersToAddress() {
  const q = new URLSearchParams();
  for (const [key, id] of Object.entries(FILTERS)) {
    const value = $(id).value.trim();
    if (value && !(key === "sort" && value === "updated_at")) q.set(key, value);
  }
  if (state.sort) q.set("order", `${state.sort.key}:${state.sort.dir}`);
  const search = q.toString();
  history.replaceState(null, "", `${location.pathname}${search ? `?${search}` : ""}${location.hash}`);
}

function leadQuery() {
  const q = new URLSearchParams({ limit: "50" });
  for (const [key, id] of Object.entries(FILTERS)) {
    const value = $(id).value.trim();
    if (value) q.set(key, value);
  }
  if (state.leadsCursor) q.set("cursor", state.leadsCursor);
  return q;
}

async function loadLeads(more) {
  if (!more) state.leadsCursor = null;
  try {
    const { body } = await api("GET", `/api/leads?${leadQuery()}`);
    state.leads = more ? state.leads.concat(body.data) : body.data;
    for (const lead of body.data) remember("lead", lead);
    const shown = new Set(state.leads.map((l) => l.id));
    for (const id of state.picked) if (!shown.has(id)) state.picked.delete(id);
    renderLeadRows();
    state.leadsCursor = body.next_cursor;
    $("more-leads").hidden = !body.next_cursor;
  } catch (err) {
    showProblem(err, $("lead-list"));
  }
}

/** A lead's value for sorting by a column. */
function sortValue(lead, key) {
  if (key === "name") return (lead.name || lead.email || "").toLowerCase();
  if (key === "owner") return lead.owner_id === null || lead.owner_id === undefined ? "" : person(lead.owner_id).toLowerCase();
  return String(lead[key] || "").toLowerCase();
}

/** The loaded rows in the chosen column order (the server's order otherwise). */
function sortedLeads() {
  if (!state.sort) return state.leads;
  const { key, dir } = state.sort;
  const sign = dir === "asc" ? 1 : -1;
  return [...state.leads].sort((a, b) => sign * sortValue(a, key).localeCompare(sortValue(b, key)) || b.id - a.id);
}

function renderLeadRows() {
  const tbody = $("lead-table").querySelector("tbody");
  tbody.replaceChildren(...sortedLeads().map(leadRow));
  $("lead-empty").hidden = state.leads.length > 0;
  for (const th of $("lead-table").querySelectorAll("th[data-col]")) {
    const on = state.sort && state.sort.key === th.dataset.col;
    th.setAttribute("aria-sort", on ? (state.sort.dir === "asc" ? "ascending" : "descending") : "none");
  }
  renderBulk();
}

function sortBy(key) {
  const same = state.sort && state.sort.key === key;
  state.sort = { key, dir: same && state.sort.dir === "asc" ? "desc" : "asc" };
  if (!same && key === "updated_at") state.sort.dir = "desc";
  filtersToAddress();
  renderLeadRows();
}

function leadLabel(lead) {
  return lead.name || lead.email || `Lead ${lead.id}`;
}

function leadRow(lead) {
  const pick = el("input", {
    type: "checkbox",
    class: "pick",
    "aria-label": `Select ${leadLabel(lead)}`,
    onchange: (e) => {
      if (e.target.checked) state.picked.add(lead.id);
      else state.picked.delete(lead.id);
      renderBulk();
    },
  });
  pick.checked = state.picked.has(lead.id);
  // By keyboard or mouse, the open lead takes the focus (its heading).
  const open = (e) => {
    e.preventDefault();
    openLead(lead.id, { focus: true });
  };
  const row = el(
    "tr",
    { dataset: { leadId: String(lead.id) } },
    el("td", { class: "c-pick" }, pick),
    el(
      "td",
      { class: "name", title: [lead.name, lead.email].filter(Boolean).join(" · ") },
      el("a", { href: `#lead/${lead.id}`, onclick: open }, leadLabel(lead)),
      lead.name && lead.email ? el("span", { class: "sub" }, lead.email) : null,
    ),
    el("td", { class: "wide", title: lead.company || "" }, lead.company || ""),
    el("td", { class: "wide" }, lead.source),
    el("td", {}, el("span", { class: `status status-${lead.status}` }, lead.status)),
    el("td", { class: "owner" }, person(lead.owner_id)),
    el("td", { class: "wide", title: when(lead.updated_at) }, shortWhen(lead.updated_at)),
  );
  // A click anywhere on the row opens the lead; the box and the link do their own thing.
  row.addEventListener("click", (e) => {
    if (!e.target.closest("input, a, button")) openLead(lead.id);
  });
  if (state.lead && state.lead.id === lead.id) row.classList.add("selected");
  return row;
}

/** A time as "14:05" today, "3 Dec" this year, "3 Dec 2025" before. */
function shortWhen(value) {
  const d = new Date(value);
  if (isNaN(d)) return "";
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const opts = { day: "numeric", month: "short" };
  if (d.getFullYear() !== now.getFullYear()) opts.year = "numeric";
  return d.toLocaleDateString([], opts);
}

// ---------------------------------------------------------------- bulk actions

function renderBulk() {
  const n = state.picked.size;
  $("bulk").hidden = n === 0;
  $("bulk-count").textContent = `${plural(n, "lead")} selected`;
  const all = $("pick-all");
  all.checked = n > 0 && n === state.leads.length;
  all.indeterminate = n > 0 && n < state.leads.length;
}

/** An owner picker: active sales principals by label, and `none` (no owner). */
function fillOwnerChoices(select, noneLabel) {
  const chosen = select.value;
  select.replaceChildren(
    el("option", { value: "" }, "choose…"),
    ...owners().map((p) => el("option", { value: String(p.id) }, p.label)),
    el("option", { value: "none" }, noneLabel),
  );
  select.value = chosen;
}

/**
 * Runs one write per selected lead, each with its own Idempotency-Key and
 * the version shown as If-Match; says how many worked and why the rest did not.
 */
async function bulk(verb, write) {
  clearProblem();
  const leads = state.leads.filter((l) => state.picked.has(l.id));
  for (const b of $("bulk").querySelectorAll("button")) b.disabled = true;
  const failed = [];
  for (const lead of leads) {
    try {
      await write(lead, { "Idempotency-Key": uuid(), "If-Match": `"${lead.version}"` });
    } catch (err) {
      if (err.status === 401) return showProblem(err);
      const p = err.problem || {};
      failed.push(`${leadLabel(lead)}: ${headline(err.status).toLowerCase()}${p.detail ? ` (${p.detail})` : ""}`);
    }
  }
  for (const b of $("bulk").querySelectorAll("button")) b.disabled = false;
  const done = leads.length - failed.length;
  const result = $("bulk-result");
  result.replaceChildren(
    `${verb} ${plural(done, "lead")}.`,
    failed.length ? el("span", { class: "alert" }, ` ⚠ ${plural(failed.length, "lead")} not: `, failed.join("; ")) : "",
  );
  result.hidden = false;
  state.picked.clear();
  await loadLeads(false);
  if (state.lead && leads.some((l) => l.id === state.lead.id)) await openLead(state.lead.id);
}

function bulkAssign() {
  const choice = $("bulk-owner").value;
  if (!choice) return $("bulk-owner").focus();
  const owner = choice === "none" ? null : Number(choice);
  return bulk("Assigned", (lead, headers) => api("PATCH", `/api/leads/${lead.id}`, { body: { owner_id: owner }, headers }));
}

function bulkMove() {
  const to = $("bulk-status").value;
  const reason = $("bulk-reason").value.trim();
  const body = reason ? { to, reason } : { to };
  return bulk("Moved", (lead, headers) => api("POST", `/api/leads/${lead.id}/transitions`, { body, headers }));
}

async function openLead(id, { keepProblem, focus } = {}) {
  if (!keepProblem) clearProblem();
  try {
    // A merged lead answers 308: the browser follows it to the survivor.
    const { body, headers } = await api("GET", `/api/leads/${id}`);
    state.lead = body;
    remember("lead", body);
    state.etag = headers.get("ETag");
    state.conversion = null;
    // The lead is addressable (#lead/ID): reload and duplicate links land here.
    if (location.hash !== `#lead/${body.id}`) history.replaceState(null, "", `${location.pathname}${location.search}#lead/${body.id}`);
    renderLead();
    if (focus) $("lead-title").focus();
    await Promise.all([
      loadTimeline(),
      loadLeadTasks(),
      loadDuplicateNames(),
      body.status === "converted" ? loadConversion() : null,
    ]);
  } catch (err) {
    showProblem(err, $("lead-detail").hidden ? $("lead-list") : $("lead-detail"));
  }
}

function closeLead() {
  state.lead = null;
  state.etag = null;
  $("lead-detail").hidden = true;
  $("lead-columns").classList.remove("with-detail");
  history.replaceState(null, "", `${location.pathname}${location.search}`);
  for (const row of $("lead-table").querySelectorAll("tbody tr.selected")) row.classList.remove("selected");
}

/** The duplicates' own leads, so they show by name (each read once per lead shown). */
async function loadDuplicateNames() {
  const id = state.lead.id;
  const wanted = (state.lead.possible_duplicates || []).map((d) => d.lead_id).filter((d) => !state.duplicateLeads.has(d));
  const read = await Promise.all(wanted.slice(0, 20).map((d) => api("GET", `/api/leads/${d}`).then((r) => r.body, () => null)));
  for (const lead of read) if (lead) state.duplicateLeads.set(lead.id, lead);
  if (state.lead && state.lead.id === id && read.some(Boolean)) renderDuplicates();
}

function renderDuplicates() {
  const lead = state.lead;
  const duplicates = Array.isArray(lead.possible_duplicates) ? lead.possible_duplicates : [];
  $("duplicates").hidden = duplicates.length === 0;
  $("duplicate-links").replaceChildren(
    ...duplicates.map((d) => {
      const other = state.duplicateLeads.get(d.lead_id);
      const name = other ? leadLabel(other) : `Lead #${d.lead_id}`;
      return el(
        "li",
        {},
        el("a", { href: `#lead/${d.lead_id}`, dataset: { leadId: String(d.lead_id) } }, name),
        el("span", { class: "muted" }, other ? ` from ${other.source}` : "", `, same ${d.reason} `),
        d.merge
          ? el(
              "button",
              {
                type: "button",
                class: "small merge",
                dataset: { mergeLead: String(d.lead_id) },
                "aria-label": `Merge ${name} into this lead`,
                onclick: (e) => mergeDuplicate(e, d),
              },
              "Merge",
            )
          : null,
      );
    }),
  );
}

/** Speed to lead, as a clock: how long until the answer is due, or how late it is. */
function renderClock(lead) {
  const c = lead.speed_to_lead || {};
  const box = $("lead-clock");
  let text = null;
  let late = false;
  const since = (t) => duration((Date.now() - new Date(t)) / 1000);
  if (c.first_response_at) {
    const from = c.assigned_at || lead.created_at;
    text = `Answered ${duration((new Date(c.first_response_at) - new Date(from)) / 1000)} after ${c.assigned_at ? "it got its owner" : "it arrived"}`;
  } else if (c.response_due_at) {
    const left = (new Date(c.response_due_at) - Date.now()) / 1000;
    late = c.overdue || left < 0;
    text = late ? `Answer overdue by ${duration(-left)}` : `Answer due in ${duration(left)} (${when(c.response_due_at)})`;
  } else if (lead.owner_id === null && !["converted", "lost"].includes(lead.status)) {
    text = `Waiting for an owner for ${since(lead.created_at)}`;
  }
  box.hidden = !text;
  box.className = late ? "clock late" : "clock";
  box.textContent = late ? `⚠ ${text}` : text || "";
}

/** The sender's payload: its fields as a table, nested values as JSON. */
function payloadView(payload) {
  const entries = payload && typeof payload === "object" ? Object.entries(payload) : [];
  if (!entries.length) return el("p", { class: "muted" }, "Nothing beyond the fields above.");
  return el(
    "table",
    { class: "payload" },
    el("tbody", {}, entries.map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, typeof v === "object" && v !== null ? el("pre", {}, JSON.stringify(v, null, 2)) : cell(v))))),
  );
}

function renderLead() {
  const lead = state.lead;
  $("lead-detail").hidden = false;
  $("lead-columns").classList.add("with-detail");
  $("lead-title").textContent = leadLabel(lead);
  renderClock(lead);
  const fields = [
    ["email", lead.email],
    ["phone", lead.phone],
    ["company", lead.company],
    ["source", `${lead.source} (their reference ${lead.source_ref})`],
    ["received", when(lead.created_at)],
    ["changed", when(lead.updated_at)],
  ];
  $("lead-fields").replaceChildren(
    ...fields.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v === null || v === undefined ? "—" : v)]),
  );
  // Any sales principal may own a lead: the rep takes it, or anyone assigns it.
  const mine = state.me && state.me.role === "sales" && lead.owner_id !== state.me.id;
  const picker = el("select", { id: "assign-owner", "aria-label": "New owner" });
  const assign = el("form", { class: "assign", onsubmit: assignTo }, picker, el("button", { type: "submit", class: "small", id: "assign" }, "Assign"));
  fillOwnerChoices(picker, "nobody");
  $("lead-fields").append(
    el("dt", {}, "owner"),
    el(
      "dd",
      {},
      el("span", { id: "lead-owner" }, person(lead.owner_id)),
      mine ? el("button", { type: "button", id: "assign-me", class: "small", onclick: assignToMe }, "Assign to me") : null,
      assign,
    ),
  );
  renderDuplicates();
  $("lead-payload").replaceChildren(payloadView(lead.payload));
  $("convert-form").hidden = lead.status !== "qualified";
  renderConversion();
  const status = $("lead-status");
  status.textContent = lead.status;
  status.className = `status status-${lead.status}`;
  // The version matters to those who read the API; sales sees none of it.
  $("lead-version").textContent = state.me && state.me.role !== "sales" ? `version ${lead.version}` : "";
  const next = NEXT_STATUS[lead.status] || [];
  $("transition-reason").hidden = next.length === 0;
  document.querySelector("label[for=transition-reason]").hidden = next.length === 0;
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

/**
 * A write to the shown lead failed. A stale `412` (someone changed the lead
 * meanwhile) re-reads it, so what is shown is what is stored, and says so.
 */
async function leadWriteFailed(err) {
  if (err.status === 412 && state.lead) {
    await openLead(state.lead.id, { keepProblem: true });
    await loadLeads(false);
    showProblem(err, $("lead-detail"), "The lead now shows what is stored; look at it and try again.");
  } else {
    showProblem(err, $("lead-detail"));
    if (state.lead) renderLead();
  }
}

async function transition(to) {
  clearProblem();
  const lead = state.lead;
  const reason = $("transition-reason").value.trim();
  const body = { to };
  if (reason) body.reason = reason;
  for (const b of $("transitions").querySelectorAll("button")) b.disabled = true;
  try {
    const response = await api("POST", `/api/leads/${lead.id}/transitions`, { body, headers: writeHeaders() });
    $("transition-reason").value = "";
    await leadChanged(response);
  } catch (err) {
    await leadWriteFailed(err);
  }
}

/** After a write that returned the lead (or `{lead, …}`): show it everywhere. */
async function leadChanged(response, lead) {
  state.lead = Object.assign({}, state.lead, lead || response.body);
  state.etag = response.headers.get("ETag");
  renderLead();
  await loadTimeline();
  state.leads = state.leads.map((l) => (l.id === state.lead.id ? state.lead : l));
  const row = $("lead-table").querySelector(`tbody tr[data-lead-id="${state.lead.id}"]`);
  if (row) row.replaceWith(leadRow(state.lead));
}

/** Merges a duplicate into the shown lead, as the hint offers it. */
async function mergeDuplicate(e, duplicate) {
  clearProblem();
  e.target.disabled = true;
  try {
    const response = await api(duplicate.merge.method, duplicate.merge.href, { body: duplicate.merge.body, headers: writeHeaders() });
    state.leads = state.leads.filter((l) => l.id !== duplicate.lead_id);
    $("lead-table").querySelector(`tbody tr[data-lead-id="${duplicate.lead_id}"]`)?.remove();
    await openLead(response.body.lead.id);
  } catch (err) {
    await leadWriteFailed(err);
  }
}

/** Undoes a merge from the survivor's timeline: the merged leads come back. */
async function undoMerge(e, mergeId) {
  clearProblem();
  e.target.disabled = true;
  try {
    await api("POST", `/api/merges/${mergeId}/undo`, { body: {}, headers: { "Idempotency-Key": uuid() } });
    await loadLeads();
    await openLead(state.lead.id);
  } catch (err) {
    showProblem(err, $("timeline"));
    e.target.disabled = false;
  }
}

/** A write to the shown lead with a fresh Idempotency-Key and its If-Match. */
function writeHeaders() {
  const headers = { "Idempotency-Key": uuid() };
  if (state.etag) headers["If-Match"] = state.etag;
  return headers;
}

async function assignOwner(owner, button) {
  clearProblem();
  button.disabled = true;
  try {
    const response = await api("PATCH", `/api/leads/${state.lead.id}`, {
      body: { owner_id: owner },
      headers: writeHeaders(),
    });
    await leadChanged(response);
  } catch (err) {
    button.disabled = false;
    await leadWriteFailed(err);
  }
}

function assignToMe(e) {
  return assignOwner(state.me.id, e.target);
}

function assignTo(e) {
  e.preventDefault();
  const choice = $("assign-owner").value;
  if (!choice) return $("assign-owner").focus();
  return assignOwner(choice === "none" ? null : Number(choice), $("assign"));
}

async function addNote(text) {
  clearProblem();
  $("add-note").disabled = true;
  try {
    // A note has no natural key: the Idempotency-Key makes a retry safe.
    await api("POST", `/api/leads/${state.lead.id}/notes`, {
      body: { text },
      headers: { "Idempotency-Key": uuid() },
    });
    $("note-text").value = "";
    await loadTimeline();
  } catch (err) {
    showProblem(err, $("note-form"));
  } finally {
    $("add-note").disabled = false;
  }
}

/** The convert form's deal, or undefined when no deal name is given. */
function dealInput() {
  const name = $("deal-name").value.trim();
  if (!name) return undefined;
  const deal = { name };
  const amount = $("deal-amount").value.trim();
  // Minor units, never a float on the wire.
  if (amount) deal.amount_cents = Math.round(Number(amount) * 100);
  const currency = $("deal-currency").value.trim();
  if (currency) deal.currency = currency.toUpperCase();
  return deal;
}

async function convertLead() {
  clearProblem();
  $("convert").disabled = true;
  try {
    const deal = dealInput();
    const response = await api("POST", `/api/leads/${state.lead.id}/convert`, {
      body: deal ? { deal } : {},
      headers: writeHeaders(),
    });
    const c = response.body;
    state.conversion = { contact: c.contact, company: c.company, deal: c.deal };
    for (const id of ["deal-name", "deal-amount", "deal-currency"]) $(id).value = "";
    await leadChanged(response, c.lead);
  } catch (err) {
    await leadWriteFailed(err);
  } finally {
    $("convert").disabled = false;
  }
}

/** What a converted lead became, read back from the CRM. */
async function loadConversion() {
  const id = state.lead.id;
  try {
    const ids = (await api("GET", `/api/leads/${id}/conversion`)).body;
    const get = (path) => api("GET", path).then((r) => r.body, () => null);
    const [contact, company, deal] = await Promise.all([
      get(`/api/contacts/${ids.contact_id}`),
      ids.company_id ? get(`/api/companies/${ids.company_id}`) : null,
      ids.deal_id ? get(`/api/deals/${ids.deal_id}`) : null,
    ]);
    if (!state.lead || state.lead.id !== id) return;
    state.conversion = {
      contact: contact || { id: ids.contact_id },
      company: company || (ids.company_id ? { id: ids.company_id } : null),
      deal: deal || (ids.deal_id ? { id: ids.deal_id } : null),
    };
    renderConversion();
  } catch (err) {
    if (err.status !== 404) showProblem(err, $("lead-detail"));
  }
}

function money(cents, currency) {
  return `${(cents / 100).toLocaleString("en", { minimumFractionDigits: 2 })} ${currency || ""}`.trim();
}

/** What a lead became, each a link to its contact, company or deal by name. */
function renderConversion() {
  const c = state.conversion;
  $("conversion").hidden = !c;
  if (!c) return;
  for (const [kind, record] of [["contact", c.contact], ["company", c.company], ["deal", c.deal]]) {
    if (record && record.version !== undefined) remember(kind, record);
  }
  const link = (kind, record, ...more) =>
    record && el("span", {}, recordLink(kind, record.id), more.filter(Boolean).map((m) => ` · ${m}`).join(""));
  const d = c.deal;
  const rows = [
    ["contact", link("contact", c.contact, c.contact && c.contact.email)],
    ["company", link("company", c.company, c.company && c.company.domain)],
    ["deal", link("deal", d, d && d.amount_cents !== undefined ? money(d.amount_cents, d.currency) : null, d && d.stage)],
  ];
  $("conversion-fields").replaceChildren(
    ...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { dataset: { field: k } }, v || "—")]),
  );
}

/** What kind of entry a timeline line is, in words. */
const KIND_WORDS = {
  ingest: "Received",
  status_changed: "Status",
  note: "Note",
  call: "Call",
  assigned: "Owner",
  duplicate_hint: "Duplicate?",
  merged: "Merge",
  merged_into: "Merged",
  unmerged: "Merge undone",
  task_created: "Task",
  task_completed: "Task done",
  task_reopened: "Task reopened",
  task_updated: "Task changed",
  converted: "Converted",
};

function describeActivity(a) {
  const d = a.detail || {};
  switch (a.kind) {
    case "status_changed":
      return `status ${d.from} → ${d.to}${d.reason ? ` (${d.reason})` : ""}`;
    case "ingest":
      return el("span", {}, `${a.origin || "intake"}: ${a.outcome || ""}`, d.via_lead_id ? [" (key of merged ", timelineLead(d.via_lead_id), ")"] : null);
    case "merged":
      return el("span", {}, "merged ", leadList(d.merged_ids), " into this one");
    case "merged_into":
      return el("span", {}, "merged into ", recordLink("lead", d.survivor_id));
    case "unmerged":
      return d.survivor_id
        ? el("span", {}, "merge into ", recordLink("lead", d.survivor_id), " undone")
        : el("span", {}, "merge of ", leadList(d.merged_ids), " undone");
    case "note":
      return `note: ${d.text || ""}`;
    case "assigned":
      return `owner → ${d.to === null || d.to === undefined ? "nobody" : person(d.to)}${d.by ? ` (${d.by})` : ""}`;
    case "duplicate_hint":
      return el("span", {}, "possible duplicate of ", recordLink("lead", d.other_lead_id), ` (same ${d.reason})`);
    case "task_created":
      return `task for ${person(d.owner_id)}: ${d.title || ""} (due ${when(d.due_at)})`;
    case "task_completed":
      return `task done: ${d.title || ""}`;
    case "task_reopened":
      return `task reopened: ${d.title || ""}`;
    case "task_updated":
      return `task #${d.task_id} changed: ${(d.fields || []).join(", ")}`;
    case "converted":
      return el(
        "span",
        {},
        "converted into contact ",
        recordLink("contact", d.contact_id),
        d.company_id ? [", company ", recordLink("company", d.company_id)] : null,
        d.deal_id ? [", deal ", recordLink("deal", d.deal_id)] : null,
      );
    default:
      return a.detail ? Object.entries(a.detail).map(([k, v]) => `${k.replace(/_/g, " ")}: ${cell(v)}`).join(", ") : "";
  }
}

/**
 * A lead a timeline entry is about: one merged into this lead by its name
 * and source (it has no page of its own), any other as a link by name.
 */
function timelineLead(id) {
  const merged = (state.lead.merged_leads || []).find((m) => m.id === id);
  if (!merged) return recordLink("lead", id);
  return el("span", { class: "merged-lead", dataset: { leadId: String(id) } }, `${leadLabel(merged)} from ${merged.source}`);
}

/** Leads by name, comma-separated. */
function leadList(ids) {
  return (ids || []).flatMap((id, i) => (i === 0 ? [timelineLead(id)] : [", ", timelineLead(id)]));
}

async function loadTimeline() {
  const id = state.lead.id;
  try {
    const { body } = await api("GET", `/api/leads/${id}/activities?limit=50`);
    // What a converted lead became, and the other leads entries are about,
    // show by name.
    const converted = body.data.filter((a) => a.kind === "converted" && a.detail).map((a) => a.detail);
    const merged = new Set((state.lead.merged_leads || []).map((m) => m.id));
    const leads = body.data
      .filter((a) => a.detail)
      .flatMap((a) => [a.detail.survivor_id, a.detail.other_lead_id, a.detail.via_lead_id, ...(a.detail.merged_ids || [])])
      .filter((lead) => lead !== undefined && lead !== null && lead !== id && !merged.has(lead));
    await Promise.all([
      learnNames("lead", leads),
      learnNames("contact", converted.map((d) => d.contact_id)),
      learnNames("company", converted.map((d) => d.company_id)),
      learnNames("deal", converted.map((d) => d.deal_id)),
    ]);
    if (!state.lead || state.lead.id !== id) return;
    // A merge undone already offers no Undo.
    const undone = new Set(body.data.filter((a) => a.kind === "unmerged" && a.detail).map((a) => a.detail.merge_id));
    $("timeline").replaceChildren(
      ...body.data.map((a) =>
        el(
          "li",
          { dataset: { kind: a.kind } },
          el("time", {}, when(a.created_at)),
          " ",
          el("span", { class: "kind" }, KIND_WORDS[a.kind] || a.kind.replace(/_/g, " ")),
          " ",
          describeActivity(a),
          a.author_id ? el("span", { class: "muted" }, ` by ${person(a.author_id)}`) : null,
          a.kind === "merged" && a.detail && a.detail.merge_id && !undone.has(a.detail.merge_id)
            ? el("button", { type: "button", class: "small undo-merge", onclick: (e) => undoMerge(e, a.detail.merge_id) }, "Undo")
            : null,
        ),
      ),
    );
  } catch (err) {
    showProblem(err, $("timeline"));
  }
}

// ---------------------------------------------------------------- names

/** Keeps what a person calls a record, for links to it elsewhere. */
function remember(kind, record, id) {
  state.names.set(`${kind}/${id === undefined ? record.id : id}`, KINDS[kind].label(record));
}

/** A record by name (`lead #7` while its name is unknown or unreadable). */
function nameOf(kind, id) {
  return state.names.get(`${kind}/${id}`) || `${kind} #${id}`;
}

/**
 * Reads the names of records not known yet, a few at a time; each is read
 * once per page. A record the caller may not read keeps its `#id`.
 */
async function learnNames(kind, ids) {
  const wanted = [...new Set(ids.filter((id) => id !== null && id !== undefined))].filter((id) => !state.names.has(`${kind}/${id}`));
  for (let i = 0; i < wanted.length; i += 6) {
    await Promise.all(
      wanted.slice(i, i + 6).map((id) =>
        api("GET", `${KINDS[kind].path}/${id}`).then(
          // A merged lead's address answers with its survivor: not its name.
          (r) => (r.body.id === id ? remember(kind, r.body, id) : state.names.set(`${kind}/${id}`, null)),
          () => state.names.set(`${kind}/${id}`, null),
        ),
      ),
    );
  }
}

/** A link to a record by name; it opens the record where its kind is shown. */
function recordLink(kind, id) {
  if (id === null || id === undefined) return "—";
  const open = (e) => {
    e.preventDefault();
    go(kind, id);
  };
  return el("a", { href: `#${kind}/${id}`, dataset: { [`${kind}Id`]: String(id) }, onclick: open }, nameOf(kind, id));
}

// ---------------------------------------------------------------- contacts, companies, deals

/** Each kind's list: its table's columns, the names its rows need, its filters. */
const LISTS = {
  contact: {
    plural: "contacts",
    query: () => ({ q: $("contact-q").value.trim() }),
    needs: (rows) => learnNames("company", rows.map((c) => c.company_id)),
    cells: (c) => [
      el("td", { class: "name", title: [c.name, c.email].filter(Boolean).join(" · ") }, recordLink("contact", c.id), c.name && c.email ? el("span", { class: "sub" }, c.email) : null),
      el("td", { class: "wide" }, c.phone || ""),
      el("td", {}, c.company_id ? recordLink("company", c.company_id) : ""),
      el("td", { class: "wide", title: when(c.updated_at) }, shortWhen(c.updated_at)),
    ],
  },
  company: {
    plural: "companies",
    query: () => ({ q: $("company-q").value.trim() }),
    needs: async () => {},
    cells: (c) => [
      el("td", { class: "name" }, recordLink("company", c.id)),
      el("td", {}, c.domain || ""),
      el("td", { class: "wide", title: when(c.updated_at) }, shortWhen(c.updated_at)),
    ],
  },
};

async function loadRecords(kind, more) {
  const list = LISTS[kind];
  if (!more) state.recordCursors[kind] = null;
  const q = new URLSearchParams({ limit: "50" });
  for (const [k, v] of Object.entries(list.query())) if (v) q.set(k, v);
  if (state.recordCursors[kind]) q.set("cursor", state.recordCursors[kind]);
  try {
    const { body } = await api("GET", `${KINDS[kind].path}?${q}`);
    for (const r of body.data) remember(kind, r);
    await list.needs(body.data);
    state.records[kind] = more ? state.records[kind].concat(body.data) : body.data;
    state.recordCursors[kind] = body.next_cursor;
    renderRecordRows(kind);
    $(`more-${list.plural}`).hidden = !body.next_cursor;
  } catch (err) {
    showProblem(err, $(`${kind}-list`));
  }
}

function renderRecordRows(kind) {
  const rows = state.records[kind].map((r) => {
    const row = el("tr", { dataset: { id: String(r.id) } }, LISTS[kind].cells(r));
    // A click anywhere on the row opens it; its links do their own thing.
    row.addEventListener("click", (e) => {
      if (!e.target.closest("a, button")) openRecord(kind, r.id, { focus: true });
    });
    if (state.record && state.record.kind === kind && state.record.body.id === r.id) row.classList.add("selected");
    return row;
  });
  $(`${kind}-table`).querySelector("tbody").replaceChildren(...rows);
  $(`${kind}-empty`).hidden = rows.length > 0;
}

/** Opens a contact, company or deal beside its list; its address is `#kind/ID`. */
async function openRecord(kind, id, { keepProblem, focus } = {}) {
  if (!keepProblem) clearProblem();
  const detail = $(`${kind}-detail`);
  try {
    const { body, headers } = await api("GET", `${KINDS[kind].path}/${id}`);
    remember(kind, body);
    state.record = { kind, body, etag: headers.get("ETag") };
    if (location.hash !== `#${kind}/${body.id}`) history.replaceState(null, "", `${location.pathname}${location.search}#${kind}/${body.id}`);
    await DETAILS[kind](body);
    detail.hidden = false;
    $(`${kind}-columns`).classList.add("with-detail");
    $(`${kind}-title`).textContent = KINDS[kind].label(body);
    if (focus) $(`${kind}-title`).focus();
    for (const row of document.querySelectorAll(`#${kind}-table tbody tr, #deal-board li[data-deal-id]`)) {
      row.classList.toggle("selected", row.dataset.id === String(body.id) || row.dataset.dealId === String(body.id));
    }
    await loadRecordTimeline(kind, body.id);
  } catch (err) {
    showProblem(err, detail.hidden ? $(`${kind}-list`) : detail);
  }
}

function closeRecord(kind) {
  state.record = null;
  $(`${kind}-detail`).hidden = true;
  $(`${kind}-columns`).classList.remove("with-detail");
  history.replaceState(null, "", `${location.pathname}${location.search}`);
  for (const row of document.querySelectorAll(`#${kind}-table .selected, #deal-board .selected`)) row.classList.remove("selected");
}

/** A definition list's rows: [term, value] pairs (a missing value is "—"). */
function facts(target, rows) {
  $(target).replaceChildren(
    ...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { dataset: { field: k } }, v === null || v === undefined || v === "" ? "—" : v)]),
  );
}

/** The version matters to those who read the API; sales sees none of it. */
function versionFact(record) {
  return state.me && state.me.role !== "sales" ? [["version", String(record.version)]] : [];
}

/** A related list (a company's contacts, a contact's deals): links by name. */
async function relatedList(target, kind, path, describe) {
  try {
    const rows = (await api("GET", path)).body.data;
    for (const r of rows) remember(kind, r);
    $(target).replaceChildren(...rows.map((r) => el("li", {}, recordLink(kind, r.id), describe ? el("span", { class: "muted" }, ` ${describe(r)}`) : null)));
    if (!rows.length) $(target).replaceChildren(el("li", { class: "muted" }, "none"));
  } catch (err) {
    $(target).replaceChildren(el("li", {}, problemView(err)));
  }
}

const dealSummary = (d) => `· ${d.stage} · ${money(d.amount_cents, d.currency)}`;

/** Each kind's detail: its fields and the records related to it. */
const DETAILS = {
  contact: async (c) => {
    await learnNames("company", [c.company_id]);
    facts("contact-fields", [
      ["email", c.email],
      ["phone", c.phone],
      ["company", c.company_id ? recordLink("company", c.company_id) : null],
      ["created", when(c.created_at)],
      ["changed", when(c.updated_at)],
      ...versionFact(c),
    ]);
    await relatedList("contact-deals", "deal", `/api/deals?contact_id=${c.id}&limit=50`, dealSummary);
  },
  company: async (c) => {
    facts("company-fields", [
      ["name", c.name],
      ["domain", c.domain],
      ["created", when(c.created_at)],
      ["changed", when(c.updated_at)],
      ...versionFact(c),
    ]);
    await Promise.all([
      relatedList("company-contacts", "contact", `/api/contacts?company_id=${c.id}&limit=50`, (x) => (x.email ? `· ${x.email}` : "")),
      relatedList("company-deals", "deal", `/api/deals?company_id=${c.id}&limit=50`, dealSummary),
    ]);
  },
  deal: async (d) => {
    await Promise.all([learnNames("contact", [d.contact_id]), learnNames("company", [d.company_id]), learnNames("lead", [d.lead_id])]);
    facts("deal-fields", [
      ["amount", money(d.amount_cents, d.currency)],
      ["owner", person(d.owner_id)],
      ["contact", d.contact_id ? recordLink("contact", d.contact_id) : null],
      ["company", d.company_id ? recordLink("company", d.company_id) : null],
      ["from lead", d.lead_id ? recordLink("lead", d.lead_id) : null],
      ["created", when(d.created_at)],
      ["changed", when(d.updated_at)],
      ...(d.closed_at ? [["closed", when(d.closed_at)]] : []),
      ...(d.lost_reason ? [["why lost", d.lost_reason]] : []),
    ]);
    const stage = $("deal-stage");
    stage.textContent = d.stage;
    stage.className = `status stage-${d.stage}`;
    $("deal-version").textContent = state.me && state.me.role !== "sales" ? `version ${d.version}` : "";
    const next = NEXT_STAGE[d.stage] || [];
    $("deal-reason").hidden = next.length === 0;
    document.querySelector("label[for=deal-reason]").hidden = next.length === 0;
    $("deal-moves").replaceChildren(
      ...(next.length
        ? next.map((to) => el("button", { type: "button", dataset: { to }, onclick: () => moveDeal(d, to, $("deal-detail")) }, `→ ${to}`))
        : [el("span", { class: "muted" }, "closed: a won or lost deal stays so")]),
    );
  },
};

/** What a contact's, company's or deal's timeline entry is, in words. */
const CRM_KIND_WORDS = {
  created: "Created",
  updated: "Changed",
  stage_changed: "Stage",
  lead_converted: "From a lead",
  task_created: "Task",
  task_completed: "Task done",
  task_reopened: "Task reopened",
  task_updated: "Task changed",
};

function describeCrmActivity(kind, a) {
  const d = a.detail || {};
  switch (a.kind) {
    case "created":
      if (kind === "deal") return `deal opened at ${money(d.amount_cents || 0, d.currency)}${d.owner_id ? ` for ${person(d.owner_id)}` : ""}`;
      if (kind === "company") return `company created: ${[d.name, d.domain].filter(Boolean).join(", ")}`;
      return d.company_id ? el("span", {}, "contact created at ", recordLink("company", d.company_id)) : "contact created";
    case "updated":
      if (d.from && d.to) {
        const changed = ["name", "domain"].filter((k) => d.from[k] !== d.to[k]);
        return changed.map((k) => `${k} ${d.from[k] || "—"} → ${d.to[k] || "—"}`).join(", ") || "changed";
      }
      return `changed ${(d.fields || []).map((f) => f.replace(/_/g, " ")).join(", ")}`;
    case "stage_changed":
      return `stage ${d.from} → ${d.to}${d.reason ? ` (${d.reason})` : ""}`;
    case "lead_converted":
      return el("span", {}, "converted from ", recordLink("lead", d.lead_id));
    default:
      return describeActivity(a);
  }
}

async function loadRecordTimeline(kind, id) {
  try {
    const { body } = await api("GET", `${KINDS[kind].path}/${id}/activities?limit=50`);
    await learnNames("lead", body.data.filter((a) => a.kind === "lead_converted" && a.detail).map((a) => a.detail.lead_id));
    if (!state.record || state.record.kind !== kind || state.record.body.id !== id) return;
    $(`${kind}-timeline`).replaceChildren(
      ...body.data.map((a) =>
        el(
          "li",
          { dataset: { kind: a.kind } },
          el("time", {}, when(a.created_at)),
          " ",
          el("span", { class: "kind" }, CRM_KIND_WORDS[a.kind] || a.kind.replace(/_/g, " ")),
          " ",
          describeCrmActivity(kind, a),
          a.author_id ? el("span", { class: "muted" }, ` by ${person(a.author_id)}`) : null,
        ),
      ),
    );
    if (!body.data.length) $(`${kind}-timeline`).replaceChildren(el("li", { class: "muted" }, "nothing yet"));
  } catch (err) {
    showProblem(err, $(`${kind}-timeline`));
  }
}

// ---------------------------------------------------------------- the deal board

/** Amounts summed per currency: "12,500.00 EUR + 300.00 USD". */
function totals(deals) {
  const by = new Map();
  for (const d of deals) by.set(d.currency, (by.get(d.currency) || 0) + d.amount_cents);
  return [...by].map(([currency, cents]) => money(cents, currency)).join(" + ");
}

/** The board: one column per stage, the newest changed deals first in each. */
async function loadBoard() {
  const q = new URLSearchParams({ limit: "100" });
  const text = $("deal-q").value.trim();
  if (text) q.set("q", text);
  if ($("deal-owner").value) q.set("owner", $("deal-owner").value);
  try {
    const pages = await Promise.all(DEAL_STAGES.map((stage) => api("GET", `/api/deals?${q}&stage=${stage}`).then((r) => r.body)));
    const deals = pages.flatMap((p) => p.data);
    for (const d of deals) remember("deal", d);
    await Promise.all([learnNames("contact", deals.map((d) => d.contact_id)), learnNames("company", deals.map((d) => d.company_id))]);
    state.records.deal = deals;
    $("deal-board").replaceChildren(
      ...DEAL_STAGES.map((stage, i) => {
        const column = pages[i].data;
        return el(
          "section",
          {
            class: `stage stage-column-${stage}`,
            dataset: { stage },
            "aria-labelledby": `stage-${stage}`,
            // A card dropped here moves as its button would; only a legal move is taken.
            ondragover: (e) => {
              if (!state.dragging || !(NEXT_STAGE[state.dragging.stage] || []).includes(stage)) return;
              e.preventDefault();
              e.currentTarget.classList.add("drop-here");
            },
            ondragleave: (e) => e.currentTarget.classList.remove("drop-here"),
            ondrop: (e) => {
              e.preventDefault();
              e.currentTarget.classList.remove("drop-here");
              const deal = state.dragging;
              state.dragging = null;
              if (deal && (NEXT_STAGE[deal.stage] || []).includes(stage)) moveDeal(deal, stage, e.currentTarget);
            },
          },
          el("h3", { id: `stage-${stage}` }, el("span", { class: `status stage-${stage}` }, stage), " ", plural(column.length, "deal"), pages[i].next_cursor ? " and more" : ""),
          column.length ? el("p", { class: "muted sum" }, totals(column)) : null,
          el("ul", { class: "deal-cards" }, column.map(dealCard)),
        );
      }),
    );
  } catch (err) {
    showProblem(err, $("deal-list"));
  }
}

function dealCard(d) {
  const who = [d.contact_id ? nameOf("contact", d.contact_id) : null, d.company_id ? nameOf("company", d.company_id) : null].filter(Boolean).join(", ");
  const label = KINDS.deal.label(d);
  const card = el(
    "li",
    { class: "deal-card", dataset: { dealId: String(d.id) } },
    el("span", { class: "deal-name" }, recordLink("deal", d.id)),
    el("span", { class: "deal-amount" }, money(d.amount_cents, d.currency)),
    who ? el("span", { class: "sub" }, who) : null,
    el("span", { class: "sub" }, d.owner_id ? person(d.owner_id) : "no owner"),
    (NEXT_STAGE[d.stage] || []).length
      ? el(
          "span",
          { class: "moves" },
          NEXT_STAGE[d.stage].map((to) =>
            el("button", { type: "button", class: "small", dataset: { to }, "aria-label": `Move ${label} to ${to}`, onclick: (e) => moveDeal(d, to, e.target) }, `→ ${to}`),
          ),
        )
      : null,
  );
  if (state.record && state.record.kind === "deal" && state.record.body.id === d.id) card.classList.add("selected");
  // A mouse can drag an open deal to its new column; the buttons do the same by keyboard.
  if ((NEXT_STAGE[d.stage] || []).length) {
    card.draggable = true;
    card.addEventListener("dragstart", (e) => {
      state.dragging = d;
      e.dataTransfer.setData("text/plain", label);
      e.dataTransfer.effectAllowed = "move";
    });
    card.addEventListener("dragend", () => {
      state.dragging = null;
      for (const column of document.querySelectorAll("#deal-board .drop-here")) column.classList.remove("drop-here");
    });
  }
  return card;
}

/**
 * Moves a deal to another stage with the version shown as If-Match. A stale
 * `412` (someone changed the deal meanwhile) reads the board and the deal
 * again, so what is shown is what is stored, and says so.
 */
async function moveDeal(deal, to, where) {
  clearProblem();
  $("deal-result").hidden = true;
  const shown = state.record && state.record.kind === "deal" && state.record.body.id === deal.id;
  const fromDetail = where === $("deal-detail");
  const reason = fromDetail ? $("deal-reason").value.trim() : "";
  const body = reason ? { to, reason } : { to };
  const ifMatch = fromDetail && state.record.etag ? state.record.etag : `"${deal.version}"`;
  for (const b of document.querySelectorAll(`#deal-board li[data-deal-id="${deal.id}"] button, #deal-moves button`)) b.disabled = true;
  try {
    await api("POST", `/api/deals/${deal.id}/transitions`, { body, headers: { "Idempotency-Key": uuid(), "If-Match": ifMatch } });
    if (fromDetail) $("deal-reason").value = "";
    const result = $("deal-result");
    result.textContent = `Moved ${KINDS.deal.label(deal)} to ${to}.`;
    result.hidden = false;
    await loadBoard();
    if (shown) await openRecord("deal", deal.id, { keepProblem: true });
  } catch (err) {
    if (err.status === 412) {
      await loadBoard();
      if (shown) await openRecord("deal", deal.id, { keepProblem: true });
      showProblem(err, shown && fromDetail ? $("deal-detail") : $("deal-list"), "The board now shows what is stored; look at the deal and try again.");
    } else {
      showProblem(err, fromDetail ? $("deal-detail") : $("deal-list"));
      await loadBoard();
      if (shown) await openRecord("deal", deal.id, { keepProblem: true });
    }
  }
}

// ---------------------------------------------------------------- reports

/** Seconds as people read a delay: "45 s", "12 min", "3.5 h". */
function delay(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

async function loadSpeedToLead() {
  const active = document.querySelector("#report-window button.active");
  const windowName = active ? active.dataset.window : "24h";
  try {
    const { body } = await api("GET", `/api/reports/speed-to-lead?window=${windowName}`);
    const row = (label, f) =>
      el(
        "tr",
        {},
        el("td", { class: "group" }, label),
        el("td", {}, f.leads),
        el("td", {}, f.assigned),
        el("td", {}, f.responded),
        el("td", {}, `${delay(f.system_delay_seconds.p50)} / ${delay(f.system_delay_seconds.p90)}`),
        el("td", {}, `${delay(f.rep_delay_seconds.p50)} / ${delay(f.rep_delay_seconds.p90)}`),
        el("td", { class: "within" }, f.within_target),
        el("td", { class: f.breaches > 0 ? "breaches bad" : "breaches" }, f.breaches),
      );
    $("speed-table").querySelector("tbody").replaceChildren(
      row("All leads", body.total),
      ...body.by_source.map((s) => row(`Source ${s.source}`, s)),
      ...body.by_owner.map((o) => row(person(o.owner_id), o)),
    );
  } catch (err) {
    showProblem(err);
  }
}

// ---------------------------------------------------------------- my day

/** My day: my tasks due today and overdue (overdue first), and my open leads. */
async function loadMyDay() {
  const tasks = (due) => {
    const q = new URLSearchParams({ owner: "me", due, limit: "100", utc_offset: utcOffset() });
    return api("GET", `/api/tasks?${q}`).then((r) => r.body.data);
  };
  try {
    const [overdue, today, leads] = await Promise.all([
      tasks("overdue"),
      tasks("today"),
      api("GET", "/api/leads?owner=me&limit=200").then((r) => r.body.data),
    ]);
    for (const lead of leads) remember("lead", lead);
    await learnSubjects(overdue.concat(today));
    const taskRow = (task, late) =>
      el(
        "tr",
        { dataset: { taskId: String(task.id) }, class: late ? "late" : "" },
        el("td", {}, late ? el("span", { class: "alert" }, "⚠ overdue ", when(task.due_at)) : shortWhen(task.due_at)),
        el("td", {}, task.title),
        el("td", {}, subjectLink(task)),
        el("td", {}, doneButton(task, loadMyDay)),
      );
    const rows = overdue.map((t) => taskRow(t, true)).concat(today.filter((t) => !overdue.some((o) => o.id === t.id)).map((t) => taskRow(t, false)));
    $("my-tasks").querySelector("tbody").replaceChildren(...rows);
    $("my-tasks-empty").hidden = rows.length > 0;
    const open = leads.filter((l) => !["converted", "lost"].includes(l.status));
    $("my-leads").querySelector("tbody").replaceChildren(
      ...open.map((lead) =>
        el(
          "tr",
          { dataset: { leadId: String(lead.id) } },
          el("td", { class: "name" }, recordLink("lead", lead.id), lead.company ? el("span", { class: "sub" }, lead.company) : null),
          el("td", {}, el("span", { class: `status status-${lead.status}` }, lead.status)),
          el("td", { title: when(lead.updated_at) }, shortWhen(lead.updated_at)),
        ),
      ),
    );
    $("my-leads-empty").hidden = open.length > 0;
  } catch (err) {
    showProblem(err);
  }
}

// ---------------------------------------------------------------- tasks

/** This browser's offset from UTC as the API takes it ("+01:00"): "today" is the user's day. */
function utcOffset() {
  const minutes = -new Date().getTimezoneOffset();
  const sign = minutes < 0 ? "-" : "+";
  const abs = Math.abs(minutes);
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
}

function taskQuery() {
  const q = new URLSearchParams({ limit: "50", utc_offset: utcOffset() });
  // A sales rep sees their own tasks; ops and admin see everyone's.
  if (state.me && state.me.role === "sales") q.set("owner", "me");
  if (state.taskDue === "done") q.set("status", "done");
  else q.set("due", state.taskDue);
  if (state.tasksCursor) q.set("cursor", state.tasksCursor);
  return q;
}

/** What a task is about, as a link by name. */
function subjectLink(task) {
  return KINDS[task.subject_type] ? recordLink(task.subject_type, task.subject_id) : `${task.subject_type} #${task.subject_id}`;
}

/** The names of the records the tasks are about, read before the rows are drawn. */
function learnSubjects(tasks) {
  return Promise.all(Object.keys(KINDS).map((kind) => learnNames(kind, tasks.filter((t) => t.subject_type === kind).map((t) => t.subject_id))));
}

function doneButton(task, reload) {
  if (task.status !== "open") return el("span", { class: "muted" }, `done ${when(task.completed_at)}`);
  return el("button", { type: "button", class: "small", onclick: (e) => completeTask(e, task, reload) }, "Done");
}

async function loadTasks(more) {
  if (!more) state.tasksCursor = null;
  $("tasks-heading").firstChild.textContent = state.me && state.me.role === "sales" ? "My tasks " : "Tasks ";
  for (const b of document.querySelectorAll(".due-choice button")) b.classList.toggle("active", b.dataset.due === state.taskDue);
  try {
    const { body } = await api("GET", `/api/tasks?${taskQuery()}`);
    await learnSubjects(body.data);
    const rows = body.data.map((task) =>
      el(
        "tr",
        { dataset: { taskId: String(task.id) } },
        el("td", {}, when(task.due_at)),
        el("td", {}, task.title),
        el("td", {}, subjectLink(task)),
        el("td", {}, person(task.owner_id)),
        el("td", {}, doneButton(task, () => loadTasks(false))),
      ),
    );
    const tbody = $("task-table").querySelector("tbody");
    if (more) tbody.append(...rows);
    else tbody.replaceChildren(...rows);
    state.tasksCursor = body.next_cursor;
    $("more-tasks").hidden = !body.next_cursor;
    $("task-empty").hidden = tbody.children.length > 0;
  } catch (err) {
    showProblem(err);
  }
}

/** Completes a task as the version shown (If-Match): a task changed meanwhile answers 412. */
async function completeTask(e, task, reload) {
  clearProblem();
  e.target.disabled = true;
  try {
    await api("PATCH", `/api/tasks/${task.id}`, {
      body: { status: "done" },
      headers: { "Idempotency-Key": uuid(), "If-Match": `"${task.version}"` },
    });
    await reload();
  } catch (err) {
    showProblem(err, e.target);
    e.target.disabled = false;
  }
}

async function loadLeadTasks() {
  const id = state.lead.id;
  try {
    const { body } = await api("GET", `/api/tasks?lead_id=${id}&limit=50`);
    $("lead-tasks").replaceChildren(
      ...body.data.map((task) =>
        el(
          "li",
          { dataset: { taskId: String(task.id), status: task.status } },
          el("time", {}, when(task.due_at)),
          " ",
          task.title,
          el("span", { class: "muted" }, ` — ${person(task.owner_id)} `),
          doneButton(task, async () => {
            await loadLeadTasks();
            await loadTimeline();
          }),
        ),
      ),
    );
  } catch (err) {
    showProblem(err, $("lead-tasks"));
  }
}

async function addTask() {
  clearProblem();
  const due = new Date($("task-due").value);
  if (isNaN(due)) return;
  const body = { subject_type: "lead", subject_id: state.lead.id, title: $("task-title").value.trim(), due_at: due.toISOString() };
  // An ops or admin caller names the owner: the lead's.
  if (state.me.role !== "sales") body.owner_id = state.lead.owner_id;
  $("add-task").disabled = true;
  try {
    // A task has no natural key: the Idempotency-Key makes a retry safe.
    await api("POST", "/api/tasks", { body, headers: { "Idempotency-Key": uuid() } });
    $("task-title").value = "";
    $("task-due").value = "";
    await Promise.all([loadLeadTasks(), loadTimeline()]);
  } catch (err) {
    showProblem(err, $("task-form"));
  } finally {
    $("add-task").disabled = false;
  }
}

// ---------------------------------------------------------------- ops

function loadOps() {
  loadStats();
  loadSeries();
  loadDeadEvents();
  loadDeadDeliveries();
  loadInbox();
  loadReconcileRuns();
}

/** A figure that needs attention: a CSS class and words, never colour alone. */
function flagged(text, warning) {
  return warning ? el("span", { class: "alert" }, "⚠ ", text, el("span", { class: "why" }, ` (${warning})`)) : text;
}

function waiting(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const text = duration(seconds);
  return seconds > BACKLOG_ALERT_SECONDS ? flagged(text, `backlog over ${duration(BACKLOG_ALERT_SECONDS)}`) : text;
}

/** Whether a source has been quiet for longer than its rhythm allows. */
function tooQuiet(s) {
  return s.quiet_seconds !== null && s.usual_gap_seconds !== null && s.quiet_seconds > QUIET_GAPS * s.usual_gap_seconds && s.quiet_seconds > QUIET_FLOOR_SECONDS;
}

/** How long a source has been quiet, against its usual gap. */
function quiet(s) {
  if (s.quiet_seconds === null || s.quiet_seconds === undefined) return "—";
  const usual = s.usual_gap_seconds === null ? "" : ` (usually ${duration(s.usual_gap_seconds)})`;
  return tooQuiet(s) ? flagged(`${duration(s.quiet_seconds)}${usual}`, "quiet for too long") : `${duration(s.quiet_seconds)}${usual}`;
}

/** What the webhooks missed of what reconcile found, in a window. */
function missed(w) {
  if (!w.reconciled) return "—";
  return [percent(w.missed_rate), el("span", { class: "muted" }, ` (${w.missed} of ${plural(w.reconciled, "record")})`)];
}

function deadCount(n, one, many) {
  return n > 0 ? flagged(plural(n, one, many), "dead letters") : plural(n, one, many);
}

/** The alerts above the panels, one line per thing to look at. */
function renderAlerts(stats) {
  const alerts = [];
  for (const s of stats.sources) {
    if (s.state === "paused") alerts.push(`${s.source}: paused, its events wait until it is resumed (leadpipe source resume ${s.source})`);
    if (s.inbox.dead > 0) alerts.push(`${s.source}: ${plural(s.inbox.dead, "dead inbox event")}`);
    const age = s.oldest_unprocessed_age_seconds;
    if (age !== null && age > BACKLOG_ALERT_SECONDS) alerts.push(`${s.source}: oldest unprocessed event waiting ${duration(age)}`);
    if (tooQuiet(s)) alerts.push(`${s.source}: no delivery for ${duration(s.quiet_seconds)}, usually every ${duration(s.usual_gap_seconds)}`);
  }
  const dead = stats.outbox.deliveries.dead || 0;
  if (dead > 0) alerts.push(`outgoing: ${plural(dead, "dead delivery", "dead deliveries")}`);
  const age = stats.outbox.oldest_undelivered_age_seconds;
  if (age !== null && age > BACKLOG_ALERT_SECONDS) alerts.push(`outgoing: oldest undelivered waiting ${duration(age)}`);
  $("ops-alerts").replaceChildren(...alerts.map((a) => el("li", { class: "alert" }, "⚠ ", a)));
  $("ops-alerts").hidden = alerts.length === 0;
}

function loadStats() {
  return optional($("stats"), "/api/ops/stats", (stats) => {
    renderAlerts(stats);
    const head = ["Source", "Received (1 h)", "Received (24 h)", "Duplicates (24 h)", "Missed by webhooks (24 h)", "Quiet for", "Waiting", "Oldest waiting", "Failed", "Dead", "Leads"];
    const rows = stats.sources.map((s) => {
      const waitingCount = (s.inbox.received || 0) + (s.inbox.processing || 0) + (s.inbox.failed || 0);
      return el(
        "tr",
        { dataset: { source: s.source } },
        el("td", {}, s.source, s.state === "paused" ? el("span", { class: "muted source-state" }, " (paused)") : ""),
        el("td", {}, plural(s.last_hour.events, "event")),
        el("td", {}, plural(s.last_day.events, "event")),
        el("td", { class: "duplicate-rate" }, percent(s.last_day.duplicate_rate), el("span", { class: "muted" }, ` (${s.last_day.duplicates} of ${plural(s.last_day.deliveries, "delivery", "deliveries")})`)),
        el("td", { class: "missed-rate" }, missed(s.last_day)),
        el("td", { class: "quiet" }, quiet(s)),
        el("td", {}, plural(waitingCount, "event")),
        el("td", { class: "oldest" }, waiting(s.oldest_unprocessed_age_seconds)),
        el("td", {}, plural(s.inbox.failed || 0, "event")),
        el("td", { class: "dead" }, deadCount(s.inbox.dead || 0, "event")),
        el("td", {}, plural(s.leads, "lead")),
      );
    });
    const table = stats.sources.length
      ? el("table", { class: "figures", id: "source-stats" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), el("tbody", {}, rows))
      : el("p", { class: "muted" }, "no sources yet");
    const o = stats.outbox;
    const d = o.deliveries;
    const totals = [
      ["Outgoing events pending", plural(o.events_pending, "event")],
      ["Deliveries pending", plural((d.pending || 0) + (d.delivering || 0), "delivery", "deliveries")],
      ["Deliveries failing (will retry)", plural(d.failed || 0, "delivery", "deliveries")],
      ["Dead deliveries", deadCount(d.dead || 0, "delivery", "deliveries")],
      ["Oldest undelivered", waiting(o.oldest_undelivered_age_seconds)],
      ["Leads waiting for processing", plural(stats.leads_processing_backlog, "lead")],
    ];
    if (d.held) totals.push(["Deliveries held for disabled subscriptions", flagged(plural(d.held, "delivery", "deliveries"), "sent once enabled")]);
    loadSubscriptions(stats.subscriptions);
    return el(
      "div",
      {},
      table,
      el("dl", { class: "totals", id: "outbox-stats" }, totals.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      el("p", { class: "muted" }, `as of ${when(stats.generated_at)}`),
    );
  });
}

// ---------------------------------------------------------------- charts

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  node.append(...children);
  return node;
}

function clock(value) {
  return new Date(value).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

const CHART_W = 600;
const CHART_H = 80;

/** One bar per bucket, scaled to the largest; a <title> per bar for hovering. */
function barChart(buckets, field, unit) {
  const peak = Math.max(0, ...buckets.map((b) => b[field]));
  const max = Math.max(1, peak);
  const w = CHART_W / buckets.length;
  const bars = buckets.map((b, i) => {
    const h = (b[field] / max) * (CHART_H - 2);
    return svg(
      "rect",
      { class: "bar", x: (i * w + w * 0.1).toFixed(2), y: (CHART_H - h).toFixed(2), width: (w * 0.8).toFixed(2), height: h.toFixed(2) },
      svg("title", {}, `${clock(b.start)}: ${plural(b[field], unit)}`),
    );
  });
  return { node: svg("svg", { viewBox: `0 0 ${CHART_W} ${CHART_H}`, preserveAspectRatio: "none", role: "img" }, ...bars), peak };
}

/** A line through one point per bucket (the duplicate rate, 0–100 %). */
function lineChart(buckets, field) {
  const w = CHART_W / buckets.length;
  const points = buckets.map((b, i) => `${(i * w + w / 2).toFixed(2)},${(CHART_H - 1 - b[field] * (CHART_H - 2)).toFixed(2)}`);
  const dots = buckets.map((b, i) =>
    svg("circle", { class: "point", cx: (i * w + w / 2).toFixed(2), cy: (CHART_H - 1 - b[field] * (CHART_H - 2)).toFixed(2), r: 1.5 }, svg("title", {}, `${clock(b.start)}: ${percent(b[field])}`)),
  );
  return svg(
    "svg",
    { viewBox: `0 0 ${CHART_W} ${CHART_H}`, preserveAspectRatio: "none", role: "img" },
    svg("polyline", { class: "line", points: points.join(" "), "vector-effect": "non-scaling-stroke" }),
    ...dots,
  );
}

function renderSeries(series) {
  const b = series.buckets;
  const per = series.bucket_seconds === 60 ? "minute" : duration(series.bucket_seconds);
  const sum = (f) => b.reduce((n, x) => n + x[f], 0);
  const deliveries = sum("deliveries");
  const received = sum("received");
  const rate = deliveries ? (deliveries - received) / deliveries : 0;
  // A day's span crosses midnight: name the dates too.
  const span = series.window === "1h" ? `${clock(series.from)}–${clock(series.to)}` : `${when(series.from)} – ${when(series.to)}`;
  const receivedBars = barChart(b, "received", "event");
  const processedBars = barChart(b, "processed", "event");
  const missedBars = barChart(b, "missed", "record");
  const reconciled = sum("reconciled");
  const missedShare = reconciled ? sum("missed") / reconciled : 0;
  const chart = (id, title, figure, node, scale) => {
    node.setAttribute("aria-label", `${title}: ${figure}, ${scale}, over ${span}`);
    return el(
      "figure",
      { id, class: "chart" },
      el("figcaption", {}, el("strong", {}, title), " ", figure, el("span", { class: "muted" }, ` · ${scale}`)),
      node,
    );
  };
  return el(
    "div",
    {},
    chart("chart-received", "Received", plural(received, "event"), receivedBars.node, `per ${per}, peak ${plural(receivedBars.peak, "event")}`),
    chart("chart-processed", "Processed", plural(sum("processed"), "event"), processedBars.node, `per ${per}, peak ${plural(processedBars.peak, "event")}`),
    chart("chart-duplicates", "Duplicate rate", percent(rate), lineChart(b, "duplicate_rate"), "per bucket, 0–100 %"),
    chart(
      "chart-missed",
      "Missed by webhooks",
      `${sum("missed")} of ${plural(reconciled, "reconciled record")} (${percent(missedShare)})`,
      missedBars.node,
      `per ${per}, peak ${plural(missedBars.peak, "record")}`,
    ),
    el("p", { class: "muted" }, `${b.length} buckets, ${span}`),
  );
}

function loadSeries() {
  for (const btn of document.querySelectorAll(".window-choice button")) btn.classList.toggle("active", btn.dataset.window === state.seriesWindow);
  return optional($("charts"), `/api/ops/stats/series?window=${state.seriesWindow}`, renderSeries);
}

function retryButton(label, path, reload) {
  return (row) =>
    el(
      "button",
      {
        type: "button",
        class: "small retry",
        onclick: async (e) => {
          e.target.disabled = true;
          try {
            await api("POST", path(row), { headers: { "Idempotency-Key": uuid() } });
            await reload();
          } catch (err) {
            showProblem(err, e.target);
            e.target.disabled = false;
          }
        },
      },
      label,
    );
}

/** A table with a header row; `cols` are [heading, cell(row)] pairs. */
function dataTable(id, rows, cols, rowAttrs) {
  return el(
    "table",
    { class: "data", id },
    el("thead", {}, el("tr", {}, cols.map(([h, , cls]) => el("th", { class: cls || "" }, h)))),
    el("tbody", {}, rows.map((r) => el("tr", rowAttrs ? rowAttrs(r) : {}, cols.map(([, f, cls]) => el("td", { class: cls || "" }, f(r)))))),
  );
}

function leadLink(id) {
  return recordLink("lead", id);
}

function viewButton(label, onclick) {
  return el("button", { type: "button", class: "small", onclick }, label);
}

// ---------------------------------------------------------------- subscriptions

/** A subscription's receiver: its URL, with its description beneath. */
function receiverOf(sub) {
  return el("span", { title: sub.url }, el("span", { class: "url" }, sub.url), sub.description ? el("span", { class: "sub" }, sub.description) : null);
}

/** Active, failing or disabled, in words; what needs attention flagged. */
function subscriptionState(sub) {
  if (sub.state === "disabled") {
    // The server's reason names the setting; the time reads better local.
    const why = sub.failing_since ? `no delivery succeeded since ${when(sub.failing_since)}` : sub.disabled_reason || "disabled by an admin";
    return el("span", { title: sub.disabled_reason || "" }, flagged("disabled", "deliveries held"), el("span", { class: "sub" }, why));
  }
  if (sub.failing_since) return el("span", {}, flagged("active", "failing"), el("span", { class: "sub" }, `failing since ${when(sub.failing_since)}`));
  return sub.state;
}

/** The last day's deliveries of one subscription (from the stats). */
function lastDay(figures) {
  if (!figures || !figures.attempts) return el("span", { class: "muted" }, "no attempts");
  const dead = figures.dead ? [" · ", deadCount(figures.dead, "dead delivery", "dead deliveries")] : [];
  return el("span", {}, `${percent(figures.success_rate)} of ${plural(figures.attempts, "attempt")} answered 2xx`, el("span", { class: "sub" }, plural(figures.delivered, "delivered", "delivered"), ...dead));
}

/** Subscriptions with their health; an admin enables and recovers them here. */
async function loadSubscriptions(figures) {
  const target = $("subscriptions");
  let subs;
  try {
    subs = (await api("GET", "/api/subscriptions")).body.data;
  } catch (err) {
    return showProblem(err, target);
  }
  const byId = new Map((figures || []).map((f) => [f.subscription_id, f]));
  const disabled = subs.filter((sub) => sub.state === "disabled");
  if (disabled.length) {
    $("ops-alerts").append(...disabled.map((sub) => el("li", { class: "alert" }, "⚠ ", `outgoing: ${sub.url} is disabled; its deliveries are held until it is enabled`)));
    $("ops-alerts").hidden = false;
  }
  if (!subs.length) return target.replaceChildren(el("p", { class: "muted" }, "no subscriptions yet"));
  const admin = state.me && state.me.role === "admin";
  const actions = (sub) =>
    admin
      ? el(
          "span",
          { class: "actions" },
          sub.state === "disabled" ? enableButton(sub) : null,
          viewButton("Recover…", () => askRecover(sub)),
        )
      : null;
  target.replaceChildren(
    dataTable("subscription-table", subs, [
      ["Receiver", receiverOf, "w-url"],
      ["Events", (sub) => (sub.event_types.length ? sub.event_types.join(", ") : "every event"), "wrap"],
      ["State", subscriptionState, "wrap w-state"],
      ["Last day", (sub) => lastDay(byId.get(sub.id)), "wrap"],
      ["Rate limit", (sub) => (sub.rate_limit ? `${sub.rate_limit} a second` : "—"), "w-num"],
      ["", actions, "w-actions"],
    ], (sub) => ({ dataset: { subscriptionId: String(sub.id) } })),
    admin ? el("p", { id: "recover-result", class: "muted", role: "status" }) : el("p", { class: "muted" }, "an admin enables and recovers subscriptions"),
  );
}

function enableButton(sub) {
  return el(
    "button",
    {
      type: "button",
      class: "small enable",
      onclick: async (e) => {
        e.target.disabled = true;
        try {
          await api("POST", `/api/subscriptions/${sub.id}/enable`, { body: {}, headers: { "Idempotency-Key": uuid() } });
          await loadStats();
        } catch (err) {
          showProblem(err, e.target);
          e.target.disabled = false;
        }
      },
    },
    "Enable",
  );
}

/** Opens the form that sends a subscription's failed deliveries again. */
function askRecover(sub) {
  const form = $("recover-form");
  form.dataset.subscriptionId = String(sub.id);
  $("recover-which").textContent = `${sub.url}: `;
  // A day back by default, in the browser's own time zone.
  const since = new Date(Date.now() - 24 * 3600 * 1000);
  since.setMinutes(since.getMinutes() - since.getTimezoneOffset());
  $("recover-since").value = since.toISOString().slice(0, 16);
  form.hidden = false;
  $("recover-since").focus();
}

async function recover(e) {
  e.preventDefault();
  const form = $("recover-form");
  const id = form.dataset.subscriptionId;
  const since = new Date($("recover-since").value);
  if (isNaN(since)) return;
  try {
    const { body } = await api("POST", `/api/subscriptions/${id}/recover`, { body: { since: since.toISOString() }, headers: { "Idempotency-Key": uuid() } });
    form.hidden = true;
    await loadStats();
    await loadDeadDeliveries();
    const result = $("recover-result");
    if (result) result.textContent = `Sent again: ${plural(body.dead, "dead delivery", "dead deliveries")}, ${plural(body.failed, "delivery", "deliveries")} waiting for a retry.`;
  } catch (err) {
    showProblem(err, form);
  }
}

function loadDeadEvents() {
  return optional($("dead-events"), "/api/ops/inbox?state=dead&limit=50", (body) => {
    if (!body.data.length) return el("p", { class: "muted" }, "none");
    const count = el("p", { class: "alert" }, "⚠ ", plural(body.data.length, "dead event"), body.next_cursor ? " or more" : "", " — retry once the cause is fixed");
    const retry = retryButton("Retry", (r) => `/api/ops/inbox/${r.id}/retry`, loadDeadEvents);
    return el(
      "div",
      {},
      count,
      dataTable("dead-event-table", body.data, [
        ["Received", (e) => shortWhen(e.received_at), "w-when"],
        ["Source", (e) => e.source, "w-source"],
        ["Event", (e) => el("span", { title: e.event_id }, e.event_type || "event", el("span", { class: "sub" }, e.event_id))],
        ["Attempts", (e) => e.attempts, "w-num"],
        ["Why it failed", (e) => e.last_error || "—", "wrap"],
        ["", (e) => el("span", { class: "actions" }, viewButton("Payload", () => showInboxEvent(e.id)), retry(e)), "w-actions"],
      ]),
    );
  });
}

/** The HTTP reason phrases a receiver's answer is most often read by. */
const REASONS = { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 410: "Gone", 413: "Content Too Large", 422: "Unprocessable Content", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout" };

/** What the receiver answered on the last attempt, in words. */
function receiverAnswer(d) {
  const error = (d.last_error || "").trim();
  if (d.last_status) {
    const m = /^HTTP \d+:\s*([\s\S]*)$/.exec(error);
    const said = (m ? m[1] : error).trim();
    return el(
      "span",
      {},
      el("strong", {}, `${d.last_status} ${REASONS[d.last_status] || ""}`.trim()),
      said ? el("q", { class: "said" }, said) : el("span", { class: "muted" }, " — with an empty body"),
    );
  }
  return error ? `no answer: ${error}` : "—";
}

async function loadDeadDeliveries() {
  // The receivers' URLs come from the subscriptions; without them the id shows.
  const subscriptions = new Map();
  try {
    for (const s of (await api("GET", "/api/subscriptions")).body.data) subscriptions.set(s.id, s);
  } catch (err) {
    if (err.status === 401) return showProblem(err);
  }
  return optional($("dead-deliveries"), "/api/ops/deliveries?state=dead&limit=50", async (body) => {
    await learnNames("lead", body.data.map((d) => d.lead_id));
    if (!body.data.length) return el("p", { class: "muted" }, "none");
    const count = el("p", { class: "alert" }, "⚠ ", plural(body.data.length, "dead delivery", "dead deliveries"), body.next_cursor ? " or more" : "");
    const receiver = (d) => {
      const sub = subscriptions.get(d.subscription_id);
      if (!sub) return `subscription #${d.subscription_id}`;
      return el("span", { title: sub.url }, el("span", { class: "url" }, sub.url), sub.description ? el("span", { class: "sub" }, sub.description) : null);
    };
    return el(
      "div",
      {},
      count,
      dataTable("dead-delivery-table", body.data, [
        ["Receiver", receiver, "w-url"],
        ["About", (d) => leadLink(d.lead_id), "w-source"],
        ["Attempts", (d) => d.attempts, "w-num"],
        ["Receiver's answer", receiverAnswer, "wrap"],
        ["Last tried", (d) => shortWhen(d.updated_at), "w-when"],
        ["", retryButton("Retry", (r) => `/api/ops/deliveries/${r.id}/retry`, loadDeadDeliveries), "w-actions"],
      ]),
    );
  });
}

function loadInbox() {
  return optional($("inbox"), "/api/ops/inbox?limit=20", async (body) => {
    await learnNames("lead", body.data.map((e) => e.lead_id));
    if (!body.data.length) return el("p", { class: "muted" }, "no events yet");
    return el(
      "div",
      {},
      dataTable("inbox-table", body.data, [
        ["Received", (e) => shortWhen(e.received_at), "w-when"],
        ["Source", (e) => e.source, "w-source"],
        ["Event", (e) => el("span", { title: e.event_id }, e.event_type || "event", el("span", { class: "sub" }, e.event_id))],
        ["State", (e) => (e.state === "dead" ? el("span", { class: "alert" }, "⚠ dead") : e.state), "w-state"],
        ["Outcome", (e) => (e.lead_id ? el("span", {}, `${e.outcome || "done"}: `, leadLink(e.lead_id)) : e.outcome || e.last_error || "—"), "wrap"],
        ["", (e) => viewButton("Payload", () => showInboxEvent(e.id)), "w-actions"],
      ], (e) => ({ dataset: { eventId: String(e.id) } })),
      body.next_cursor ? el("p", { class: "muted" }, "the newest 20 events") : null,
    );
  });
}

/** One inbox event in the viewer: what arrived, its kept headers and its body. */
async function showInboxEvent(id) {
  const viewer = $("inbox-viewer");
  viewer.hidden = false;
  viewer.replaceChildren(el("p", { class: "muted" }, "loading…"));
  try {
    const e = (await api("GET", `/api/ops/inbox/${id}`)).body;
    await learnNames("lead", [e.lead_id]);
    const facts = [
      ["source", e.source],
      ["event id", `${e.event_id} (from ${e.event_id_from})`],
      ["type", e.event_type || "—"],
      ["state", e.state],
      ["delivered", `${plural(e.deliveries, "time")}, first ${when(e.received_at)}, last ${when(e.last_delivery_at)}`],
      ["processing", `${plural(e.attempts, "attempt")}, ${plural(e.retries, "retry", "retries")}${e.processed_at ? `, done ${when(e.processed_at)}` : ""}`],
      ["outcome", e.lead_id ? el("span", {}, `${e.outcome || ""} `, leadLink(e.lead_id)) : e.outcome || "—"],
      ["error", e.last_error || "—"],
      ["correlation id", e.correlation_id || "—"],
    ];
    const headers = e.headers && typeof e.headers === "object" ? Object.entries(e.headers) : [];
    viewer.replaceChildren(
      el("h3", {}, `Event ${e.event_id} from ${e.source}`, el("button", { type: "button", class: "small push", onclick: () => (viewer.hidden = true) }, "Close")),
      el("dl", {}, facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      el("h4", {}, "Headers"),
      headers.length
        ? el("table", { class: "payload" }, el("tbody", {}, headers.map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, cell(v))))))
        : el("p", { class: "muted" }, "none kept"),
      el("h4", {}, "Body"),
      el("pre", { class: "body", id: "inbox-body", tabindex: "0" }, e.body !== null && e.body !== undefined ? JSON.stringify(e.body, null, 2) : e.body_text || ""),
    );
    viewer.scrollIntoView({ block: "nearest" });
  } catch (err) {
    viewer.hidden = true;
    showProblem(err, viewer);
  }
}

/** A run's figures in words, leaving out the noughts. */
function runCounts(r) {
  const parts = [["fetched", r.fetched], ["created", r.created], ["updated", r.updated], ["unchanged", r.unchanged], ["stale", r.stale], ["suppressed", r.suppressed], ["rejected", r.rejected], ["missed by webhooks", r.missed]];
  const said = parts.filter(([k, n]) => n > 0 || k === "fetched").map(([k, n]) => `${n.toLocaleString("en")} ${k}`);
  return `${said.join(" · ")} (${plural(r.pages, "page")})`;
}

function runWho(r) {
  if (r.started_by !== null && r.started_by !== undefined) return person(r.started_by);
  return r.trigger === "schedule" || r.trigger === "cron" ? "the schedule" : r.trigger;
}

function runOutcome(r) {
  const dry = r.dry_run ? " (dry run)" : "";
  if (r.error) return flagged(`${r.state}${dry}`, r.error);
  if (r.rejected > 0) return flagged(`${r.state}${dry}`, `${r.rejected} rejected to look at`);
  return `${r.state}${dry}`;
}

function runTook(r) {
  const end = r.finished_at || r.heartbeat_at;
  const secs = (new Date(end) - new Date(r.started_at)) / 1000;
  return isNaN(secs) ? "" : `${r.finished_at ? "took" : "running for"} ${duration(secs)}`;
}

function loadReconcileRuns() {
  return optional($("reconcile-runs"), "/api/ops/reconcile-runs", (body) => {
    const runs = Array.isArray(body) ? body : Array.isArray(body && body.data) ? body.data : [];
    if (!runs.length) return el("p", { class: "muted" }, "no runs yet");
    return dataTable("reconcile-table", runs, [
      ["Started", (r) => el("span", { title: when(r.started_at) }, shortWhen(r.started_at), el("span", { class: "sub" }, runTook(r))), "w-when"],
      ["Who", runWho, "w-who"],
      ["Source", (r) => r.source, "w-source"],
      ["Counts", runCounts, "wrap"],
      ["Outcome", runOutcome, "wrap w-outcome"],
      ["", (r) => viewButton("Details", () => showRun(r.id)), "w-actions"],
    ], (r) => ({ dataset: { runId: String(r.id) } }));
  });
}

/** One reconcile run in full, in words. */
async function showRun(id) {
  const box = $("reconcile-detail");
  box.hidden = false;
  try {
    const r = (await api("GET", `/api/ops/reconcile-runs/${id}`)).body;
    const facts = [
      ["source", r.source],
      ["started", `${when(r.started_at)} by ${runWho(r)}`],
      ["finished", r.finished_at ? `${when(r.finished_at)} (${runTook(r)})` : `not yet — last sign of life ${when(r.heartbeat_at)}`],
      ["outcome", runOutcome(r)],
      ["mode", r.dry_run ? "dry run: nothing written" : "records written"],
      ["pages", plural(r.pages, "page")],
      ["fetched", plural(r.fetched, "record")],
      ["created", plural(r.created, "lead")],
      ["updated", plural(r.updated, "lead")],
      ["unchanged", plural(r.unchanged, "lead")],
      ["stale", `${plural(r.stale, "record")} older than what is stored`],
      ["suppressed", `${plural(r.suppressed, "record")} of erased leads`],
      ["rejected", plural(r.rejected, "record")],
      ["missed", `${plural(r.missed, "record")} the webhooks had missed`],
      ["cursor", r.cursor_start || r.cursor ? `${r.cursor_start || "start"} → ${r.cursor || "—"}` : "—"],
    ];
    box.replaceChildren(
      el("h3", {}, `Run #${r.id}: ${r.source}`, el("button", { type: "button", class: "small push", onclick: () => (box.hidden = true) }, "Close")),
      el("dl", { id: "run-facts" }, facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    );
    box.scrollIntoView({ block: "nearest" });
  } catch (err) {
    box.hidden = true;
    showProblem(err, box);
  }
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
      showProblem(err, $("reconcile-form"));
    }
  }
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", async () => {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("token").value.trim();
    $("token").value = "";
    if (t) signIn(t);
  });
  $("password-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const email = $("login-email").value.trim();
    const password = $("login-password").value;
    $("login-password").value = "";
    if (email && password) signInWithPassword(email, password);
  });
  $("sign-out").addEventListener("click", () => signOut());
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  $("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    filtersToAddress();
    loadLeads(false);
  });
  $("more-leads").addEventListener("click", () => loadLeads(true));
  for (const kind of ["contact", "company"]) {
    $(`${kind}-filters`).addEventListener("submit", (e) => {
      e.preventDefault();
      loadRecords(kind, false);
    });
    $(`more-${LISTS[kind].plural}`).addEventListener("click", () => loadRecords(kind, true));
  }
  $("deal-filters").addEventListener("submit", (e) => {
    e.preventDefault();
    loadBoard();
  });
  for (const kind of ["contact", "company", "deal"]) {
    $(`${kind}-detail`).querySelector(".close-record").addEventListener("click", () => closeRecord(kind));
  }
  $("close-lead").addEventListener("click", closeLead);
  for (const b of document.querySelectorAll("#lead-table button.sort")) b.addEventListener("click", () => sortBy(b.dataset.sort));
  $("pick-all").addEventListener("change", (e) => {
    state.picked = new Set(e.target.checked ? state.leads.map((l) => l.id) : []);
    renderLeadRows();
  });
  $("bulk").addEventListener("submit", (e) => e.preventDefault());
  $("bulk-assign").addEventListener("click", bulkAssign);
  $("bulk-move").addEventListener("click", bulkMove);
  $("bulk-clear").addEventListener("click", () => {
    state.picked.clear();
    renderLeadRows();
  });
  $("refresh-inbox").addEventListener("click", loadInbox);
  $("note-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("note-text").value.trim();
    if (text && state.lead) addNote(text);
  });
  $("task-form").addEventListener("submit", (e) => {
    e.preventDefault();
    if (state.lead && $("task-title").value.trim()) addTask();
  });
  for (const b of document.querySelectorAll(".due-choice button")) {
    b.addEventListener("click", () => {
      state.taskDue = b.dataset.due;
      loadTasks(false);
    });
  }
  $("more-tasks").addEventListener("click", () => loadTasks(true));
  for (const b of document.querySelectorAll("#report-window button")) {
    b.addEventListener("click", () => {
      for (const other of document.querySelectorAll("#report-window button")) other.classList.toggle("active", other === b);
      loadSpeedToLead();
    });
  }
  $("convert-form").addEventListener("submit", (e) => {
    e.preventDefault();
    if (state.lead) convertLead();
  });
  window.addEventListener("hashchange", openFromAddress);
  for (const b of document.querySelectorAll(".window-choice button")) {
    b.addEventListener("click", () => {
      state.seriesWindow = b.dataset.window;
      loadSeries();
    });
  }
  $("refresh-ops").addEventListener("click", loadOps);
  $("recover-form").addEventListener("submit", recover);
  $("recover-cancel").addEventListener("click", () => ($("recover-form").hidden = true));
  $("reconcile-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const source = $("reconcile-source").value.trim();
    if (source) startReconcile(source);
  });
  const notice = sessionStorage.getItem(NOTICE_KEY);
  if (notice) {
    sessionStorage.removeItem(NOTICE_KEY);
    $("problem").replaceChildren(el("strong", {}, notice));
    $("problem").hidden = false;
  }
  if (token()) showApp();
  else if (await resumeSession()) showApp();
});

// Back or Forward may restore a page from memory: one of another session
// (or of none) starts afresh.
window.addEventListener("pageshow", (e) => {
  if (e.persisted && state.token !== token()) location.replace(location.pathname);
});
