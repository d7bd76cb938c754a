// The task tree page: the tree from /v1/tasks/<id>/tree, then live from
// /v1/tasks/<id>/events (every node's progress and result on one stream). A click on
// a node shows its timeline, result and transcript; approvals raised anywhere in the
// tree are answered from the banner at the top.
"use strict";

const rootId = decodeURIComponent(location.pathname.split("/").pop());
const nodes = new Map(); // task id -> node
const approvals = new Map(); // request id -> {task_id, permission, patterns}
let selected = rootId;
let drawQueued = false;

function node(id) {
  let n = nodes.get(id);
  if (!n) {
    n = { id, parent: "", agent: "", description: "", status: "queued", worker: "",
      start: null, end: null, live: 0, usage: null, result: null, timeline: [], calls: new Map(),
      current: null };
    nodes.set(id, n);
  }
  return n;
}

function fromTask(t) {
  const n = node(t.task_id);
  n.parent = t.parent_task_id; n.agent = t.agent; n.status = t.status;
  n.description = n.description || t.title || t.prompt;
  n.worker = t.worker || n.worker;
  n.start = t.started_at ? Date.parse(t.started_at) : n.start;
  n.end = tw.terminal(t.status) && t.finished_at ? Date.parse(t.finished_at) : n.end;
  if (tw.terminal(t.status)) n.usage = { own: t.usage, subtree: t.subtree };
  if (t.result) setResult(n, t.result);
}

function setResult(n, r) {
  n.result = r; n.status = r.status; n.current = null;
  // The recorded usage replaces the live count, and replayed steps never add to it.
  n.usage = { own: r.own_usage, subtree: r.usage };
  if (r.worker) n.worker = r.worker;
  if (!n.end) n.end = Date.now();
  if (n.start === null && r.latency_ms) n.start = n.end - r.latency_ms;
}

function onEvent(ev) {
  if (ev.type === "end") { setLive("finished"); return; }
  if (ev.type === "error") { tw.showError(ev.task_id + ": " + ev.error); return; }
  if (ev.type === "result") { setResult(node(ev.task_id), ev.result); clearApprovals(ev.task_id); draw(); return; }
  if (ev.type !== "progress") return;
  const n = node(ev.task_id);
  const at = ev.at ? Date.parse(ev.at) : Date.now();
  if (n.start === null) n.start = at;
  if (!n.result) n.status = ev.status;
  if (ev.status !== "awaiting_approval") clearApprovals(ev.task_id);
  const e = ev.event;
  switch (e.kind) {
    case "step_started": n.timeline.push({ at, kind: "step", text: "step " + e.step + " started" }); break;
    case "step_finished":
      n.live += tw.tokens(e.usage);
      n.timeline.push({ at, kind: "step", text: "step " + e.step + " finished · " + tw.tokens(e.usage) + " tokens" });
      break;
    case "tool_call": {
      if (e.task_id && e.task_id !== n.id) break; // a descendant's call: shown on its own node
      let c = n.calls.get(e.call_id);
      if (!c) { c = { at, tool: e.tool, title: "", state: "", end: null }; n.calls.set(e.call_id, c); n.timeline.push({ at, kind: "tool", call: c }); }
      c.state = e.state; c.title = e.title || c.title; c.error = e.error;
      if (e.state === "completed" || e.state === "error") { c.end = at; if (n.current === c) n.current = null; }
      else n.current = c;
      break;
    }
    case "text": {
      const last = n.timeline[n.timeline.length - 1];
      if (last && last.kind === "text") last.text += e.text; else n.timeline.push({ at, kind: "text", text: e.text });
      break;
    }
    case "child_task": {
      const c = node(e.task_id);
      c.parent = ev.task_id; c.agent = c.agent || e.agent; c.description = e.description || c.description;
      n.timeline.push({ at, kind: "child", text: "started " + e.agent + " " + e.task_id });
      break;
    }
    case "approval_required":
      approvals.set(e.request_id, { task_id: e.task_id, permission: e.permission, patterns: e.patterns });
      n.timeline.push({ at, kind: "ask", text: "asks: " + e.permission + " " + e.patterns.join(", ") });
      break;
    case "compaction":
      n.timeline.push({ at, kind: "step", text: "compacted " + e.tokens_before + " → " + e.tokens_after + " tokens" });
      break;
    case "rate_limit_wait":
      n.timeline.push({ at, kind: "step", text: "awaiting rate limit of " + e.model + " · " + e.wait_ms + " ms" });
      break;
    case "hook":
      n.timeline.push({ at, kind: e.outcome === "ok" ? "step" : "ask",
        text: "hook " + e.event + " " + e.hook + " on " + e.subject + ": " + e.outcome + (e.outcome !== "ok" && e.message ? " · " + e.message : "") });
      break;
  }
  draw();
}

