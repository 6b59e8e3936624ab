// An operator's state on a waiting room, over HTTP on workerd: pausing
// holds everyone in the room (positions stand still, newcomers queue,
// sessions run on), opening lets them in in order, closing answers 410
// `closed` (problem details, or Sluice's page for a browser), opening again
// serves the queue as it was. The state lives in the room's shards: the
// isolate that served the change applies it at once, another within its
// view's life (2 s). Bad input names the field.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice, anotherIsolate } from "./harness.mjs";
import { Visitor } from "./room-visitor.mjs";

const SECRET = "room-controls-secret-for-e2e-0123456789ab";
const ADMIN = "room-controls-admin-token-0123456789abcdef";
/** How long an isolate shows a shard's view without asking it (src/room/visit.rs). */
const STATUS_TTL_MS = 2_000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const room = (id, fields) => ({ id, match: { path: `/${id}/*` }, waiting_room: { per_minute: 600, refresh: "1s", session: "30s", ...fields } });
const config = {
  rules: [
    room("hold", { active: 2, shards: 1 }),
    room("shut", { active: 2, shards: 2 }),
    room("both", { active: 2, shards: 1 }),
    room("input", { active: 1, shards: 1 }),
  ],
};

/** A second isolate of Sluice's worker, bound to the same objects. */
const secondIsolate = () =>
  anotherIsolate("sluice-b", { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN, SLUICE: { origin: "demo", ...config } });

let sluice;
let other;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN }, workers: [secondIsolate()] });
  other = await sluice.worker("sluice-b");
});
after(() => sluice?.stop());

