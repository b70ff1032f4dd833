// The pdc dashboard: polls api/snapshot, keeps the points of
// api/history, and draws them. No framework, nothing fetched from
// elsewhere.
"use strict";

const colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
let points = [];      // oldest first, as api/history gives them
let maxPoints = 150;
let lastSeq = 0;

function $(id) { return document.getElementById(id); }

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

function fmtNum(n) {
  if (n >= 100 || n === 0 || Number.isInteger(n)) return Math.round(n).toString();
  return n.toFixed(1);
}

function fmtSecs(s) {
  if (!s) return "-";
  if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(1) + " ms";
  return s.toFixed(2) + " s";
}

// set puts a number in the element of id: its raw value in data-value
// (what scripts and tests read), formatted as its text.
function set(el, raw, text) {
  if (typeof el === "string") el = $(el);
  el.dataset.value = String(raw);
  el.textContent = text;
}

function cell(tr, id, raw, text, cls) {
  const td = document.createElement("td");
  td.id = id;
  if (cls) td.className = cls;
  if (raw === null) td.textContent = text; else set(td, raw, text);
  tr.appendChild(td);
  return td;
}

function render(s) {
  $("tmpdir").textContent = "tmpdir " + s.tmpdir;
  const up = $("updated");
  up.dataset.seq = String(s.seq);
  up.textContent = s.seq ? "snapshot " + s.seq + " at " + new Date(s.time).toLocaleTimeString() : "waiting for the first snapshot";
  const ce = $("cluster-error");
  ce.hidden = !s.error;
  ce.textContent = s.error || "";

  const t = s.totals;
  set("total-up", t.up, t.up + " of " + t.servers);
  set("total-rps", t.requests_per_sec, fmtNum(t.requests_per_sec));
  set("total-objects", t.objects, fmtNum(t.objects));
  set("total-written", t.written_bytes, fmtBytes(t.written_bytes));
  set("total-xfers", t.transfers_in_flight, fmtNum(t.transfers_in_flight));
  set("total-queued", t.transfers_queued, fmtNum(t.transfers_queued));
  set("stage-produces", t.stage_produces, fmtNum(t.stage_produces));
  set("stage-bytes", t.stage_bytes, fmtBytes(t.stage_bytes));
  set("stage-consumes", t.stage_consumes, fmtNum(t.stage_consumes));
  set("stage-waiters", t.stage_waiters, fmtNum(t.stage_waiters));
  set("total-errors", t.errors, fmtNum(t.errors));

  const body = document.querySelector("#servers tbody");
  body.replaceChildren();
  for (const v of s.servers) {
    const tr = document.createElement("tr");
    const p = "srv-" + v.rank + "-";
    tr.id = "srv-" + v.rank;
    const rank = cell(tr, p + "rank", null, String(v.rank));
    rank.style.borderLeft = "4px solid " + colors[v.rank % colors.length];
    const st = cell(tr, p + "state", null, v.state, "text state-" + v.state.replace(" ", "-"));
    if (v.error) st.title = v.error;
    cell(tr, p + "addr", null, v.addr, "text");
    cell(tr, p + "roles", null, v.roles, "text");
    cell(tr, p + "requests", v.requests, fmtNum(v.requests));
    cell(tr, p + "rps", v.requests_per_sec, fmtNum(v.requests_per_sec));
    cell(tr, p + "p99", v.p99_seconds, fmtSecs(v.p99_seconds));
    cell(tr, p + "in", v.in_bytes_per_sec, fmtBytes(v.in_bytes_per_sec) + "/s");
    cell(tr, p + "out", v.out_bytes_per_sec, fmtBytes(v.out_bytes_per_sec) + "/s");
    cell(tr, p + "objects", v.objects, fmtNum(v.objects));
    cell(tr, p + "written", v.written_bytes, fmtBytes(v.written_bytes));
    cell(tr, p + "xfers", v.transfers_in_flight, fmtNum(v.transfers_in_flight));
    cell(tr, p + "queued", v.transfers_queued, fmtNum(v.transfers_queued));
    cell(tr, p + "clients", v.clients, fmtNum(v.clients));
    cell(tr, p + "errors", v.errors, fmtNum(v.errors));
    body.appendChild(tr);
  }

  const eb = document.querySelector("#errors tbody");
  eb.replaceChildren();
  for (const e of s.recent_errors) {
    const tr = document.createElement("tr");
    tr.className = "err";
    tr.dataset.rank = String(e.rank);
    tr.dataset.method = e.method;
    tr.dataset.code = e.code;
    tr.dataset.count = String(e.count);
    cell(tr, "", null, new Date(e.time).toLocaleTimeString(), "text").removeAttribute("id");
    cell(tr, "", null, String(e.rank)).removeAttribute("id");
    cell(tr, "", null, e.method, "text").removeAttribute("id");
    cell(tr, "", null, e.code, "text").removeAttribute("id");
    cell(tr, "", null, fmtNum(e.count)).removeAttribute("id");
    eb.appendChild(tr);
  }
  $("no-errors").hidden = s.recent_errors.length > 0;
}