function clearApprovals(taskId) {
  for (const [id, a] of approvals) if (a.task_id === taskId) approvals.delete(id);
}

function setLive(text) {
  const l = document.getElementById("live"); l.textContent = text; l.classList.toggle("on", text === "live");
}

function draw() {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => { drawQueued = false; drawTree(); drawApprovals(); drawDetail(); });
}

function nodeView(n) {
  const end = n.end || (tw.terminal(n.status) ? null : Date.now());
  const dur = n.start && end ? tw.duration(Math.max(0, end - n.start)) : "";
  // A finished node: its recorded usage, own and subtree. A running one: the tokens of
  // the steps seen so far (its own calls; what they cost is known once recorded).
  const usage = !n.usage ? [n.live ? "own " + n.live + " tokens so far" : ""] : [
    tw.usageLine(n.usage.own, n.usage.subtree),
    tw.cost(n.usage.subtree) === "unpriced" ? "unpriced"
      : tw.cost(n.usage.own) + " own, " + tw.cost(n.usage.subtree) + " subtree"];
  const meta = [n.worker ? "worker " + n.worker : "not claimed yet", dur, ...usage]
    .filter(Boolean).join(" · ");
  const div = tw.el("div", { class: "node" + (n.id === selected ? " selected" : ""),
      "data-task": n.id, "data-status": n.status, onclick: () => { selected = n.id; loadTranscript(); draw(); } },
    tw.status(n.status), tw.el("span", { class: "desc" }, tw.el("b", {}, n.agent || "?"), " ", n.description || ""),
    tw.el("code", {}, n.id.slice(-8)),
    tw.el("span", { class: "meta" }, meta));
  if (n.current) div.appendChild(tw.el("span", { class: "tool" }, "▶ " + n.current.tool + ": " + (n.current.title || n.current.state)));
  return div;
}

function drawTree() {
  const children = new Map();
  for (const n of nodes.values()) {
    if (!children.has(n.parent)) children.set(n.parent, []);
    children.get(n.parent).push(n);
  }
  const sub = (n) => tw.el("li", {}, nodeView(n),
    children.has(n.id) ? tw.el("ul", {}, ...children.get(n.id).map(sub)) : null);
  const root = nodes.get(rootId);
  if (root) document.getElementById("tree").replaceChildren(tw.el("ul", {}, sub(root)));
}

function drawApprovals() {
  const section = document.getElementById("approvals");
  section.hidden = approvals.size === 0;
  const list = document.getElementById("approval-list");
  list.replaceChildren(...[...approvals].map(([rid, a]) => {
    const asker = nodes.get(a.task_id);
    const msg = tw.el("input", { placeholder: "message for the model (reject)", class: "reject-message" });
    const answer = (kind) => async () => {
      try {
        await tw.post("/v1/tasks/" + a.task_id + "/approvals/" + encodeURIComponent(rid), { answer: kind, message: msg.value });
        approvals.delete(rid); draw();
      } catch (e) { tw.showError(e); }
    };
    return tw.el("div", { class: "approval", "data-request": rid, "data-task": a.task_id },
      tw.el("span", {}, tw.el("b", {}, (asker && asker.agent) || "task"), " ", tw.el("code", {}, a.task_id.slice(-8)),
        " asks for ", tw.el("b", {}, a.permission), ": ", tw.el("code", {}, a.patterns.join(", "))),
      tw.el("button", { "data-answer": "once", onclick: answer("once") }, "allow once"),
      tw.el("button", { "data-answer": "always", onclick: answer("always") }, "allow always"),
      msg, tw.el("button", { "data-answer": "reject", onclick: answer("reject") }, "reject"));
  }));
}

function diff(patch) {
  return tw.el("pre", { class: "diff" }, ...patch.split("\n").map((l) => tw.el("span", {
    class: l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del"
      : l.startsWith("@@") ? "hunk" : "" }, l + "\n")));
}

