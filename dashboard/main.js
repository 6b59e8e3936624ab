// Sluice's operator dashboard. The page holds no data: it asks for the
// admin token once, keeps it in this tab's sessionStorage, and reads and
// acts through the admin API next to it with `Authorization: Bearer`.
// Keys come from attackers, so every value reaches the page as text
// (textContent and text nodes), never as HTML.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { Rooms } from "./rooms.js";
import { Sales } from "./sales.js";
import { Charts } from "./charts.js";

const API = new URL(".", location.href).pathname; // `{prefix}/admin/`
const TOKEN = "sluice-admin-token";
const REFRESH_MS = 5_000;
const TIMEOUT_MS = 10_000;
const TOP_MINUTES = 10;
const TOP_KEYS = 10;
const BANS_PAGE = 25;
const BANS_MOST = 100; // the admin API's largest page
const MINUTE = 60_000;

const $ = (id) => document.getElementById(id);

/** An element with attributes and children; strings become text nodes. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false).map(
    (c) => (c instanceof Node ? c : document.createTextNode(String(c))),
  ));
  return node;
}

// ---- formatting -------------------------------------------------------

const number = new Intl.NumberFormat();
const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const stamp = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** `90000` → `1m30s`; durations in the config's own notation. */
function duration(ms) {
  if (ms < 1000) return `${ms}ms`;
  const parts = [];
  let s = Math.round(ms / 1000);
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  return parts.join("");
}

function until(ms) {
  const left = ms - Date.now();
  return left > 0 ? `in ${duration(left)}` : "ending";
}

// ---- the admin API ----------------------------------------------------

class ApiError extends Error {
  constructor(status, problem, retryAfter) {
    super(problem?.detail ?? (status ? `HTTP ${status}` : "the admin API did not answer"));
    this.status = status;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }
}

async function call(method, path, body) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN) ?? ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
  let response;
  try {
    response = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      redirect: "error",
      signal: abort.signal,
    });
  } catch {
    throw new ApiError(0, null, null);
  } finally {
    clearTimeout(timer);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data, response.headers.get("retry-after"));
  if (data === null) throw new ApiError(0, null, null);
  return data;
}

const segment = (text) => encodeURIComponent(text);

// ---- session ----------------------------------------------------------

const state = {
  rules: null, paused: false, timer: null, inFlight: null, lastOk: null, charts: new Map(), bansShown: BANS_PAGE, keyBan: null,
};

function setStatus(kind, text) {
  const status = $("status");
  status.dataset.state = kind;
  status.textContent = text;
}

function showSignIn(message) {
  sessionStorage.removeItem(TOKEN);
  clearTimeout(state.timer);
  $("dashboard").hidden = true;
  $("session").hidden = true;
  $("signin").hidden = false;
  const error = $("signin-error");
  error.hidden = !message;
  error.textContent = message ?? "";
  setStatus("idle", "Signed out");
  $("token").value = "";
  $("token").focus();
}

/** What a refused call means to the operator, in one sentence. */
function explain(error) {
  if (error.status === 401) return "The admin API refused this token (401 unauthorized). Check the ADMIN_TOKEN secret and sign in again.";
  if (error.status === 429) return `Too many failed sign-ins from this address: the admin API locks it out for ${error.retryAfter ?? "a few hundred"} s.`;
  if (error.status === 0) return "The admin API is unreachable (no answer from the worker).";
  return `The admin API answered ${error.status}: ${error.message}`;
}

async function signIn(event) {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN, token);
  $("token").value = "";
  const button = event.submitter ?? $("signin-form").querySelector("button");
  button.disabled = true;
  try {
    state.rules = await call("GET", "rules");
  } catch (error) {
    showSignIn(explain(error));
    return;
  } finally {
    button.disabled = false;
  }
  start();
}

function start() {
  $("signin").hidden = true;
  $("dashboard").hidden = false;
  $("session").hidden = false;
  // Focus for screen readers, without scrolling: the page opens at its top.
  $("main").focus({ preventScroll: true });
  refresh();
}

// ---- refreshing: one call in flight at most ---------------------------

function schedule() {
  clearTimeout(state.timer);
  if (!state.paused && !document.hidden && sessionStorage.getItem(TOKEN)) {
    state.timer = setTimeout(refresh, REFRESH_MS);
  }
}

