// AgentTavern web app: one small script, no build step. Text from models, cards and users is
// always escaped first; markdown is a tiny safe subset applied to escaped text.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const csrf = () => (document.cookie.match(/(?:^|; )tavern_csrf=([^;]*)/) || [])[1] || $('meta[name="csrf"]').content;

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// Escape, then: fenced code, inline code, **bold**, *italic*, line breaks. No links, no HTML.
function markdown(text) {
  const parts = String(text).split(/```/);
  return parts.map((part, i) => {
    if (i % 2 === 1) return "<pre><code>" + escapeHtml(part.replace(/^[a-z0-9_-]*\n/i, "")) + "</code></pre>";
    let html = escapeHtml(part);
    html = html.replace(/`([^`\n]+)`/g, "<code>$1</code>");
    html = html.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
    html = html.replace(/(^|[^*])\*([^*\n]+)\*/g, "$1<em>$2</em>");
    return html.replace(/\n/g, "<br>");
  }).join("");
}

function notice(message, kind = "error") {
  const box = $("#notice");
  box.textContent = message;
  box.className = kind;
  box.hidden = false;
}

function clearNotice() { $("#notice").hidden = true; }

async function api(method, url, body, isForm = false) {
  const headers = { "X-CSRF-Token": csrf() };
  let payload;
  if (isForm) payload = body;
  else if (body !== undefined) { headers["Content-Type"] = "application/json"; payload = JSON.stringify(body); }
  let response;
  try {
    response = await fetch(url, { method, headers, body: payload, credentials: "same-origin" });
  } catch (err) {
    const error = new Error("The server cannot be reached; nothing was lost, try again.");
    notice(error.message);
    throw error;
  }
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    const err = (data && data.error) || { code: "error", message: response.statusText };
    let message = err.message;
    if (response.status === 401 && !url.startsWith("/api/login")) {
      message = "Your session has expired. Sign in again in another tab; what you typed is still here.";
    }
    notice(message);
    const error = new Error(message);
    error.code = err.code;
    throw error;
  }
  return data;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k === "html") node.innerHTML = v; // only ever markdown() output
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

// --- accounts ----------------------------------------------------------------------------------

function accountForm() {
  const form = $("#account-form");
  if (!form) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearNotice();
    try {
      await api("POST", form.dataset.action, { name: $("#name").value, password: $("#password").value });
      location.href = form.dataset.next || "/";
    } catch (e) { /* notice shown; the form keeps what was typed */ }
  });
}

function header() {
  const out = $("#logout");
  if (out) out.addEventListener("click", async () => { await api("POST", "/api/logout"); location.href = "/login"; });
  const all = $("#logout-everywhere");
  if (all) all.addEventListener("click", async () => { await api("POST", "/api/logout-everywhere"); location.href = "/login"; });
}

// --- gallery, import, new chat -------------------------------------------------------------------

async function indexPage() {
  const input = $("#import-file");
  input.addEventListener("change", () => { if (input.files[0]) importFile(input.files[0]); });
  const drop = $("#import");
  drop.addEventListener("dragover", (ev) => { ev.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (ev) => {
    ev.preventDefault(); drop.classList.remove("over");
    if (ev.dataTransfer.files[0]) importFile(ev.dataTransfer.files[0]);
  });
  $("#new-chat").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // One character (picked, or the one member ticked), or a group of two or more: not both.
    const picked = $("#character").value || null;
    const members = [...document.querySelectorAll("#members input:checked")].map((box) => box.value);
    if (picked && members.length >= 2) { notice("Pick one character, or tick two or more members for a group chat, not both."); return; }
    await startChat(picked || (members.length === 1 ? members[0] : null)).catch(() => {});
  });
  const invite = $("#invite");
  if (invite) invite.addEventListener("click", async () => {
    const found = await api("POST", "/api/invites");
    $("#invite-link").replaceChildren(el("span", { text: "Invite link (one use): " }), el("code", { text: found.url }));
  });
  const [, sessions] = await Promise.all([listCharacters(), api("GET", "/api/sessions")]);
  const chats = $("#chats");
  chats.replaceChildren();
  for (const s of sessions.sessions) {
    const label = `${s.session_id} · ${s.architecture}${s.context_mode ? " / " + s.context_mode : ""} · ${s.turns} turns`;
    chats.append(el("li", {}, el("a", { href: `/chat/${s.session_id}`, text: label })));
  }
  if (!sessions.sessions.length) chats.append(el("li", { text: "No chats yet." }));
  document.body.dataset.ready = "true";
}

let galleryDrawn = 0;

