// asya console: one ES module, no build step, no dependency. Served by the gateway at /console/.
//
// Pages (hash routes): #/tasks (list, GW-LIST), #/task/{id} (view GW-TASK + SSE GW-SSE), #/mesh (GW-OPS-3 and
// GET /api/v1/system/mesh), #/new/{flow} (create, GW-CREATE). Every value that comes from the API is untrusted: the
// DOM is built with createElement and textContent only, never innerHTML, and hrefs are built from encoded ids.
// Auth: under api_key the key lives in sessionStorage and goes out as X-API-Key. EventSource cannot send headers,
// so with a key the SSE stream is read with fetch (same protocol: Last-Event-ID, retry, 204 ends it).

import { drawFlow, flowPath, visitedActors } from "./flowgraph.js";

const KEY_STORAGE = "asya.console.apiKey";
const TERMINAL = new Set(["succeeded", "failed", "canceled"]);
const STATUSES = ["pending", "running", "paused", "succeeded", "failed", "canceled"];
// /console/ locally, /{stage}/console/ behind API Gateway: the API lives next to the console folder
const BASE = location.pathname.replace(/console\/[^/]*$/, "");
const LOCAL = ["127.0.0.1", "localhost", "[::1]"].includes(location.hostname);

// `page` counts page changes: a page's late async work checks its own `alive()` before touching the DOM or
// starting timers and streams, so a slow answer for a page already left never draws over the current one.
const state = { mesh: null, cleanup: [], page: 0 };

// ---------------------------------------------------------------- DOM helpers (textContent only)

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "on") for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn);
    else if (name === "class") node.className = value;
    else if (name in node && typeof value !== "string") node[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function taskLink(id) {
  return el("a", { href: "#/task/" + encodeURIComponent(id), class: "mono", "data-task": id, text: id });
}

function badge(status) {
  const known = STATUSES.includes(status) ? status : "unknown";
  return el("span", { class: "badge " + known, "data-status": String(status), text: String(status) });
}

function bar(percent, status, big = false) {
  const value = Math.max(0, Math.min(100, Number(percent) || 0));
  const fill = el("span");
  fill.style.width = value + "%";
  return el("div", { class: "bar " + (big ? "big " : "") + (STATUSES.includes(status) ? status : ""),
    role: "progressbar", "aria-valuenow": String(value), "aria-valuemin": "0", "aria-valuemax": "100" }, fill);
}

function age(timestamp) {
  const then = Date.parse(timestamp);
  if (Number.isNaN(then)) return "";
  const seconds = Math.max(0, Math.round((Date.now() - then) / 1000));
  if (seconds < 60) return seconds + "s ago";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m ago";
  if (seconds < 86400) return Math.floor(seconds / 3600) + "h ago";
  return Math.floor(seconds / 86400) + "d ago";
}

// A relative time that stays true: the element keeps its timestamp and one page-wide timer rewrites its text.
function ageText(timestamp, attributes = {}) {
  return el("span", { ...attributes, class: "age", "data-ts": String(timestamp || ""), title: String(timestamp || ""), text: age(timestamp) });
}

setInterval(() => {
  if (document.visibilityState !== "visible") return;
  for (const node of document.querySelectorAll(".age[data-ts]")) node.textContent = age(node.dataset.ts);
}, 5000);

function kv(pairs) {
  const list = el("dl", { class: "kv" });
  for (const [key, value] of pairs) {
    if (value === null || value === undefined || value === "") continue;
    list.append(el("dt", { text: key }), el("dd", {}, value instanceof Node ? value : String(value)));
  }
  return list;
}

function begin() {
  state.page += 1;
  for (const fn of state.cleanup.splice(0)) fn();
  const token = state.page;
  return () => token === state.page;
}

function show(alive, ...nodes) {
  if (alive()) document.getElementById("main").replaceChildren(...nodes);
}

// Run fn when the page is left (at once when it already was).
function onLeave(alive, fn) {
  if (alive()) state.cleanup.push(fn);
  else fn();
}

function banner(message) {
  const node = document.getElementById("banner");
  node.textContent = message || "";
  node.hidden = !message;
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

function authHeaders() {
  const key = apiKey();
  return key ? { "X-API-Key": key } : {};
}

async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json", ...authHeaders() }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(BASE + path, init);
  if (response.status === 401) {
    askForKey(apiKey() ? "The API key was refused (401 invalid credentials)." : "");
    throw new ApiError(401, "authentication required");
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    let message = data && typeof data.error === "string" ? data.error : text.slice(0, 200);
    if (response.status === 403 && !(data && data.error)) {
      message = "403 from API Gateway: under gateway.auth.mode iam the browser cannot sign requests (SigV4); " +
        "use the console with asya dev, or a gateway in api_key mode";
    }
    throw new ApiError(response.status, message || "HTTP " + response.status);
  }
  return data;
}

function askForKey(reason) {
  const form = document.getElementById("key-form");
  form.hidden = false;
  banner(reason);
  document.getElementById("key-input").focus();
}

function setupKeyForm() {
  const form = document.getElementById("key-form");
  const button = document.getElementById("key-button");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = document.getElementById("key-input").value.trim();
    if (!value) return;
    sessionStorage.setItem(KEY_STORAGE, value);
    document.getElementById("key-input").value = "";
    form.hidden = true;
    banner("");
    state.mesh = null;
    route();
  });
  document.getElementById("key-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    form.hidden = true;
    route();
  });
  button.addEventListener("click", () => {
    form.hidden = !form.hidden;
  });
}