function drawDetail() {
  const n = nodes.get(selected);
  if (!n) return;
  document.getElementById("detail").hidden = false;
  document.getElementById("detail-title").replaceChildren(tw.status(n.status), " ", n.agent, " ", tw.el("code", {}, n.id));
  document.getElementById("cancel").disabled = tw.terminal(n.status);
  document.getElementById("replay").disabled = !["error", "dead_lettered"].includes(n.status);
  document.getElementById("timeline").replaceChildren(...n.timeline.map((t) => {
    const at = tw.el("span", { class: "at" }, new Date(t.at).toLocaleTimeString());
    if (t.kind === "tool") {
      const c = t.call;
      const d = c.end ? " · " + tw.duration(c.end - c.at) : "";
      return tw.el("li", { "data-kind": "tool" }, at, tw.el("span", {}, tw.el("b", {}, c.tool), " ", c.title || "",
        " ", tw.status(c.state), d, c.error ? " · " + c.error : ""));
    }
    return tw.el("li", { "data-kind": t.kind }, at, tw.el("span", { class: t.kind === "text" ? "text" : "" }, t.text));
  }));
  const r = n.result;
  const result = document.getElementById("result");
  if (!r) { result.replaceChildren(tw.el("p", {}, "not finished")); return; }
  result.replaceChildren(
    tw.el("p", {}, tw.status(r.status), " · ", tw.usageLine(r.own_usage, r.usage) + " (subtree " + r.usage.input_tokens +
      " in, " + r.usage.output_tokens + " out) · " + r.steps + " steps · " + tw.duration(r.latency_ms)),
    ...r.errors.map((e) => tw.el("p", { class: "error" }, e.code + ": " + e.message)),
    tw.el("pre", { class: "output" }, r.text || "(no text)"),
    r.patch ? tw.el("div", {}, tw.el("h3", {}, "patch"), diff(r.patch)) : tw.el("p", {}, "no changes"));
}

// One part of a transcript message: text as it is, a tool call as its call and
// output, anything else as JSON.
function part(p) {
  if (p.type === "text") return tw.el("div", {}, p.text);
  if (p.type === "tool_call") return tw.el("div", {}, tw.el("b", {}, p.tool), " " + (p.title || "") + " ",
    tw.status(p.state || "unknown"), p.output ? tw.el("pre", { class: "output" }, String(p.output)) : null);
  if (p.type === "step_finish") return null;
  return tw.el("div", { class: "mono" }, JSON.stringify(p));
}

async function loadTranscript() {
  const box = document.getElementById("transcript");
  const id = selected;
  try {
    const { transcript } = await tw.api("/v1/tasks/" + id + "/transcript");
    if (id !== selected) return;
    const messages = transcript && (transcript.messages || transcript);
    if (!Array.isArray(messages)) { box.replaceChildren(tw.el("p", {}, transcript ? "" : "no transcript saved yet")); return; }
    box.replaceChildren(...messages.map((m) => tw.el("div", { class: "msg" },
      tw.el("span", { class: "role" }, (m.role || "?") + (m.agent ? " (" + m.agent + ")" : "") + ": "),
      ...(Array.isArray(m.parts) ? m.parts.map(part) : [JSON.stringify(m.content ?? m, null, 1)]))));
  } catch (e) { box.replaceChildren(tw.el("p", { class: "error" }, String(e.message || e))); }
}

document.getElementById("cancel").onclick = () => tw.post("/v1/tasks/" + selected + "/cancel").then(draw, tw.showError);
document.getElementById("replay").onclick = () => tw.post("/v1/tasks/" + selected + "/replay")
  .then(() => location.reload(), tw.showError);

async function start() {
  await tw.access();
  const { tasks } = await tw.api("/v1/tasks/" + encodeURIComponent(rootId) + "/tree");
  tasks.forEach(fromTask);
  document.title = "taskwire · " + rootId.slice(-8);
  draw(); loadTranscript();
  // Durations of running nodes move on; a local redraw, not a request.
  setInterval(() => { if ([...nodes.values()].some((n) => !tw.terminal(n.status))) draw(); }, 1000);
  setLive("live");
  await tw.events("/v1/tasks/" + encodeURIComponent(rootId) + "/events", onEvent);
  loadTranscript();
}
start().catch((e) => { setLive("disconnected"); tw.showError(e); });