function renderGallery(characters, asked) {
  // The page's first listing may answer after an import's newer one: the older is dropped. A
  // redraw keeps what the user already picked (the character, the members checked).
  if (asked < galleryDrawn) return;
  galleryDrawn = asked;
  const gallery = $("#gallery");
  const select = $("#character");
  const members = $("#members");
  const chosen = select.value;
  const checked = new Set([...document.querySelectorAll("#members input:checked")].map((box) => box.value));
  gallery.replaceChildren();
  select.replaceChildren(el("option", { value: "", text: "(none)" }));
  if (members) members.replaceChildren(members.querySelector("legend"));
  for (const c of characters) {
    const img = c.avatar ? el("img", { src: c.avatar, alt: `Avatar of ${c.name}`, width: 96, height: 96 }) : el("div", { class: "noavatar", "aria-hidden": "true", text: c.name.slice(0, 1) });
    gallery.append(el("li", { class: "character" }, img, el("h3", { text: c.name }),
      c.greeting ? el("p", { class: "greeting", text: c.greeting.slice(0, 160) }) : null,
      el("button", { type: "button", "aria-label": `Chat with ${c.name}`, onclick: () => startChat(c.asset_id) }, "Chat")));
    select.append(el("option", { value: c.asset_id, text: c.name }));
    if (members) members.append(el("label", {}, el("input", { type: "checkbox", value: c.asset_id, checked: checked.has(c.asset_id) ? "checked" : null }), ` ${c.name}`));
  }
  if (characters.some((c) => c.asset_id === chosen)) select.value = chosen;
}

let galleryAsked = 0;

async function listCharacters() {
  const asked = ++galleryAsked;
  const chars = await api("GET", "/api/characters");
  renderGallery(chars.characters, asked);
}

async function importFile(file) {
  clearNotice();
  const status = $("#import-status");
  status.textContent = `Importing ${file.name} …`;
  const form = new FormData();
  form.append("file", file);
  try {
    const found = await api("POST", "/api/assets", form, true);
    const later = found.ready === false ? " It is still being indexed: a chat started now may open without its greeting." : "";
    status.textContent = `${found.duplicate ? "Already imported" : "Imported"} ${found.kind} ${found.name}.${later}`;
    await listCharacters();
  } catch (e) { status.textContent = `Not imported: ${e.message}`; }
}

async function startChat(characterId) {
  const body = { architecture: $("#architecture").value, context_mode: $("#context-mode").value };
  const members = [...document.querySelectorAll("#members input:checked")].map((box) => box.value);
  if (!characterId && members.length >= 2) body.members = members;
  else if (characterId) body.character_id = characterId;
  const found = await api("POST", "/api/sessions", body);
  location.href = found.url;
}

// --- the chat ------------------------------------------------------------------------------------

const chat = { turns: new Map(), bubbles: new Map(), steps: new Map(), binding: null, running: false, speakers: new Map() };

function speakerOf(ev, p) {
  // A group reply names its member (payload speaker); its chunks only carry the actor id.
  if (p.speaker) chat.speakers.set(ev.actor_id, p.speaker.name);
  return chat.speakers.get(ev.actor_id) || null;
}

function who(ev, name) {
  // The speaking member's name and avatar (its card image, when the card came with one).
  const label = el("div", { class: "who", text: name || "Assistant" });
  if (!name || !chat.binding || !chat.binding.group) return label;
  const img = el("img", { class: "speaker-avatar", src: `/api/assets/${encodeURIComponent(ev.actor_id)}/avatar`, alt: `Avatar of ${name}`, width: 32, height: 32 });
  img.addEventListener("error", () => img.remove());
  label.prepend(img, " ");
  return label;
}

function renderReply(node, ev, p) {
  node.replaceChildren(who(ev, speakerOf(ev, p)), el("div", { class: "text", html: markdown(node.raw) }));
  if (chat.speakers.has(ev.actor_id)) node.dataset.speaker = chat.speakers.get(ev.actor_id);
}

async function groupControls(group) {
  // A group chat: who is in it, and a button per member to let that member speak now.
  const asked = chat.groupDrawn = (chat.groupDrawn || 0) + 1;
  const found = await api("GET", "/api/characters").catch(() => ({ characters: [] }));
  if (asked !== chat.groupDrawn) return;  // a newer state of the group is being drawn
  const names = new Map(found.characters.map((c) => [c.asset_id, c.name]));
  const box = $("#group-controls");
  if (!box) return;
  box.hidden = false;
  const everyone = group.members.map((m) => names.get(m.character_id) || m.character_id).join(", ");
  $("#chat-title").textContent = `Group chat${group.name ? " " + group.name : ""} with ${everyone}`;
  box.replaceChildren(el("h2", { text: `Group: ${group.name || "unnamed"}` }));
  for (const m of group.members) {
    const name = names.get(m.character_id) || m.character_id;
    const muted = (group.disabled || []).includes(m.character_id);
    box.append(el("button", { type: "button", disabled: muted ? "disabled" : null, onclick: () => api("POST", `/api/sessions/${$("#chat").dataset.session}/commands`, { name: "speak", args: { name: m.character_id } }).catch(() => {}) }, `Let ${name} speak`));
  }
}

