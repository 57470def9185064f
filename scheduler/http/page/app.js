// The evsched page: reads the JSON API of the server that served it; no build step, nothing from elsewhere.
"use strict";

const $ = (sel) => document.querySelector(sel);
const MIN_PRIORITY = -2147483648; // a queue or app with nothing pending has no priority
// How often the page asks whether a new cycle ran (paused: never); ?poll=MS (at least 200) for another pace.
const POLL_MS = Math.max(200, Number(new URLSearchParams(location.search).get("poll")) || 5000);
const PAGE = { apps: 20, nodes: 20, pending: 10, decisions: 15 };
const showPriority = (p) => (p === MIN_PRIORITY ? "–" : `${p}`);
const state = {
  partition: "default", cycle: "", expanded: new Set(["root"]), queueFilter: null, pendingQueue: "root",
  paused: false, seen: null, capacity: {}, nodes: [], decisions: [],
  offset: { apps: 0, nodes: 0, pending: 0, decisions: 0 }, search: { apps: "", nodes: "" },
};

// Human units: memory in bytes -> KiB..TiB, vcore in millicores -> "500m" / "64 cores".
function humanQuantity(name, value) {
  if (name === "vcore") {
    if (value % 1000 === 0) return `${value / 1000} ${value === 1000 ? "core" : "cores"}`;
    return value < 1000 ? `${value}m` : `${(value / 1000).toFixed(2)} cores`;
  }
  if (name === "memory" || name.endsWith("storage")) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let v = value, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`;
  }
  return String(value);
}

function human(resources) {
  const names = Object.keys(resources || {}).sort();
  return names.length ? names.map((n) => `${n} ${humanQuantity(n, resources[n])}`).join(", ") : "–";
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function cell(row, text, cls) {
  const td = el("td", cls, text);
  row.appendChild(td);
  return td;
}

async function api(path, { travel = true, total = false } = {}) {
  const sep = path.includes("?") ? "&" : "?";
  const url = travel && state.cycle !== "" && path.startsWith("/ws/v1/partition") ? `${path}${sep}cycle=${state.cycle}` : path;
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.message || `HTTP ${response.status}`);
  return total ? { body, total: Number(response.headers.get("X-Total-Count") || body.length) } : body;
}

// A pager: "41–60 of 312  [previous] [next]" writing state.offset[key] and calling reload.
function pager(key, total, shown, reload) {
  const box = $(`#${key}-pager`);
  box.replaceChildren();
  const from = state.offset[key];
  box.append(total ? `${from + 1}–${from + shown} of ${total}` : "none");
  const prev = el("button", "prev", "previous");
  prev.disabled = from === 0;
  prev.onclick = () => { state.offset[key] = Math.max(0, from - PAGE[key]); reload(); };
  const next = el("button", "next", "next");
  next.disabled = from + shown >= total;
  next.onclick = () => { state.offset[key] = from + PAGE[key]; reload(); };
  box.append(prev, next);
}

// The offset of the last page of ``total`` rows (0 when there are none).
const lastPage = (total, size) => Math.max(0, Math.floor((total - 1) / size) * size);

// Usage meters: per resource, allocated against max (the bar's end; no max: the partition's
// capacity) with a tick at guaranteed; red past guaranteed.
function meters(allocated, guaranteed, max) {
  const box = el("div", "usage");
  const names = Object.keys({ ...allocated, ...guaranteed, ...max }).filter((n) => (max[n] || state.capacity[n])).sort();
  for (const name of names) {
    const end = max[name] || state.capacity[name];
    const used = allocated[name] || 0;
    const meter = el("div", "meter");
    const fill = el("div", "fill");
    fill.style.width = `${Math.min(100, (100 * used) / end)}%`;
    if (guaranteed[name] !== undefined && used > guaranteed[name]) fill.classList.add("over");
    meter.appendChild(fill);
    if (guaranteed[name] !== undefined) {
      const tick = el("div", "guar");
      tick.style.left = `${Math.min(100, (100 * guaranteed[name]) / end)}%`;
      meter.appendChild(tick);
    }
    const of = max[name] ? "max" : "cluster";
    const guar = guaranteed[name] !== undefined ? `, guaranteed ${humanQuantity(name, guaranteed[name])}` : "";
    meter.title = `${name}: ${humanQuantity(name, used)} of ${of} ${humanQuantity(name, end)}${guar}`;
    box.append(el("div", "meter-label", `${name} ${Math.round((100 * used) / end)}% of ${of}`), meter);
  }
  return box;
}