function refresh() {
  if (state.inFlight) return state.inFlight;
  clearTimeout(state.timer);
  state.inFlight = load().finally(() => {
    state.inFlight = null;
    schedule();
  });
  return state.inFlight;
}

/** Whether `stat` counted a refusal in the last `TOP_MINUTES`: only then
 * are its top refused keys asked for. */
function refusedLately(stat, now) {
  const from = now - TOP_MINUTES * MINUTE;
  return stat.per_minute.some((row) => row.refused > 0 && row.minute_ms + MINUTE > from);
}

async function load() {
  try {
    const since = Date.now() - 60 * MINUTE;
    const [rules, stats, bans, roomFigures] = await Promise.all([
      call("GET", "rules"),
      call("GET", `stats?since=${since}`),
      call("GET", `bans?limit=${state.bansShown}`),
      call("GET", "rooms"),
    ]);
    const refusing = stats.rules.filter((stat) => refusedLately(stat, stats.now_ms));
    const [tops, views] = await Promise.all([
      Promise.all(refusing.map((stat) =>
        call("GET", `top?rule=${segment(stat.rule)}&top_minutes=${TOP_MINUTES}&limit=${TOP_KEYS}`))),
      // Each rule's state, and a global quota's sale. One that fails shows
      // why in its row; the rest of the page still refreshes.
      Promise.all([...rules.rules, ...Sales.layers(rules)].map((rule) => call("GET", `rules/${segment(rule.id)}`).catch((error) => {
        if (error.status === 401) throw error;
        return { rule: rule.id, error };
      }))),
    ]);
    const top = new Map(tops.map((answer) => [answer.rule, answer.keys]));
    const viewed = new Map(views.map((view) => [view.rule, view]));
    state.rules = rules;
    rooms.render($("rooms-section"), $("rooms"), roomFigures);
    renderRules(rules, viewed);
    sales.render($("sales-section"), $("sales"), rules, viewed);
    renderTraffic(rules, stats, top);
    renderBans(bans, stats.bans.manual + stats.bans.rule);
    renderFigures(stats);
    state.lastOk = new Date();
    const refreshed = $("refreshed");
    refreshed.textContent = clock.format(state.lastOk);
    refreshed.dateTime = state.lastOk.toISOString();
    $("problem").hidden = true;
    setStatus(state.paused ? "paused" : "live", state.paused ? "Paused" : "Live");
  } catch (error) {
    if (error.status === 401) return showSignIn(explain(error));
    const since = state.lastOk ? ` Showing what it answered at ${clock.format(state.lastOk)}.` : "";
    const problem = $("problem");
    problem.textContent = `${explain(error)}${since} Retrying every ${REFRESH_MS / 1000} s.`;
    problem.hidden = false;
    setStatus("down", "Unreachable");
  }
}

// ---- traffic: a chart and the top refused keys per rule ---------------

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

function chartOptions(width) {
  const text = css("--muted");
  const grid = css("--grid");
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const line = (label, color, dash) => ({
    label, stroke: color, width: 2, dash, points: { show: false },
    value: (_, v) => (v === null ? "–" : number.format(v)),
  });
  return {
    width,
    height: 170,
    scales: { x: { time: true }, y: { range: (_, __, max) => [0, Math.max(4, Math.ceil(max * 1.15))] } },
    axes: [{ ...axis, space: 72 }, { ...axis, size: 52 }],
    series: [
      { value: (_, v) => (v === null ? "–" : clock.format(new Date(v * 1000))) },
      line("admitted", css("--admitted")),
      line("refused", css("--refused")),
      line("failed", css("--failed"), [5, 4]),
    ],
    cursor: { drag: { x: false, y: false } },
    legend: { live: false },
  };
}

/** The last 60 minutes, one point per minute (zero when nothing counted). */
function minutes(perMinute, now) {
  const last = Math.floor(now / MINUTE) * MINUTE;
  const xs = [];
  const series = [[], [], []];
  const byMinute = new Map(perMinute.map((row) => [row.minute_ms, row]));
  for (let m = last - 59 * MINUTE; m <= last; m += MINUTE) {
    const row = byMinute.get(m);
    xs.push(m / 1000);
    series[0].push(row?.admitted ?? 0);
    series[1].push(row?.refused ?? 0);
    series[2].push(row?.failed ?? 0);
  }
  return [xs, ...series];
}

