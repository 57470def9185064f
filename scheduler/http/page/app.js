// The evsched page: reads the JSON API of the server that served it; no build step.
"use strict";

const $ = (sel) => document.querySelector(sel);
const MIN_PRIORITY = -2147483648; // a queue or app with nothing pending has no priority
const showPriority = (p) => (p === MIN_PRIORITY ? "–" : `${p}`);
const state = { partition: "default", cycle: "", expanded: new Set(["root"]), queueFilter: null };

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

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

async function api(path) {
  const sep = path.includes("?") ? "&" : "?";
  const url = state.cycle !== "" && path.startsWith("/ws/v1/partition") ? `${path}${sep}cycle=${state.cycle}` : path;
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.message || `HTTP ${response.status}`);
  return body;
}

function renderQueues(root) {
  const body = $("#queues tbody");
  body.replaceChildren();
  const walk = (q, depth) => {
    const row = document.createElement("tr");
    row.className = "queue";
    row.dataset.queue = q.queuename;
    const name = cell(row, "");
    name.style.paddingLeft = `${depth * 1.2 + 0.6}em`;
    const toggle = document.createElement("span");
    toggle.className = "toggle";
    toggle.textContent = q.isLeaf ? "" : (state.expanded.has(q.queuename) ? "▾" : "▸");
    toggle.onclick = () => {
      if (state.expanded.has(q.queuename)) state.expanded.delete(q.queuename); else state.expanded.add(q.queuename);
      renderQueues(root);
    };
    const label = document.createElement("a");
    label.textContent = q.queuename.split(".").pop();
    label.title = q.queuename;
    label.onclick = () => { state.queueFilter = q.isLeaf ? q.queuename : null; loadApps(); };
    name.append(toggle, label);
    const props = q.properties;
    const prio = cell(row, showPriority(q.currentPriority), "num");
    const fence = props["priority.policy"] === "fence";
    prio.title = `offset ${props["priority.offset"]}${fence ? ", fenced" : ""}`;
    if (fence) prio.innerHTML += ' <span class="fence">fence</span>';
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

async function loadApps() {
  const query = state.queueFilter ? `?queue=${encodeURIComponent(state.queueFilter)}` : "";
  const apps = await api(`/ws/v1/partition/${state.partition}/applications${query}`);
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
    for (const r of a.requests) {
      const link = document.createElement("a");
      link.textContent = r.allocationKey;
      link.title = "why is this ask pending?";
      link.onclick = () => explain(`${a.applicationID}/${r.allocationKey}`);
      asks.append(link, " ");
    }
    body.appendChild(row);
  }
}

async function loadNodes() {
  const nodes = await api(`/ws/v1/partition/${state.partition}/nodes`);
  const body = $("#nodes tbody");
  body.replaceChildren();
  for (const n of nodes.slice(0, 500)) {
    const row = document.createElement("tr");
    cell(row, n.nodeID);
    cell(row, n.schedulable ? "yes" : "no");
    cell(row, human(n.capacity));
    cell(row, human(n.allocated));
    cell(row, human(n.available));
    cell(row, `${n.allocations}`, "num");
    body.appendChild(row);
  }
}

async function loadDecisions() {
  const decisions = await api("/ws/v1/decisions?limit=30");
  const body = $("#decisions tbody");
  body.replaceChildren();
  for (const d of decisions) {
    const row = document.createElement("tr");
    const id = cell(row, "");
    const link = document.createElement("a");
    link.textContent = d.decisionId;
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
    answer.textContent = result.text;
  } catch (err) {
    answer.textContent = `cannot explain ${target}: ${err.message}`;
  }
}

async function refresh() {
  state.cycle = $("#cycle").value.trim();
  try {
    const cycles = await api("/ws/v1/cycles");
    $("#mode").textContent = cycles.live ? "live" : "from the log";
    $("#cycle").max = cycles.latest;
    const partitions = await api("/ws/v1/partitions");
    const select = $("#partition");
    if (select.options.length !== partitions.length) {
      select.replaceChildren(...partitions.map((p) => new Option(p.name, p.name)));
      select.value = state.partition;
    }
    renderQueues(await api(`/ws/v1/partition/${state.partition}/queues`));
    await Promise.all([loadApps(), loadNodes(), loadDecisions()]);
    $("#status").textContent = `cycle ${state.cycle === "" ? cycles.latest : state.cycle} of ${cycles.latest}`;
  } catch (err) {
    $("#status").textContent = `error: ${err.message}`;
  }
}

$("#refresh").onclick = refresh;
$("#partition").onchange = (e) => { state.partition = e.target.value; state.queueFilter = null; refresh(); };
$("#cycle").onchange = refresh;
$("#why-form").onsubmit = (e) => { e.preventDefault(); explain($("#why-input").value); };
refresh();