function renderQueues(root) {
  const body = $("#queues tbody");
  body.replaceChildren();
  const walk = (q, depth) => {
    const row = document.createElement("tr");
    row.className = "queue" + (q.queuename === state.pendingQueue ? " selected" : "");
    row.dataset.queue = q.queuename;
    const name = cell(row, "");
    name.style.paddingLeft = `${depth * 1.2 + 0.6}em`;
    const toggle = el("span", "toggle", q.isLeaf ? "" : (state.expanded.has(q.queuename) ? "▾" : "▸"));
    toggle.onclick = () => {
      if (state.expanded.has(q.queuename)) state.expanded.delete(q.queuename); else state.expanded.add(q.queuename);
      renderQueues(root);
    };
    const label = el("a", "qname", q.queuename.split(".").pop());
    label.title = `${q.queuename}: its pending work and apps`;
    label.onclick = () => {
      state.queueFilter = q.isLeaf ? q.queuename : null;
      state.pendingQueue = q.queuename;
      state.offset.apps = 0; state.offset.pending = 0;
      renderQueues(root);
      loadApps(); loadPending();
    };
    name.append(toggle, label);
    row.appendChild(el("td")).appendChild(meters(q.allocatedResource, q.guaranteedResource, q.maxResource));
    const props = q.properties;
    const prio = cell(row, showPriority(q.currentPriority), "num");
    const fence = props["priority.policy"] === "fence";
    prio.title = `offset ${props["priority.offset"]}${fence ? ", fenced" : ""}`;
    if (fence) prio.append(" ", el("span", "fence", "fence"));
    if (props["priority.offset"] !== "0") prio.append(` (offset ${props["priority.offset"]})`);
    cell(row, `${props["application.sort.policy"]}`);
    cell(row, human(q.guaranteedResource));
    cell(row, human(q.maxResource));
    cell(row, human(q.allocatedResource));
    cell(row, human(q.pendingResource));
    cell(row, `${q.runningApps}`, "num");
    body.appendChild(row);
    if (state.expanded.has(q.queuename)) q.children.forEach((c) => walk(c, depth + 1));
  };
  walk(root, 0);
}

function list(items, cls) {
  const ul = el("ul", cls);
  for (const text of items) ul.appendChild(el("li", "", text));
  return ul;
}

async function loadPending() {
  const q = state.pendingQueue;
  $("#pending-queue").textContent = q;
  const path = `/ws/v1/partition/${state.partition}/queue/${encodeURIComponent(q)}/pending`;
  const report = await api(`${path}?offset=${state.offset.pending}&limit=${PAGE.pending}`);
  if (report.items.length === 0 && state.offset.pending > 0) { // the list shrank under this page
    state.offset.pending = lastPage(report.total, PAGE.pending);
    if (report.total > 0) return loadPending();
  }
  const body = $("#pending tbody");
  body.replaceChildren();
  for (const item of report.items) {
    const row = document.createElement("tr");
    row.dataset.ask = `${item.applicationID}/${item.allocationKey}`;
    cell(row, `${item.positionInQueue}`, "num pos-queue");
    cell(row, `${item.positionInLeafQueue}`, "num pos-leaf");
    cell(row, `${item.positionInPartition}`, "num pos-partition");
    const ask = cell(row, "");
    const link = el("a", "", `${item.applicationID}/${item.allocationKey}`);
    link.title = "explain in full";
    link.onclick = () => explain(`${item.applicationID}/${item.allocationKey}`);
    ask.appendChild(link);
    cell(row, item.queueName);
    cell(row, human(item.resource));
    const reasons = item.reasons.length ? item.reasons.map((r) => r.message)
      : ["nothing holds it now: the next cycle should allocate it"];
    row.appendChild(el("td", "why")).appendChild(list(reasons, "reasons"));
    row.appendChild(el("td", "fix")).appendChild(list(item.wouldRun.map((f) => f.message), "reasons"));
    body.appendChild(row);
  }
  pager("pending", report.total, report.items.length, loadPending);
}

