// fxworld chat: a conversation over fxworld's HTTP routes, with no build step.
//
// POST sessions            {"text"} -> {"session_id", "cursor"}   (a new session)
// POST sessions/{id}/prompts {"text"} -> {"session_id", "cursor"} (Idempotency-Key header)
// GET  sessions/{id}/stream  Server-Sent Events: id = cursor, event = kind, data = JSON
// POST sessions/{id}/approvals/{execution_id} {"approve": true|false}  (the approval card)
// POST sessions/{id}/stop    {}  (the Stop button)
//
// The page renders every event of the stream once, as it arrives. When the
// connection drops (a server restart, a network change) the browser's EventSource
// reconnects by itself and sends the last cursor it saw as Last-Event-ID, so the
// server continues right after it: nothing is missed and nothing is shown twice.
"use strict";

const KINDS = [
  "prompt", "turn.started", "text", "text.discarded", "message", "tool.started",
  "tool.finished", "tool.interrupted", "turn.finished", "turn.failed", "turn.yielded", "fence",
  "approval.requested", "approval.decided", "stop.requested", "turn.stopped",
];

const transcript = document.getElementById("transcript");
const statusEl = document.getElementById("status");
const form = document.getElementById("composer");
const input = document.getElementById("text");
const sendButton = document.getElementById("send");
const footer = document.getElementById("session");
const stopButton = document.getElementById("stop");

let sessionId = new URLSearchParams(location.hash.slice(1)).get("s");
let source = null;
let lastCursor = null;
const bubbles = new Map(); // model call -> its assistant <li>
const tools = new Map(); // execution_id -> its tool <li>
const approvals = new Map(); // execution_id -> its approval card <li>
let lastCall = null; // the model call whose text was shown last
let running = 0; // prompts not answered yet: Stop is enabled while > 0

function setStatus(text, cls) {
  statusEl.textContent = text;
  statusEl.className = "status " + cls;
}

function item(ev, cls) {
  const li = document.createElement("li");
  li.className = "event " + cls;
  li.dataset.cursor = ev.lastEventId;
  li.dataset.kind = ev.type;
  transcript.appendChild(li);
  return li;
}

// A small element inside an existing entry, still marked with its own cursor.
function part(parent, ev, tag, cls, text) {
  const el = document.createElement(tag);
  el.className = "event " + cls;
  el.dataset.cursor = ev.lastEventId;
  el.dataset.kind = ev.type;
  el.textContent = text;
  parent.appendChild(el);
  return el;
}

function meta(ev, text) {
  item(ev, "meta").textContent = text;
}

function bubbleFor(call) {
  let li = bubbles.get(call);
  if (!li) {
    li = document.createElement("li");
    li.className = "assistant";
    const b = document.createElement("div");
    b.className = "bubble";
    li.appendChild(b);
    transcript.appendChild(li);
    bubbles.set(call, li);
  }
  return li;
}

function render(ev) {
  const d = JSON.parse(ev.data);
  switch (ev.type) {
    case "prompt": {
      const li = item(ev, "user");
      const b = document.createElement("div");
      b.className = "bubble";
      b.textContent = d.text;
      li.appendChild(b);
      break;
    }
    case "text":
      part(bubbleFor(d.call).firstChild, ev, "span", "chunk", d.text);
      lastCall = d.call;
      break;
    case "text.discarded":
      bubbleFor(d.call).classList.add("discarded");
      bubbles.delete(d.call);
      meta(ev, "the cut-off reply above is discarded; the model is asked again");
      break;
    case "message": {
      const calls = d.tool_calls || [];
      if (bubbles.has(d.call)) part(bubbles.get(d.call).firstChild, ev, "span", "end", ""); // streamed already
      else if (d.text) part(bubbleFor(d.call).firstChild, ev, "span", "chunk", d.text);
      else meta(ev, calls.length ? "the model asked for " + calls.map((c) => c.name).join(", ") : "(no reply)");
      break;
    }
    case "tool.started": {
      const li = item(ev, "tool");
      const code = document.createElement("code");
      code.textContent = "tool: " + d.name + "(" + JSON.stringify(d.input) + ")";
      li.appendChild(code);
      if (d.attempt > 1) li.appendChild(document.createTextNode("  attempt " + d.attempt));
      tools.set(d.execution_id, li);
      break;
    }
    case "tool.finished": {
      const card = tools.get(d.execution_id) || item(ev, "tool");
      const out = typeof d.output === "string" ? d.output : JSON.stringify(d.output);
      part(card, ev, "span", "result" + (d.is_error ? " error" : ""), "→ " + out);
      break;
    }
    case "tool.interrupted": {
      const card = tools.get(d.execution_id) || item(ev, "tool");
      part(card, ev, "span", "result error", "interrupted: " + d.message);
      break;
    }
    case "approval.requested": {
      const li = item(ev, "approval");
      const code = document.createElement("code");
      code.textContent = d.name + "(" + JSON.stringify(d.input) + ") needs your approval";
      li.appendChild(code);
      const buttons = document.createElement("div");
      buttons.className = "choices";
      for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = label;
        b.className = approve ? "approve" : "deny";
        b.addEventListener("click", () => decide(d.execution_id, approve, buttons));
        buttons.appendChild(b);
      }
      li.appendChild(buttons);
      approvals.set(d.execution_id, li);
      break;
    }
    case "approval.decided": {
      const card = approvals.get(d.execution_id) || item(ev, "approval");
      closeCard(card, d.approved ? "approved" : "denied" + (d.reason ? ": " + d.reason : ""));
      part(card, ev, "span", "result" + (d.approved ? "" : " error"), d.approved ? "✓ approved" : "✗ denied");
      approvals.delete(d.execution_id);
      break;
    }
    case "stop.requested": meta(ev, "stop requested"); break;
    case "turn.stopped": {
      if (lastCall && bubbles.has(lastCall)) bubbles.get(lastCall).classList.add("stopped");
      for (const card of approvals.values()) closeCard(card, "closed: the turn was stopped");
      approvals.clear();
      meta(ev, "turn stopped by the user");
      break;
    }
    case "turn.started": meta(ev, "turn started"); break;
    case "turn.finished": meta(ev, "turn finished"); break;
    case "turn.failed": meta(ev, "turn failed: " + d.error); break;
    case "turn.yielded": meta(ev, "turn paused (" + d.reason + "), continuing"); break;
    case "fence": meta(ev, "a worker picked up the session (epoch " + d.epoch + ")"); break;
  }
  if (ev.type === "prompt") running++;
  if (ev.type === "turn.finished" || ev.type === "turn.failed" || ev.type === "turn.stopped") {
    running = Math.max(0, running - 1);
  }
  stopButton.disabled = running === 0;
  lastCursor = ev.lastEventId;
  document.querySelector("main").scrollTop = 1e9;
}

