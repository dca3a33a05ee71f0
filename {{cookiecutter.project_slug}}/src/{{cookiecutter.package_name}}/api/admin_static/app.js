// The admin page: plain DOM, no framework, no CDN. Data is only ever inserted as text.
"use strict";

const TOKEN_KEY = "outbox-admin-token";
// held: the message is what an action said, kept until the operator loads another selection
// (the page's own refreshes, every 2 s and after the action, leave it).
const state = { box: "", after: null, timer: null, relays: {}, held: false };
const $ = (id) => document.getElementById(id);

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

async function api(path, options) {
  const init = Object.assign({ headers: {} }, options || {});
  init.headers = Object.assign({ Authorization: "Bearer " + token() }, init.headers);
  if (init.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(init.body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) {
    logout("The token was refused; log in again.");
    throw new Error("unauthorized");
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const detail = data && data.detail ? data.detail : response.statusText;
    throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return data;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 120) return seconds.toFixed(1) + " s";
  if (seconds < 7200) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1048576).toFixed(1) + " MiB";
}

// The relay column: empty for an inbox, "worker", or for a box Debezium relays its capture:
// the problems PostgreSQL shows (missing trigger or slot, ...) or the slot's state.
function relayText(box) {
  if (!box.relay) return ["", ""];
  if (box.relay !== "debezium" || !box.capture) return [box.relay, ""];
  const capture = box.capture;
  if (capture.problems.length) return ["debezium: " + capture.problems.join("; "), "relay-problem"];
  const slot = capture.slot + (capture.slot_active ? " streaming" : " not read by a connector");
  const rows = capture.capture_rows + " capture rows";
  return ["debezium: slot " + slot + ", lag " + bytes(capture.lag_bytes) + ", " + rows, ""];
}

function say(text, isError, held) {
  state.held = Boolean(held);
  const message = $("message");
  message.textContent = text;
  message.className = isError ? "error" : "";
}

async function loadBoxes() {
  const stats = await api("/admin/stats?top=0");
  const body = $("boxes").querySelector("tbody");
  body.replaceChildren();
  const select = $("f-box");
  const known = Array.from(select.options).map((o) => o.value);
  for (const box of stats) {
    const row = document.createElement("tr");
    row.dataset.box = box.box;
    const name = cell(row, "");
    const link = document.createElement("a");
    link.href = "#";
    link.textContent = box.box;
    link.addEventListener("click", (event) => {
      event.preventDefault();
      select.value = box.box;
      loadSelection();
    });
    name.appendChild(link);
    cell(row, box.kind);
    const [relay, relayClass] = relayText(box);
    cell(row, relay, ("c-relay " + relayClass).trim());
    state.relays[box.box] = box.relay;
    cell(row, box.counts.pending, "c-pending");
    cell(row, box.pending_waiting);
    cell(row, box.counts.failed, box.counts.failed ? "status-failed c-failed" : "c-failed");
    cell(row, box.counts.parked, box.counts.parked ? "status-parked c-parked" : "c-parked");
    cell(row, box.counts.delivered, "c-delivered");
    cell(row, box.counts.discarded, "c-discarded");
    cell(row, age(box.oldest_pending_age_seconds));
    cell(row, box.paused.join("; "), box.paused.length ? "paused" : "");
    body.appendChild(row);
    if (!known.includes(box.box)) {
      const option = document.createElement("option");
      option.value = box.box;
      option.textContent = box.box;
      select.appendChild(option);
    }
  }
}

function query() {
  const params = new URLSearchParams();
  const status = $("f-status").value;
  if (status) params.append("status", status);
  const key = $("f-key").value.trim();
  if (key) params.set("key", key);
  const event = $("f-event").value.trim();
  if (event) params.set("event", event);
  const since = $("f-since").value;
  if (since) params.set("since", new Date(since).toISOString());
  return params;
}

// The operator's own load (Apply, the box list, a box's link): what an earlier action said
// gives way to what this selection shows.
function loadSelection() {
  state.held = false;
  return loadItems(true);
}

async function loadItems(reset) {
  const box = $("f-box").value;
  if (!box) return;
  const params = query();
  const tbody = $("items").querySelector("tbody");
  if (reset) {
    state.after = null;
    params.set("after_id", "0");
  } else if (state.after !== null) {
    params.set("after_id", String(state.after));
  }
  let page;
  try {
    page = await api("/admin/boxes/" + encodeURIComponent(box) + "/items?" + params.toString());
  } catch (error) {
    say(error.message, true);
    return;
  }
  if (reset) tbody.replaceChildren();
  state.box = box;
  for (const item of page.items) tbody.appendChild(itemRow(box, item));
  state.after = page.next_after_id;
  $("more").hidden = page.next_after_id === null;
  if (reset && !state.held) say(page.items.length ? "" : "No items match.", false);
}

