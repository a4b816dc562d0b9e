// OpenTalon status page: reads /api/status, /api/usage and /api/affinity
// (docs/status.md) and draws them. No framework, no other origin.
"use strict";

const KEY = "opentalon-api-key";
const SVG = "http://www.w3.org/2000/svg";
const state = { range: "24h", by: "model" };
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}

function ago(seconds) {
  if (seconds < 90) return Math.round(seconds) + " s";
  if (seconds < 5400) return Math.round(seconds / 60) + " min";
  if (seconds < 172800) return Math.round(seconds / 3600) + " h";
  return Math.round(seconds / 86400) + " d";
}

function since(iso, now) {
  return ago((Date.parse(now) - Date.parse(iso)) / 1000);
}

async function api(path) {
  const headers = {};
  const key = sessionStorage.getItem(KEY);
  if (key) headers["Authorization"] = "Bearer " + key;
  const r = await fetch(path, { headers });
  if (r.status === 401) throw { login: true };
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function fill(tbody, rows, empty, cols) {
  tbody.replaceChildren();
  if (rows.length === 0) {
    tbody.append(el("tr", {}, el("td", { colspan: String(cols), class: "muted" }, empty)));
    return;
  }
  for (const r of rows) tbody.append(r);
}

function badge(ok, good, bad) {
  return el("span", { class: ok ? "good" : "bad" }, ok ? good : bad);
}

function renderStatus(s) {
  $("version").textContent = "version " + s.version + " · up " + since(s.started, s.now);
  $("updated").textContent = "updated " + new Date(s.now).toLocaleTimeString();

  fill($("channels").tBodies[0], s.channels.map((c) => el("tr", { "data-channel": c.name, "data-up": String(c.up) },
    el("td", {}, c.name),
    el("td", {}, badge(c.up, "up", "down"), c.error ? el("div", { class: "muted" }, c.error) : ""),
    el("td", {}, c.last_event ? since(c.last_event, s.now) + " ago" : "—"),
    el("td", {}, String(c.restarts)))), "No channels.", 4);

  if (s.cluster) {
    const c = s.cluster;
    $("cluster-card").hidden = false;
    $("cluster-warnings").replaceChildren(...c.warnings.map((w) => el("p", { class: "warn" }, w)));
    fill($("replicas").tBodies[0], c.replicas.map((r) => el("tr", { "data-replica": r.id },
      el("td", {}, r.id + (r.id === c.replica ? " (this one)" : "")),
      el("td", {}, r.host), el("td", {}, r.version), el("td", {}, r.config_hash),
      el("td", {}, r.stopped ? el("span", { class: "muted" }, "stopped " + since(r.stopped, s.now) + " ago") : since(r.heartbeat, s.now) + " ago"),
      el("td", {}, c.leases.filter((l) => l.held && l.holder === r.id).map((l) => l.name).join(", ") || "—"))),
      "No replicas recorded.", 6);
  }

  const q = s.queue;
  $("queue").replaceChildren(...[["queued", q.queued], ["running", q.running], ["oldest waiting", q.queued ? ago(q.oldest_age_seconds) : "—"], ["failed", q.failed]]
    .map(([k, v]) => el("div", {}, el("b", {}, String(v)), el("span", { class: "muted" }, k))));
  fill($("failures").tBodies[0], q.failures.map((f) => el("tr", {},
    el("td", {}, since(f.at, s.now) + " ago"), el("td", {}, f.channel), el("td", {}, "#" + f.id), el("td", { class: "reason" }, f.reason))),
    "No failed requests.", 4);

  fill($("credentials").tBodies[0], s.credentials.map((c) => {
    const cooling = c.cooling_until && Date.parse(c.cooling_until) > Date.parse(s.now);
    const state = cooling ? el("span", { class: "warn" }, "cooling " + since(s.now, c.cooling_until) + " more")
      : c.failing ? el("span", { class: "bad" }, "failing") : el("span", { class: "good" }, "ready");
    return el("tr", { "data-profile": c.profile, "data-state": cooling ? "cooling" : c.failing ? "failing" : "ready" },
      el("td", {}, c.profile), el("td", {}, String(c.uses)),
      el("td", {}, state, c.failing ? el("div", { class: "muted" }, c.failing) : "",
        c.last_error ? el("div", { class: "muted" }, "last error: " + c.last_error) : ""));
  }), "No credentials configured.", 3);

  const kinds = (f) => Object.entries(f).sort((a, b) => b[1] - a[1]).map(([k, n]) => k + " ×" + n).join(", ");
  const modelState = { ok: ["good", "ok"], degraded: ["warn", "degraded"], failing: ["bad", "failing"] };
  fill($("models").tBodies[0], s.models.map((m) => {
    const [cls, word] = modelState[m.state] || ["muted", m.state];
    return el("tr", { "data-model": m.model, "data-state": m.state },
      el("td", {}, m.model), el("td", {}, String(m.calls)),
      el("td", {}, el("span", { class: cls }, word),
        Object.keys(m.failures).length ? el("div", { class: "muted" }, kinds(m.failures) +
          (m.last_failure ? " · last " + since(m.last_failure, s.now) + " ago" : "")) : ""));
  }), "No LLM calls in the last 15 minutes.", 3);

  const rows = s.plugins.map((p) => el("tr", {}, el("td", {}, p.name), el("td", {}, "plugin"),
    el("td", {}, badge(p.up, "running", "stopped"), p.restarts ? el("span", { class: "muted" }, " · " + p.restarts + " restarts") : "")))
    .concat(s.scripts.map((x) => el("tr", {}, el("td", {}, x.name), el("td", {}, "Lua"),
      el("td", {}, badge(x.healthy, "ok", x.loaded === false ? "not loaded" : "failing"),
        x.reload_error && x.loaded !== false ? el("span", { class: "bad" }, " edit not loaded: version " + x.version + " keeps running") : "",
        x.error ? el("div", { class: "muted" }, x.error) : "",
        x.reload_error && x.loaded !== false ? el("div", { class: "muted" }, x.reload_error) : ""))));
  fill($("plugins").tBodies[0], rows, "No plugins or Lua scripts loaded.", 3);
}

// niceStep is the smallest of 1, 2, 2.5 and 5 times a power of ten that
// is at least x (x > 0).
function niceStep(x) {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x * (1 - 1e-9)) return m * p;
  return 10 * p;
}