// An approval card once decided (or closed by a stop): no more buttons.
function closeCard(card, why) {
  card.classList.add("decided");
  card.title = why;
  for (const b of card.querySelectorAll("button")) b.disabled = true;
}

async function decide(executionId, approve, buttons) {
  for (const b of buttons.querySelectorAll("button")) b.disabled = true;
  const path = "sessions/" + encodeURIComponent(sessionId) + "/approvals/" + encodeURIComponent(executionId);
  try {
    // 409 (decided the other way, e.g. in another tab) shows as its decided event
    await post(path, approve ? { approve: true } : { approve: false, reason: "denied in the browser" });
  } catch (err) {
    if (!/already/.test(err.message)) alert("Could not decide: " + err.message);
  }
}

stopButton.addEventListener("click", async () => {
  if (!sessionId) return;
  stopButton.disabled = true;
  try {
    await post("sessions/" + encodeURIComponent(sessionId) + "/stop", {});
  } catch (err) {
    alert("Could not stop: " + err.message);
  }
});

function connect(cursor) {
  if (source) source.close();
  let url = "sessions/" + encodeURIComponent(sessionId) + "/stream";
  if (cursor) url += "?cursor=" + encodeURIComponent(cursor);
  source = new EventSource(url);
  for (const kind of KINDS) source.addEventListener(kind, render);
  source.onopen = () => setStatus("live", "live");
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      // The server answered with an error: the browser gave up, so start again
      // from the last cursor shown.
      setStatus("reconnecting…", "reconnecting");
      setTimeout(() => connect(lastCursor), 2000);
    } else {
      setStatus("reconnecting…", "reconnecting"); // EventSource retries by itself
    }
  };
  footer.textContent = "session " + sessionId;
}

function randomHex(bytes) {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("");
}

// POST a prompt (or a decision, a stop), retrying a lost request with the same
// Idempotency-Key: a prompt that did land is never saved twice (a decision or a
// stop is idempotent by itself).
async function post(path, body) {
  const key = randomHex(16);
  for (let attempt = 1; ; attempt++) {
    try {
      const r = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json", "Idempotency-Key": key },
        body: JSON.stringify(body),
      });
      const reply = await r.json();
      if (!r.ok) throw Object.assign(new Error(reply.message || r.statusText), { final: r.status < 500 });
      return reply;
    } catch (e) {
      if (e.final || attempt >= 5) throw e;
      await new Promise((ok) => setTimeout(ok, 1000 * attempt));
    }
  }
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  sendButton.disabled = true;
  try {
    if (!sessionId) {
      // The page chooses the new session's id, so a retried request cannot make two.
      const r = await post("sessions", { text, session_id: "s-" + randomHex(16) });
      sessionId = r.session_id;
      history.replaceState(null, "", "#s=" + encodeURIComponent(sessionId));
      connect(null); // from the start: the prompt just sent is the first event
    } else {
      await post("sessions/" + encodeURIComponent(sessionId) + "/prompts", { text });
    }
    input.value = "";
  } catch (err) {
    alert("Could not send: " + err.message);
  } finally {
    sendButton.disabled = false;
    input.focus();
  }
});

input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    form.requestSubmit();
  }
});

document.getElementById("new").addEventListener("click", () => {
  if (source) source.close();
  source = null;
  sessionId = null;
  lastCursor = null;
  bubbles.clear();
  tools.clear();
  approvals.clear();
  lastCall = null;
  running = 0;
  stopButton.disabled = true;
  transcript.replaceChildren();
  history.replaceState(null, "", location.pathname);
  footer.textContent = "";
  setStatus("no session", "idle");
});

if (sessionId) connect(null);