function ruleCard(id) {
  const chartBox = el("div", { class: "chart", role: "img", "aria-label": `Decisions per minute for ${id}` });
  const totals = el("ul", { class: "totals" });
  const topBody = el("tbody");
  const topEmpty = el("p", { class: "empty" }, "No refusals.");
  const dataBody = el("tbody");
  const card = el("article", { class: "card rule-card", "data-rule": id },
    el("header", {}, el("h3", {}, id), totals),
    el("div", { class: "plot" },
      chartBox,
      el("details", { class: "minutes" },
        el("summary", {}, "Per-minute counts"),
        el("div", { class: "scroll" }, el("table", { class: "minute-table" },
          el("thead", {}, el("tr", {},
            el("th", { scope: "col" }, "Minute"), el("th", { scope: "col", class: "num" }, "Admitted"),
            el("th", { scope: "col", class: "num" }, "Refused"), el("th", { scope: "col", class: "num" }, "Failed"))),
          dataBody)))),
    el("div", { class: "top" },
      el("h4", {}, "Top refused keys"),
      el("div", { class: "scroll" }, el("table", { class: "top-refused" },
        el("thead", {}, el("tr", {},
          el("th", { scope: "col" }, "Key"), el("th", { scope: "col", class: "num" }, "Refused"),
          el("th", { scope: "col" }, el("span", { class: "sr-only" }, "Actions")))),
        topBody)),
      topEmpty));
  return { card, chartBox, totals, topBody, topEmpty, dataBody, chart: null, data: null };
}

function renderTraffic(rules, stats, top) {
  $("top-minutes").textContent = String(TOP_MINUTES);
  const byRule = new Map(stats.rules.map((r) => [r.rule, r]));
  // A waiting room's card counts its joins, which its join limit decides;
  // its places are in its own panel.
  const ids = rules.rules.map((r) => r.id);
  if (byRule.has(rules.api_rule)) ids.push(rules.api_rule);
  for (const id of byRule.keys()) if (!ids.includes(id)) ids.push(id);
  const box = $("traffic");
  for (const [id, view] of state.charts) {
    if (!ids.includes(id)) {
      view.chart?.destroy();
      view.card.remove();
      state.charts.delete(id);
    }
  }
  if (ids.length === 0) {
    box.replaceChildren(el("p", { class: "empty card" }, "No rules and no decision-API traffic yet."));
    return;
  }
  box.querySelector(":scope > p.empty")?.remove();
  ids.forEach((id, i) => {
    let view = state.charts.get(id);
    if (!view) {
      view = ruleCard(id);
      state.charts.set(id, view);
    }
    if (box.children[i] !== view.card) box.insertBefore(view.card, box.children[i] ?? null);
    const stat = byRule.get(id) ?? { admitted: 0, refused: 0, failed: 0, per_minute: [] };
    renderRuleStats(id, view, stat, top.get(id) ?? [], stats.now_ms);
  });
}

function renderRuleStats(id, view, stat, topRefused, now) {
  const quiet = stat.per_minute.length === 0 && topRefused.length === 0;
  view.card.classList.toggle("quiet", quiet);
  view.totals.replaceChildren(
    ...["admitted", "refused", "failed"].map((kind) =>
      el("li", { class: kind }, el("b", {}, number.format(stat[kind])), ` ${kind}`)),
    el("li", {}, quiet ? "no decisions in the last hour" : "last hour"),
  );
  view.data = minutes(stat.per_minute, now);
  traffic.draw(view);
  view.dataBody.replaceChildren(...[...stat.per_minute].reverse().map((row) =>
    el("tr", {},
      el("td", {}, clock.format(new Date(row.minute_ms))),
      el("td", { class: "num" }, number.format(row.admitted)),
      el("td", { class: "num" }, number.format(row.refused)),
      el("td", { class: "num" }, number.format(row.failed)))));
  view.topEmpty.hidden = topRefused.length > 0;
  view.topBody.replaceChildren(...topRefused.map((entry) =>
    el("tr", {},
      el("td", { class: "key" }, entry.key),
      el("td", { class: "num", title: entry.error ? `between ${entry.count - entry.error} and ${entry.count}` : null },
        number.format(entry.count), entry.error ? el("span", { class: "muted" }, ` ±${number.format(entry.error)}`) : null),
      el("td", { class: "actions" }, ...keyActions(id, entry.key)))));
}