function showBinding(note = "") {
  // The binding line, the mode picker and a group's controls, as the log has them now.
  const b = chat.binding;
  $("#binding").textContent = `${b.architecture}${b.context_mode ? " · " + b.context_mode : ""}${b.character_id ? " · character " + b.character_id : ""}${b.group ? " · group of " + b.group.members.length : ""}${note}`;
  if (b.context_mode) $("#mode").value = b.context_mode;
  if (b.group) groupControls(b.group);
}

function regrouped(group, type, p) {
  // A group after a member event (the loop's own rules: muted members stay members).
  const next = { ...group, members: [...group.members], disabled: [...(group.disabled || [])] };
  const id = type === "group/member-added" ? p.member.character_id : p.character_id;
  if (type === "group/member-added" && !next.members.some((m) => m.character_id === id)) next.members.push(p.member);
  if (type === "group/member-removed") next.members = next.members.filter((m) => m.character_id !== id);
  if (type === "group/member-muted" && !next.disabled.includes(id)) next.disabled.push(id);
  if (type === "group/member-unmuted" || type === "group/member-removed") next.disabled = next.disabled.filter((d) => d !== id);
  return next;
}

function turnItem(turn) {
  let item = chat.turns.get(turn);
  if (!item) {
    item = el("li", { class: "turn", "data-turn": turn });
    $("#log").append(item);
    chat.turns.set(turn, item);
  }
  return item;
}

function stepBox(ev) {
  const key = `${ev.turn}.${ev.step}`;
  let box = chat.steps.get(key);
  if (!box) {
    const summary = el("summary", { text: `Step ${ev.step}: tools and memory` });
    box = el("details", { class: "step", "data-step": key }, summary, el("ul", { class: "step-items" }));
    turnItem(ev.turn).append(box);
    chat.steps.set(key, box);
  }
  return $(".step-items", box);
}

function bubble(ev, role) {
  // A group chat's greetings share their turn and step: each member's is a bubble of its own.
  const who = ev.form === "greeting" && ev.actor_id ? `.${ev.actor_id}` : "";
  const key = `${ev.turn}.${ev.step}.${role}${who}`;
  let node = chat.bubbles.get(key);
  if (!node) {
    node = el("div", { class: `msg ${role}`, "data-role": role });
    node.raw = "";
    turnItem(ev.turn).append(node);
    chat.bubbles.set(key, node);
  }
  return node;
}