async function loadApps() {
  const query = new URLSearchParams({ offset: state.offset.apps, limit: PAGE.apps });
  if (state.queueFilter) query.set("queue", state.queueFilter);
  if (state.search.apps) query.set("search", state.search.apps);
  const { body: apps, total } = await api(`/ws/v1/partition/${state.partition}/applications?${query}`, { total: true });
  if (apps.length === 0 && state.offset.apps > 0 && total > 0) {
    state.offset.apps = lastPage(total, PAGE.apps);
    return loadApps();
  }
  $("#apps-filter").textContent = state.queueFilter ? `in ${state.queueFilter}` : "";
  const body = $("#apps tbody");
  body.replaceChildren();
  for (const a of apps) {
    const row = document.createElement("tr");
    cell(row, a.applicationID);
    cell(row, a.queueName);
    cell(row, a.applicationState);
    cell(row, showPriority(a.currentPriority), "num");
    cell(row, human(a.allocatedResource));
    cell(row, human(a.pendingResource));
    const asks = cell(row, "");
    for (const r of a.requests.slice(0, 12)) {
      const link = el("a", "", r.allocationKey);
      link.title = "why is this ask pending?";
      link.onclick = () => explain(`${a.applicationID}/${r.allocationKey}`);
      asks.append(link, " ");
    }
    if (a.requests.length > 12) asks.append(`… ${a.requests.length - 12} more`);
    body.appendChild(row);
  }
  pager("apps", total, apps.length, loadApps);
}

// A node's use: the fuller of its resources, allocated plus occupied over capacity, 0..1.
function nodeUse(n) {
  let most = 0;
  for (const [name, cap] of Object.entries(n.capacity)) {
    if (cap > 0) most = Math.max(most, ((n.allocated[name] || 0) + (n.occupied[name] || 0)) / cap);
  }
  return Math.min(1, most);
}

function renderHeatmap() {
  const box = $("#heatmap");
  box.replaceChildren();
  for (const n of state.nodes) {
    const use = nodeUse(n);
    const square = el("div", "cell");
    square.setAttribute("role", "listitem");
    square.dataset.node = n.nodeID;
    if (!n.schedulable) square.classList.add("off");
    else square.style.background = `var(--heat-${Math.min(4, Math.floor(use * 5))})`;
    square.title = `${n.nodeID}: ${Math.round(use * 100)}% used (${human(n.allocated)} of ${human(n.capacity)})`;
    square.onclick = () => { $("#nodes-search").value = n.nodeID; state.search.nodes = n.nodeID; state.offset.nodes = 0; renderNodes(); };
    box.appendChild(square);
  }
}

function renderNodes() {
  const needle = state.search.nodes.toLowerCase();
  const found = needle ? state.nodes.filter((n) => n.nodeID.toLowerCase().includes(needle)) : state.nodes;
  if (state.offset.nodes >= found.length) state.offset.nodes = lastPage(found.length, PAGE.nodes);
  const shown = found.slice(state.offset.nodes, state.offset.nodes + PAGE.nodes);
  const body = $("#nodes tbody");
  body.replaceChildren();
  for (const n of shown) {
    const row = document.createElement("tr");
    row.dataset.node = n.nodeID;
    cell(row, n.nodeID);
    cell(row, `${Math.round(nodeUse(n) * 100)}%`, "num");
    cell(row, n.schedulable ? "yes" : "no");
    cell(row, human(n.capacity));
    cell(row, human(n.allocated));
    cell(row, human(n.available));
    cell(row, `${n.allocations}`, "num");
    body.appendChild(row);
  }
  pager("nodes", found.length, shown.length, renderNodes);
}

async function loadNodes() {
  state.nodes = await api(`/ws/v1/partition/${state.partition}/nodes`);
  renderHeatmap();
  renderNodes();
}

