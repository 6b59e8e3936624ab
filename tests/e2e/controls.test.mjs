// Live control of a rule over HTTP on workerd: pause, close and open a
// global quota (its state in its parts, from the next request; within one
// lease, at most 1 s, in an isolate holding an admission block) and a
// per-key rule (its state in Workers KV: at once in the isolate that served
// the change, within the documented delay in another); an override of a
// global quota's whole limit; the sale's view; bad input to every new
// route. Two isolates of Sluice's worker share the objects and KV.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, anotherIsolate, INTERVAL_VAR } from "./harness.mjs";

const TOKEN = "controls-admin-token-for-e2e-0123456789-abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };
/** How often an isolate reads the states (src/isolate/states.rs), as
 * the admin API announces it, and as both isolates here read them. */
const REFRESH_MS = 10_000;
const TEST_REFRESH_MS = 300;

const config = {
  rules: [
    { id: "sale", match: { path: "/buy" }, scope: "global", split: 2, limit: 3, window: "1m" },
    { id: "stock", match: { path: "/stock" }, scope: "global", split: 2, limit: 3, window: "1m" },
    { id: "flash", match: { path: "/flash" }, scope: "global", split: 2, limit: 1000, window: "1m" },
    { id: "hot", match: { path: "/hot" }, scope: "global", split: 2, limit: 10000, window: "1m" },
    { id: "one", match: { path: "/one" }, scope: "global", limit: 2, window: "1m" },
    { id: "gone", match: { path: "/gone" }, scope: "global", split: 2, limit: 2, window: "1m" },
    { id: "two", match: { path: "/two" }, scope: "global", split: 2, policies: [
      { name: "second", limit: 10, window: "1s" },
      { name: "hour", limit: 100, window: "1h" },
    ] },
    { id: "api", match: { path: "/api/*" }, limit: 100, window: "1m" },
    { id: "tiers", match: { path: "/tiers" }, tiers: [{ name: "all", limit: 10, window: "1m" }] },
    { id: "cart", match: { path: "/cart" }, key: "header:x-user", limit: 1, window: "1m",
      also: [{ id: "all", scope: "global", split: 2, limit: 3, window: "1m" }] },
    { id: "drop", match: { path: "/drop" }, key: "header:x-user", limit: 1, window: "1m",
      also: [{ id: "all", scope: "global", split: 2, limit: 5, window: "1m" }] },
  ],
};

/** A second isolate of Sluice's worker, bound to the same objects and KV. */
const secondIsolate = () =>
  anotherIsolate("sluice-b", { ADMIN_TOKEN: TOKEN, SLUICE: { origin: "demo", ...config }, [INTERVAL_VAR]: String(TEST_REFRESH_MS) });

let sluice;
let other;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN }, workers: [secondIsolate()], intervalMs: TEST_REFRESH_MS });
  other = await sluice.worker("sluice-b");
});
after(() => sluice?.stop());

