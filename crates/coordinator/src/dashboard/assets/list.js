// The task list: newest first, filtered through the URL's query (status, agent, trace_id,
// q); statuses update live from /v1/events.
"use strict";

const rows = new Map();

function row(t) {
  // A finished task's recorded usage; a running one's is not known yet.
  const tokens = tw.terminal(t.status) ? tw.usageLine(t.usage, t.subtree) : "";
  const tr = tw.el("tr", { "data-task": t.task_id },
    tw.el("td", { class: "st" }, tw.status(t.status)),
    tw.el("td", {}, tw.el("a", { href: "/tasks/" + t.task_id, class: "mono" }, t.task_id)),
    tw.el("td", {}, t.agent),
    tw.el("td", { class: "prompt", title: t.prompt }, t.title || t.prompt),
    tw.el("td", {}, tw.time(t.created_at)),
    tw.el("td", {}, String(tokens)));
  rows.set(t.task_id, tr);
  return tr;
}

async function load() {
  const params = new URLSearchParams(location.search);
  const form = document.getElementById("filters");
  for (const [k, v] of params) if (form.elements[k]) form.elements[k].value = v;
  const body = document.querySelector("#tasks tbody");
  const filter = params.get("status");
  // The last status each task's events named: a row read after a terminal event (its
  // read may predate the recorded result) still shows where the task ended.
  const latest = new Map();
  // The feed is opened before the list is read, so a status that changes in between
  // is not missed; its events wait until the rows are there.
  let loaded = false;
  const early = [];
  const apply = (ev) => {
    latest.set(ev.task_id, ev.status);
    const tr = rows.get(ev.task_id);
    if (tr) {
      tr.querySelector(".st").replaceChildren(tw.status(ev.status));
      if (filter && filter !== ev.status) tr.classList.add("stale");
    } else if (!filter || filter === ev.status) {
      // A task that is new to this page: show it on top, read whole.
      tw.api("/v1/tasks?" + new URLSearchParams(Object.assign(Object.fromEntries(params), { limit: "20" })))
        .then(({ tasks }) => { const t = tasks.find((x) => x.task_id === ev.task_id);
          if (!t || rows.has(t.task_id)) return;
          const tr = row(t);
          const last = latest.get(t.task_id);
          if (last && tw.terminal(last)) tr.querySelector(".st").replaceChildren(tw.status(last));
          body.prepend(tr); }).catch(() => {});
    }
  };
  let open;
  const opened = new Promise((resolve) => { open = resolve; });
  const feed = tw.events("/v1/events", (ev) => { if (loaded) apply(ev); else early.push(ev); }, open);
  feed.catch(tw.showError);
  // The list is read once the feed is open, or without it if it failed (shown above).
  await Promise.race([opened, feed.catch(() => {})]);
  try {
    const { tasks } = await tw.api("/v1/tasks?" + params.toString());
    body.replaceChildren(...tasks.map(row));
    if (!tasks.length) body.appendChild(tw.el("tr", {}, tw.el("td", { colspan: "6" }, "no tasks")));
  } catch (e) { tw.showError(e); return; }
  loaded = true;
  for (const ev of early.splice(0)) apply(ev);
}

document.getElementById("filters").onsubmit = (e) => {
  e.preventDefault();
  const params = new URLSearchParams();
  for (const el of e.target.elements) if (el.name && el.value) params.set(el.name, el.value);
  location.search = params.toString();
};
tw.access().then(load).catch(tw.showError);