async function mesh() {
  if (!state.mesh) {
    state.mesh = await api("GET", "api/v1/system/mesh");
    document.getElementById("namespace").textContent = "namespace " + state.mesh.namespace;
    document.getElementById("key-button").hidden = state.mesh.auth !== "api_key";
  }
  return state.mesh;
}

// Poll fn every `ms` while the page is visible; stopped when the page changes (costs nothing while nobody looks).
function every(alive, ms, fn) {
  const timer = setInterval(() => {
    if (document.visibilityState === "visible") fn();
  }, ms);
  onLeave(alive, () => clearInterval(timer));
}

function failure(error) {
  if (error instanceof ApiError && error.status === 401) return el("p", { class: "muted", text: "Waiting for an API key." });
  return el("div", { class: "card error-box" }, el("p", { class: "error-text", text: String(error.message || error) }));
}

// ---------------------------------------------------------------- pipeline

function routeOf(view, flows) {
  const data = view.data || {};
  if (Array.isArray(data.prev) && Array.isArray(data.next) && typeof data.curr === "string") {
    return [...data.prev, data.curr, ...data.next];
  }
  const flow = flows.find((f) => f.name === view.flow);
  return flow ? flow.route : [view.actor];
}

function pipeline(view, flows) {
  const names = routeOf(view, flows);
  const status = view.status;
  const current = view.status === "failed" && view.failed_actor ? view.failed_actor : view.current_actor;
  const at = current ? names.indexOf(current) : -1;
  const row = el("div", { class: "pipeline", "data-testid": "pipeline" });
  names.forEach((name, index) => {
    let cls = "next";
    let note = "";
    if (status === "succeeded") [cls, note] = ["done", "done"];
    else if (index < at) [cls, note] = ["done", "done"];
    else if (index === at) {
      if (status === "failed") [cls, note] = ["failed", "failed"];
      else if (status === "paused") [cls, note] = ["paused", "paused"];
      else if (view.step === "retrying") [cls, note] = ["current retrying", "retrying" + attemptOf(view)];
      else if (status === "canceled") [cls, note] = ["current", "canceled"];
      else [cls, note] = ["current", view.step || "current"];
    } else if (at === -1 && status === "pending" && index === 0) [cls, note] = ["current", "queued"];
    else note = "next";
    if (index > 0) row.append(el("span", { class: "arrow", text: "→" }));
    row.append(el("div", { class: "stage " + cls, "data-actor": name }, String(name), el("small", { text: note })));
  });
  return row;
}

function routeRow(names) {
  const row = el("div", { class: "pipeline" });
  names.forEach((name, index) => {
    if (index > 0) row.append(el("span", { class: "arrow", text: "→" }));
    row.append(el("div", { class: "stage", "data-actor": name, text: name }));
  });
  return row;
}

function attemptOf(view) {
  const attempt = view.data && view.data.attempt;
  return attempt ? " (attempt " + attempt + ")" : "";
}

// ---------------------------------------------------------------- tasks page

function loadingRow(columns) {
  return el("tr", { class: "loading" }, el("td", { colspan: String(columns), class: "muted", "aria-busy": "true", text: "loading…" }));
}

async function tasksPage(alive, params) {
  const filters = { status: params.get("status") || "", flow: params.get("flow") || "" };
  const limit = /^\d+$/.test(params.get("limit") || "") ? Math.min(100, Math.max(1, Number(params.get("limit")))) : 20;
  const cursors = [];
  let cursor = null;
  const statusSelect = el("select", { id: "filter-status" }, el("option", { value: "", text: "any status" }),
    STATUSES.map((s) => el("option", { value: s, text: s, selected: s === filters.status })));
  // the listing does not wait for the mesh description (queue attributes): the flow filter fills in when it comes
  const flowSelect = el("select", { id: "filter-flow" }, el("option", { value: "", text: "any flow" }),
    filters.flow ? el("option", { value: filters.flow, text: filters.flow, selected: true }) : null);
  mesh().then((m) => {
    flowSelect.replaceChildren(el("option", { value: "", text: "any flow" }),
      m.flows.map((f) => el("option", { value: f.name, text: f.name, selected: f.name === filters.flow })));
  }, () => {});
  const body = el("tbody", {}, loadingRow(7));
  const prev = el("button", { type: "button", class: "secondary", id: "tasks-newer", text: "← Newer" });
  const next = el("button", { type: "button", class: "secondary", id: "tasks-older", text: "Older →" });
  const table = el("table", { id: "tasks" },
    el("thead", {}, el("tr", {}, ["Task", "Flow", "Status", "Progress", "Actor", "Created", "Error"].map((h) => el("th", { text: h })))),
    body);

  async function load() {
    const query = new URLSearchParams({ limit: String(limit) });
    if (filters.status) query.set("status", filters.status);
    if (filters.flow) query.set("flow", filters.flow);
    if (cursor) query.set("cursor", cursor);
    let page;
    try {
      page = await api("GET", "api/v1/mesh/?" + query.toString());
    } catch (error) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: "7" }, failure(error))));
      return false;
    }
    const rows = page.messages.map((task) => el("tr", { "data-task-row": task.id, "data-created-at": task.created_at || "", "data-flow": task.flow || "" }, ...taskCells(task)));
    body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "7", class: "empty", text: "No tasks." }))]));
    next.disabled = !page.next_cursor;
    next.dataset.cursor = page.next_cursor || "";
    prev.disabled = cursors.length === 0;
    watchRows(page.messages.filter((task) => !TERMINAL.has(task.status)).map((task) => task.id));
    return true;
  }

  // The unfinished tasks on the page are followed over ONE stream (GET api/v1/mesh/events?ids=..., GW-SSE-20..27):
  // each status event redraws its row; the stream is reopened only when the set of unfinished ids changes.
  let watching = "";
  let stopWatching = () => {};
  onLeave(alive, () => stopWatching());
  function watchRows(ids) {
    const key = ids.join(",");
    if (key === watching) return;
    stopWatching();
    watching = key;
    stopWatching = () => {};
    if (!ids.length || !alive()) return;
    const url = BASE + "api/v1/mesh/events?ids=" + ids.map(encodeURIComponent).join(",");
    stopWatching = followUrl(url, {
      status(data) {
        const row = body.querySelector(`tr[data-task-row="${CSS.escape(String(data.task_id))}"]`);
        if (!row) return;
        const task = { ...data, id: data.task_id, created_at: row.dataset.createdAt, flow: row.dataset.flow };
        row.replaceChildren(...taskCells(task));
      },
    }, () => false);
  }

  function refilter() {
    const query = new URLSearchParams();
    if (statusSelect.value) query.set("status", statusSelect.value);
    if (flowSelect.value) query.set("flow", flowSelect.value);
    if (limit !== 20) query.set("limit", String(limit));
    location.hash = "#/tasks" + (query.toString() ? "?" + query.toString() : "");
  }
  statusSelect.addEventListener("change", refilter);
  flowSelect.addEventListener("change", refilter);
  next.addEventListener("click", () => {
    cursors.push(cursor);
    cursor = next.dataset.cursor || null;
    load();
  });
  prev.addEventListener("click", () => {
    cursor = cursors.pop() ?? null;
    load();
  });

  show(alive, el("h1", { text: "Tasks" }),
    el("div", { class: "card" },
      el("div", { class: "filters" }, el("label", {}, "Status ", statusSelect), el("label", {}, "Flow ", flowSelect),
        el("a", { href: "#/new", text: "+ New task" })),
      table, el("div", { class: "pager" }, prev, next)));
  await load();
  // rows change through the stream; the list itself is read again only to show new tasks
  every(alive, 10000, load);
}

