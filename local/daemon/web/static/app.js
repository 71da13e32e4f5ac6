// The sandplane dashboard: keeps the table live from GET /v1/events and
// drives the /v1 API. Everything the API returns goes into the page as text,
// never as markup: names and labels are user input.
//
// A daemon with a token serves its pages locked (data-locked): empty, and
// filled here from the API with the token, which this script holds in the
// tab's sessionStorage and sends as a header. Never in a cookie: a browser
// sends a cookie of 127.0.0.1 to every port of it, sandboxes' included,
// while sessionStorage belongs to this origin, port and all.
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const locked = "locked" in document.body.dataset;

  // ---- the daemon token

  const tokenKey = "sandplane.token";
  let token = takeToken();

  // takeToken moves a token handed over in the address (#token=, where
  // /?token= redirects) into the tab's storage and out of the address bar
  // and history.
  function takeToken() {
    const m = /^#token=(.+)$/.exec(location.hash);
    if (m) {
      sessionStorage.setItem(tokenKey, decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem(tokenKey) || "";
  }

  function setToken(t) {
    token = t;
    if (t) sessionStorage.setItem(tokenKey, t);
    else sessionStorage.removeItem(tokenKey);
  }

  function authHeaders(headers) {
    if (token) headers.Authorization = `Bearer ${token}`;
    return headers;
  }

  // unauthorized is what api and the event stream throw on a 401.
  class Unauthorized extends Error {}

  async function api(method, path, body) {
    const init = { method, headers: authHeaders({ Accept: "application/json" }), cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (err) {
      throw new Error("the daemon does not answer: is `sandplane serve` still running?");
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (err) {
      data = null;
    }
    if (!res.ok) {
      const e = data && data.error;
      const msg = e && e.message ? e.message : `HTTP ${res.status} ${res.statusText}`;
      throw res.status === 401 ? new Unauthorized(msg) : new Error(msg);
    }
    return data;
  }

  const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  if (document.body.classList.contains("logs")) {
    logsPage();
    return;
  }

  const rows = $("rows");
  const live = $("live");
  const form = $("create-form");
  const createButton = $("create-button");
  const banner = $("error");
  const bannerText = $("error-text");
  let minuteMs = parseDuration(document.body.dataset.minute) || 60000;

  const sandboxes = new Map(); // id -> sandbox, as the API spells it
  const creating = new Map(); // placeholder key -> name, while a create runs
  const busy = new Set(); // ids with an action in flight
  const gone = new Set(); // ids deleted: a late answer must not bring them back
  let nextKey = 0;

  // ---- durations, formatted like the CLI and the server-rendered page

  // parseDuration reads a Go duration such as "1m0s", "200ms" or "1h2m3.5s".
  function parseDuration(s) {
    const units = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, "µs": 1e-3, ns: 1e-6 };
    const re = /(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g;
    let total = 0;
    let matched = "";
    for (const m of String(s || "").matchAll(re)) {
      total += parseFloat(m[1]) * units[m[2]];
      matched += m[0];
    }
    return matched && matched === s ? total : 0;
  }

  function human(ms) {
    if (ms > 0 && ms < 1000) return `${Math.floor(ms)}ms`;
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
    return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
  }

  // instant splits an RFC 3339 time into epoch seconds and nanosecond digits,
  // so that ordering matches the daemon's, which is finer than Date's.
  function instant(t) {
    const m = /^(.*?)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(t || "");
    if (!m) return [0, ""];
    return [Date.parse(m[1] + m[3]) || 0, (m[2] || "").padEnd(9, "0")];
  }

  function compareTimes(a, b) {
    const [as, an] = instant(a);
    const [bs, bn] = instant(b);
    if (as !== bs) return as - bs;
    return an < bn ? -1 : an > bn ? 1 : 0;
  }

  // oldestFirst is the order of GET /v1/sandboxes and `sandplane ls`.
  function oldestFirst(a, b) {
    return compareTimes(a.createdAt, b.createdAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  }

  // ---- DOM, text only

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v === undefined || v === null) continue;
      node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      node.append(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return node;
  }

  function safeURL(u) {
    return /^https?:\/\//i.test(u || "") ? u : "";
  }

  function otherLabels(labels) {
    return Object.entries(labels || {})
      .filter(([k]) => k !== "origin")
      .map(([k, v]) => `${k}=${v}`)
      .sort()
      .join(" ");
  }

  // session is the agent session the page was opened on (/?session=ID):
  // the table then shows that session's sandboxes only.
  const session = new URLSearchParams(location.search).get("session") || "";

  function row(s) {
    const origin = (s.labels || {}).origin;
    const labels = otherLabels(s.labels);
    const preview = s.state === "started" ? safeURL(s.previewUrl) : "";
    const tr = el("tr", { "data-id": s.id, "data-name": s.name, "data-state": s.state },
      el("td", { class: "state" }, el("span", { class: "dot", "data-state": s.state }), s.state),
      el("td", { class: "origin" }, origin
        ? el("span", { class: "badge", "data-origin": origin }, origin)
        : el("span", { class: "none" }, "—")),
      el("td", { class: "name" }, el("strong", {}, s.name),
        s.public ? el("span", { class: "badge", "data-public": "" }, "public") : null,
        s.unisolated ? el("span", { class: "badge", "data-unisolated": "", title: unisolatedTitle }, "unisolated") : null,
        s.name !== s.id ? el("small", { class: "id" }, s.id) : null,
        s.sessionId ? el("small", { class: "session" }, "session ", el("a", { href: "/?session=" + encodeURIComponent(s.sessionId) }, s.sessionId)) : null,
        labels ? el("small", { class: "labels" }, labels) : null),
      el("td", { class: "runtime" }, s.runtime || "", el("small", {}, s.snapshot || "")),
      el("td", { class: "port" }, s.port ? String(s.port) : ""),
      el("td", { class: "age" }),
      el("td", { class: "idle" }),
      el("td", { class: "reason" }, s.errorReason === "auto_stopped"
        ? el("span", { class: "auto" }, "auto_stopped")
        : s.errorReason || ""),
      el("td", { class: "links" },
        el("a", { href: `/logs/${encodeURIComponent(s.id)}` }, "logs"),
        preview ? " " : null,
        // Through the daemon, which hands the sandbox's token to its
        // preview once: the preview URL alone would answer 401.
        preview ? el("a", { href: `/open/${encodeURIComponent(s.id)}`, title: preview, target: "_blank", rel: "noopener noreferrer" }, "preview") : null),
      actions(s));
    times(tr, s, Date.now());
    return tr;
  }

  function actions(s) {
    const td = el("td", { class: "actions" });
    const moving = busy.has(s.id) || s.state === "starting" || s.state === "stopping";
    const button = (action, text) => el("button", { type: "button", "data-action": action, disabled: moving }, text);
    if (s.state === "started") td.append(button("stop", "Stop"));
    if (s.state === "stopped" || s.state === "error") td.append(button("start", "Start"));
    if (s.state !== "destroyed") td.append(button("delete", "Delete"));
    return td;
  }

  // times fills the cells that change as the clock runs: age and idle time
  // against the auto-stop window.
  function times(tr, s, now) {
    const age = tr.querySelector("td.age");
    const idle = tr.querySelector("td.idle");
    age.textContent = human(now - instant(s.createdAt)[0]);
    const window = s.autoStopInterval > 0 ? s.autoStopInterval * minuteMs : 0;
    const idleMs = now - instant(s.lastActivityAt)[0];
    idle.replaceChildren();
    if (s.state === "started") {
      idle.append(human(idleMs));
    } else {
      idle.append(el("span", { class: "none" }, "—"));
    }
    idle.append(` / ${window ? human(window) : "never"}`);
    if (s.state === "started" && window) {
      const frac = Math.min(1, Math.max(0, idleMs / window));
      idle.append(el("meter", { min: 0, max: 1, low: 0.6, high: 0.85, optimum: 0, value: frac.toFixed(3) }));
    }
  }

  function render() {
    const frag = document.createDocumentFragment();
    for (const s of [...sandboxes.values()].sort(oldestFirst)) frag.append(row(s));
    for (const name of creating.values()) {
      frag.append(el("tr", { class: "pending", "data-creating": name },
        el("td", { class: "state" }, el("span", { class: "dot", "data-state": "starting" }), "creating"),
        el("td", { colspan: 9 }, `${name}: waiting for the workload to come up…`)));
    }
    if (!frag.childNodes.length) {
      frag.append(el("tr", { class: "empty" }, session
        ? el("td", { colspan: 10 }, "No sandbox belongs to session ", el("code", {}, session), ".")
        : el("td", { colspan: 10 }, "No sandboxes yet. Create one above, or run ", el("code", {}, "sandplane run -- echo hello"), ".")));
    }
    rows.replaceChildren(frag);
  }

  function tick() {
    const now = Date.now();
    for (const tr of rows.querySelectorAll("tr[data-id]")) {
      const s = sandboxes.get(tr.dataset.id);
      if (s) times(tr, s, now);
    }
  }

  // ---- state from the event stream and from answers

  // upsert keeps the newer of two views of a sandbox.
  function upsert(s) {
    if (!s || gone.has(s.id)) return;
    const old = sandboxes.get(s.id);
    if (old && compareTimes(old.updatedAt, s.updatedAt) > 0) return;
    sandboxes.set(s.id, s);
  }

  function remove(id) {
    gone.add(id);
    sandboxes.delete(id);
  }

  function setLive(status, text) {
    live.dataset.status = status;
    live.textContent = text;
  }

  // connect keeps the event stream open, resuming from the last event id
  // after a break, as EventSource would; EventSource itself cannot send
  // the token's header.
  let streaming = false;
  async function connect() {
    if (streaming) return;
    streaming = true;
    let lastId = "";
    for (;;) {
      try {
        await stream(lastId, (id) => { lastId = id; });
      } catch (err) {
        if (err instanceof Unauthorized) {
          streaming = false;
          askToken(`The daemon refused the token: ${err.message}`);
          return;
        }
      }
      setLive("reconnecting", "reconnecting…");
      await delay(2000);
    }
  }

  // stream reads one response of GET /v1/events until it ends.
  async function stream(lastId, seen) {
    const headers = authHeaders({ Accept: "text/event-stream" });
    if (lastId) headers["Last-Event-ID"] = lastId;
    const query = session ? "?sessionId=" + encodeURIComponent(session) : "";
    const res = await fetch("/v1/events" + query, { headers, cache: "no-store" });
    if (res.status === 401) throw new Unauthorized(`HTTP 401`);
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
    setLive("live", "live");
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      for (let i; (i = buf.indexOf("\n\n")) >= 0;) {
        const ev = parseEvent(buf.slice(0, i));
        buf = buf.slice(i + 2);
        if (ev.id) seen(ev.id);
        if (ev.type && ev.data) onEvent(ev.type, JSON.parse(ev.data));
      }
    }
  }

  // parseEvent reads one server-sent event: its id, event and data fields
  // (comments, such as the keep-alives, carry none).
  function parseEvent(block) {
    const ev = { id: "", type: "", data: "" };
    for (const line of block.split("\n")) {
      const i = line.indexOf(":");
      if (i <= 0) continue;
      const field = line.slice(0, i);
      const value = line.slice(i + 1).replace(/^ /, "");
      if (field === "id") ev.id = value;
      else if (field === "event") ev.type = value;
      else if (field === "data") ev.data = ev.data ? `${ev.data}\n${value}` : value;
    }
    return ev;
  }

  function onEvent(type, ev) {
    if (type === "sandboxes_replaced") {
      sandboxes.clear();
      for (const s of ev.sandboxes || []) sandboxes.set(s.id, s);
    } else if (type === "sandbox.deleted") {
      if (ev.sandbox) remove(ev.sandbox.id);
    } else if (ev.sandbox) {
      if (type === "sandbox.created") gone.delete(ev.sandbox.id);
      upsert(ev.sandbox);
    }
    render();
  }

  function showError(msg) {
    bannerText.textContent = msg;
    banner.hidden = false;
  }

  $("error-close").addEventListener("click", () => { banner.hidden = true; });

  function createBody(fd) {
    const body = {};
    const name = String(fd.get("name") || "").trim();
    if (name) body.name = name;
    const snapshot = String(fd.get("snapshot") || "");
    if (snapshot) body.snapshot = snapshot;
    const runtime = String(fd.get("runtime") || "");
    if (runtime) body.runtime = runtime;
    const labels = {};
    for (const item of String(fd.get("labels") || "").split(",")) {
      const kv = item.trim();
      if (!kv) continue;
      const i = kv.indexOf("=");
      if (i <= 0) throw new Error(`label "${kv}" is not key=value`);
      labels[kv.slice(0, i).trim()] = kv.slice(i + 1).trim();
    }
    if (!labels.origin) labels.origin = "web-ui";
    body.labels = labels;
    const auto = String(fd.get("autoStopInterval") || "").trim();
    if (auto) {
      const n = Number(auto);
      if (!Number.isInteger(n) || n < 0) throw new Error("auto-stop must be a whole number of minutes, 0 for never");
      body.autoStopInterval = n;
    }
    return body;
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let body;
    try {
      body = createBody(new FormData(form));
    } catch (err) {
      showError(err.message);
      return;
    }
    const key = nextKey++;
    creating.set(key, body.name || "new sandbox");
    createButton.disabled = true;
    render();
    try {
      const s = await api("POST", "/v1/sandboxes", body);
      gone.delete(s.id);
      upsert(s);
      form.elements.name.value = "";
      banner.hidden = true;
    } catch (err) {
      failed("Create", err);
    } finally {
      creating.delete(key);
      createButton.disabled = false;
      render();
    }
  });

  rows.addEventListener("click", async (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    const id = button.closest("tr").dataset.id;
    const s = sandboxes.get(id);
    if (!s) return;
    const action = button.dataset.action;
    if (action === "delete" && !window.confirm(`Delete sandbox "${s.name}"? Its workload is stopped and its files are removed.`)) {
      return;
    }
    busy.add(id);
    render();
    const path = `/v1/sandboxes/${encodeURIComponent(id)}`;
    try {
      if (action === "delete") {
        await api("DELETE", path);
        remove(id);
      } else {
        upsert(await api("POST", `${path}/${action}`));
      }
    } catch (err) {
      failed(`${action[0].toUpperCase()}${action.slice(1)} ${s.name}`, err);
    } finally {
      busy.delete(id);
      render();
    }
  });

  // A preview link carries the sandbox's token to its preview once. With a
  // daemon token, only this script can ask the daemon for the link: it
  // opens the tab at the click (so no pop-up blocker stops it), cuts the
  // tab's way back to this page, then sends it there.
  rows.addEventListener("click", async (e) => {
    const a = e.target.closest('a[href^="/open/"]');
    if (!a || !locked) return;
    e.preventDefault();
    const tab = window.open("", "_blank");
    if (!tab) {
      showError("The browser blocked the preview's tab: allow pop-ups for this page.");
      return;
    }
    tab.opener = null;
    try {
      const { url } = await api("GET", a.getAttribute("href"));
      if (!safeURL(url)) throw new Error("the daemon answered no preview link");
      tab.location.replace(url);
    } catch (err) {
      tab.close();
      failed("Preview", err);
    }
  });

  // failed shows an action's error, and asks for the token again when the
  // daemon refused it.
  function failed(what, err) {
    if (err instanceof Unauthorized) askToken(`The daemon refused the token: ${err.message}`);
    else showError(`${what} failed: ${err.message}`);
  }

  // ---- signing in, on a locked page

  const signin = $("signin");

  function askToken(why) {
    setToken("");
    if (!signin) {
      // An open page whose daemon came back with a token: the server
      // renders it locked from now on.
      showError("The daemon now needs its token: reload the page.");
      return;
    }
    setLive("static", "signed out");
    form.hidden = true;
    signin.hidden = false;
    if (why) $("signin-why").textContent = why;
    signin.elements.token.focus();
  }

  if (signin) {
    signin.addEventListener("submit", (e) => {
      e.preventDefault();
      setToken(String(new FormData(signin).get("token") || "").trim());
      signin.reset();
      signin.hidden = true;
      boot();
    });
  }

  const unisolatedTitle = "runs without isolation: it sees the host's files, /tmp and network, the daemon's root and other sandboxes";

  // fillInfo writes what the server renders on an open page: the daemon's
  // line, its interval minute and the create form's choices.
  function fillInfo(info) {
    $("isolation").hidden = !info.isolationFallback;
    $("isolation-why").textContent = info.isolationFallback || "";
    minuteMs = parseDuration(info.minute) || minuteMs;
    $("meta").replaceChildren("daemon ", el("b", {}, info.version || ""), ` · pid ${info.pid || "?"} · root `,
      el("code", {}, info.rootDir || ""), " · one interval minute = ", el("b", {}, info.minute || ""));
    const snapshot = form.elements.snapshot;
    snapshot.replaceChildren(...(info.snapshots || []).map((n) => el("option", { selected: n === "default" }, n)));
    const runtime = form.elements.runtime;
    runtime.replaceChildren(el("option", { value: "", selected: true }, "daemon default"),
      ...(info.runtimes || []).map((n) => el("option", {}, n)));
  }

  let ticking = false;
  async function boot() {
    if (locked) {
      if (!token) {
        askToken();
        return;
      }
      try {
        const info = await api("GET", "/v1/info");
        // /v1/info answers a wrong token too, with name and versions only
        // and an auth that says why (a daemon before auth: no rootDir).
        if (info.auth?.state === "required" || !info.rootDir) {
          throw new Unauthorized(info.auth?.why || "the token is not this daemon's");
        }
        fillInfo(info);
      } catch (err) {
        if (err instanceof Unauthorized) askToken(`The daemon refused the token: ${err.message}`);
        else showError(err.message);
        return;
      }
      form.hidden = false;
    }
    $("create-fields").disabled = false;
    setLive("reconnecting", "connecting…");
    connect();
    if (!ticking) setInterval(tick, 1000);
    ticking = true;
  }

  boot();

  // ---- one sandbox's logs, on a locked logs page

  async function logsPage() {
    const id = document.body.dataset.id;
    const path = `/v1/sandboxes/${encodeURIComponent(id)}`;
    const show = (msg) => {
      $("error-text").replaceChildren(msg, " ", el("a", { href: "/" }, "Back to the dashboard"));
      $("error").hidden = false;
    };
    if (!token) {
      show("This daemon needs its token: open the dashboard in this tab and give it there first.");
      return;
    }
    try {
      const [s, logs] = await Promise.all([api("GET", path), api("GET", `${path}/entrypoint-logs`)]);
      document.title = `${s.name} · logs · sandplane`;
      document.querySelector("h1").lastChild.textContent = ` / ${s.name}`;
      $("meta").replaceChildren(`${s.id} · `, el("span", { class: "dot", "data-state": s.state }), s.state,
        s.errorReason ? ` · ${s.errorReason}` : "", " · entrypoint logs, secret values redacted · ", el("a", { href: "" }, "reload"));
      $("stdout").textContent = logs.stdout || "";
      $("stderr").textContent = logs.stderr || "";
    } catch (err) {
      if (err instanceof Unauthorized) setToken("");
      show(err.message);
    }
  }
})();