function onEvent(ev) {
  const p = ev.payload || {};
  switch (ev.type) {
    case "session/created":
      chat.binding = { ...p };
      showBinding();
      greeting(p.group ? p.group.members.map((m) => m.character_id) : [p.character_id]);
      break;
    case "session/binding-changed":
      if (!chat.binding) break;
      chat.binding.architecture = p.to_architecture;
      chat.binding.context_mode = p.to_context_mode;
      if (p.group) chat.binding.group = p.group;
      showBinding(" (from the next turn)");
      break;
    case "group/member-added":
    case "group/member-removed":
    case "group/member-muted":
    case "group/member-unmuted":
      if (chat.binding && chat.binding.group) {
        chat.binding.group = regrouped(chat.binding.group, ev.type, p);
        showBinding();
      }
      break;
    case "user/message":
      if (ev.form === "recall") {
        const items = stepBox(ev);
        items.append(el("li", { class: "recall" }, el("details", {}, el("summary", { text: "Memory recalled" }), el("div", { class: "recalled", text: p.text }))));
      } else if ((ev.source || "").startsWith("plugin:")) {
        stepBox(ev).append(el("li", { class: "dim", text: `${ev.source}: ${p.text}` }));
      } else {
        const node = el("div", { class: "msg user", "data-role": "user" }, el("div", { class: "who", text: "You" }), el("div", { class: "text", html: markdown(p.text) }));
        turnItem(ev.turn).append(node);
      }
      break;
    case "turn/start":
      chat.running = true;
      turnItem(ev.turn).setAttribute("aria-busy", "true");
      break;
    case "assistant/chunk": {
      if (!p.delta) break;
      chat.chunks = (chat.chunks || 0) + 1;
      document.body.dataset.chunks = String(chat.chunks);
      const node = bubble(ev, "assistant");
      node.raw += p.delta;
      renderReply(node, ev, p);
      node.dataset.streaming = "true";
      break;
    }
    case "assistant/message": {
      // The log's greeting replaces the one drawn from the gallery while the log was loading.
      if (ev.form === "greeting") {
        chat.loggedGreeting = true;
        if ($("#greeting")) $("#greeting").remove();
      }
      if (!p.content && !(chat.bubbles.get(`${ev.turn}.${ev.step}.assistant`))) break;
      const node = bubble(ev, "assistant");
      node.raw = p.content || node.raw;
      renderReply(node, ev, p);
      node.dataset.streaming = "false";
      if (p.partial) node.append(el("p", { class: "dim", text: p.finish_reason === "error" ? "(partial reply kept: the stream broke)" : "(partial reply kept: the turn was cancelled)" }));
      else if (p.finish_reason === "length") node.append(el("p", { class: "dim", text: "(the reply was cut at the token limit)" }));
      break;
    }
    case "tool/call":
      stepBox(ev).append(el("li", { class: "tool" }, el("code", { text: `→ ${p.name}(${(p.arguments || "").slice(0, 300)})` })));
      break;
    case "tool/result":
      stepBox(ev).append(el("li", { class: p.ok ? "tool" : "tool bad" }, el("code", { text: `${p.ok ? "←" : "✗"} ${p.name}: ${(p.content || "").slice(0, 400)}` })));
      break;
    case "agent/retry": {
      const next = p.fallback ? `falling back to ${p.fallback.offline ? "the offline stand-in model" : p.fallback.provider + ":" + p.fallback.model}` : `retrying in ${p.delay_s || 0} s`;
      stepBox(ev).append(el("li", { class: "dim", text: `${p.provider}:${p.model} failed (${p.reason}${p.status ? ", HTTP " + p.status : ""}); ${next}` }));
      break;
    }
    case "context/compaction-skipped":
      turnItem(ev.turn).append(el("p", { class: "dim", role: "status", text: p.detail }));
      break;
    case "context/compacted":
      turnItem(ev.turn).append(el("p", { class: "dim", text: `Context compacted (${p.strategy}): ${p.tokens_before} → ${p.tokens_after} tokens` }));
      break;
    case "turn/end": {
      chat.running = false;
      const item = turnItem(ev.turn);
      item.removeAttribute("aria-busy");
      item.dataset.outcome = p.outcome;
      if (p.outcome !== "completed") {
        const why = p.error ? `: ${p.error.message}` : (p.reason ? ` (${p.reason})` : "");
        item.append(el("p", { class: "warn", role: "status", text: `Turn ${ev.turn} ${p.outcome}${why}` }));
      }
      break;
    }
    default:
      break;
  }
}

async function greeting(characterIds) {
  // Once per page: a reconnect that replays session/created must not add a second greeting
  // (the flag is set before the await, so two replays in flight cannot both pass). A group
  // chat opens with every member's greeting, in the group's order, as SillyTavern's does.
  const ids = characterIds.filter(Boolean);
  if (!ids.length || chat.greeted) return;
  chat.greeted = true;
  try {
    const found = await api("GET", "/api/characters");
    const cards = ids.map((id) => found.characters.find((x) => x.asset_id === id)).filter(Boolean);
    if (!cards.length) return;
    if (!chat.binding || !chat.binding.group) $("#chat-title").textContent = `Chat with ${cards[0].name}`;
    const said = cards.filter((c) => c.greeting).map((c) => el("div", { class: "msg assistant greeting-msg" }, el("div", { class: "who", text: c.name }), el("div", { class: "text", html: markdown(c.greeting) })));
    if (said.length && !chat.loggedGreeting) $("#log").prepend(el("li", { id: "greeting", class: "turn" }, ...said));
  } catch (e) { /* shown */ }
}

const STREAM_LOST = "Live updates of this chat stopped (signed out, or the chat is not there yet); retrying …";

function follow(sid, pause = 1000) {
  // The browser reconnects a dropped stream by itself (with Last-Event-ID); one it closed for
  // good (an answer other than 200: signed out, a chat still being made) is opened again here,
  // after the last event shown, until it holds.
  const after = chat.lastId ? `?after=${chat.lastId}` : "";
  const source = new EventSource(`/api/sessions/${sid}/events${after}`);
  source.onopen = () => {
    if (chat.streamLost && $("#notice").textContent === STREAM_LOST) clearNotice();
    chat.streamLost = false;
  };
  source.onmessage = (msg) => {
    // A stream that restarts from the beginning replays what was shown: each event once.
    const id = Number(msg.lastEventId || 0);
    if (id && id <= (chat.lastId || 0)) return;
    if (id) chat.lastId = id;
    try { onEvent(JSON.parse(msg.data)); } catch (e) { console.error(e); }
  };
  source.onerror = () => {
    if (source.readyState !== EventSource.CLOSED) return;
    chat.streamLost = true;
    notice(STREAM_LOST);
    setTimeout(() => follow(sid, Math.min(pause * 2, 30000)), pause);
  };
}

