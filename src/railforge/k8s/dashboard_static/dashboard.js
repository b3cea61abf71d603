// The dashboard: reads /api/state every few seconds and draws it. Names come from users' objects, so every
// value goes in as text (textContent), never as markup.
"use strict";

const REFRESH_MS = 3000;
const GPU = "nvidia.com/gpu";

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function cell(value, number = false) {
  return element("td", number ? { class: "number" } : {}, value);
}

function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  return `${(s / 3600).toFixed(1)}h`;
}

function utc(seconds) {
  return new Date(seconds * 1000).toISOString().replace(/\.\d+Z$/, "Z");
}

function gpus(amounts) {
  return GPU in amounts ? amounts[GPU] : "-";
}

function fill(id, rows) {
  document.querySelector(`#${id} tbody`).replaceChildren(...rows);
}

function draw(state) {
  const now = Date.now() / 1000;
  document.getElementById("scheduler").textContent = `(${state.scheduler})`;
  const status = document.getElementById("status");
  status.dataset.state = state.leader ? "leading" : "standby";
  status.textContent = state.leader
    ? `leading (${state.leader_identity}); last pass ${duration(now - state.updated)} ago, decide() took ${(state.last_decide_seconds * 1000).toFixed(1)} ms`
    : `standby: ${state.leader_identity || "no replica"} leads (or the caches are not synced yet)`;

  fill("queues", state.queues.map((q) => element("tr", { "data-queue": q.name },
    cell(q.name), cell(q.parent || ""), cell(gpus(q.quota), true), cell(gpus(q.limit), true),
    cell(q.allocated[GPU] || 0, true), cell(q.pending[GPU] || 0, true), cell(q.fair_share_gpus, true),
    cell(q.over_quota_weight, true))));

  fill("pending", state.pending.map((p) => element("tr", { "data-gang": p.gang, "data-reason-code": p.reason_code },
    cell(p.gang), cell(p.queue), cell(p.pods, true), cell(p.gpus, true), cell(duration(now - p.submitted)),
    cell(p.reason),
    cell(p.expected_start === null ? "" : `${utc(p.expected_start)} (in ${duration(p.expected_start - now)})` +
      (p.reserved_start === null ? "" : `, reserved on ${p.reserved_nodes.length} nodes`)))));

  fill("running", state.running.map((r) => {
    const notes = [r.borrowed ? "borrowed" : "", r.backfilled_past ? `backfilled past ${r.backfilled_past}` : ""];
    return element("tr", { "data-gang": r.gang },
      cell(r.gang), cell(r.queue), cell(r.pods, true), cell(r.gpus, true), cell(r.nodes.join(", ")),
      cell(duration(now - r.started)), cell(notes.filter(Boolean).join("; ")));
  }));

  document.getElementById("topology").replaceChildren(...state.domains.map((domain) => element("div",
    { class: "domain", "data-domain": domain.path },
    element("h3", {}, domain.path),
    ...domain.nodes.map((node) => {
      const squares = [];
      for (let i = 0; i < node.gpus; i++) {
        squares.push(element("span", { class: i < Math.round(node.used_gpus) ? "gpu used" : "gpu" }));
      }
      return element("div", { class: "node", "data-node": node.name, "data-used-gpus": node.used_gpus,
                               "data-gpus": node.gpus, title: node.name },
        element("div", { class: "name" }, node.name),
        element("div", { class: "gpus" }, ...squares),
        element("div", { class: "gangs" }, node.gangs.map((g) => `${g.gang} ×${g.pods}`).join(", ") || "idle"));
    }))));

  fill("recent", state.recent.map((d) => element("tr", { "data-kind": d.kind, "data-gang": d.gang },
    cell(utc(d.at).slice(11)), cell(d.kind), cell(d.gang), cell(d.queue), cell(d.nodes.join(", ")), cell(d.detail))));

  document.getElementById("problems").replaceChildren(...state.problems.map((p) => element("li", {}, p)));
  document.getElementById("problems-section").hidden = state.problems.length === 0;
  document.body.dataset.loaded = "true";
}

async function refresh() {
  try {
    const response = await fetch("/api/state", { cache: "no-store" });
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    draw(await response.json());
  } catch (error) {
    const status = document.getElementById("status");
    status.dataset.state = "error";
    status.textContent = `cannot read the scheduler's state: ${error.message}`;
  }
  setTimeout(refresh, REFRESH_MS);
}

refresh();