// plot draws one line per server of key over the points, from 0 to the
// highest value seen.
function plot(id, key, fmt) {
  const c = $(id);
  const g = c.getContext("2d");
  const w = c.width, h = c.height, left = 64, bottom = 16;
  g.clearRect(0, 0, w, h);
  let top = 0;
  for (const p of points) for (const v of p.servers) top = Math.max(top, v[key]);
  g.strokeStyle = "#ccc";
  g.beginPath();
  g.moveTo(left, 4); g.lineTo(left, h - bottom); g.lineTo(w - 4, h - bottom);
  g.stroke();
  g.fillStyle = "#666";
  g.font = "11px sans-serif";
  g.fillText(fmt(top), 2, 12);
  g.fillText(fmt(0), 2, h - bottom);
  if (points.length > 1) {
    const t0 = Date.parse(points[0].time), t1 = Date.parse(points[points.length - 1].time);
    g.fillText(Math.round((t1 - t0) / 1000) + " s", w - 40, h - 2);
  }
  if (points.length < 2 || top <= 0) return;
  const ranks = new Set();
  for (const p of points) for (const v of p.servers) ranks.add(v.rank);
  const t0 = Date.parse(points[0].time), span = Math.max(Date.parse(points[points.length - 1].time) - t0, 1);
  for (const r of ranks) {
    g.strokeStyle = colors[r % colors.length];
    g.beginPath();
    let started = false;
    for (const p of points) {
      const v = p.servers.find(x => x.rank === r);
      if (!v) { started = false; continue; }
      const x = left + (w - 4 - left) * (Date.parse(p.time) - t0) / span;
      const y = h - bottom - (h - bottom - 4) * v[key] / top;
      if (started) g.lineTo(x, y); else g.moveTo(x, y);
      started = true;
    }
    g.stroke();
  }
}

function legend(s) {
  const l = $("legend");
  l.replaceChildren();
  for (const v of s.servers) {
    const span = document.createElement("span");
    const i = document.createElement("i");
    i.style.background = colors[v.rank % colors.length];
    span.append(i, "rank " + v.rank + " (" + v.roles + ")");
    l.appendChild(span);
  }
}

function draw() {
  plot("plot-rps", "requests_per_sec", fmtNum);
  plot("plot-p99", "p99_seconds", s => s ? fmtSecs(s) : "0");
  plot("plot-in", "in_bytes_per_sec", b => fmtBytes(b) + "/s");
  plot("plot-out", "out_bytes_per_sec", b => fmtBytes(b) + "/s");
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()));
  return r.json();
}

async function tick() {
  let poll = 2000;
  try {
    const s = await getJSON("api/snapshot");
    poll = Math.max(s.poll_ns / 1e6, 250);
    if (s.seq > lastSeq && !s.error) {
      points.push({
        seq: s.seq, time: s.time,
        servers: s.servers.filter(v => v.state === "up").map(v => ({
          rank: v.rank, requests_per_sec: v.requests_per_sec, in_bytes_per_sec: v.in_bytes_per_sec,
          out_bytes_per_sec: v.out_bytes_per_sec, p99_seconds: v.p99_seconds,
        })),
      });
      while (points.length > maxPoints) points.shift();
    }
    lastSeq = Math.max(lastSeq, s.seq);
    render(s);
    legend(s);
    draw();
  } catch (e) {
    const ce = $("cluster-error");
    ce.hidden = false;
    ce.textContent = "the dashboard does not answer: " + e.message;
  }
  setTimeout(tick, poll);
}

async function start() {
  try {
    const h = await getJSON("api/history");
    points = h.points;
    maxPoints = Math.max(points.length, Math.round(300e9 / h.poll_ns), 2);
    if (points.length) lastSeq = points[points.length - 1].seq;
  } catch (e) {
    // The snapshot's error says it.
  }
  tick();
}

start();