/** What can be done with a top refused key: inspect it and ban it on its
 * rule; under a global quota the key is a client's address (every client
 * shares the quota), which can be banned on every rule. */
function keyActions(id, key) {
  if (isGlobal(id)) {
    return [el("button", {
      type: "button",
      class: "small",
      "aria-label": `Ban the address ${key} on every rule`,
      onclick: () => prepareAddressBan(key),
    }, "Ban address…")];
  }
  return [
    el("button", { type: "button", class: "small", "aria-label": `Inspect ${key}`, onclick: () => inspect(id, key) }, "Inspect"),
    bannable(id) ? el("button", {
      type: "button",
      class: "small",
      "aria-label": `Ban ${key} on rule ${id}`,
      onclick: () => prepareKeyBan(id, key),
    }, "Ban…") : null,
  ];
}

function isGlobal(rule) {
  return state.rules?.rules.find((r) => r.id === rule)?.scope === "global";
}

/** Fills the form that bans an address on every rule, which the operator
 * still submits. */
function prepareAddressBan(address) {
  $("ban-key").value = address;
  $("ban-for").focus();
}

/** Whether a key of `rule` can be banned on that rule: not a global
 * quota's (its key is every caller), not the decision API's. */
function bannable(rule) {
  const found = state.rules?.rules.find((r) => r.id === rule.split(".")[0]);
  return Boolean(found) && found.scope !== "global";
}

/** The traffic charts, one per rule. */
const traffic = new Charts(() => state.charts.values(), chartOptions, 170);

const rooms = new Rooms({ el, number, clock, stamp, css, duration });
const sales = new Sales({ el, number, duration, chartOptions, stateOf, explain, act, call, segment });

// ---- bans -------------------------------------------------------------

/** The newest bans (a page of the admin API's list) and how many there
 * are in all, as the hubs count them. */
function renderBans(page, total) {
  const bans = page.bans;
  $("bans-count").textContent = total ? `(${number.format(total)})` : "";
  $("bans-empty").hidden = bans.length > 0;
  const more = page.next !== null;
  $("bans-more").hidden = !more;
  $("bans-more-text").textContent = more ? `Showing the newest ${number.format(bans.length)}.` : "";
  $("bans-more-button").hidden = !more || state.bansShown >= BANS_MOST;
  const body = $("bans").tBodies[0];
  body.replaceChildren(...bans.map((ban) => {
    const manual = ban.source === "manual";
    const rule = manual ? null : ban.source.replace(/^rule:/, "");
    return el("tr", {},
      el("td", { class: "keycell" }, el("span", { class: "key" }, ban.key),
        el("span", { class: "source" }, manual ? el("span", { class: "tag" }, "manual") : el("span", { class: "tag warn" }, `rule ${rule}`))),
      el("td", {},
        el("time", { datetime: ban.until, title: stamp.format(new Date(ban.until_ms)) }, `ends ${until(ban.until_ms)}`),
        el("span", { class: "line muted reason" }, ban.reason)),
      el("td", { class: "actions" },
        el("button", {
          type: "button",
          class: "small",
          "aria-label": `Lift the ban on ${ban.key}`,
          title: manual ? null : `Lifts the ban on rule ${rule}; the key's log is kept`,
          onclick: (event) => lift(event.currentTarget, ban.key, rule),
        }, "Lift")));
  }));
}

async function lift(button, key, rule) {
  button.disabled = true;
  await act(
    () => (rule === null ? call("DELETE", `bans/${segment(key)}`) : call("DELETE", `keys/${segment(rule)}/${segment(key)}/ban`)),
    `Lifted the ban on ${key}.`,
  );
}

// ---- actions ----------------------------------------------------------

let noticeTimer = null;
function notify(text, failed = false) {
  const notice = $("notice");
  notice.textContent = text;
  notice.classList.toggle("failed", failed);
  notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { notice.hidden = true; }, 8_000);
}

/** Runs an action, says how it went, and refreshes what it changed. */
async function act(action, done) {
  try {
    const answer = await action();
    notify(done);
    // A refresh that started before the change would show the old state.
    if (state.inFlight) await state.inFlight;
    await refresh();
    return answer;
  } catch (error) {
    if (error.status === 401) return showSignIn(explain(error));
    notify(`Failed: ${explain(error)}`, true);
    return null;
  }
}