// The cells of a task list row, from a list entry (GW-LIST-2) or a status event of the multiplexed stream.
function taskCells(task) {
  return [
    el("td", {}, taskLink(task.id)),
    el("td", { text: task.flow || "—" }),
    el("td", {}, badge(task.status)),
    el("td", {}, bar(task.progress_percent, task.status), el("small", { class: "muted", text: (task.progress_percent ?? 0) + "%" })),
    el("td", { text: task.current_actor || task.actor || "" }),
    el("td", {}, task.created_at ? ageText(task.created_at) : ""),
    el("td", { class: "error-text", text: task.error || "" }),
  ];
}

// ---------------------------------------------------------------- task page

async function taskPage(alive, id) {
  const flows = await mesh().then((m) => m.flows, () => []);
  let view;
  try {
    view = await api("GET", "api/v1/mesh/" + encodeURIComponent(id));
  } catch (error) {
    show(alive, el("h1", { text: "Task" }), failure(error));
    return;
  }
  const header = el("div", { class: "card" });
  const live = el("div", { class: "card" });
  const fly = el("pre", { class: "fly", id: "fly", "data-testid": "fly" });
  const outcome = el("div");
  const raw = el("pre", { id: "raw-json" });
  const rawBox = el("details", { class: "card", id: "raw" }, el("summary", { text: "Raw JSON" }), raw);
  const timeline = el("div", { id: "timeline" });
  // a flow written as Python is drawn with the path this task took (GW-MESH-1), from its run history when asya dev
  // keeps one, else from the route its last status carried
  const graph = (flows.find((f) => f.name === view.flow) || {}).graph;
  const drawing = el("div", { class: "card", id: "flow", hidden: !graph });
  let historySteps = null;
  function renderFlow() {
    if (!graph) return;
    const path = flowPath(graph, visitedActors(view, historySteps), { ended: view.status === "succeeded",
      paused: view.status === "paused", failedActor: view.status === "failed" ? view.failed_actor : null });
    const whole = drawing.querySelector(".flow-drawing.whole") !== null;  // a redraw keeps the reader's choice
    drawing.replaceChildren(el("h2", { text: "Flow " + view.flow }), flowDrawing(drawFlow(graph, view.flow, path), whole));
  }
  let flyCount = 0;
  let pausedForm = null;

  function renderView() {
    const cancel = el("button", { type: "button", class: "danger", id: "cancel", text: "Cancel task",
      disabled: TERMINAL.has(view.status), on: { click: cancelTask } });
    header.replaceChildren(
      el("h1", {}, "Task ", el("span", { class: "mono", text: view.id }), " ", badge(view.status)),
      kv([["flow", view.flow || "—"], ["entry actor", view.actor], ["created", el("span", {}, view.created_at + " (", ageText(view.created_at), ")")],
        ["updated", view.updated_at], ["deadline", view.deadline_at], ["remaining", view.remaining_seconds != null ? view.remaining_seconds + " s (frozen while paused)" : null]]),
      el("div", { class: "actions" }, cancel,
        view.status === "failed" ? el("button", { type: "button", id: "retry", text: "Retry",
          on: { click: () => retryTask(id, null) } }) : null));
    renderLive(view);
    renderOutcome();
    renderFlow();
    raw.textContent = json(view);
  }

  function renderLive(data) {
    const ended = TERMINAL.has(data.status);
    // a finished task says how it ended (and where it failed), not the step it was at when it last reported
    const progress = ended
      ? el("p", { id: "progress-text" }, el("strong", { text: data.status }),
        data.status === "failed" && (view.failed_actor || data.failed_actor)
          ? el("span", { class: "muted", text: " · at " + (view.failed_actor || data.failed_actor) }) : null)
      : el("p", { id: "progress-text" },
        el("strong", { text: (data.progress_percent ?? 0) + "%" }), " ",
        el("span", { id: "message", text: data.message || "" }),
        data.current_actor ? el("span", { class: "muted", text: " · " + data.current_actor + (data.step ? " (" + data.step + ")" : "") }) : null);
    fly.dataset.ended = ended ? "true" : "false";
    live.replaceChildren(
      el("h2", { text: "Progress" }),
      pipeline(view, flows),
      bar(ended && data.status === "succeeded" ? 100 : data.progress_percent, data.status, true),
      progress,
      el("h3", { text: "Live output (FLY)" }), fly);
  }

  function renderOutcome() {
    const parts = [];
    if (view.status === "succeeded") {
      parts.push(el("div", { class: "card", id: "result" }, el("h2", { text: "Result" }),
        "result_url" in view ? el("a", { href: safeUrl(view.result_url), rel: "noreferrer", text: "result (presigned URL)" }) : el("pre", { text: json(view.result) })));
    }
    if (view.status === "failed" || view.error) {
      parts.push(el("div", { class: "card error-box", id: "error" }, el("h2", { text: "Error" }),
        el("p", { class: "error-text", id: "error-text", text: view.error || "task failed" }),
        view.failed_actor ? el("p", {}, "Failed in ", el("strong", { text: view.failed_actor })) : null,
        view.error_details ? el("details", { open: true }, el("summary", { text: "Error details" }), errorDetails(view.error_details)) : null));
    }
    // one form per paused spell: a refresh (the paused status event triggers one) must not discard what the reviewer
    // already typed or checked
    pausedForm = view.status === "paused" ? pausedForm || resumeForm(view) : null;
    if (view.status === "paused" && ("paused_state" in view || "paused_state_url" in view)) {
      // what the reviewer approves is the payload as it reached the pause, not the input (GW-TASK-10)
      const state = "paused_state_url" in view
        ? el("a", { href: safeUrl(view.paused_state_url), rel: "noreferrer", text: "paused envelope (presigned URL; the state is its payload)" })
        : el("pre", { id: "paused-state", text: json(view.paused_state) });
      parts.push(el("div", { class: "card", id: "paused-state-card" }, el("h2", { text: "State at the pause" }), state));
    }
    if (pausedForm) parts.push(pausedForm);
    if (view.checkpoint_key || view.checkpoint_uri) {
      parts.push(el("div", { class: "card", id: "checkpoint" }, el("h2", { text: "Checkpoint" }),
        kv([["uri", view.checkpoint_uri], ["key", view.checkpoint_key], ["line", view.checkpoint_line]])));
    }
    const payload = "payload_url" in view
      ? el("a", { href: safeUrl(view.payload_url), rel: "noreferrer", text: "input payload (presigned URL)" })
      : el("pre", { id: "payload", text: json(view.payload) });
    parts.push(el("div", { class: "card" }, el("h2", { text: "Input" }), payload));
    if (Array.isArray(view.children) && view.children.length) {
      // the child tree (P-FAN-7): a child has no task record of its own, so its row says all the view knows
      parts.push(el("div", { class: "card", id: "children" }, el("h2", { text: "Fan-out children" }),
        el("table", { "data-testid": "child-tree" },
          el("thead", {}, el("tr", {}, ["child", "status", "current actor", "attempt", "last error"].map((h) => el("th", { text: h })))),
          el("tbody", {}, view.children.map((child) => el("tr", { "data-child": String(child.id) },
            el("td", { class: "mono", text: String(child.id) }),
            el("td", {}, badge(child.status || "running")),
            el("td", { text: child.current_actor || child.actor || "—" }),
            el("td", { text: child.attempt != null ? String(child.attempt) : "—" }),
            el("td", { class: child.error ? "error-text" : "muted", text: child.error || "—" })))))));
    }
    outcome.replaceChildren(...parts);
  }

  async function cancelTask() {
    try {
      await api("DELETE", "api/v1/mesh/" + encodeURIComponent(id));
      await refresh();
    } catch (error) {
      banner("cancel: " + error.message);
    }
  }

  async function refresh() {
    try {
      view = await api("GET", "api/v1/mesh/" + encodeURIComponent(id));
      renderView();
    } catch (error) {
      banner(error.message);
    }
  }

  function onStatus(data) {
    Object.assign(view, {
      status: data.status,
      progress_percent: data.progress_percent,
      current_actor: data.current_actor ?? view.current_actor,
      step: data.step ?? view.step,
      message: data.message ?? view.message,
      data,
    });
    header.querySelector(".badge")?.replaceWith(badge(view.status));
    header.querySelector("#cancel").disabled = TERMINAL.has(view.status);
    renderLive(data);
    renderFlow();
    if (TERMINAL.has(data.status) || data.status === "paused") refresh().then(loadTimeline);
  }

  function onFly(data) {
    flyCount += 1;
    const value = data.payload;
    fly.append(document.createTextNode(typeof value === "string" ? value : json(value) + "\n"));
    fly.dataset.count = String(flyCount);
  }

  // The first load (on open) and the one after a terminal status may answer out of order: only the latest request's
  // answer is shown, or a slow first answer would hide the final steps.
  let timelineRequest = 0;
  async function loadTimeline() {
    const request = ++timelineRequest;
    const steps = await history(id, view.status === "failed", (list) => { historySteps = list; });
    if (request !== timelineRequest || !alive()) return;
    timeline.replaceChildren(...(steps ? [steps] : []));
    renderFlow();
  }

  renderView();
  show(alive, header, live, drawing, outcome, timeline, rawBox);
  if (!alive()) return;
  onLeave(alive, follow(id, { status: onStatus, fly: onFly }));
  loadTimeline();
}

