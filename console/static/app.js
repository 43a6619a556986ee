// The warren web console: the socket's methods over POST /api/call, the
// logged events over GET /api/events (server-sent events). No framework,
// no build step.
"use strict";

const state = { agents: [], waits: [], selected: null, lastSeq: 0, live: "" };

async function call(method, params) {
  const res = await fetch("/api/call", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Warren-Console": "1" },
    body: JSON.stringify({ id: 1, method: method, params: params || {} }),
  });
  if (res.status === 401) { location.reload(); throw new Error("not paired"); }
  const frame = await res.json();
  if (frame.error) { const e = new Error(frame.error.message); e.code = frame.error.code; throw e; }
  return frame.result;
}

function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") n.className = v; else if (k.startsWith("on")) n.addEventListener(k.slice(2), v); else n.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) n.append(k);
  return n;
}

// spend is an agent's own spend (agent.list's spent, SPEC 13): tokens,
// dollars, and whether every request had a price.
function spend(a) {
  const s = a.spent || {};
  return { tokens: s.tokens || 0, usd: s.usd || 0, turns: s.turns || 0, priced: (s.requests || 0) > 0 && !s.unpriced_requests };
}

function subtreeSpend(a) {
  const sum = { tokens: 0, usd: 0, turns: 0, priced: true };
  for (const b of state.agents) {
    if (b.path !== a.path && !b.path.startsWith(a.path + "/")) continue;
    const s = spend(b);
    sum.tokens += s.tokens; sum.usd += s.usd; sum.turns += s.turns;
    if (!s.priced && s.tokens > 0) sum.priced = false;
  }
  return sum;
}

// leftText is what remains of a budget (agent.list's remaining).
function leftText(r) {
  const parts = [];
  if (r.tokens != null) parts.push(r.tokens + " tok");
  if (r.usd != null) parts.push("$" + Number(r.usd).toFixed(4));
  if (r.turns != null) parts.push(r.turns + " turns");
  return parts.join(", ");
}

function spendText(s) {
  const turns = s.turns + (s.turns === 1 ? " turn" : " turns");
  if (!s.tokens) return turns;
  return s.tokens + " tok" + (s.priced && s.usd > 0 ? " · $" + s.usd.toFixed(4) : "") + ", " + turns;
}

// indent sets a cell's indentation through the CSSOM (the page's CSP
// allows no inline style attribute).
function indent(td, depth) { td.style.paddingLeft = (0.5 + depth * 1.2) + "rem"; return td; }

function statusClass(s) { return (s || "").split("_")[0]; }

function renderTree() {
  const body = document.querySelector("#tree tbody");
  body.replaceChildren();
  const sorted = [...state.agents].sort((x, y) => x.path.localeCompare(y.path));
  for (const a of sorted) {
    const depth = a.path.split("/").length - 1;
    const actions = el("td", {});
    if ((a.status || "").startsWith("interrupted")) {
      actions.append(el("button", { class: "resume", onclick: (e) => { e.stopPropagation(); act("agent.resume", { agent_id: a.agent_id }); } }, "Resume"));
    }
    if (a.status === "running" || a.status === "waiting") {
      actions.append(el("button", { class: "cancel", onclick: (e) => { e.stopPropagation(); act("agent.cancel", { agent_id: a.agent_id }); } }, "Cancel"));
    }
    const sub = subtreeSpend(a), own = spend(a);
    const row = el("tr", { class: "agent" + (state.selected === a.agent_id ? " selected" : ""), "data-agent": a.path, onclick: () => select(a) },
      indent(el("td", {}, a.name), depth),
      el("td", {}, el("span", { class: "status " + statusClass(a.status) }, a.status),
        a.last_error ? el("span", { class: "note" }, a.last_error) : null),
      el("td", { class: "wide" }, (a.provider || "") + " " + (a.model || "")),
      el("td", { class: "spend" }, spendText(own), sub.turns !== own.turns ? el("span", { class: "sub" }, " (" + spendText(sub) + " in all)") : null,
        a.remaining ? el("span", { class: "left" }, "left: " + leftText(a.remaining)) : null),
      actions);
    body.append(row);
  }
}

let waitsShown = null; // the token ids the cards show