const here = () => new Visitor((path, init) => sluice.fetch(path, init));
const there = () => new Visitor((path, init) => other.fetch(`http://sluice-b${path}`, init));
const admin = (method, path, body, headers = {}) =>
  sluice.fetch(`/_sluice/admin${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
const setState = async (rule, state, reason) => {
  const response = await admin("PUT", `/rules/${rule}/state`, reason === undefined ? { state } : { state, reason });
  assert.equal(response.status, 200, `PUT ${rule} ${state}: ${await response.clone().text()}`);
  return response.json();
};
const figures = async (rule) => (await admin("GET", `/rooms/${rule}`)).json();

/** A waiting answer, paused (with `reason`) or not. */
function assertWaiting(answer, position, reason) {
  assert.equal(answer.status, 503, answer.text);
  assert.equal(answer.headers.get("retry-after"), "1");
  assert.equal(answer.body.state, "waiting");
  assert.equal(answer.body.position, position);
  if (reason === undefined) {
    assert.equal(answer.body.paused, undefined);
  } else {
    assert.equal(answer.body.paused, true);
    assert.equal(answer.body.reason, reason);
  }
}

/** A closed room's answer to a client asking for JSON. */
function assertClosed(answer, rule, reason) {
  assert.equal(answer.status, 410, answer.text);
  assert.equal(answer.headers.get("content-type"), "application/problem+json");
  assert.equal(answer.headers.get("retry-after"), null);
  assert.equal(answer.headers.get("set-cookie"), null, "a ticket is left as it is");
  assert.equal(answer.body.code, "closed");
  assert.equal(answer.body.rule, rule);
  assert.equal(answer.body.reason, reason);
}

describe("pausing a room holds everyone in it", () => {
  test("positions stand still, newcomers queue, sessions run on; opened, they go in in order", { timeout: 60_000 }, async () => {
    const [a, b] = [here(), here()];
    assert.equal((await a.get("/hold/x")).status, 200);
    assert.equal((await b.get("/hold/x")).status, 200);
    const [c, d] = [here(), here()];
    assertWaiting(await c.get("/hold/x"), 1);
    assertWaiting(await d.get("/hold/x"), 2);

    const paused = await setState("hold", "paused", "stock count");
    assert.deepEqual([paused.rule, paused.state, paused.reason, paused.where], ["hold", "paused", "stock count", "shards"]);
    assert.deepEqual(paused.shards.map((s) => [s.shard, s.object, s.previous.state]), [[0, "room:hold#0", "open"]]);

    // A session runs on, on its signature; the origin ends it, and its
    // place goes to nobody.
    assert.equal((await a.get("/hold/cart")).status, 200);
    assert.equal((await a.get("/hold/done?room=end")).status, 200);
    assertWaiting(await c.get("/hold/x"), 1, "stock count");
    assertWaiting(await d.get("/hold/x"), 2, "stock count");
    // A newcomer, though a place is free: a ticket at the back.
    const e = here();
    assertWaiting(await e.get("/hold/x"), 3, "stock count");
    // Past the view's life, asking the shard: still nobody in.
    await sleep(STATUS_TTL_MS + 200);
    assertWaiting(await c.get("/hold/x"), 1, "stock count");
    assertWaiting(await e.get("/hold/x"), 3, "stock count");
    let report = await figures("hold");
    assert.deepEqual([report.state, report.reason, report.active, report.offered, report.waiting], ["paused", "stock count", 1, 0, 3]);
    assert.equal(report.shards[0].state, "paused");
    // The page says so, for a person.
    const page = await c.get("/hold/x", { accept: "text/html" });
    assert.equal(page.status, 503);
    assert.match(page.text, /<strong>Entry is paused\.<\/strong>/);
    assert.match(page.text, /Why: stock count/);
    assert.match(page.text, /<dt>Your place in line<\/dt><dd>1<\/dd>/);

    const opened = await setState("hold", "open");
    assert.equal(opened.shards[0].previous.state, "paused");
    assert.equal(opened.shards[0].previous.reason, "stock count");
    // This isolate applies it at once: c is let in, d is next, e behind.
    assert.equal((await c.get("/hold/x")).status, 200);
    assertWaiting(await e.get("/hold/x"), 2);
    assertWaiting(await d.get("/hold/x"), 1);
    assert.equal((await b.get("/hold/done?room=end")).status, 200);
    assert.equal((await e.get("/hold/x")).status, 503, "e may not pass d");
    assert.equal((await d.get("/hold/x")).status, 200);
    assertWaiting(await e.get("/hold/x"), 1);
    report = await figures("hold");
    assert.deepEqual([report.state, report.active + report.offered], ["open", 2]);
    for (const v of [c, d]) await v.get("/hold/done?room=end");
    assert.equal((await e.get("/hold/x")).status, 200);
  });
});

describe("closing a room", () => {
  test("answers 410 closed to newcomers and tickets, lets sessions run on, and opening again serves the queue as it was", { timeout: 60_000 }, async () => {
    // One place per shard: two visitors hold both (newcomers go to a
    // shard drawn at random), and c, the first to wait, waits in one.
    const holders = [];
    const waiting = [];
    for (let i = 0; i < 30 && (holders.length < 2 || waiting.length === 0); i++) {
      const v = here();
      const answer = await v.get("/shut/x");
      (answer.status === 200 ? holders : waiting).push(v);
    }
    assert.equal(holders.length, 2);
    const [c] = waiting;
    const position = (await c.get("/shut/x")).body.position;

    const closed = await setState("shut", "closed", "sold out");
    assert.deepEqual(closed.shards.map((s) => s.previous.state), ["open", "open"]);
    const newcomer = here();
    assertClosed(await newcomer.get("/shut/x"), "shut", "sold out");
    assert.equal(newcomer.cookie, null, "no ticket handed out");
    assertClosed(await c.get("/shut/x"), "shut", "sold out");
    assert.ok(c.cookie, "the ticket is kept");
    // A browser gets Sluice's page: strict policy, no refresh, no Retry-After.
    const page = await here().get("/shut/x", { accept: "text/html,application/xhtml+xml,*/*;q=0.8" });
    assert.equal(page.status, 410);
    assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
    assert.match(page.headers.get("content-security-policy"), /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]{43}='; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/);
    assert.equal(page.headers.get("retry-after"), null);
    assert.equal(page.headers.get("cache-control"), "no-store");
    assert.match(page.text, /<title>Closed<\/title>/);
    assert.match(page.text, /sold out/);
    assert.doesNotMatch(page.text, /http-equiv|<script/i);
    // Sessions run on.
    for (const v of holders) assert.equal((await v.get("/shut/cart")).status, 200);
    const read = await (await admin("GET", "/rules/shut/state")).json();
    assert.deepEqual([read.state, read.reason, read.where, read.agree], ["closed", "sold out", "shards", true]);
    assert.deepEqual(read.shards.map((s) => s.state.state), ["closed", "closed"]);
    assert.deepEqual(await (await admin("GET", "/rules/shut")).json(), read, "the rule's view is its state");

    await setState("shut", "open");
    assertWaiting(await c.get("/shut/x"), position);
    // Its place comes as before: both holders leave, c is let in.
    for (const v of holders) await v.get("/shut/done?room=end");
    assert.equal((await c.get("/shut/x")).status, 200);
    for (const v of waiting) await v.get("/shut/done?room=end");
  });
});

describe("across isolates", () => {
  test("another isolate's waiting visitors see a change within the view's life; newcomers at once", { timeout: 60_000 }, async () => {
    const holders = [here(), here()];
    for (const v of holders) assert.equal((await v.get("/both/x")).status, 200);
    const far = there();
    assert.equal((await far.get("/both/x")).status, 503);
    await setState("both", "paused", "recount");
    const changed = Date.now();
    let seen;
    for (;;) {
      seen = await far.get("/both/x");
      if (seen.body.paused || Date.now() - changed > STATUS_TTL_MS + 1_000) break;
      await sleep(100);
    }
    assert.equal(seen.body.paused, true, `seen within ${STATUS_TTL_MS} ms`);
    assert.ok(Date.now() - changed <= STATUS_TTL_MS + 500, `took ${Date.now() - changed} ms`);
    // A newcomer there asks its shard: paused, queued behind far.
    const late = await there().get("/both/x");
    assert.deepEqual([late.body.paused, late.body.position], [true, 2]);
    await setState("both", "closed");
    const newcomer = await there().get("/both/x");
    assert.equal(newcomer.status, 410, "a newcomer there asks its shard, or its fresh view says closed");
    await setState("both", "open");
    for (const v of holders) await v.get("/both/done?room=end");
  });
});

test("a shard that does not answer is named, the others keep the change, and sending it again is safe", { timeout: 60_000 }, async () => {
  // Three places over two shards: shard 0 has two, shard 1 one, so shard
  // 1's calls are the ones holding "places":1.
  const faulty = await Sluice.start({
    faults: true,
    sluice: { timeout: "300ms", rules: [room("split", { active: 3, shards: 2 })] },
    secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN },
  });
  try {
    const call = (method, path, body) => faulty.fetch(`/_sluice/admin${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body && JSON.stringify(body),
    });
    await faulty.fault("throw", "room", '"places":1,');
    const put = await call("PUT", "/rules/split/state", { state: "paused", reason: "recount" });
    assert.equal(put.status, 503);
    assert.equal(put.headers.get("retry-after"), "1");
    const problem = await put.json();
    assert.deepEqual([problem.code, problem.failed], ["unavailable", [1]]);
    assert.match(problem.detail, /^shards 1 did not answer/);
    const read = await call("GET", "/rules/split/state");
    assert.equal(read.status, 200);
    const view = await read.json();
    assert.deepEqual([view.state, view.reason, view.agree], ["paused", "recount", true]);
    assert.equal(view.shards[0].state.state, "paused");
    assert.match(view.shards[1].error, /injected fault/);
    await faulty.fault("throw", "room");
    assert.equal((await call("GET", "/rules/split/state")).status, 503, "no shard answered");
    await faulty.fault("pass", "room");
    const again = await call("PUT", "/rules/split/state", { state: "paused", reason: "recount" });
    assert.equal(again.status, 200);
    assert.deepEqual((await again.json()).shards.map((s) => s.previous.state), ["paused", "open"]);
    const both = await (await call("GET", "/rules/split/state")).json();
    assert.deepEqual(both.shards.map((s) => s.state.state), ["paused", "paused"]);
  } finally {
    await faulty.stop();
  }
});