// Error details: each multi-line string member (a traceback) in its own block with its real line breaks; the rest as JSON.
function errorDetails(details) {
  if (!details || typeof details !== "object" || Array.isArray(details)) return el("pre", { id: "error-details", text: json(details) });
  const rest = {};
  const blocks = [];
  for (const [key, value] of Object.entries(details)) {
    if (typeof value === "string" && value.includes("\n")) {
      blocks.push(el("div", { class: "detail-block" }, el("div", { class: "muted", text: key }), el("pre", { class: "traceback", "data-detail": key, text: value })));
    } else {
      rest[key] = value;
    }
  }
  return el("div", { id: "error-details" }, Object.keys(rest).length ? el("pre", { text: json(rest) }) : null, ...blocks);
}

function safeUrl(value) {
  // presigned S3 URLs only: anything else (javascript:, data:) is not turned into a link target
  try {
    const url = new URL(String(value));
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : "#";
  } catch {
    return "#";
  }
}

// The task's events: status and fly, in order, until the terminal status (GW-SSE-7) or the page changes.
function follow(id, handlers) {
  const url = BASE + "api/v1/mesh/" + encodeURIComponent(id) + "/events";
  return followUrl(url, handlers, (name, data, lastId) => name === "status" && lastId && TERMINAL.has(data.status));
}

