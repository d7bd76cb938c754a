// The schedules page: every schedule /v1/schedules answers (the token's tenant's; with
// the API open, every tenant's), read again every few seconds. Each row shows the
// cadence, time zone, state, next fire times, last runs (linked to their tasks) and
// counters; Pause/Resume and Trigger call the API and read the list again at once.
"use strict";

const REFRESH_MS = 4000;
const shown = new Map(); // tenant/name -> { json, tr }
const expanded = new Set(); // tenant/name of rows whose next fire times are open
let issued = 0; // reads of the list started; only the latest one is drawn
let loadFailed = false;

function key(s) { return s.tenant + "/" + s.name; }

// The API path of a schedule (and an action on it), in its tenant.
function path(s, action) {
  return "/v1/schedules/" + encodeURIComponent(s.name) + (action ? "/" + action : "")
    + "?" + new URLSearchParams({ tenant: s.tenant });
}

// `in 12 min`, `3 s ago`.
function relative(iso) {
  const ms = Date.parse(iso) - Date.now();
  if (isNaN(ms)) return "";
  const s = Math.round(Math.abs(ms) / 1000);
  const text = s < 60 ? s + " s"
    : s < 3600 ? Math.round(s / 60) + " min"
    : s < 2 * 86400 ? (s / 3600).toFixed(1).replace(/\.0$/, "") + " h"
    : Math.round(s / 86400) + " days";
  return ms >= 0 ? "in " + text : text + " ago";
}

function rel(iso) { return tw.el("span", { class: "muted", "data-rel": iso }, relative(iso)); }

function cadence(s) {
  const cron = s.cron !== null && s.cron !== undefined;
  const text = cron ? s.cron : "every " + s.every;
  const what = cron ? tw.el("code", {}, text) : tw.el("span", {}, text);
  // The cadence in words, unless it says the same (`every 1h`).
  const words = s.description && s.description !== text
    ? tw.el("div", { class: "muted" }, s.description) : null;
  return tw.el("td", { class: "cadence", title: s.description }, what, words);
}

function nextFires(s) {
  const td = tw.el("td", { class: "next" });
  if (s.paused || !s.next_fires.length) {
    td.appendChild(tw.el("span", { class: "muted" }, s.paused ? "none while paused" : "none"));
    return td;
  }
  const first = s.next_fires[0];
  td.appendChild(tw.el("div", { class: "next-first", "data-next": first,
    title: "next fire times:\n" + s.next_fires.map(tw.time).join("\n") },
  tw.time(first), " ", rel(first)));
  if (s.next_fires.length > 1) {
    const k = key(s);
    const details = tw.el("details", { class: "next" },
      tw.el("summary", {}, "next " + s.next_fires.length),
      tw.el("ol", {}, ...s.next_fires.map((t) => tw.el("li", {}, tw.time(t), " ", rel(t)))));
    details.open = expanded.has(k);
    details.ontoggle = () => { if (details.open) expanded.add(k); else expanded.delete(k); };
    td.appendChild(details);
  }
  return td;
}

function runs(s) {
  const td = tw.el("td", { class: "runs" });
  if (!s.recent_runs.length) {
    td.appendChild(tw.el("span", { class: "muted" }, "no runs yet"));
    return td;
  }
  td.appendChild(tw.el("ul", { class: "runs" }, ...s.recent_runs.map((r) => tw.el("li", {
    class: "run", "data-outcome": r.outcome,
    title: "tick " + tw.time(r.tick) + (r.fired_at ? ", acted on " + tw.time(r.fired_at) : ""),
  },
  tw.el("span", { class: "outcome " + r.outcome }, r.outcome.replace(/_/g, " ")), " ",
  r.task_id ? tw.el("a", { href: "/tasks/" + r.task_id, class: "mono", "data-task": r.task_id }, r.task_id) : null,
  r.task_id ? " " : null,
  r.status ? tw.status(r.status) : null,
  r.status ? " " : null,
  rel(r.fired_at || r.tick),
  r.reason ? tw.el("div", { class: "error" }, r.reason) : null))));
  return td;
}