const from = (ip, path) => sluice.fetch(path, { headers: { "CF-Connecting-IP": ip } });
const fromOther = (ip, path) => other.fetch(`http://sluice-b${path}`, { headers: { "CF-Connecting-IP": ip } });
const adminCall = (method, path, body, headers = {}) =>
  sluice.fetch(`/_sluice/admin${path}`, {
    method,
    headers: { ...admin, "CF-Connecting-IP": "192.0.2.200", ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
/** A problem+json answer of `status`, naming `name` as its field. */
const field = async (response, status, name) => {
  assert.equal(response.status, status, await response.clone().text());
  assert.match(response.headers.get("content-type"), /application\/problem\+json/);
  const problem = await response.json();
  if (name !== undefined) assert.equal(problem.field, name, JSON.stringify(problem));
  return problem;
};
const setState = async (rule, state, reason = "") => {
  const response = await adminCall("PUT", `/rules/${rule}/state`, { state, reason });
  assert.equal(response.status, 200, `PUT ${rule} ${state}: ${await response.clone().text()}`);
  return response.json();
};

/** The status and problem of a request, checking the state's answer. */
async function expectState(response, state, reason) {
  const status = { paused: 503, closed: 410 }[state];
  assert.equal(response.status, status);
  assert.match(response.headers.get("content-type"), /application\/problem\+json/);
  const problem = await response.json();
  assert.equal(problem.code, state);
  assert.equal(problem.reason, reason);
  assert.equal(response.headers.get("retry-after"), state === "paused" ? "10" : null);
  assert.equal(response.headers.get("ratelimit"), null, "nothing was decided");
}

describe("a global quota's state lives in its parts", () => {
  test("pause, close and open apply from the next request, and nothing admitted is lost", async () => {
    assert.equal((await from("198.51.100.1", "/buy")).status, 200);
    const paused = await setState("sale", "paused", "stock count");
    assert.equal(paused.where, "parts");
    assert.deepEqual(paused.parts.map((p) => [p.key, p.previous.state]), [["*#0", "open"], ["*#1", "open"]]);
    for (const ip of ["198.51.100.1", "198.51.100.2", "198.51.100.3"]) {
      await expectState(await from(ip, "/buy"), "paused", "stock count");
    }
    // Another isolate, which never heard of the change, asks a part.
    await expectState(await fromOther("198.51.100.4", "/buy"), "paused", "stock count");
    await setState("sale", "closed", "sold out");
    await expectState(await from("198.51.100.1", "/buy"), "closed", "sold out");
    // The other isolate may hold the paused answer a second at most.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await expectState(await fromOther("198.51.100.4", "/buy"), "closed", "sold out");
    const opened = await setState("sale", "open");
    assert.deepEqual(opened.parts.map((p) => p.previous.state), ["closed", "closed"]);
    // The one admission before the pause still counts: 2 more of 3.
    const statuses = [];
    for (let i = 0; i < 5; i += 1) statuses.push((await from(`198.51.100.${10 + i}`, "/buy")).status);
    assert.deepEqual(statuses, [200, 200, 429, 429, 429]);
    const view = await (await adminCall("GET", "/rules/sale")).json();
    assert.equal(view.quota[0].used, 3);
    assert.equal(view.quota[0].remaining, 0);
  });

  test("an isolate holding admission blocks of a hot quota's parts admits from them for at most one lease after a pause", async () => {
    const stats = async () => (await (await other.fetch("http://sluice-b/_sluice/admin/stats", { headers: admin })).json()).isolate;
    // Hot in the other isolate: its parts grant it blocks.
    for (let i = 0; i < 60; i += 1) assert.equal((await fromOther(`198.51.100.${i % 50}`, "/hot")).status, 200);
    assert.ok((await stats()).blocks.held > 0, "the other isolate holds blocks");
    await setState("hot", "paused", "restock");
    const paused = Date.now();
    // From its blocks while their leases last, then paused: a block lasts
    // at most 1 s from its grant, which came before the pause.
    const late = [];
    for (;;) {
      const sent = Date.now();
      const response = await fromOther("198.51.100.60", "/hot");
      if (response.status === 200) {
        late.push(sent - paused);
        continue;
      }
      await expectState(response, "paused", "restock");
      break;
    }
    assert.ok(late.every((ms) => ms <= 1_000), `admitted ${late} ms after the pause`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (let i = 0; i < 5; i += 1) await expectState(await fromOther("198.51.100.61", "/hot"), "paused", "restock");
    await expectState(await from("198.51.100.62", "/hot"), "paused", "restock");
    await setState("hot", "open");
  });

  test("a quota held by one object is paused the same way, and GET reads the state", async () => {
    await setState("one", "paused");
    await expectState(await from("198.51.100.20", "/one"), "paused", "");
    const read = await (await adminCall("GET", "/rules/one/state")).json();
    assert.equal(read.state.state, "paused");
    assert.deepEqual(read.parts.map((p) => [p.key, p.state.state]), [["*", "paused"]]);
    await setState("one", "open");
    assert.equal((await from("198.51.100.20", "/one")).status, 200);
  });
});

describe("a per-user rule under a global layer keeps its state in the layer's parts", () => {
  test("exact from the next request in every isolate, and a buyer the pause turned away keeps their unit", async () => {
    const buyer = (user) => sluice.fetch("/drop", { headers: { "x-user": user, "CF-Connecting-IP": "198.51.100.70" } });
    const otherBuyer = (user) => other.fetch("http://sluice-b/drop", { headers: { "x-user": user, "CF-Connecting-IP": "198.51.100.71" } });
    assert.equal((await buyer("d1")).status, 200);
    const paused = await setState("drop", "paused", "restock");
    assert.equal(paused.where, "parts");
    assert.equal(paused.applies_within_ms, undefined, "no delay to wait out");
    assert.deepEqual(paused.parts.map((p) => [p.key, p.previous.state]), [["*#0", "open"], ["*#1", "open"]]);
    await expectState(await buyer("d2"), "paused", "restock");
    // The other isolate never heard of the change: the parts answer it.
    await expectState(await otherBuyer("d3"), "paused", "restock");
    const read = await (await adminCall("GET", "/rules/drop/state")).json();
    assert.deepEqual([read.state, read.where, read.agree], ["paused", "parts", true]);
    assert.deepEqual(read.parts.map((p) => p.state.state), ["paused", "paused"]);
    await setState("drop", "closed", "sold out");
    await expectState(await buyer("d2"), "closed", "sold out");
    await setState("drop", "open");
    // d2 was turned away twice after the per-user layer had admitted it:
    // both admissions were given back, so d2 buys now, and once only.
    assert.equal((await buyer("d2")).status, 200);
    assert.equal((await buyer("d2")).status, 429);
    assert.equal((await buyer("d1")).status, 429);
    const sale = await (await adminCall("GET", "/rules/drop.all")).json();
    assert.deepEqual([sale.admitted, sale.quota[0].used, sale.state.state], [2, 2, "open"]);
    // Nothing of it went to KV.
    const kv = await (await adminCall("GET", "/rules/api/state")).json();
    assert.equal(kv.where, "kv");
  });
});

describe("a per-key rule's state lives in KV", () => {
  test("the isolate that served the change applies it at once, another within the documented delay", { timeout: 60_000 }, async () => {
    // Both isolates have read the states once (at their first request).
    assert.equal((await from("203.0.113.1", "/api/x")).status, 200);
    assert.equal((await fromOther("203.0.113.1", "/api/x")).status, 200);
    for (const [state, reason] of [["paused", "deploy"], ["closed", "gone"], ["open", ""]]) {
      const changed = Date.now();
      const put = await setState("api", state, reason);
      assert.equal(put.where, "kv");
      assert.equal(put.applies_within_ms, 60_000 + REFRESH_MS);
      const here = await from("203.0.113.2", "/api/x");
      if (state === "open") assert.equal(here.status, 200);
      else await expectState(here, state, reason);
      // The other isolate reads KV in the background, at most once per
      // interval, from a request: poll it until it answers the new state.
      const expected = { paused: 503, closed: 410, open: 200 }[state];
      let seen;
      while (Date.now() - changed < TEST_REFRESH_MS + 5_000) {
        seen = await fromOther("203.0.113.3", "/api/x");
        if (seen.status === expected) break;
        await seen.arrayBuffer();
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      assert.equal(seen.status, expected, `the other isolate applies ${state} within its interval (KV is immediate locally)`);
      if (state !== "open") await expectState(seen, state, reason);
      const read = await (await adminCall("GET", "/rules/api/state")).json();
      assert.deepEqual([read.state, read.where, read.isolate.state], [state, "kv", state]);
    }
  });

  test("a paused rule refuses without calling any key object, and other rules are untouched", async () => {
    await setState("api", "paused");
    try {
      const before = await sluice.inspect("rule:api:203.0.113.9");
      for (let i = 0; i < 5; i += 1) await expectState(await from("203.0.113.9", "/api/y"), "paused", "");
      const afterwards = await sluice.inspect("rule:api:203.0.113.9");
      assert.equal(afterwards.checks, before.checks, "no check reached the key's object");
      assert.equal((await from("203.0.113.9", "/buy")).status !== 503, true);
    } finally {
      await setState("api", "open");
    }
  });
});

describe("an override of a global quota's whole limit", () => {
  test("from 3 to 5 admits exactly 2 more, divided as the config divides it, and lifting it keeps what was admitted", async () => {
    const admitted = async (n) => {
      let count = 0;
      for (let i = 0; i < n; i += 1) if ((await from(`198.51.100.${50 + i}`, "/stock")).status === 200) count += 1;
      return count;
    };
    assert.equal(await admitted(8), 3);
    const put = await adminCall("PUT", "/rules/stock/override", { limit: 5, reason: "more stock" });
    assert.equal(put.status, 200);
    const set = await put.json();
    assert.deepEqual(set.override, { policy: "stock", limit: 5, reason: "more stock", set_ms: set.override.set_ms });
    assert.deepEqual(set.parts.map((p) => [p.key, p.policies[0].limit, p.replaced]), [["*#0", 3, false], ["*#1", 2, false]]);
    assert.equal(await admitted(8), 2, "exactly 2 more");
    const view = await (await adminCall("GET", "/rules/stock")).json();
    assert.deepEqual(view.override.policies, [{ name: "stock", limit: 5, window_ms: 60_000 }]);
    assert.equal(view.override.parts, 2);
    assert.deepEqual([view.quota[0].limit, view.quota[0].used, view.quota[0].remaining], [5, 5, 0]);
    const read = await (await adminCall("GET", "/rules/stock/override")).json();
    assert.equal(read.override.reason, "more stock");
    const lifted = await adminCall("DELETE", "/rules/stock/override");
    assert.equal(lifted.status, 200);
    assert.deepEqual((await lifted.json()).parts.map((p) => [p.policies, p.replaced]), [[null, true], [null, true]]);
    assert.equal(await admitted(4), 0, "the 5 admitted still count against 3");
    assert.equal((await adminCall("DELETE", "/rules/stock/override")).status, 404);
  });

  test("a global layer under a per-user limit is watched and overridden by its policies' name", async () => {
    const buy = (user) => sluice.fetch("/cart", { headers: { "x-user": user, "CF-Connecting-IP": "198.51.100.90" } });
    const admitted = async (users) => {
      let count = 0;
      for (const user of users) if ((await buy(user)).status === 200) count += 1;
      return count;
    };
    assert.equal(await admitted(["c1", "c2", "c3", "c4", "c5"]), 3);
    const view = await (await adminCall("GET", "/rules/cart.all")).json();
    assert.deepEqual([view.rule, view.admitted, view.quota[0].limit, view.quota[0].remaining], ["cart.all", 3, 3, 0]);
    assert.deepEqual(view.parts.map((p) => p.key), ["*#0", "*#1"]);
    const put = await adminCall("PUT", "/rules/cart.all/override", { limit: 5, reason: "restock" });
    assert.equal(put.status, 200, await put.clone().text());
    assert.equal((await put.json()).override.limit, 5);
    assert.equal(await admitted(["c4", "c5", "c6", "c7"]), 2, "exactly 2 more, one per user");
    assert.equal((await adminCall("DELETE", "/rules/cart.all/override")).status, 200);
    // The rule's own layer is per user: no sale, no whole-quota override.
    await field(await adminCall("PUT", "/rules/cart/override", { limit: 5 }), 400, "rule");
    await field(await adminCall("GET", "/rules/cart.nope"), 404, "rule");
  });

  test("a rule with several policies names the one by its window", async () => {
    const put = await adminCall("PUT", "/rules/two/override", { limit: 50, window: "1h" });
    assert.equal(put.status, 200);
    assert.deepEqual((await put.json()).parts[0].policies.map((p) => p.limit), [5, 25]);
    assert.equal((await adminCall("DELETE", "/rules/two/override")).status, 200);
  });
});

describe("the sale's view", () => {
  test("sums its parts: admitted, refused, remaining, per second, the rate and the time to sell out", async () => {
    // Three from each isolate: never hot enough for admission blocks, whose
    // admissions the view would count only once reported.
    for (let i = 0; i < 6; i += 1) {
      const buy = i % 2 === 0 ? from : fromOther;
      assert.equal((await buy(`198.51.100.${100 + i}`, "/flash")).status, 200);
    }
    const view = await (await adminCall("GET", "/rules/flash")).json();
    assert.deepEqual([view.rule, view.scope, view.split, view.state.state, view.agree], ["flash", "global", 2, "open", true]);
    assert.deepEqual([view.admitted, view.refused, view.span_s], [6, 0, 300]);
    assert.deepEqual([view.quota[0].limit, view.quota[0].used, view.quota[0].remaining], [1000, 6, 994]);
    assert.equal(view.per_second.reduce((sum, [, admitted]) => sum + admitted, 0), 6);
    for (const [at] of view.per_second) assert.ok(at * 1000 <= view.now_ms && at * 1000 > view.now_ms - 300_000);
    assert.equal(view.rate.over_s, 10);
    // 6 admitted in the last 10 s (or fewer, if the second turned): a
    // 1-minute window of 1 000 never fills at that rate.
    assert.equal(view.sell_out_ms, null);
    assert.deepEqual(view.parts.map((p) => p.key), ["*#0", "*#1"]);
    assert.equal(view.parts.reduce((sum, p) => sum + p.admitted, 0), 6);
    assert.deepEqual(view.unreachable, []);
  });

  test("a sold-out quota says 0, and its refusals count, under the clients' addresses among the top refused keys", async () => {
    for (const ip of ["198.51.100.70", "198.51.100.71"]) assert.equal((await from(ip, "/gone")).status, 200);
    for (let i = 0; i < 5; i += 1) assert.equal((await from("198.51.100.77", "/gone")).status, 429);
    const view = await (await adminCall("GET", "/rules/gone")).json();
    assert.equal(view.sell_out_ms, 0);
    assert.equal(view.admitted, 2);
    // The parts count the refusals they decide: the first refusal asked
    // both; the isolate answered some of the rest from the batches of
    // moments the parts gave it (those count in /admin/stats): batches that
    // double (1, then 2, then 4 each) bring 5 refusals to at most 6 part
    // decisions, not the 10 that asking both parts every time would count.
    assert.ok(view.refused >= 2 && view.refused <= 6, `refused ${view.refused}`);
    const top = await (await adminCall("GET", "/top?rule=gone")).json();
    const keys = top.keys.map((k) => k.key);
    assert.ok(keys.includes("198.51.100.77"), JSON.stringify(keys));
    assert.ok(!keys.includes("*"));
  });

  test("a part that does not answer is named, and the view still answers", async () => {
    const faulty = await Sluice.start({ faults: true, sluice: { timeout: "300ms", ...config }, secrets: { ADMIN_TOKEN: TOKEN } });
    try {
      const call = (method, path, body) => faulty.fetch(`/_sluice/admin${path}`, {
        method,
        headers: { ...admin, ...(body ? { "content-type": "application/json" } : {}) },
        body: body && JSON.stringify(body),
      });
      for (let i = 0; i < 4; i += 1) await faulty.fetch("/flash", { headers: { "CF-Connecting-IP": `198.51.100.${i + 1}` } });
      await faulty.fault("throw", "limiter", "rule:flash:*#1");
      const view = await call("GET", "/rules/flash");
      assert.equal(view.status, 200);
      const body = await view.json();
      assert.deepEqual(body.unreachable, ["*#1"]);
      assert.deepEqual(body.parts.map((p) => p.key), ["*#0"]);
      assert.equal(body.quota[0].limit, 500, "the figures of the parts that answered");
      // A change that reaches some parts says which did not, and may be sent again.
      const put = await call("PUT", "/rules/flash/state", { state: "paused" });
      assert.equal(put.status, 503);
      const problem = await put.json();
      assert.deepEqual([problem.code, problem.failed], ["unavailable", ["*#1"]]);
      await faulty.fault("pass");
      assert.equal((await call("PUT", "/rules/flash/state", { state: "paused" })).status, 200);
    } finally {
      await faulty.stop();
    }
  });
});

describe("bad input to the new routes", () => {
  test("a state body names its field", async () => {
    for (const rule of ["sale", "api"]) {
      await field(await adminCall("PUT", `/rules/${rule}/state`, {}), 400, "state");
      await field(await adminCall("PUT", `/rules/${rule}/state`, { state: "sold-out" }), 400, "state");
      await field(await adminCall("PUT", `/rules/${rule}/state`, { state: "Paused" }), 400, "state");
      await field(await adminCall("PUT", `/rules/${rule}/state`, { state: "paused", reason: "x".repeat(201) }), 400, "reason");
      await field(await adminCall("PUT", `/rules/${rule}/state`, { state: "paused", reason: 7 }), 400, "reason");
      await field(await adminCall("PUT", `/rules/${rule}/state`, { state: "paused", for: "1m" }), 400, "for");
      await field(await adminCall("PUT", `/rules/${rule}/state`, "{\"state\":"), 400, "body");
      await field(await adminCall("PUT", `/rules/${rule}/state`, "[]"), 400, "body");
      await field(await adminCall("PUT", `/rules/${rule}/state`, { state: "paused" }, { "content-type": "text/plain" }), 400, "content-type");
    }
    // Nothing changed.
    assert.equal((await from("198.51.100.200", "/api/z")).status, 200);
  });

  test("an override body names its field", async () => {
    await field(await adminCall("PUT", "/rules/stock/override", {}), 400, "limit");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 1 }), 400, "limit");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 2_000_000 }), 400, "limit");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: "6" }), 400, "limit");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 6, window: "1s" }), 400, "window");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 6, window: "soon" }), 400, "window");
    await field(await adminCall("PUT", "/rules/two/override", { limit: 60 }), 400, "window");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 6, for: "1h" }), 400, "for");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 6, unlimited: true }), 400, "unlimited");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 6, limt: 1 }), 400, "limt");
    await field(await adminCall("PUT", "/rules/stock/override", { limit: 6, reason: "a\nb" }), 400, "reason");
    await field(await adminCall("PUT", "/rules/api/override", { limit: 6 }), 400, "rule");
    await field(await adminCall("GET", "/rules/api/override"), 400, "rule");
  });

  test("an unknown rule, a tier or _api is a 404 naming rule, a wrong method a 405", async () => {
    for (const path of ["/rules/nope", "/rules/nope/state", "/rules/tiers.all/state", "/rules/_api/state", "/rules/nope/override"]) {
      await field(await adminCall("GET", path), 404, "rule");
    }
    await field(await adminCall("PUT", "/rules/nope/state", { state: "paused" }), 404, "rule");
    for (const [method, path] of [["POST", "/rules/sale/state"], ["DELETE", "/rules/sale/state"], ["PUT", "/rules/sale"], ["POST", "/rules/sale/override"]]) {
      const response = await adminCall(method, path);
      assert.equal(response.status, 405, `${method} ${path}`);
      assert.ok(response.headers.get("allow"));
    }
    assert.equal((await adminCall("GET", "/rules/sale/states")).status, 404);
    assert.equal((await sluice.fetch("/_sluice/admin/rules/sale/state")).status, 401, "the admin token is needed");
  });
});