// An SSE stream's events to `handlers` by name; `ends(name, data, id)` closes it. A server that ends the stream
// answers the reconnection 204, which stops EventSource too (the multiplexed stream ends this way).
function followUrl(url, handlers, ends) {
  const dispatch = (name, text, id) => {
    let data;
    try {
      data = JSON.parse(text);
    } catch {
      return false;
    }
    if (handlers[name]) handlers[name](data);
    return Boolean(ends(name, data, id));
  };
  if (!apiKey()) {
    const source = new EventSource(url);
    for (const name of ["status", "fly"]) {
      source.addEventListener(name, (event) => {
        if (dispatch(name, event.data, event.lastEventId)) source.close();
      });
    }
    return () => source.close();
  }
  return followWithFetch(url, dispatch);
}

function followWithFetch(url, dispatch) {
  const abort = new AbortController();
  let lastId = null;
  let retry = 1000;
  let done = false;
  (async () => {
    while (!done) {
      try {
        const headers = { Accept: "text/event-stream", ...authHeaders() };
        if (lastId !== null) headers["Last-Event-ID"] = lastId;
        const response = await fetch(url, { headers, signal: abort.signal });
        if (response.status === 204 || response.status === 404) return;
        if (response.status === 401) return askForKey("The API key was refused by the event stream.");
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        let event = { name: "message", data: [], id: null };
        for (;;) {
          const { value, done: ended } = await reader.read();
          if (ended) break;
          buffer += value;
          let newline;
          while ((newline = buffer.search(/\r\n|\n|\r/)) >= 0) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
            if (line === "") {
              if (event.data.length) {
                if (event.id !== null) lastId = event.id;
                if (dispatch(event.name, event.data.join("\n"), event.id)) done = true;
              }
              event = { name: "message", data: [], id: null };
              continue;
            }
            if (line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const content = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "event") event.name = content;
            else if (field === "data") event.data.push(content);
            else if (field === "id") event.id = content;
            else if (field === "retry" && /^\d+$/.test(content)) retry = Number(content);
          }
        }
      } catch (error) {
        if (abort.signal.aborted) return;
      }
      if (!done) await new Promise((resolve) => setTimeout(resolve, retry));
    }
  })();
  return () => {
    done = true;
    abort.abort();
  };
}

// POST /api/v1/mesh/{id}/retry (GW-HIST-2), the route `asya retry` uses, after a confirmation; then the new task.
async function retryTask(id, step) {
  const what = step === null ? "Start a new task with this task's input, from the start?"
    : typeof step === "string" ? "Start a new task that runs this fan-out slice again with the input it received " +
      "(the other slices' results are reused)?"
    : "Start a new task from step " + step + " with the input that step received?";
  if (!window.confirm(what)) return;
  try {
    const created = await api("POST", "api/v1/mesh/" + encodeURIComponent(id) + "/retry", step === null ? {} : { from: String(step) });
    location.hash = "#/task/" + encodeURIComponent(created.id);
  } catch (error) {
    banner("retry: " + error.message);
  }
}