function counters(s) {
  return tw.el("td", { class: "counters" },
    tw.el("div", { "data-counter": "fires" }, "fires " + s.fires),
    tw.el("div", { "data-counter": "skipped_overlap" }, "skipped overlap " + s.skipped_overlap),
    tw.el("div", { "data-counter": "skipped_missed" }, "skipped missed " + s.skipped_missed),
    s.queued_tick ? tw.el("div", { class: "muted" }, "queued tick " + tw.time(s.queued_tick)) : null);
}

function actions(s) {
  const toggle = s.paused ? "resume" : "pause";
  const buttons = [
    tw.el("button", { "data-action": toggle,
      title: s.paused ? "fire again from the next tick after now" : "no tick fires until resumed" }, toggle),
    tw.el("button", { "data-action": "trigger", title: "submit its task now, outside its cadence" }, "trigger"),
  ];
  for (const b of buttons) b.onclick = () => act(s, b.dataset.action, buttons);
  return tw.el("td", { class: "actions" }, ...buttons);
}

function row(s) {
  const state = s.paused ? "paused" : "active";
  return tw.el("tr", { "data-schedule": s.name, "data-tenant": s.tenant },
    tw.el("td", { class: "name" }, tw.el("span", { class: "mono" }, s.name),
      tw.el("div", { class: "muted" }, s.task.agent + " · tenant " + s.tenant)),
    cadence(s),
    tw.el("td", {}, s.time_zone),
    tw.el("td", {}, tw.el("span", { class: "state " + state, "data-state": state }, state)),
    nextFires(s),
    runs(s),
    counters(s),
    actions(s));
}

function draw(schedules) {
  const body = document.querySelector("#schedules tbody");
  const rows = schedules.map((s) => {
    const k = key(s);
    const json = JSON.stringify(s);
    const old = shown.get(k);
    // An unchanged schedule keeps its row (an open tooltip or list stays open).
    const tr = old && old.json === json ? old.tr : row(s);
    shown.set(k, { json, tr });
    return tr;
  });
  const keep = new Set(schedules.map(key));
  for (const k of [...shown.keys()]) if (!keep.has(k)) shown.delete(k);
  if (rows.length) body.replaceChildren(...rows);
  else body.replaceChildren(tw.el("tr", {}, tw.el("td", { colspan: "8", class: "muted" },
    "no schedules (create one with POST /v1/schedules or `taskwire schedule`)")));
  for (const el of body.querySelectorAll("[data-rel]")) el.textContent = relative(el.dataset.rel);
}

// Reads the list and draws it, unless a later read started meanwhile.
async function load() {
  const seq = ++issued;
  const live = document.getElementById("live");
  try {
    const { schedules } = await tw.api("/v1/schedules");
    if (seq !== issued) return;
    draw(schedules);
    live.textContent = "updated " + new Date().toLocaleTimeString();
    live.classList.add("on");
    if (loadFailed) { document.getElementById("error").hidden = true; loadFailed = false; }
  } catch (e) {
    if (seq !== issued) return;
    live.textContent = "refresh failed";
    live.classList.remove("on");
    loadFailed = true;
    tw.showError(e);
  }
}

function notice(...children) {
  const n = document.getElementById("notice");
  n.replaceChildren(...children);
  n.hidden = false;
}

async function act(s, action, buttons) {
  for (const b of buttons) b.disabled = true;
  try {
    const r = await tw.post(path(s, action));
    document.getElementById("error").hidden = true;
    if (action === "trigger") {
      notice("triggered " + s.name + ": task ",
        tw.el("a", { href: "/tasks/" + r.task_id, class: "mono" }, r.task_id));
    } else {
      notice(s.name + (action === "pause" ? " paused" : " resumed"));
    }
  } catch (e) {
    tw.showError(e);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
  await load();
}

async function refresh() {
  await load();
  setTimeout(refresh, REFRESH_MS);
}

tw.access().then(refresh).catch(tw.showError);