function chatPage() {
  const sid = $("#chat").dataset.session;
  follow(sid);
  const box = $("#message");
  const draftKey = `draft:${sid}`;
  box.value = sessionStorage.getItem(draftKey) || "";
  box.addEventListener("input", () => sessionStorage.setItem(draftKey, box.value));
  box.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("#composer").requestSubmit(); }
  });
  $("#composer").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = box.value.trim();
    const send = $("#send");
    if (!text || send.disabled) return;  // one send at a time: Enter twice sends once
    clearNotice();
    send.disabled = true;
    try {
      if (text === "/compact") await api("POST", `/api/sessions/${sid}/commands`, { name: "compact", args: {} });
      else await api("POST", `/api/sessions/${sid}/messages`, { text });
      if (box.value.trim() === text) {  // what was typed meanwhile stays
        box.value = "";
        sessionStorage.removeItem(draftKey);
      }
    } catch (e) { /* notice shown; the text stays in the box */ }
    finally { send.disabled = false; }
  });
  $("#cancel").addEventListener("click", () => api("POST", `/api/sessions/${sid}/cancel`).catch(() => {}));
  for (const button of document.querySelectorAll("[data-command]")) {
    button.addEventListener("click", () => api("POST", `/api/sessions/${sid}/commands`, { name: button.dataset.command }).catch(() => {}));
  }
  $("#mode-switch").addEventListener("click", () => api("POST", `/api/sessions/${sid}/commands`, { name: "mode", args: { context_mode: $("#mode").value } }).catch(() => {}));
  $("#fork").addEventListener("click", async () => {
    const found = await api("POST", `/api/sessions/${sid}/commands`, { name: "fork" });
    if (found.fork) notice(`Forked into ${found.fork}: it opens once the fork is made.`, "info");
    setTimeout(() => { location.href = `/chat/${found.fork}`; }, 1500);
  });
}

// --- the management panel ------------------------------------------------------------------------

async function managePage() {
  const root = $("#manage");
  const select = $("#manage-session");
  const sessions = (await api("GET", "/api/sessions")).sessions;
  for (const s of sessions) select.append(el("option", { value: s.session_id, text: `${s.session_id} · ${s.architecture}${s.context_mode ? " / " + s.context_mode : ""}` }));
  const asked = root.dataset.session;
  if (asked && !sessions.some((s) => s.session_id === asked)) select.append(el("option", { value: asked, text: asked }));
  if (asked) select.value = asked;
  const load = () => loadChat(select.value, sessions.find((s) => s.session_id === select.value));
  select.addEventListener("change", load);
  $("#memory-search").addEventListener("submit", (ev) => { ev.preventDefault(); loadMemory(select.value); });
  $("#cleanup").addEventListener("click", () => cleanup(select.value));
  $("#cleanup-scope").addEventListener("click", async () => {
    const found = await api("GET", `/api/memory?${new URLSearchParams({ session_id: select.value, state: "all", limit: 1 })}`);
    const scope = (found.items || []).map((i) => i.scope_id).find((x) => x);
    if (!scope) { notice("This chat has no memory yet, so no character scope to clean up.", "info"); return; }
    cleanup(select.value, scope);
  });
  $("#memory-import").addEventListener("submit", (ev) => { ev.preventDefault(); importMemory(select.value); });
  $("#var-scope").addEventListener("change", () => loadVariables(select.value));
  $("#var-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    let value;
    try { value = JSON.parse($("#var-value").value); } catch (e) { notice("The value is not JSON: write \"text\" in quotes, or a number, list or object."); return; }
    try {
      const saved = await api("POST", `/api/sessions/${select.value}/variables`, { scope: $("#var-scope").value, name: $("#var-name").value, value, expected_revision: Number($("#var-revision").value || 0) });
      if (typeof saved.revision === "number") $("#var-revision").value = saved.revision;  // the next save's expectation
      clearNotice();
      loadVariables(select.value);
    } catch (e) { /* notice shown (a stale revision says so); the form keeps what was typed */ }
  });
  if (select.value) load();
  if ($("#ops-title")) {
    loadOperator();
    $("#replay-form").addEventListener("submit", (ev) => { ev.preventDefault(); startReplay(); });
  }
}