// A flow drawing in its scroll box (at most 640 px high, console.css), with a button that shows it whole when it is
// taller than the box, and folds it back.
function flowDrawing(drawing, whole = false) {
  const box = el("div", { class: "flow-drawing" + (whole ? " whole" : "") }, drawing);
  const label = () => (box.classList.contains("whole") ? "Fold the flow" : "Show the whole flow");
  const toggle = el("button", { type: "button", class: "flow-expand secondary", hidden: true, text: label(),
    on: { click: () => { box.classList.toggle("whole"); toggle.textContent = label(); } } });
  // known once the box is in the page: only a drawing that does not fit gets the button (a box never shown, because
  // a newer drawing replaced it, stops asking after a second of frames)
  let frames = 60;
  const fit = () => {
    if (!box.isConnected) {
      if (--frames > 0) requestAnimationFrame(fit);
      return;
    }
    const height = drawing ? Number(drawing.getAttribute("height")) : 0;
    toggle.hidden = !(height > box.clientHeight + 1 || box.classList.contains("whole"));
  };
  requestAnimationFrame(fit);
  return el("div", { class: "flow-box" }, toggle, box);
}

// The run history recorded in S3 (GW-HIST-1: a flow with history: steps in AWS, every task under asya dev); null
// when it does not answer 200. `failed`: each step of the task's own envelope, and of a fan-out slice, gets a
// "Retry from here" button. `onSteps` gets the steps (the flow drawing marks the path they took).
async function history(id, failed, onSteps = () => {}) {
  let body = null;
  try {
    body = await api("GET", "api/v1/mesh/" + encodeURIComponent(id) + "/history");
  } catch {
    return null;
  }
  if (!body || !Array.isArray(body.steps)) return null;
  onSteps(body.steps);
  // the task's own steps by hop index; a fan-out slice's by its child id: the retry runs that slice again and reuses
  // its siblings' results (P-HIST-9)
  const isSlice = (step) => Boolean(step.headers && step.headers["x-asya-fan-in"]);
  const replayable = (step) => failed && step.hop != null && (step.envelope_id === id || isSlice(step));
  const from = (step) => (step.envelope_id === id ? step.hop : step.envelope_id);
  const rows = body.steps.map((step, index) => el("tr", {},
    el("td", { text: String(index + 1) }),
    el("td", {}, el("strong", { text: step.actor }), step.attempt > 1 ? el("small", { class: "muted", text: " attempt " + step.attempt }) : null),
    el("td", { title: step.started_at, text: (step.started_at || "") }),
    el("td", { text: step.duration_ms != null ? step.duration_ms + " ms" : "" }),
    el("td", {}, el("details", {}, el("summary", { text: "input" }), el("pre", { text: json(step.input) }))),
    el("td", {}, (step.outputs || []).map((out) => el("details", {},
      el("summary", { text: "→ " + (out.actor || "end") }), el("pre", { text: json(out.payload) })))),
    el("td", { class: "error-text", text: step.error ? (typeof step.error === "string" ? step.error : json(step.error)) : "" }),
    el("td", {}, replayable(step) ? el("button", { type: "button", class: "retry-from", "data-hop": String(step.hop),
      "data-envelope": step.envelope_id, text: "Retry from here", on: { click: () => retryTask(id, from(step)) } }) : null)));
  return el("div", { class: "card timeline", "data-testid": "timeline" }, el("h2", { text: "Step timeline" }),
    el("table", {}, el("thead", {}, el("tr", {}, ["#", "Actor", "Started", "Duration", "Input", "Outputs", "Error", ""].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows)),
    body.truncated ? el("p", { class: "muted", text: "History truncated: older steps were dropped." }) : null,
    body.missing_objects ? el("p", { class: "muted", text: body.missing_objects + " invocation(s) still writing or lost: reload to see their steps." }) : null);
}

// ---------------------------------------------------------------- resume (pause_metadata fields, P-PAUSE-3)

function resumeForm(view) {
  const meta = view.pause_metadata || { prompt: "Task paused", fields: [] };
  const fields = Array.isArray(meta.fields) ? meta.fields : [];
  const inputs = fields.map((field) => fieldInput(String(field.name), { type: field.type || "string" }, Boolean(field.required), field.prompt));
  const message = el("p", { class: "error-text", id: "resume-error" });
  const form = el("form", { class: "card", id: "resume-form" },
    el("h2", { text: "Paused" }), el("p", { text: meta.prompt || "Task paused" }),
    inputs.map((input) => input.row),
    el("div", { class: "actions" }, el("button", { type: "submit", text: "Resume" })), message);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = {};
    try {
      for (const item of inputs) {
        const value = item.read();
        if (value !== undefined) input[item.name] = value;
      }
      await api("POST", "api/v1/mesh/" + encodeURIComponent(view.id) + "/resume", { input });
      route();
    } catch (error) {
      message.textContent = error.message;
    }
  });
  return form;
}

// ---------------------------------------------------------------- new task form (input_schema)