// decimals is how many decimals show step and its multiples exactly.
function decimals(step) {
  let d = 0;
  while (d < 12 && Math.abs(Math.round(step * Math.pow(10, d)) - step * Math.pow(10, d)) > 1e-6) d++;
  return d;
}

// bars draws a stacked bar chart: one bar per bucket, one colored part
// per series. The axis has three ticks, 0, step and 2·step, with a
// round step: the labels are proportional to the heights they mark.
// tick formats an axis value given the decimals the step needs.
function bars(target, buckets, series, value, fmt, stepSeconds, tick, minStep) {
  // Drawn at the container's own width, so text keeps its size on a phone.
  const W = Math.max(300, Math.round(target.clientWidth || 720)), H = 180, L = 56, B = 22, T = 8;
  const n = buckets.length;
  const totals = buckets.map((_, i) => series.reduce((sum, s) => sum + value(s)[i], 0));
  const step = Math.max(niceStep((Math.max(...totals, 0) || minStep) / 2), minStep);
  const top = 2 * step, dec = decimals(step);
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "chart" });
  const bw = (W - L) / n;
  for (const k of [0, 1, 2]) {
    const y = T + (H - B - T) * (1 - k / 2);
    svg.append(el("svg:line", { x1: L, x2: W, y1: y, y2: y }));
    svg.append(el("svg:text", { x: L - 4, y: y + 4, "text-anchor": "end", class: "tick", "data-value": String(k * step) }, tick(k * step, dec)));
  }
  series.forEach((s, si) => {
    const v = value(s);
    for (let i = 0; i < n; i++) {
      if (!v[i]) continue;
      const below = series.slice(0, si).reduce((sum, o) => sum + value(o)[i], 0);
      const h = (H - B - T) * v[i] / top, y = T + (H - B - T) * (1 - (below + v[i]) / top);
      const r = el("svg:rect", { x: L + i * bw + 1, y, width: Math.max(bw - 2, 1), height: Math.max(h, 0.5), class: "c" + (si % 8) });
      r.append(el("svg:title", {}, `${s.key}: ${fmt(v[i])}`));
      svg.append(r);
    }
  });
  const every = Math.ceil(n / Math.max(2, Math.floor((W - L) / 110)));
  buckets.forEach((b, i) => {
    if (i % every) return;
    const d = new Date(b);
    const label = stepSeconds < 86400 ? d.toLocaleString([], { weekday: stepSeconds > 3600 ? "short" : undefined, hour: "2-digit", minute: "2-digit" }) : d.toLocaleDateString([], { month: "short", day: "numeric" });
    svg.append(el("svg:text", { x: L + i * bw + bw / 2, y: H - 6, "text-anchor": "middle" }, label));
  });
  target.replaceChildren(svg);
}