async function startReplay() {
  const body = { projection: $("#replay-projection").value };
  const session = $("#replay-session").value.trim();
  if (session) body.session_id = session;
  const bar = $("#replay-progress");
  const status = $("#replay-status");
  const button = $("#replay-form button");
  clearNotice();
  button.disabled = true;
  try {
    let job = await api("POST", "/api/operator/replay", body);
    bar.hidden = false;
    while (true) {
      bar.max = Math.max(job.total, 1);
      bar.value = job.state === "done" ? bar.max : Math.min(job.done, bar.max);
      if (job.state === "done") { status.textContent = `Replay of ${job.projection} done: ${job.entries} entries rebuilt.`; break; }
      if (job.state !== "running") { status.textContent = `Replay of ${job.projection} ${job.state}${job.failure ? ": " + job.failure : ""}.`; break; }
      status.textContent = `Replaying ${job.projection}: ${job.done} of ${job.total} entries …`;
      await new Promise((resolve) => setTimeout(resolve, 250));
      job = await api("GET", `/api/operator/replay/${job.job_id}`);
    }
    loadOperator();
  } catch (e) { status.textContent = `Replay not started: ${e.message}`; }
  finally { button.disabled = false; }
}

async function loadOperator() {
  try {
    const found = await api("GET", "/api/operator/status");
    const row = (...cells) => el("tr", {}, ...cells.map((c) => el("td", { text: String(c) })));
    $("#ops-services tbody").replaceChildren(...found.services.map((x) => row(x.name, x.ok ? "up" : "down", x.version || "")));
    $("#ops-streams tbody").replaceChildren(...found.streams.map((x) => row(x.name, x.ok ? x.messages : "missing", x.ok ? x.bytes : "")));
    $("#ops-consumers tbody").replaceChildren(...found.consumers.map((x) => row(`${x.stream}/${x.name}`, x.pending, x.ack_pending, x.redelivered)));
    $("#ops-summary").textContent = `Dead letters: ${found.dead_letters}`;
  } catch (e) { /* shown */ }
}

function chosen(sid) {
  // The manage page draws a chat's answers only while that chat is still the one picked.
  return $("#manage-session").value === sid;
}

function loadChat(sid, row) {
  if (!sid) return;
  $("#manage-binding").textContent = row ? `Architecture ${row.architecture}${row.context_mode ? ", context mode " + row.context_mode : ""}; chat ${row.chat_id}${row.character_id ? "; character " + row.character_id : ""}` : sid;
  $("#export").href = `/api/sessions/${sid}/memory/export`;
  $("#export-character").href = `/api/sessions/${sid}/memory/export/character`;
  $("#export-character").hidden = !(row && row.character_id);
  loadMemory(sid);
  loadVariables(sid);
  loadApprovals(sid);
  loadTools(sid);
}

async function loadApprovals(sid, done) {
  try {
    const found = await api("GET", `/api/sessions/${sid}/approvals`);
    if (!chosen(sid)) return;
    const cell = (text) => el("td", { text: String(text) });
    const decide = (label, url, after) => {
      const buttons = el("td", { class: "row-actions" });
      for (const [decision, verb] of [["approve", "Approve"], ["reject", "Reject"]]) {
        buttons.append(el("button", { type: "button", "aria-label": `${verb} ${label}`, onclick: async () => {
          try {
            await api("POST", url, { decision });
            loadApprovals(sid, `${decision === "approve" ? "Approved" : "Rejected"}: ${label}`);
            if (after) after();
          } catch (e) { /* notice shown */ }
        } }, verb));
      }
      return buttons;
    };
    const pending = (state) => !["approved", "rejected", "promoted", "rolled_back", "superseded"].includes(state);
    const empty = (cols, text) => el("tr", {}, el("td", { colspan: cols, text }));
    const drafts = found.rule_drafts.map((r) => el("tr", {}, cell(r.text), cell(r.domain), decide(`rule ${r.text}`, `/api/scopes/${found.scope_id}/rules/${r.id}`)));
    $("#rule-drafts tbody").replaceChildren(...(drafts.length ? drafts : [empty(3, "No rule drafts waiting.")]));
    const active = found.active_rules.map((r) => el("tr", {}, cell(r.text), cell(r.domain), cell(r.pinned ? "yes" : "no")));
    $("#active-rules tbody").replaceChildren(...(active.length ? active : [empty(3, "No active rules.")]));
    const styles = found.styles.map((c) => el("tr", {}, cell(`${c.candidate_id} (${(c.evidence_ids || []).length} statements)`), cell(c.state),
      pending(c.state) ? decide(`style ${c.candidate_id}`, `/api/styles/${c.candidate_id}`) : cell(c.decision || c.state)));
    $("#style-candidates tbody").replaceChildren(...(styles.length ? styles : [empty(3, "No style candidates.")]));
    const pool = found.pool.map((c) => el("tr", {}, cell(c.text), cell(c.state),
      pending(c.state) ? decide(`pool candidate ${c.text}`, `/api/pool/${c.id}`) : cell(c.state)));
    $("#pool-candidates tbody").replaceChildren(...(pool.length ? pool : [empty(3, "No pool candidates.")]));
    $("#approvals-status").textContent = done || `Memory scope ${found.scope_id}: ${found.rule_drafts.length} rule drafts waiting.`;
  } catch (e) { $("#approvals-status").textContent = "Approvals could not be loaded."; }
}