function fieldInput(name, schema, required, hint) {
  const id = "field-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  let control;
  let read;
  if (Array.isArray(schema.enum)) {
    control = el("select", { id, name }, required ? null : el("option", { value: "", text: "—" }),
      schema.enum.map((value, index) => el("option", { value: String(index), text: JSON.stringify(value) })));
    read = () => (control.value === "" ? undefined : schema.enum[Number(control.value)]);
  } else if (type === "boolean" && required && typeof schema.default !== "boolean") {
    // a required yes/no nobody answered must not go out as false: the reviewer picks one, the browser refuses none
    control = el("select", { id, name, required }, el("option", { value: "", text: "— choose —" }),
      el("option", { value: "true", text: "yes" }), el("option", { value: "false", text: "no" }));
    read = () => (control.value === "" ? undefined : control.value === "true");
  } else if (type === "boolean") {
    control = el("input", { id, name, type: "checkbox", checked: schema.default === true });
    read = () => control.checked;
  } else if (type === "integer" || type === "number") {
    control = el("input", { id, name, type: "number", step: type === "integer" ? "1" : "any", required,
      value: schema.default != null ? String(schema.default) : null });
    read = () => {
      if (control.value === "") return undefined;
      const value = Number(control.value);
      if (!Number.isFinite(value) || (type === "integer" && !Number.isInteger(value))) throw new Error(name + " must be " + (type === "integer" ? "an integer" : "a number") + ", got " + JSON.stringify(control.value));
      return value;
    };
  } else if (type === "object" || type === "array") {
    control = el("textarea", { id, name, rows: "4", placeholder: type === "object" ? "{}" : "[]", required,
      text: schema.default !== undefined ? json(schema.default) : "" });
    read = () => {
      if (control.value.trim() === "") return undefined;
      try {
        return JSON.parse(control.value);
      } catch (error) {
        throw new Error(name + ": invalid JSON (" + error.message + ")");
      }
    };
  } else {
    const long = (schema.maxLength || 0) > 200 || schema.format === "textarea";
    control = long ? el("textarea", { id, name, rows: "4", required }) : el("input", { id, name, type: "text", required,
      value: typeof schema.default === "string" ? schema.default : null });
    read = () => (control.value === "" && !required ? undefined : control.value);
  }
  const row = el("div", { class: "form-row" },
    el("label", { for: id }, name, required ? " *" : "", el("span", { class: "hint", text: type ? "  " + type : "" })),
    control, hint || schema.description ? el("div", { class: "hint", text: hint || schema.description }) : null);
  return { name, row, read };
}

async function newTaskPage(alive, flowName) {
  let info;
  try {
    info = await mesh();
  } catch (error) {
    show(alive, el("h1", { text: "New task" }), failure(error));
    return;
  }
  const flow = info.flows.find((f) => f.name === flowName);
  if (!flow) {
    show(alive, el("h1", { text: "New task" }), el("div", { class: "card" }, el("p", { text: "Pick a flow:" }),
      info.flows.length ? el("ul", { id: "flow-list" }, info.flows.map((f) => el("li", {},
        el("a", { href: "#/new/" + encodeURIComponent(f.name), text: f.name }), f.description ? " · " + f.description : "")))
        : el("p", { class: "empty", text: "The manifest declares no flows." }),
      flowName ? el("p", { class: "error-text", text: "flow not found: " + flowName }) : null));
    return;
  }
  const schema = flow.input_schema || null;
  const properties = schema && schema.type === "object" && schema.properties && typeof schema.properties === "object" ? schema.properties : null;
  const required = new Set(Array.isArray(schema && schema.required) ? schema.required : []);
  const inputs = properties ? Object.entries(properties).map(([name, sub]) => fieldInput(name, sub || {}, required.has(name))) : [];
  const rawText = el("textarea", { id: "raw-payload", rows: "10", text: schema && schema.type === "object" ? "{}" : "null" });
  const rawToggle = el("input", { type: "checkbox", id: "use-raw", checked: !properties });
  // a fieldset, so that switching to raw JSON disables its controls and their browser validation with them
  const formFields = el("fieldset", { id: "schema-fields", class: "plain", hidden: !properties }, inputs.map((input) => input.row));
  const rawBox = el("div", { id: "raw-box", hidden: Boolean(properties) },
    el("label", { for: "raw-payload", class: "muted", text: "Payload (any JSON value)" }), rawText);
  const timeout = el("input", { id: "timeout", type: "number", min: "1", max: "604800", step: "1", placeholder: String(flow.timeout) });
  const message = el("p", { class: "error-text", id: "create-error" });
  rawToggle.addEventListener("change", () => {
    if (rawToggle.checked) {
      try {
        rawText.value = json(collect());
      } catch {
        // an unparsable field leaves the raw text as it was
      }
    }
    formFields.hidden = rawToggle.checked;
    formFields.disabled = rawToggle.checked;
    rawBox.hidden = !rawToggle.checked;
  });
  function collect() {
    const payload = {};
    for (const item of inputs) {
      const value = item.read();
      if (value !== undefined) payload[item.name] = value;
    }
    return payload;
  }
  const form = el("form", { class: "card", id: "create-form" },
    el("h1", {}, "New task · ", el("span", { text: flow.name })),
    flow.description ? el("p", { class: "muted", text: flow.description }) : null,
    routeRow(flow.route),
    formFields,
    properties ? el("label", {}, rawToggle, " Raw JSON") : null,
    rawBox,
    el("div", { class: "form-row" }, el("label", { for: "timeout", text: "Timeout (seconds, optional)" }), timeout),
    el("div", { class: "actions" }, el("button", { type: "submit", id: "create", text: "Create task" })),
    message);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.textContent = "";
    let body;
    try {
      let payload;
      if (rawToggle.checked) {
        try {
          payload = JSON.parse(rawText.value);
        } catch (error) {
          throw new Error("payload: invalid JSON (" + error.message + ")");
        }
      } else payload = collect();
      body = { payload };
      if (timeout.value !== "") body.timeout = Number(timeout.value);
      const created = await api("POST", "api/v1/mesh/?flow=" + encodeURIComponent(flow.name), body);
      location.hash = "#/task/" + encodeURIComponent(created.id);
    } catch (error) {
      message.textContent = error.message;
    }
  });
  show(alive, form);
}

// ---------------------------------------------------------------- mesh page

function dlqCommands(actor) {
  const where = LOCAL ? " --local" : "";
  return ["asya dlq show " + actor + where, "asya dlq redrive " + actor + where];
}