/** The body of a ban form: its duration and, if given, its reason. */
function banBody(prefix) {
  const body = { for: $(`${prefix}-for`).value.trim() };
  const reason = $(`${prefix}-reason`).value.trim();
  if (reason) body.reason = reason;
  return body;
}

/** A ban of one key on one rule: the key's own, on that rule only. */
function prepareKeyBan(rule, key) {
  state.keyBan = { rule, key };
  $("key-ban-subject").replaceChildren(el("span", { class: "key" }, key), ` on rule ${rule}`);
  $("key-ban-form").hidden = false;
  $("key-ban-for").focus();
}

function cancelKeyBan() {
  state.keyBan = null;
  $("key-ban-form").hidden = true;
}

async function banKey(event) {
  event.preventDefault();
  if (!state.keyBan) return;
  const { rule, key } = state.keyBan;
  const answer = await act(
    () => call("PUT", `keys/${segment(rule)}/${segment(key)}/ban`, banBody("key-ban")),
    `Banned ${key} on rule ${rule}.`,
  );
  if (answer) cancelKeyBan();
}

/** A ban of an address or a network, on every rule: an explicit action
 * of its own, never what a key's "Ban…" does. */
async function ban(event) {
  event.preventDefault();
  const key = $("ban-key").value.trim();
  const answer = await act(() => call("PUT", `bans/${segment(key)}`, banBody("ban")), `Banned ${key} on every rule.`);
  if (answer) $("ban-key").value = "";
}

// ---- key lookup -------------------------------------------------------

/** Every `{rule}` a key can be looked up under: a rule's id (for a tiered
 * rule, every tier at once, since a key alone does not say which tier it
 * is under; top refused keys are counted under the rule's id), and each
 * tier's own. */
function ruleOptions(rules) {
  const select = $("lookup-rule");
  const chosen = select.value;
  const options = [];
  for (const rule of rules.rules) {
    const tiered = rule.tiers.some((tier) => tier.name);
    if (tiered) options.push(el("option", { value: rule.id }, `${rule.id} · every tier`));
    for (const tier of rule.tiers) {
      const label = tier.name ? `${rule.id} · ${tier.name}` : rule.id;
      options.push(el("option", { value: tier.lookup }, label));
    }
  }
  options.push(el("option", { value: rules.api_rule }, `${rules.api_rule} (decision API)`));
  select.replaceChildren(...options);
  if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
}

function inspect(rule, key) {
  $("lookup-rule").value = rule;
  $("lookup-key").value = key;
  if ($("lookup-rule").value !== rule) {
    $("key-result").replaceChildren(el("p", { class: "message error" }, `No rule ${rule} to look ${key} up under.`));
    return;
  }
  lookup();
  $("lookup-key").focus();
}

async function lookup(event) {
  event?.preventDefault();
  const rule = $("lookup-rule").value;
  const key = $("lookup-key").value;
  if (!rule || !key) return;
  const result = $("key-result");
  try {
    renderKey(await call("GET", `keys/${segment(rule)}/${segment(key)}`));
  } catch (error) {
    if (error.status === 401) return showSignIn(explain(error));
    result.replaceChildren(el("p", { class: "message error" }, explain(error)));
  }
}