function renderUsage(u) {
  const usd = (v) => v === 0 ? "$0" : "$" + (v >= 1 ? v.toFixed(2) : v >= 0.01 ? v.toFixed(3) : v.toFixed(4));
  const tok = (v) => v >= 1e6 ? (v / 1e6).toFixed(1) + "M" : v >= 1e3 ? (v / 1e3).toFixed(1) + "k" : String(Math.round(v));
  if (u.series.length === 0) {
    for (const id of ["cost-chart", "token-chart"]) $(id).replaceChildren(el("p", { class: "empty-note" }, "No LLM calls in this period."));
    $("legend").replaceChildren();
    return;
  }
  const usdTick = (v, d) => v === 0 ? "$0" : "$" + v.toFixed(d);
  const tokTick = (v) => v >= 1e6 ? +(v / 1e6).toFixed(3) + "M" : v >= 1e3 ? +(v / 1e3).toFixed(3) + "k" : String(v);
  bars($("cost-chart"), u.buckets, u.series, (s) => s.cost_usd, usd, u.step_seconds, usdTick, 1e-6);
  bars($("token-chart"), u.buckets, u.series, (s) => s.input_tokens.map((v, i) => v + s.output_tokens[i]), tok, u.step_seconds, tokTick, 1);
  $("legend").replaceChildren(...u.series.map((s, i) => {
    const cost = s.cost_usd.reduce((a, b) => a + b, 0), calls = s.calls.reduce((a, b) => a + b, 0);
    return el("span", {}, el("i", { class: "c" + (i % 8) }), `${s.key} — ${calls} calls, ${usd(cost)}`);
  }));
}

// heat colors a score from red (0) through yellow to green (1).
function heat(score) {
  return `hsl(${Math.round(score * 120)}, 65%, 62%)`;
}

function renderAffinity(a) {
  const box = $("heatmap");
  if (a.cells.length === 0) {
    box.replaceChildren(el("p", { class: "empty-note" }, "No quality signals yet: reactions, /retry and \"try again\" teach the router."));
    return;
  }
  const CW = 120, CH = 40, L = 110, T = 56;
  const svg = el("svg:svg", { viewBox: `0 0 ${L + CW * a.models.length} ${T + CH * a.tasks.length}`, width: L + CW * a.models.length, role: "img", "aria-label": "affinity heat map" });
  a.models.forEach((m, j) => svg.append(el("svg:text", { x: L + CW * j + CW / 2, y: T - 10, "text-anchor": "middle" }, m.length > 18 ? "…" + m.slice(-17) : m)));
  a.tasks.forEach((t, i) => svg.append(el("svg:text", { x: L - 8, y: T + CH * i + CH / 2 + 4, "text-anchor": "end" }, t)));
  const at = new Map(a.cells.map((c) => [c.task + "\u0000" + c.model, c]));
  a.tasks.forEach((t, i) => a.models.forEach((m, j) => {
    const c = at.get(t + "\u0000" + m);
    const g = el("svg:g", { class: c ? "cell" : "" });
    const rect = el("svg:rect", { x: L + CW * j + 1, y: T + CH * i + 1, width: CW - 2, height: CH - 2, rx: 4 });
    if (c) {
      rect.setAttribute("fill", heat(c.score));
      rect.setAttribute("data-task", t);
      rect.setAttribute("data-model", m);
      g.append(rect, el("svg:title", {}, `${t} × ${m}: ${Math.round(c.score * 100)}% accepted, ${c.positives} 👍 ${c.negatives} 👎`),
        el("svg:text", { x: L + CW * j + CW / 2, y: T + CH * i + CH / 2 + 4, "text-anchor": "middle" }, `${Math.round(c.score * 100)}% · ${c.signals} sig.`));
    } else {
      rect.setAttribute("class", "empty");
      g.append(rect);
    }
    svg.append(g);
  }));
  box.replaceChildren(svg);
}

function renderChoices(a) {
  const list = $("choices");
  const cs = a.choices || [];
  if (cs.length === 0) {
    list.replaceChildren(el("li", { class: "empty-note" }, "No task type has a learned choice yet."));
    return;
  }
  list.replaceChildren(...cs.map((c) => el("li", { "data-task": c.task }, el("strong", {}, c.task + ": "), c.why)));
}

async function refresh() {
  try {
    const [s, u, a] = await Promise.all([api("/api/status"), api(`/api/usage?range=${state.range}&by=${state.by}`), api("/api/affinity")]);
    $("login").hidden = true;
    $("error").hidden = true;
    $("page").hidden = false;
    renderStatus(s);
    renderUsage(u);
    renderAffinity(a);
    renderChoices(a);
    if (document.body.dataset.loaded !== "true") {
      document.body.dataset.loaded = "true";
      performance.mark("opentalon-drawn"); // first full draw, for load timing
    }
  } catch (e) {
    if (e && e.login) {
      $("page").hidden = true;
      $("login").hidden = false;
      if (sessionStorage.getItem(KEY)) $("login-error").textContent = "That key was refused.";
      return;
    }
    $("error").textContent = "Could not read the status: " + (e && e.message ? e.message : e);
    $("error").hidden = false;
  }
}

function toggle(groupID, field) {
  $(groupID).addEventListener("click", (ev) => {
    const b = ev.target.closest("button");
    if (!b) return;
    state[field] = b.dataset.v;
    for (const x of $(groupID).querySelectorAll("button")) x.classList.toggle("on", x === b);
    refresh();
  });
}

// The script comes last in the page: the elements are there.
(() => {
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, $("key").value);
    refresh();
  });
  toggle("range", "range");
  toggle("by", "by");
  refresh();
  setInterval(() => { if (!document.hidden) refresh(); }, 15000);
})();