function renderDecisions() {
  if (state.offset.decisions >= state.decisions.length) state.offset.decisions = lastPage(state.decisions.length, PAGE.decisions);
  const shown = state.decisions.slice(state.offset.decisions, state.offset.decisions + PAGE.decisions);
  const body = $("#decisions tbody");
  body.replaceChildren();
  for (const d of shown) {
    const row = document.createElement("tr");
    const id = cell(row, "");
    const link = el("a", "", d.decisionId);
    link.title = "why did this decision land there?";
    link.onclick = () => explain(d.decisionId);
    id.appendChild(link);
    cell(row, `${d.cycle}`, "num");
    cell(row, `${d.applicationID}/${d.allocationKey}`);
    cell(row, d.queueName);
    cell(row, d.nodeId);
    cell(row, human(d.resource));
    body.appendChild(row);
  }
  pager("decisions", state.decisions.length, shown.length, renderDecisions);
}

async function loadDecisions() {
  state.decisions = await api("/ws/v1/decisions?limit=200");
  renderDecisions();
}

// Small charts (inline SVG): one polyline per resource, scaled to the partition's capacity
// (no capacity: the window's largest value); bars for decisions.
const SVG = "http://www.w3.org/2000/svg";
function polyline(svg, values, top, cls) {
  if (values.length === 0) return;
  const step = values.length > 1 ? 240 / (values.length - 1) : 0;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(58 - (56 * v) / (top || 1)).toFixed(1)}`);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", points.join(" "));
  line.setAttribute("class", `line ${cls}`);
  svg.appendChild(line);
}

function resourceChart(id, samples, field) {
  const svg = $(`#${id}`);
  svg.replaceChildren();
  const names = [...new Set(samples.flatMap((s) => Object.keys(s[field])))].sort();
  for (const name of names) {
    const values = samples.map((s) => s[field][name] || 0);
    polyline(svg, values, state.capacity[name] || Math.max(...values), name === "memory" ? "memory" : "vcore");
  }
  const last = samples.length ? samples[samples.length - 1][field] : {};
  $(`#${id}-now`).textContent = samples.length ? `now ${human(last)}` : "";
}

function renderSeries(samples) {
  resourceChart("chart-pending", samples, "pending");
  resourceChart("chart-allocated", samples, "allocated");
  const bars = $("#chart-decisions");
  bars.replaceChildren();
  const counts = samples.map((s) => s.decisions);
  const top = Math.max(1, ...counts);
  const width = 240 / Math.max(1, counts.length);
  counts.forEach((c, i) => {
    const rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("x", (i * width).toFixed(2));
    rect.setAttribute("width", Math.max(0.5, width - 0.5).toFixed(2));
    rect.setAttribute("y", (60 - (58 * c) / top).toFixed(2));
    rect.setAttribute("height", ((58 * c) / top).toFixed(2));
    rect.setAttribute("class", "bar");
    bars.appendChild(rect);
  });
  $("#chart-decisions-now").textContent = counts.length ? `last ${counts[counts.length - 1]}, most ${top}` : "";
  const svg = $("#chart-seconds");
  svg.replaceChildren();
  const seconds = samples.map((s) => s.seconds || 0);
  polyline(svg, seconds, Math.max(...seconds, 1e-6), "seconds");
  const lastSeconds = seconds.length ? seconds[seconds.length - 1] : null;
  $("#chart-seconds-now").textContent = lastSeconds === null ? "" : `last ${(lastSeconds * 1000).toFixed(1)} ms`;
  $("#glance-cycles").textContent = samples.length
    ? `cycles ${samples[0].cycle}–${samples[samples.length - 1].cycle}` : "no cycles yet";
}

async function loadSeries() {
  const series = await api(`/ws/v1/partition/${state.partition}/series`, { travel: false });
  renderSeries(series.cycles);
}