/** One object's state: per policy, its override, leases and bans. */
function keyState(found) {
  const slots = found.slots.length
    ? el("div", { class: "scroll" }, el("table", { class: "slots" },
      el("thead", {}, el("tr", {},
        ...["Policy", "Limit", "Used", "Left", "Oldest admission"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...found.slots.map((slot) =>
        el("tr", {},
          el("td", { class: "wrap" }, slot.policy),
          el("td", {}, `${number.format(slot.limit)} / ${duration(slot.window_ms)}`),
          el("td", { class: "num" }, number.format(slot.used)),
          el("td", { class: "num" }, number.format(slot.remaining)),
          el("td", {}, slot.used > 0 && slot.reset_ms > 0
            ? [`${duration(Math.max(0, slot.window_ms - slot.reset_ms))} ago`, el("span", { class: "line muted" }, `a slot frees in ${duration(slot.reset_ms)}`)]
            : "–"))))))
    : "";
  const counted = found.slots.some((slot) => slot.used > 0)
    ? ""
    : el("p", { class: "empty" }, "Nothing counted: the key has no admissions in any window.");
  const leases = found.leases.length
    ? el("ul", {}, ...found.leases.map((lease) =>
      el("li", { class: "wrap" }, el("code", {}, lease.id), lease.owner ? ` held by ${lease.owner}` : "",
        `, ${lease.holds} hold(s), lapses ${until(lease.expires_ms)}`)))
    : el("p", { class: "empty" }, "No leases held.");
  const bans = [];
  if (found.ban) {
    const by = found.ban.offences > 0 ? `by the rule ${until(found.ban.until_ms)} (offence ${found.ban.offences})` : `by an operator, on this rule, ${until(found.ban.until_ms)}`;
    bans.push(el("p", { class: "wrap" }, el("span", { class: "tag warn" }, "banned"), ` ${by}: `, found.ban.reason, " ",
      el("button", { type: "button", class: "small", onclick: () => liftKeyBan(found.rule, found.key) }, "Lift")));
  }
  if (found.manual_ban) bans.push(el("p", { class: "wrap" }, el("span", { class: "tag warn" }, "manual ban"),
    ` ${until(found.manual_ban.until_ms)}: `, found.manual_ban.reason));
  if (!bans.length) bans.push(el("p", { class: "empty" }, "Not banned."));
  const override = found.override
    ? el("p", { class: "wrap" }, el("span", { class: "tag" }, "override"), " ",
      found.override.unlimited
        ? "unlimited"
        : found.override.policies.map((p) => `${p.name}: ${number.format(p.limit)} / ${duration(p.window_ms)}`).join(", "),
      found.override.until_ms ? `, lapses ${until(found.override.until_ms)}` : ", until lifted",
      found.override.reason ? ` (${found.override.reason})` : "")
    : el("p", { class: "empty" }, "No override: the rule's limits apply.");
  return [slots, counted, el("h3", {}, "Override"), override, el("h3", {}, "Leases"), leases, el("h3", {}, "Bans"), ...bans];
}

/** A split quota's parts: what each holds of its share. */
function partsTable(parts) {
  return el("div", { class: "scroll" }, el("table", { class: "parts" },
    el("thead", {}, el("tr", {}, ...["Part", "Policy", "Share", "Used", "Left"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...parts.flatMap((part) => (part.slots.length ? part.slots : [null]).map((slot) =>
      el("tr", {},
        el("td", { class: "key" }, part.key),
        el("td", { class: "wrap" }, slot ? slot.policy : "–"),
        el("td", {}, slot ? `${number.format(slot.limit)} / ${duration(slot.window_ms)}` : "–"),
        el("td", { class: "num" }, slot ? number.format(slot.used) : "0"),
        el("td", { class: "num" }, slot ? number.format(slot.remaining) : "all")))))));
}

function renderKey(found) {
  const now = Date.now();
  const split = Array.isArray(found.parts);
  const body = [];
  if (found.tiers) {
    for (const tier of found.tiers) body.push(el("h3", { class: "tier" }, `Tier ${tier.rule}`), ...keyState(tier));
  } else if (split) {
    body.push(el("h3", {}, "The whole quota"), ...keyState(found).slice(0, 1),
      el("h3", {}, `Its ${found.parts.length} parts`), partsTable(found.parts));
  } else {
    body.push(...keyState(found));
  }
  $("key-result").replaceChildren(
    el("div", { class: "head" },
      el("p", {}, el("span", { class: "key" }, found.key), el("span", { class: "muted" }, ` on ${found.rule} · looked up ${clock.format(new Date(now))}`)),
      el("p", {},
        el("button", {
          type: "button",
          class: "small danger",
          onclick: () => reset(found.rule, found.key, split),
        }, split ? "Reset every part" : "Reset key"),
        " ",
        bannable(found.rule) ? el("button", { type: "button", class: "small", onclick: () => prepareKeyBan(found.rule, found.key) }, "Ban on this rule…") : null)),
    ...body);
}

async function liftKeyBan(rule, key) {
  await act(() => call("DELETE", `keys/${segment(rule)}/${segment(key)}/ban`), `Lifted the ban on ${key} on rule ${rule}.`);
  await lookupAgain(rule, key);
}

async function lookupAgain(rule, key) {
  $("lookup-rule").value = rule;
  $("lookup-key").value = key;
  await lookup();
}

async function reset(rule, key, split) {
  const what = split ? `every part of ${rule}'s quota` : `${key} on ${rule}`;
  if (!confirm(`Reset ${what}? Its log, its ban and its leases are forgotten.`)) return;
  await act(() => call("DELETE", `keys/${segment(rule)}/${segment(key)}`), `Reset ${what}.`);
  await lookupAgain(rule, key);
}

// ---- rules and figures ------------------------------------------------

function policyText(p) {
  const base = `${number.format(p.limit)} / ${duration(p.window_ms)} · ${p.algorithm}`;
  return p.algorithm === "gcra" ? `${base}, burst ${p.burst}` : base;
}

/** What a tier or a layer counts by: its key, or every caller at once. */
function keyText({ key }) {
  return key === null ? "everyone (shared)" : el("code", {}, key);
}

/** A rule's or a layer's scope: shared by every caller (split or not), or
 * one quota per key. */
function scopeText({ scope, split }) {
  return scope === "global" ? `global${split > 1 ? `, split ${split}` : ""}` : "per key";
}

/** A rule's stacked layers (`also`), each a policy line and a scope line
 * under the rule's own. */
function layers(rule) {
  return rule.also ?? [];
}

function roomText(room) {
  return `waiting room: ${number.format(room.active)} at once, ${number.format(room.per_minute)} a minute, ${room.shards} shard(s)`;
}

function renderRules(rules, viewed) {
  ruleOptions(rules);
  $("rules-empty").hidden = rules.rules.length > 0;
  const line = (...parts) => el("span", { class: "line" }, ...parts);
  $("rules").tBodies[0].replaceChildren(...rules.rules.map((rule) => {
    const tiered = rule.tiers.length > 1 || rule.tiers[0]?.name;
    const tierLabel = (tier) => (tiered ? `${tier.name} (${tier.when}): ` : "");
    return el("tr", { "data-rule": rule.id },
      el("th", { scope: "row" }, rule.id),
      el("td", { class: "state-cell" }, ...stateCell(rule, viewed.get(rule.id))),
      el("td", {}, line(el("code", {}, rule.match.path)), line(rule.match.methods ? rule.match.methods.join(", ") : "any method")),
      el("td", {}, ...rule.tiers.map((tier) => line(tierLabel(tier), keyText(tier))),
        ...layers(rule).map((layer) => line(`also ${layer.lookup}: `, keyText(layer)))),
      el("td", {}, ...(rule.waiting_room ? [roomText(rule.waiting_room)] : rule.tiers.flatMap((tier) =>
        tier.policies.length ? tier.policies.map((p) => line(tierLabel(tier), policyText(p))) : [line(tierLabel(tier), "none")])),
        ...layers(rule).map((layer) => line(`also ${layer.lookup}: `, layer.policies.map(policyText).join(", ")))),
      el("td", {}, line(rule.waiting_room ? "–" : scopeText(rule)), ...layers(rule).map((layer) => line(`also ${layer.lookup}: `, scopeText(layer)))),
      el("td", {}, rule.concurrency
        ? [line(`${number.format(rule.concurrency.limit)} at once`), line(`lease ${duration(rule.concurrency.lease_ttl_ms)}`),
          rule.concurrency.max_wait_ms ? line(`queue ${rule.concurrency.max_queue}, wait ${duration(rule.concurrency.max_wait_ms)}`) : null]
        : "–"),
      el("td", {}, rule.ban
        ? [line(`after ${rule.ban.after} in ${duration(rule.ban.within_ms)}`),
          line(`for ${duration(rule.ban.for_ms)}${rule.ban.multiplier > 1 ? ` ×${rule.ban.multiplier} up to ${duration(rule.ban.max_ms)}` : ""}`),
          line(`answers ${rule.ban.status}`)]
        : "–"),
      el("td", {}, line(rule.shadow ? el("span", { class: "tag warn" }, "shadow") : "enforcing"),
        rule.local || rule.waiting_room ? null : line("one object call per decision")),
      el("td", {}, rule.waiting_room ? "–" : rule.on_error === "allow" ? "allow (fail open)" : "deny (fail closed)"));
  }));
}

// ---- live control: a rule's state --------------------------------------

/** A rule's state as its view says it: `{state, reason, set_ms}`. A global
 * quota's view holds it as an object, another rule's at its top level. */
function stateOf(view) {
  return typeof view.state === "string" ? view : view.state;
}

/** A rule's state, why, and the buttons that change it. */
function stateCell(rule, view) {
  const parts = [];
  let current = null;
  if (!view || view.error) {
    parts.push(el("span", { class: "tag warn" }, "unknown"),
      el("span", { class: "line muted wrap" }, view ? explain(view.error) : "not read yet"));
  } else {
    current = stateOf(view);
    parts.push(el("span", { class: `tag ${current.state}` }, current.state));
    if (current.reason) parts.push(el("span", { class: "line muted reason" }, current.reason));
    if (view.agree === false) {
      const holders = view.where === "shards" ? "shards" : "parts";
      parts.push(el("span", { class: "line muted" }, `its ${holders} disagree: set it again`));
    }
    if (view.isolate && view.isolate.state !== current.state) {
      parts.push(el("span", { class: "line muted" }, `this isolate still applies ${view.isolate.state} (KV, up to ${duration(70_000)})`));
    }
  }
  const button = (next, label) => el("button", {
    type: "button",
    class: next === "closed" ? "small danger" : "small",
    disabled: current?.state === next,
    "aria-label": `${label} rule ${rule.id}`,
    onclick: (event) => changeState(event.currentTarget, rule, next),
  }, next === "closed" ? `${label}…` : label);
  parts.push(el("div", { class: "state-actions" }, button("open", "Open"), button("paused", "Pause"), button("closed", "Close")));
  return parts;
}

async function changeState(button, { id: rule, waiting_room: room }, next) {
  const closing = room
    ? `Close waiting room ${rule}? Newcomers and waiting visitors are answered 410 (sold out) until it is opened again; admitted visitors keep their sessions.`
    : `Close rule ${rule}? Every request it matches is answered 410 (sold out) until it is opened again.`;
  if (next === "closed" && !confirm(closing)) return;
  const body = { state: next };
  const reason = $("state-reason").value.trim();
  if (reason) body.reason = reason;
  button.disabled = true;
  const answer = await act(() => call("PUT", `rules/${segment(rule)}/state`, body), `Rule ${rule} is ${next}.`);
  if (answer) $("state-reason").value = "";
  button.disabled = false;
}

function renderFigures(stats) {
  const i = stats.isolate;
  const hubs = Object.keys(stats.shared).length;
  const requests = Object.values(stats.shared).reduce((sum, hub) => sum + hub.requests, 0);
  const figures = [
    ["Refusal cache", `${number.format(i.refusal_cache)} of ${number.format(i.refusal_cache_capacity)}`],
    ["Manual bans held", number.format(i.manual_bans)],
    ["Pending counts", `${number.format(i.pending_stats)} of ${number.format(i.pending_stats_capacity)}`],
    ["Rules with pending top keys", number.format(i.pending_top_rules)],
    ["Pending bans", number.format(i.pending_bans)],
    ["Hubs answering", `${hubs} of ${hubs + stats.unreachable.length}`],
    ["Reports received by hubs", number.format(requests)],
  ];
  if (stats.unreachable.length) figures.push(["Hubs unreachable", stats.unreachable.join(", ")]);
  $("isolate").replaceChildren(...figures.map(([name, value]) => el("div", {}, el("dt", {}, name), el("dd", {}, value))));
}

// ---- wiring -----------------------------------------------------------

$("signin-form").addEventListener("submit", signIn);
$("lookup-form").addEventListener("submit", lookup);
$("ban-form").addEventListener("submit", ban);
$("key-ban-form").addEventListener("submit", banKey);
$("key-ban-cancel").addEventListener("click", cancelKeyBan);
$("refresh").addEventListener("click", () => refresh());
$("bans-more-button").addEventListener("click", () => {
  state.bansShown = Math.min(BANS_MOST, state.bansShown + BANS_PAGE);
  // A refresh under way asked for the fewer: ask again once it is done.
  (state.inFlight ?? Promise.resolve()).then(() => refresh());
});
$("signout").addEventListener("click", () => showSignIn(null));
$("pause").addEventListener("click", (event) => {
  state.paused = !state.paused;
  event.currentTarget.setAttribute("aria-pressed", String(state.paused));
  event.currentTarget.textContent = state.paused ? "Resume" : "Pause";
  setStatus(state.paused ? "paused" : "live", state.paused ? "Paused" : "Live");
  schedule();
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && !state.paused && sessionStorage.getItem(TOKEN)) refresh();
});

if (sessionStorage.getItem(TOKEN)) start();
else showSignIn(null);