async function loadMemory(sid, scope) {
  const params = new URLSearchParams({ state: $("#memory-state").value });
  if (scope) params.set("scope_id", scope); else params.set("session_id", sid);
  $("#memory-shown").textContent = scope ? `Showing every item of the memory the import went into (${scope}).` : "Showing this chat's items.";
  const text = $("#memory-text").value.trim();
  if (text) params.set("text", text);
  const body = $("#memory tbody");
  try {
    const found = await api("GET", `/api/memory?${params}`);
    if (!chosen(sid)) return;
    body.replaceChildren();
    for (const item of found.items || []) body.append(memoryRow(sid, item));
    if (!(found.items || []).length) body.append(el("tr", {}, el("td", { colspan: 7, text: "No memory items." })));
  } catch (e) { /* shown */ }
}

// What a row is as a claim: a person's whole message, or a claim cut from one (which it names).
function claimOf(item) {
  if (!item.claim_kind) return "";
  return item.claim_of ? `${item.claim_kind} · from ${item.claim_of.slice(0, 11)}…` : item.claim_kind;
}

function memoryRow(sid, item) {
  const id = item.evidence_id || item.id;
  const actions = el("td", { class: "row-actions" });
  const act = (label, fn) => actions.append(el("button", { type: "button", "aria-label": `${label} ${id}`, onclick: fn }, label));
  act("Inspect", () => detail(`/api/memory/${id}`, "Item"));
  act("History", () => detail(`/api/memory/${id}/history`, "History"));
  act("Correct", () => correctForm(sid, item));
  for (const action of ["release", "quarantine", "redact", "delete", "rollback"]) {
    act(action[0].toUpperCase() + action.slice(1), async () => {
      await api("POST", `/api/memory/${id}/${action}`, { reason: `${action} from the web app` }).catch(() => null);
      loadMemory(sid);
    });
  }
  return el("tr", { "data-id": id }, el("td", { class: "mem-text", text: item.text || item.content || "" }),
    el("td", { text: claimOf(item) }), el("td", { text: item.source_class || item.source || "" }), el("td", { text: item.authority || "" }),
    el("td", { text: item.claim_domain || item.domain || "" }), el("td", { text: item.state || "" }), actions);
}

async function loadVariables(sid) {
  const body = $("#variables tbody");
  try {
    const found = await api("GET", `/api/sessions/${sid}/variables?scope=${$("#var-scope").value}`);
    if (!chosen(sid)) return;
    body.replaceChildren();
    for (const v of found.variables || []) {
      // The list gives each value's summary (a short value's JSON text, else a description); it
      // is shown as it is, and the form takes it only when it is JSON, the whole value.
      const value = v.value !== undefined ? JSON.stringify(v.value) : v.summary;
      let whole = value;
      try { JSON.parse(value); } catch (e) { whole = null; }
      body.append(el("tr", {}, el("td", { text: v.name }), el("td", { text: value }), el("td", { text: String(v.revision) }),
        el("td", {}, el("button", { type: "button", "aria-label": `Edit ${v.name}`, onclick: () => {
          $("#var-name").value = v.name; $("#var-value").value = whole ?? ""; $("#var-revision").value = v.revision; $("#var-value").focus();
          if (whole === null) notice(`The list shows a summary of ${v.name}'s value: write the whole new value.`, "info");
        } }, "Edit"))));
    }
    if (!(found.variables || []).length) body.append(el("tr", {}, el("td", { colspan: 4, text: "No variables." })));
  } catch (e) { /* shown */ }
}

async function detail(url, title) {
  const box = $("#memory-detail");
  try {
    const found = await api("GET", url);
    box.replaceChildren(el("h3", { text: title }), el("pre", { text: JSON.stringify(found, null, 2) }));
    box.hidden = false;
  } catch (e) { /* shown */ }
}

