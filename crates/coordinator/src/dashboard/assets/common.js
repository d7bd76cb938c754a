// taskwire dashboard: what both pages share — the bearer token, API calls, the
// server-sent-event reader and small formatters. Plain browser JavaScript, no build step.
"use strict";

const tw = {
  token() { return sessionStorage.getItem("taskwire.token") || ""; },

  headers(extra) {
    const h = Object.assign({}, extra || {});
    const t = tw.token();
    if (t) h["Authorization"] = "Bearer " + t;
    return h;
  },

  // Says whether the API needs a token; asks for one when it does and none is kept.
  async access() {
    const el = document.getElementById("access");
    const cfg = await (await fetch("/v1/info")).json();
    if (!cfg.auth) {
      el.textContent = "open API: no tokens file is configured, every caller sees every tenant";
      el.classList.add("open");
      return;
    }
    if (!tw.token()) tw.askToken();
    el.innerHTML = "signed in with a bearer token · ";
    const change = document.createElement("a");
    change.href = "#"; change.textContent = "change token";
    change.onclick = (e) => { e.preventDefault(); tw.askToken(); location.reload(); };
    el.appendChild(change);
  },

  askToken() {
    const t = prompt("This coordinator needs a bearer token (it shows only your tenant's tasks):");
    if (t !== null) sessionStorage.setItem("taskwire.token", t.trim());
  },

  async api(path, options) {
    const opts = Object.assign({}, options || {});
    opts.headers = tw.headers(opts.headers);
    const res = await fetch(path, opts);
    const body = await res.json().catch(() => ({}));
    if (res.status === 401) { sessionStorage.removeItem("taskwire.token"); }
    if (!res.ok) throw new Error(body.error || ("HTTP " + res.status));
    return body;
  },

  post(path, body) {
    return tw.api(path, { method: "POST", body: JSON.stringify(body || {}),
      headers: { "Content-Type": "application/json" } });
  },

  // Reads a server-sent-event stream with fetch (so the token travels in a header,
  // not the URL) and calls onEvent with each event's JSON data. Resolves when the
  // stream ends. onOpen (optional) is called once the server answered: from then on
  // it sends every event, so what is read afterwards misses none.
  async events(path, onEvent, onOpen) {
    const res = await fetch(path, { headers: tw.headers({ Accept: "text/event-stream" }) });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      throw new Error(body.error || ("HTTP " + res.status));
    }
    if (onOpen) onOpen();
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (data) onEvent(JSON.parse(data));
      }
    }
  },

  el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e[k] = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined)
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  },

  status(s) { return tw.el("span", { class: "status " + s, "data-status": s }, s); },

  duration(ms) {
    if (ms === null || ms === undefined || isNaN(ms)) return "";
    if (ms < 1000) return ms + " ms";
    const s = ms / 1000;
    return s < 60 ? s.toFixed(1) + " s" : Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  },

  tokens(u) { return u ? (u.input_tokens + u.output_tokens) : 0; },

  // A task's usage labelled as every view labels it: `own 330, subtree 770 tokens`.
  // `own` and `subtree` are the API's (a task's `usage` and `subtree`, a result's
  // `own_usage` and `usage`): recorded results, the numbers `taskwire get` shows.
  usageLine(own, subtree) { return "own " + tw.tokens(own) + ", subtree " + tw.tokens(subtree) + " tokens"; },

  // `$0.0012`, or `unpriced` when no call counted had a price.
  cost(u) { return u && u.cost_usd !== null && u.cost_usd !== undefined ? "$" + u.cost_usd.toFixed(4) : "unpriced"; },

  time(iso) { return iso ? new Date(iso).toLocaleString() : ""; },

  showError(err) {
    const e = document.getElementById("error");
    e.textContent = String(err && err.message ? err.message : err); e.hidden = false;
  },

  terminal(s) { return !["queued", "running", "awaiting_approval"].includes(s); },
};