function renderWaits() {
  const box = document.getElementById("waits");
  const count = document.getElementById("wait-count");
  count.textContent = state.waits.length;
  count.className = "count" + (state.waits.length ? " some" : "");
  // Leave the cards alone while the waits are the same: someone may be
  // typing into one.
  const shown = state.waits.map((w) => w.token_id).join(",");
  if (shown === waitsShown) return;
  waitsShown = shown;
  const keep = {};
  for (const card of box.querySelectorAll(".wait")) keep[card.dataset.token] = card;
  box.replaceChildren();
  const live = new Set(state.waits.map((w) => w.token_id));
  // A wait that ended while you were answering it (on another device,
  // say) keeps its card: answering it shows how it was answered.
  for (const [token, card] of Object.entries(keep)) {
    if (!live.has(token) && (card.querySelector("textarea").value || card.querySelector(".outcome").textContent)) {
      card.classList.add("ended");
      box.append(card);
    }
  }
  if (!state.waits.length && !box.children.length) { box.append(el("p", { class: "empty" }, "Nothing is waiting.")); }
  for (const w of state.waits) {
    if (keep[w.token_id]) { box.append(keep[w.token_id]); continue; }
    const text = el("textarea", { "aria-label": "your answer", placeholder: "your answer" });
    const outcome = el("div", { class: "outcome" });
    const answer = async (response) => {
      outcome.className = "outcome"; outcome.textContent = "sending…";
      try {
        const r = await call("agent.resume", { agent_id: w.agent_id, token_id: w.token_id, response: response });
        outcome.textContent = "answered: " + (r.response || r.status || "resumed");
      } catch (e) {
        const first = e.code === 5 ? await firstAnswer(w) : null;
        if (first !== null) {
          outcome.className = "outcome"; outcome.textContent = "already answered: " + first;
        } else {
          outcome.className = "outcome error"; outcome.textContent = e.message;
        }
      }
    };
    box.append(el("div", { class: "wait", "data-token": w.token_id },
      el("strong", {}, w.path), " ", el("span", { class: "sub" }, w.kind),
      el("div", { class: "prompt" }, w.prompt),
      text,
      el("div", { class: "actions" },
        el("button", { class: "primary answer", onclick: () => answer(text.value || "yes") }, "Answer"),
        el("button", { class: "approve", onclick: () => answer("yes") }, "Yes"),
        el("button", { class: "deny", onclick: () => answer("no") }, "No")),
      outcome));
  }
}

// firstAnswer is the response the wait's token was consumed with (a
// second answer, from another tab or device, is refused: it shows the
// first one's outcome), or null.
async function firstAnswer(w) {
  let since = 0;
  for (;;) {
    const page = await call("agent.log", { agent_id: w.agent_id, since_seq: since, limit: 1000 });
    for (const e of page.events) {
      if (e.event === "run.resumed" && e.data && e.data.token_id === w.token_id) return e.data.response || "";
    }
    since = page.next_seq;
    if (!page.more) return null;
  }
}

async function act(method, params) {
  try { await call(method, params); } catch (e) { alert(e.message); }
  refresh();
}

async function select(a) {
  state.selected = a.agent_id;
  document.getElementById("transcript-section").hidden = false;
  document.getElementById("transcript-agent").textContent = a.path;
  const box = document.getElementById("transcript");
  box.replaceChildren();
  renderTree();
  let since = 0;
  for (;;) {
    const page = await call("agent.log", { agent_id: a.agent_id, since_seq: since, limit: 500 });
    for (const e of page.events) addEntry(e);
    since = page.next_seq;
    if (!page.more) break;
  }
}

function describe(e) {
  const d = e.data || {};
  switch (e.event) {
    case "turn.start": return "turn " + d.turn + ": " + (d.prompt || "");
    case "turn.complete": return d.response || "";
    case "turn.failed": return d.error || "";
    case "tool.call": return d.tool + " " + JSON.stringify(d.arguments || {}) + " -> " + JSON.stringify(d.result !== undefined ? d.result : d.error);
    case "run.waiting": return (d.wait_kind || "") + ": " + (d.prompt || "");
    case "message.enqueued": return "from " + (d.sender || "") + ": " + (d.payload || "");
    default: return JSON.stringify(d);
  }
}

function addEntry(e) {
  const box = document.getElementById("transcript");
  const liveText = box.querySelector(".live-text");
  if (liveText && (e.event === "turn.complete" || e.event === "turn.failed")) liveText.remove();
  box.append(el("div", { class: "entry", "data-seq": e.seq }, el("span", { class: "ev" }, e.event), describe(e)));
  box.scrollTop = box.scrollHeight;
}

function addDelta(text) {
  const box = document.getElementById("transcript");
  let live = box.querySelector(".live-text");
  if (!live) { live = el("div", { class: "entry live-text" }); box.append(live); }
  live.textContent += text;
  box.scrollTop = box.scrollHeight;
}

let refreshing = null;
function refresh() {
  if (refreshing) return;
  refreshing = setTimeout(async () => {
    refreshing = null;
    try {
      const [list, waits] = await Promise.all([call("agent.list", { limit: 1000 }), call("waits.list", {})]);
      state.agents = list.agents || [];
      state.waits = waits.waits || [];
      renderTree();
      renderWaits();
    } catch (e) { console.error(e); }
  }, 50);
}

function connect() {
  const live = document.getElementById("live");
  const es = new EventSource("/api/events?deltas=1");
  es.onmessage = (m) => {
    const frame = JSON.parse(m.data);
    const ev = frame.event;
    if (!ev) return;
    if (ev.event === "subscribed") { live.textContent = "live"; live.className = "live on"; refresh(); return; }
    if (ev.event === "turn.delta") { if (ev.agent_id === state.selected) addDelta(ev.text); return; }
    if (ev.agent_id === state.selected) addEntry(ev);
    refresh();
  };
  es.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
}

refresh();
connect();