function correctForm(sid, item) {
  const id = item.evidence_id || item.id;
  const box = $("#memory-detail");
  const input = el("textarea", { id: "correction", rows: 3 });
  input.value = item.text || "";
  const form = el("form", {}, el("label", { for: "correction", text: `Correct: ${item.text || id}` }), input, el("button", { type: "submit" }, "Save correction"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await api("POST", `/api/memory/${id}/correct`, { text: input.value, session_id: sid, reason: "corrected in the web app" });
      box.replaceChildren(el("p", { role: "status", text: "Correction saved." }));
      loadMemory(sid);
    } catch (e) { /* notice shown; the correction text stays */ }
  });
  box.replaceChildren(form);
  box.hidden = false;
  input.focus();
}

async function cleanup(sid, scope) {
  const box = $("#cleanup-confirm");
  const url = scope ? `/api/scopes/${scope}/memory/cleanup` : `/api/sessions/${sid}/memory/cleanup`;
  const what = scope ? `scope ${scope} (every chat with this character)` : `chat ${sid}`;
  const ask = (listed, note) => {
    // What would go, to confirm; a list that changed meanwhile is asked again, never guessed.
    if (!listed.confirm.length) { box.replaceChildren(el("p", { text: `There is no memory of ${what} to clean up.` })); box.hidden = false; return; }
    const list = el("ul");
    for (const item of listed.items || []) list.append(el("li", { text: item.text || item.evidence_id }));
    box.replaceChildren(...(note ? [el("p", { class: "warn", role: "status", text: note })] : []),
      el("p", { text: `This deletes these ${listed.confirm.length} memory items of ${what}:` }), list,
      el("button", { type: "button", onclick: async () => {
        const done = await api("POST", url, { session_id: sid, confirm: listed.confirm });
        if (!done.done) { ask(done, "The memory changed since this list was made: nothing was deleted. Check the list and confirm again."); return; }
        const refused = (done.refused || []).length;
        const kept = refused ? ` ${refused} could not be deleted (the ledger refused them).` : "";
        box.replaceChildren(el("p", { role: "status", text: `Deleted ${done.deleted.length} items.${kept}` }));
        loadMemory(sid);
      } }, "Delete them"),
      el("button", { type: "button", onclick: () => { box.hidden = true; } }, "Keep them"));
    box.hidden = false;
  };
  ask(await api("POST", url, { session_id: sid, confirm: [] }), "");
}

async function importMemory(sid) {
  const file = $("#memory-import-file").files[0];
  const box = $("#memory-import-report");
  if (!sid || !file) { notice("Choose a chat and a memory export file first."); return; }
  clearNotice();
  const form = new FormData();
  form.append("file", file);
  form.append("target", $("#memory-import-target").value);
  box.replaceChildren(el("p", { text: `Importing ${file.name} …` }));
  box.hidden = false;
  try {
    const found = await api("POST", `/api/sessions/${sid}/memory/import`, form, true);
    box.replaceChildren(...importReport(found));
    loadMemory(sid, found.scope_id);
  } catch (e) { box.replaceChildren(el("p", { class: "warn", text: `Not imported: ${e.message}` })); }
}

function importReport(found) {
  const inserted = Object.values(found.inserted || {}).reduce((a, b) => a + b, 0);
  const parts = [el("h3", { text: "Report of the import" }),
    el("p", { class: "import-summary", text: `${found.file}: imported ${inserted} · skipped as duplicates ${found.skipped} · quarantined ${found.quarantined.length} · refused ${found.refused.length} · unreadable lines ${found.errors.length}` })];
  const section = (title, rows, text) => {
    if (!rows.length) return;
    parts.push(el("h4", { text: title }));
    const list = el("ul", { "aria-label": title });
    for (const r of rows) list.append(el("li", { text: `line ${r.line}: ${text(r)}` }));
    parts.push(list);
  };
  section("Quarantined", found.quarantined, (r) => (r.reasons || []).join(", "));
  section("Refused", found.refused, (r) => (r.reasons || []).join(", "));
  section("Unreadable lines", found.errors, (r) => r.message);
  return parts;
}

let toolsSource = null;

async function loadTools(sid) {
  const list = $("#tool-calls");
  list.replaceChildren();
  if (toolsSource) toolsSource.close();  // another chat's calls stop here
  const source = toolsSource = new EventSource(`/api/sessions/${sid}/events`);
  source.onmessage = (msg) => {
    if (!chosen(sid)) return;
    const ev = JSON.parse(msg.data);
    if (ev.type === "tool/call") list.append(el("li", {}, el("code", { text: `turn ${ev.turn} step ${ev.step}: ${ev.payload.name}(${(ev.payload.arguments || "").slice(0, 200)})` })));
  };
  setTimeout(() => source.close(), 5000);
}

document.addEventListener("DOMContentLoaded", () => {
  header();
  accountForm();
  const page = document.body.dataset.page;
  if (page === "index") indexPage().catch(() => {});
  if (page === "chat") chatPage();
  if (page === "manage") managePage().catch(() => {});
});
