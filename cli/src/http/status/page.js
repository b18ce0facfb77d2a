// The status page: reads /v1/status every second and shows it. Everything shown is set as
// text (textContent), never as markup: names and errors come from other programs.
"use strict";

const POLL_EVERY_MS = 1000;
const KINDS = ["snowflake", "uuidv7", "ulid"];
const ISSUING = new Set(["Valid"]);
const WARNING = new Set(["Outage", "Taking", "WaitingForMark", "WaitingForNumber"]);

// The lease API's token, once given in the form: kept in this page only, never stored.
let token = null;
let previous = null;
let timer = null;
// Each poll's number: an answer to an older poll than the latest is dropped (a token given
// meanwhile starts a new poll at once).
let polls = 0;

const byId = (id) => document.getElementById(id);

function setText(id, value) {
  byId(id).textContent = value;
}

function duration(ms) {
  if (ms < 0) return "passed";
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.floor(s % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

function instant(unixMs) {
  const date = new Date(unixMs);
  // A mark beyond what a Date holds (a record tampered with) is shown as its number.
  return Number.isFinite(date.getTime()) ? date.toISOString().replace(".000Z", "Z") : `${unixMs} (Unix ms)`;
}

function showLease(status) {
  const lease = status.lease;
  const badge = byId("lease-state");
  badge.textContent = lease.lease;
  badge.className = "badge " + (ISSUING.has(lease.lease) ? "ok" : WARNING.has(lease.lease) ? "warn" : "bad");
  setText("worker", lease.worker ?? "–");
  setText("datacenter", lease.datacenter ?? "–");
  let left = `${duration(lease.validForMs)} of issuing before the mark`;
  if (lease.startsInMs !== undefined) left = `starts in ${duration(lease.startsInMs)} (previous holder's mark)`;
  if (lease.givesUpInMs !== undefined) left = `no free number; gives up in ${duration(lease.givesUpInMs)}`;
  setText("time-left", left);
  setText(
    "outage",
    lease.outageSinceMs === undefined
      ? "none"
      : `since ${instant(lease.outageSinceMs)} (${duration(status.nowMs - lease.outageSinceMs)}); issuing until the mark`,
  );
  setText("identity", `ID space ${status.idSpace} · layout ${status.layout} · store ${status.store}`);
}

function showRates(status) {
  for (const kind of KINDS) {
    setText(`total-${kind}`, status.issued[kind].toLocaleString("en"));
    if (previous === null || status.nowMs <= previous.nowMs) continue;
    const seconds = (status.nowMs - previous.nowMs) / 1000;
    const rate = Math.max(0, status.issued[kind] - previous.issued[kind]) / seconds;
    setText(`rate-${kind}`, rate < 10 ? rate.toFixed(1) : Math.round(rate).toLocaleString("en"));
  }
}

function cell(row, label, value) {
  const td = row.insertCell();
  td.dataset.label = label;
  td.textContent = value;
  return td;
}

function showFleet(status) {
  const fleet = status.fleet;
  const body = byId("fleet").tBodies[0];
  const rows = fleet.numbers.map((number) => {
    const row = document.createElement("tr");
    row.dataset.worker = String(number.worker);
    cell(row, "Number", `dc ${number.datacenter} worker ${number.worker}`).className = "number";
    cell(row, "State", number.state).className = "state";
    cell(row, "Holder", fleet.holdersShown ? (number.holder ?? "–") : "hidden").className = "holder";
    cell(
      row,
      "Mark",
      number.markMs === null ? "–" : `${instant(number.markMs)} (${number.validForMs > 0 ? "in " + duration(number.validForMs) : "passed"})`,
    );
    cell(row, "Anomalies", number.anomalies.join("; ")).className = "anomalies";
    return row;
  });
  body.replaceChildren(...rows);
  const count = (state) => fleet.numbers.filter((number) => number.state === state).length;
  setText(
    "fleet-summary",
    fleet.surveyedAtMs === null
      ? "surveying the store…"
      : `${fleet.numbers.length} numbers: ${count("held")} held, ${count("free")} free, ` +
          `${count("corrupt")} corrupt, ${count("missing")} missing; surveyed ` +
          `${duration(status.nowMs - fleet.surveyedAtMs)} ago` +
          (fleet.holdersShown ? "" : "; holder names hidden"),
  );
  setText("fleet-error", fleet.error ?? "");
}

async function errorOf(response) {
  try {
    const body = await response.json();
    if (typeof body.error === "string") return body.error;
  } catch (_) {
    // Not JSON: the status line says it.
  }
  return `HTTP ${response.status}`;
}

async function poll() {
  clearTimeout(timer);
  const mine = ++polls;
  const sentToken = token;
  try {
    const headers = sentToken === null ? {} : { Authorization: `Bearer ${sentToken}` };
    const response = await fetch("/v1/status", { headers, cache: "no-store" });
    const status = response.ok ? await response.json() : null;
    const error = response.ok ? null : await errorOf(response);
    if (mine !== polls) return;
    if (status === null) {
      if (sentToken !== null && (response.status === 401 || response.status === 404)) {
        if (token === sentToken) token = null;
        setText("token-error", error);
      } else {
        setText("connection", `the service answered: ${error}`);
      }
    } else {
      showLease(status);
      showRates(status);
      showFleet(status);
      previous = status;
      setText("connection", `updated ${new Date(status.nowMs).toLocaleTimeString()}`);
    }
  } catch (error) {
    if (mine !== polls) return;
    setText("connection", `cannot reach the service (${error.message}); trying again`);
  }
  timer = setTimeout(poll, POLL_EVERY_MS);
}

async function decode(event) {
  event.preventDefault();
  const given = byId("decode-input").value.trim();
  const result = byId("decode-result");
  result.replaceChildren();
  setText("decode-error", "");
  if (given === "") {
    setText("decode-error", "type an ID to decode");
    return;
  }
  try {
    const response = await fetch(`/v1/ids/${encodeURIComponent(given)}/decode`, { cache: "no-store" });
    if (!response.ok) {
      setText("decode-error", await errorOf(response));
      return;
    }
    const decoded = await response.json();
    for (const key of ["id", "kind", "createdAt", "datacenter", "worker", "sequence", "opaque"]) {
      if (decoded[key] === undefined) continue;
      const term = document.createElement("dt");
      term.textContent = key;
      const value = document.createElement("dd");
      value.id = `decoded-${key}`;
      value.textContent = String(decoded[key]);
      result.append(term, value);
    }
  } catch (error) {
    setText("decode-error", `cannot reach the service (${error.message})`);
  }
}

function useToken(event) {
  event.preventDefault();
  const input = byId("token-input");
  token = input.value.trim() === "" ? null : input.value.trim();
  input.value = "";
  setText("token-error", "");
  poll();
}

document.addEventListener("DOMContentLoaded", () => {
  byId("decode-form").addEventListener("submit", decode);
  byId("token-form").addEventListener("submit", useToken);
  poll();
});