function itemRow(box, item) {
  const row = document.createElement("tr");
  row.dataset.id = String(item.id);
  cell(row, item.id);
  cell(row, item.event_name);
  cell(row, item.event_key);
  cell(row, item.bucket);
  cell(row, item.status, "status status-" + item.status);
  cell(row, item.errors_count);
  const error = cell(row, item.last_error, "error-cell");
  error.title = item.last_error || "";
  cell(row, item.created_at);
  const actions = cell(row, "");
  const buttons = [["Details", () => showItem(box, item.id)]];
  if (state.relays[box] === "debezium") {
    // Debezium relays the box: its items are captured when inserted and never fail, back
    // off or block a key, so retry, park and discard are refused; replay captures again.
    if (item.status === "delivered") buttons.push(["Replay", () => act(box, item.id, "replay")]);
  } else {
    if (item.status !== "delivered") buttons.push(["Retry", () => act(box, item.id, "retry")]);
    // Park: move a failed head aside so that the later items of its key go on.
    if (item.status === "failed") buttons.push(["Park", () => act(box, item.id, "park")]);
    if (["failed", "pending", "parked"].includes(item.status)) {
      buttons.push(["Discard", () => act(box, item.id, "discard")]);
    }
  }
  for (const [label, handler] of buttons) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = label;
    button.className = "act-" + label.toLowerCase();
    button.addEventListener("click", handler);
    actions.appendChild(button);
  }
  return row;
}

async function showItem(box, id) {
  let item;
  try {
    item = await api("/admin/boxes/" + encodeURIComponent(box) + "/items/" + id);
  } catch (error) {
    say(error.message, true);
    return;
  }
  $("detail").hidden = false;
  $("d-id").textContent = box + " #" + item.id;
  const fields = $("d-fields");
  fields.replaceChildren();
  for (const name of ["uuid", "status", "event_name", "event_key", "bucket", "errors_count",
                      "next_attempt_at", "created_at", "processed_at", "payload_bytes"]) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = item[name] === null || item[name] === undefined ? "-" : String(item[name]);
    fields.append(dt, dd);
  }
  $("d-error").textContent = item.last_error || "(none)";
  $("d-headers").textContent = JSON.stringify(item.headers, null, 2);
  $("d-payload").textContent = item.payload_shown
    ? item.payload
    : "(hidden: set admin_show_payload: true on the box to show payloads)";
}

function confirmDialog(text) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

const CONFIRM_NOTES = {
  park: " It is set aside: the later items of its key go on; retry or discard it later.",
  replay: " It is sent again with the same message id.",
};

async function act(box, id, action) {
  const question = action + " item " + id + " of box " + box + "?" + (CONFIRM_NOTES[action] || "");
  if (!(await confirmDialog(question))) return;
  try {
    const result = await api("/admin/boxes/" + encodeURIComponent(box) + "/" + action, {
      method: "POST",
      body: { ids: [id] },
    });
    say(action + ": " + result.rows + " item(s) changed", false, true);
  } catch (error) {
    say(error.message, true, true);
    return;
  }
  await refresh();
}

async function loadAudit() {
  const log = await api("/admin/audit?limit=20");
  const body = $("audit").querySelector("tbody");
  body.replaceChildren();
  for (const entry of log.entries) {
    const row = document.createElement("tr");
    row.dataset.id = String(entry.id);
    cell(row, entry.id);
    cell(row, entry.at);
    cell(row, entry.actor, "a-actor");
    cell(row, entry.action, "a-action");
    cell(row, entry.box);
    cell(row, entry.affected, "a-affected");
    cell(row, JSON.stringify(entry.selection), "a-selection");
    cell(row, entry.detail);
    body.appendChild(row);
  }
}

async function refresh() {
  try {
    await loadBoxes();
    await loadItems(true);
    await loadAudit();
  } catch (error) {
    say(error.message, true);
  }
}

function schedule() {
  clearInterval(state.timer);
  if ($("auto").checked) state.timer = setInterval(refresh, 2000);
}

function showMain() {
  $("login-view").hidden = true;
  $("main-view").hidden = false;
  $("logout").hidden = false;
  refresh();
  schedule();
}

function logout(reason) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(state.timer);
  $("main-view").hidden = true;
  $("logout").hidden = true;
  $("login-view").hidden = false;
  $("login-error").textContent = reason || "";
}

async function login(event) {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value);
  $("token").value = "";
  try {
    await api("/admin/boxes");
  } catch (error) {
    if (error.message !== "unauthorized") logout(error.message);
    return;
  }
  showMain();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", () => logout(""));
  $("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    loadSelection();
  });
  $("f-box").addEventListener("change", loadSelection);
  $("more").addEventListener("click", () => loadItems(false));
  $("auto").addEventListener("change", schedule);
  if (token()) showMain();
});