async function explain(text) {
  const target = text.trim();
  $("#why-input").value = target;
  const answer = $("#why-answer");
  answer.textContent = "explaining…";
  const slash = target.indexOf("/");
  const path = slash > 0
    ? `/ws/v1/asks/${encodeURIComponent(target.slice(0, slash))}/${encodeURIComponent(target.slice(slash + 1))}/explain`
    : `/ws/v1/decisions/${encodeURIComponent(target)}/explain`;
  try {
    const result = await api(path);
    let head = "";
    if (slash > 0) {
      // after the last cycle, as the explanation below (whatever cycle the page shows)
      const report = await api(`/ws/v1/partition/${state.partition}/queue/root/pending?ask=${encodeURIComponent(target)}`,
        { travel: false });
      const item = report.items[0];
      if (item) {
        head = `Position: ${item.positionInQueue} of ${report.total} pending in the partition (in the order the next cycle tries them)\n`;
        if (item.wouldRun.length) head += `What would let it run:\n${item.wouldRun.map((f) => `  - ${f.message}`).join("\n")}\n`;
        head += "\n";
      }
    }
    answer.textContent = head + result.text;
  } catch (err) {
    answer.textContent = `cannot explain ${target}: ${err.message}`;
  }
}

async function refresh() {
  state.cycle = $("#cycle").value.trim();
  try {
    const cycles = await api("/ws/v1/cycles");
    state.seen = cycles.latest;
    $("#mode").textContent = cycles.live ? "live" : "from the log";
    $("#cycle").max = cycles.latest;
    const partitions = await api(`/ws/v1/partitions${state.cycle !== "" ? `?cycle=${state.cycle}` : ""}`);
    const select = $("#partition");
    if (select.options.length !== partitions.length) {
      select.replaceChildren(...partitions.map((p) => new Option(p.name, p.name)));
      select.value = state.partition;
    }
    const mine = partitions.find((p) => p.name === state.partition);
    state.capacity = mine ? mine.capacity.capacity : {};
    $("#profile").textContent = mine ? `rules ${mine.rulesProfile}` : "";
    renderQueues(await api(`/ws/v1/partition/${state.partition}/queues`));
    await Promise.all([loadApps(), loadNodes(), loadDecisions(), loadPending(), loadSeries()]);
    const at = state.cycle === "" ? cycles.latest : state.cycle;
    $("#status").textContent = `cycle ${at} of ${cycles.latest}${state.paused ? " · paused" : ""} · ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $("#status").textContent = `error: ${err.message}`;
  }
}

// Every POLL_MS: when not paused and not looking at a past cycle, refresh if a cycle ran since.
window.evschedPolls = 0; // poll ticks so far, paused or not (the browser tests pace themselves by it)
async function poll() {
  window.evschedPolls += 1;
  if (state.paused || $("#cycle").value.trim() !== "" || document.hidden) return;
  try {
    const cycles = await api("/ws/v1/cycles");
    if (cycles.latest !== state.seen) await refresh();
  } catch (err) {
    $("#status").textContent = `error: ${err.message}`;
  }
}

function setPaused(paused) {
  state.paused = paused;
  const button = $("#pause");
  button.textContent = paused ? "resume" : "pause";
  button.setAttribute("aria-pressed", String(paused));
  const status = $("#status");
  status.textContent = status.textContent.replace(" · paused", "").replace(/^(cycle \d+ of \d+)/, paused ? "$1 · paused" : "$1");
}

function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

$("#refresh").onclick = refresh;
$("#pause").onclick = () => setPaused(!state.paused);
$("#partition").onchange = (e) => {
  state.partition = e.target.value; state.queueFilter = null; state.pendingQueue = "root";
  Object.keys(state.offset).forEach((k) => { state.offset[k] = 0; });
  refresh();
};
$("#cycle").onchange = refresh;
$("#why-form").onsubmit = (e) => { e.preventDefault(); explain($("#why-input").value); };
$("#apps-search").oninput = debounce((e) => { state.search.apps = e.target.value; state.offset.apps = 0; loadApps(); }, 250);
$("#nodes-search").oninput = debounce((e) => { state.search.nodes = e.target.value; state.offset.nodes = 0; renderNodes(); }, 250);
setInterval(poll, POLL_MS);
refresh();