async function meshPage(alive) {
  let info;
  try {
    info = await mesh();
  } catch (error) {
    show(alive, el("h1", { text: "Mesh" }), failure(error));
    return;
  }
  const alerts = el("div", { id: "dlq-alerts" });
  const queues = el("tbody", {}, loadingRow(7));  // the diagnostic reads every queue's attributes: seconds on a big mesh
  const checked = el("p", { class: "muted", text: "checking the queues…" });
  const flows = el("div", { class: "card", id: "flows" }, el("h2", { text: "Flows" }),
    info.flows.length ? info.flows.map((flow) => el("div", { "data-flow": flow.name },
      el("h3", {}, flow.name, " ", el("a", { href: "#/new/" + encodeURIComponent(flow.name), text: "+ new task" })),
      flow.description ? el("p", { class: "muted", text: flow.description }) : null,
      flow.graph ? flowDrawing(drawFlow(flow.graph, flow.name)) : routeRow(flow.route),
      el("p", { class: "muted", text: "timeout " + flow.timeout + " s · progress " + flow.progress + (flow.input_schema ? " · input_schema" : "") }))) :
      el("p", { class: "empty", text: "No flows declared." }));

  async function load() {
    let report;
    let failed = { messages: [] };
    try {
      [report, failed] = await Promise.all([
        api("POST", "api/v1/system/mq-diagnostic", {}),
        api("GET", "api/v1/mesh/?status=failed&limit=50").catch(() => ({ messages: [] })),
      ]);
    } catch (error) {
      alerts.replaceChildren(failure(error));
      return;
    }
    // the newest failed task per actor: the list is newest first
    const lastError = new Map();
    for (const task of failed.messages) {
      const actor = task.current_actor || task.actor;
      if (actor && !lastError.has(actor)) lastError.set(actor, task);
    }
    const full = report.queues.filter((q) => q.dlq && q.dlq.depth > 0);
    alerts.replaceChildren(...full.map((q) => el("div", { class: "card dlq-alert", "data-dlq": q.actor },
      el("h2", {}, "Dead letters in ", el("span", { class: "mono", text: q.dlq.queue })),
      el("p", {}, el("span", { class: "dlq-count", text: String(q.dlq.depth) }), " message(s) in the DLQ of actor ",
        el("strong", { text: q.actor }), ". Inspect, then redrive once the cause is fixed:"),
      el("pre", { class: "dlq-commands", text: dlqCommands(q.actor).join("\n") }),
      el("div", { class: "actions" }, el("button", { type: "button", class: "redrive", "data-actor": q.actor,
        text: "Redrive", on: { click: () => redrive(q.actor, q.dlq.depth) } })))));
    checked.textContent = "checked " + report.checked_at + (report.healthy ? " · healthy" : " · needs attention");
    queues.replaceChildren(...report.queues.map((q) => {
      const last = lastError.get(q.actor);
      const count = (value) => (value === null || value === undefined ? "—" : String(value));
      return el("tr", { "data-queue": q.actor },
        el("td", {}, el("strong", { text: q.actor }), el("div", { class: "muted mono", text: q.queue })),
        el("td", { text: q.exists ? count(q.depth) : "missing" }),
        el("td", { text: count(q.in_flight) }),
        el("td", { text: count(q.delayed) }),
        el("td", { class: q.dlq && q.dlq.depth > 0 ? "dlq-count" : "", text: q.dlq && q.dlq.exists ? count(q.dlq.depth) : "missing" }),
        el("td", { text: q.oldest_age_seconds != null ? q.oldest_age_seconds + " s" : "—" }),
        el("td", {}, last ? [el("span", { class: "error-text", text: last.error || "failed" }), el("div", {}, taskLink(last.id))] : "",
          q.error ? el("div", { class: "error-text", text: "AWS error: " + q.error }) : null));
    }));
  }

  // POST /api/v1/system/dlq/{actor}/redrive (GW-DLQ-1), after a confirmation; then the queues again
  async function redrive(actor, depth) {
    if (!window.confirm("Move the " + depth + " message(s) of " + actor + "'s DLQ back to its queue?")) return;
    try {
      const moved = await api("POST", "api/v1/system/dlq/" + encodeURIComponent(actor) + "/redrive", { limit: 1000 });
      banner("redrive: " + moved.moved + " message(s) moved back to " + actor + (moved.failed ? ", " + moved.failed + " failed" : ""));
    } catch (error) {
      banner("redrive: " + error.message);
    }
    await load();
  }

  show(alive, el("h1", {}, "Mesh ", el("span", { class: "muted", text: info.namespace })), alerts,
    el("div", { class: "card" }, el("h2", { text: "Queues" }), checked,
      el("table", { id: "queues" }, el("thead", {}, el("tr", {}, ["Actor", "Depth", "In flight", "Delayed", "DLQ", "Oldest", "Last error"].map((h) => el("th", { text: h })))), queues)),
    flows);
  await load();
  every(alive, 5000, load);
}

// ---------------------------------------------------------------- router

function route() {
  const hash = location.hash || "#/tasks";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === (parts[0] || "tasks"));
  banner("");
  const alive = begin();
  if (parts[0] === "task" && parts[1]) return taskPage(alive, parts[1]);
  if (parts[0] === "mesh") return meshPage(alive);
  if (parts[0] === "new") return newTaskPage(alive, parts[1] || "");
  return tasksPage(alive, params);
}

setupKeyForm();
window.addEventListener("hashchange", route);
route();