describe("bad input to a room's state", () => {
  const field = async (response, status, name) => {
    assert.equal(response.status, status, await response.clone().text());
    assert.match(response.headers.get("content-type"), /application\/problem\+json/);
    const problem = await response.json();
    assert.equal(problem.field, name, JSON.stringify(problem));
  };

  test("names the field, and changes nothing", async () => {
    await field(await admin("PUT", "/rules/input/state", {}), 400, "state");
    await field(await admin("PUT", "/rules/input/state", { state: "sold-out" }), 400, "state");
    await field(await admin("PUT", "/rules/input/state", { state: "paused", reason: 7 }), 400, "reason");
    await field(await admin("PUT", "/rules/input/state", { state: "paused", reason: "x".repeat(201) }), 400, "reason");
    await field(await admin("PUT", "/rules/input/state", { state: "paused", for: "1m" }), 400, "for");
    await field(await admin("PUT", "/rules/input/state", "{\"state\":"), 400, "body");
    await field(await admin("PUT", "/rules/input/state", { state: "paused" }, { "content-type": "text/plain" }), 400, "content-type");
    await field(await admin("PUT", "/rules/input/override", { limit: 6 }), 400, "rule");
    assert.equal((await admin("DELETE", "/rules/input/state")).status, 405);
    assert.equal((await sluice.fetch("/_sluice/admin/rules/input/state", { method: "PUT", body: "{\"state\":\"closed\"}" })).status, 401);
    const read = await (await admin("GET", "/rules/input/state")).json();
    assert.equal(read.state, "open");
    assert.equal((await here().get("/input/x")).status, 200);
  });
});
