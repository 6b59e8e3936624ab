// Every RateLimit and RateLimit-Policy value Sluice sends, parsed with a
// real structured-field parser (RFC 9651, npm `structured-headers`) and
// checked against draft-ietf-httpapi-ratelimit-headers-11: a List of named
// members, `q` a positive integer, `w` a positive integer, `r` and `t`
// non-negative integers, `qu` a string; `t` on a refusal equal to
// Retry-After; no field at all when no policy applies. Each algorithm,
// several policies, tiers, a split rule, concurrency, shadow, refusals,
// bans, windows of 1 ms and 30 days, a quota of 1 and costs above the limit.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { parseItem, parseList } from "structured-headers";
import { Sluice, freshKey, API_TOKEN } from "./harness.mjs";

const config = {
  jwt: { secret: "JWT_SECRET" },
  rules: [
    { id: "log", match: { path: "/log" }, limit: 2, window: "1m" },
    { id: "fixed", match: { path: "/fixed" }, limit: 2, window: "1m", algorithm: "fixed_window" },
    { id: "cell", match: { path: "/cell" }, limit: 2, window: "1m", algorithm: "gcra" },
    { id: "fast", match: { path: "/fast" }, limit: 2000, window: "1s", algorithm: "gcra", burst: 0 },
    { id: "bucket", match: { path: "/bucket" }, limit: 1, window: "10s", algorithm: "gcra", burst: 4 },
    {
      id: "multi", match: { path: "/multi" },
      policies: [{ name: "second", limit: 2, window: "1s" }, { name: "day", limit: 3, window: "1d" }],
    },
    {
      id: "tiered", match: { path: "/tiered" },
      tiers: [
        { name: "registered", when: "registered", limit: 100, window: "1m" },
        { name: "anonymous", when: "anonymous", limit: 1, window: "1m" },
      ],
    },
    { id: "sale", match: { path: "/sale" }, scope: "global", split: 4, limit: 8, window: "10m" },
    { id: "slow", match: { path: "/slow" }, key: "header:x-team", concurrency: 1, lease_ttl: "30s" },
    { id: "shadow", match: { path: "/shadow" }, limit: 1, window: "1m", shadow: true },
    { id: "flood", match: { path: "/flood" }, limit: 1, window: "1m", ban: { after: 1, within: "1m", for: "1m" } },
    { id: "tiny", match: { path: "/tiny" }, limit: 1, window: "1ms" },
    { id: "month", match: { path: "/month" }, limit: 1, window: "30d" },
  ],
};

let sluice;
let ipCounter = 0;
const freshIp = () => {
  ipCounter += 1;
  return `198.19.${Math.floor(ipCounter / 250)}.${(ipCounter % 250) + 1}`;
};
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { JWT_SECRET: "sluice-e2e-secret-0123456789abcdef", API_TOKEN } });
});
after(() => sluice?.stop());

/** The members of a List as {name, params}; fails unless every member is a string with parameters. */
function members(value, field) {
  assert.equal(typeof value, "string", `${field} is present`);
  assert.notEqual(value.trim(), "", `${field} is not empty`);
  const list = parseList(value);
  assert.ok(list.length > 0, `${field}: ${value}`);
  return list.map(([name, params]) => {
    assert.equal(typeof name, "string", `${field} member names are strings: ${value}`);
    const object = params instanceof Map ? Object.fromEntries(params) : params;
    return { name, params: object };
  });
}

const isCount = (n, min) => Number.isSafeInteger(n) && n >= min && n <= 999_999_999_999_999;

/**
 * Checks both fields of a response and returns them parsed; `outcome`
 * says what kind of answer it is, for the Retry-After rule.
 */
function checkFields(response, outcome = {}) {
  const policies = members(response.headers.get("ratelimit-policy"), "RateLimit-Policy");
  const state = members(response.headers.get("ratelimit"), "RateLimit");
  assert.deepEqual(state.map((m) => m.name), policies.map((m) => m.name), "one RateLimit member per policy");
  for (const { name, params } of policies) {
    assert.ok(isCount(params.q, 1), `${name}: q=${params.q}`);
    if ("w" in params) assert.ok(isCount(params.w, 1), `${name}: w=${params.w}`);
    if ("qu" in params) assert.equal(typeof params.qu, "string");
    assert.ok("w" in params || "qu" in params, `${name} says its window or its unit`);
    for (const key of Object.keys(params)) assert.ok(["q", "w", "qu", "pk"].includes(key), `${name}: ${key}`);
  }
  state.forEach(({ name, params }, i) => {
    assert.ok(isCount(params.r, 0), `${name}: r=${params.r}`);
    assert.ok(params.r <= policies[i].params.q, `${name}: r ${params.r} within q ${policies[i].params.q}`);
    if ("t" in params) assert.ok(isCount(params.t, 0), `${name}: t=${params.t}`);
    for (const key of Object.keys(params)) assert.ok(["r", "t", "pk"].includes(key), `${name}: ${key}`);
  });
  const retryAfter = response.headers.get("retry-after");
  if (retryAfter !== null) assert.match(retryAfter, /^[1-9][0-9]{0,9}$/);
  if (outcome.rateRefusal) {
    const waits = state.filter((m) => m.params.r === 0 && "t" in m.params).map((m) => m.params.t);
    assert.ok(waits.length > 0, "a refusing policy reports t");
    assert.equal(Number(retryAfter), Math.max(...waits), "t agrees with Retry-After");
  }
  return { policies, state };
}

const get = (path, headers = {}) => sluice.fetch(path, { headers: { "CF-Connecting-IP": freshIp(), ...headers } });
const from = (ip, path, headers = {}) => sluice.fetch(path, { headers: { "CF-Connecting-IP": ip, ...headers } });

for (const path of ["/log", "/fixed", "/cell"]) {
  test(`${path}: allowed and refused answers parse, t agrees with Retry-After`, async () => {
    const ip = freshIp();
    for (let i = 0; i < 2; i++) {
      const ok = await from(ip, path);
      assert.equal(ok.status, 200);
      checkFields(ok);
    }
    const refused = await from(ip, path);
    assert.equal(refused.status, 429);
    const { policies, state } = checkFields(refused, { rateRefusal: true });
    assert.deepEqual(policies[0].params, { q: 2, w: 60 });
    assert.equal(state[0].params.r, 0);
  });
}

test("GCRA: 2 000 a second with no burst announces w=1, never 0; t is one unit away", async () => {
  const ip = freshIp();
  const fast = checkFields(await from(ip, "/fast"));
  assert.deepEqual(fast.policies[0].params, { q: 1, w: 1 });
  const bucketIp = freshIp();
  for (let i = 0; i < 5; i++) checkFields(await from(bucketIp, "/bucket"));
  const refused = await from(bucketIp, "/bucket");
  assert.equal(refused.status, 429);
  const { policies, state } = checkFields(refused, { rateRefusal: true });
  assert.deepEqual(policies[0].params, { q: 5, w: 50 });
  assert.ok(state[0].params.t <= 10, `one unit in at most 10 s, not the 50 s to refill: t=${state[0].params.t}`);
});

test("several policies: one member each, the refusing one's t is Retry-After", async () => {
  const ip = freshIp();
  checkFields(await from(ip, "/multi"));
  checkFields(await from(ip, "/multi"));
  const refused = await from(ip, "/multi");
  assert.equal(refused.status, 429);
  const { policies } = checkFields(refused, { rateRefusal: true });
  assert.deepEqual(policies.map((m) => [m.name, m.params.q, m.params.w]), [["multi.second", 2, 1], ["multi.day", 3, 86400]]);
});

test("tiers: the tier that applied is announced", async () => {
  const ip = freshIp();
  const first = checkFields(await from(ip, "/tiered"));
  assert.equal(first.policies[0].params.q, 1);
  const refused = await from(ip, "/tiered");
  assert.equal(refused.status, 429);
  checkFields(refused, { rateRefusal: true });
});

test("a split global quota announces the whole quota, and r is the answering part's remaining", async () => {
  for (let i = 0; i < 3; i++) {
    const response = await get("/sale");
    assert.equal(response.status, 200);
    const { policies, state } = checkFields(response);
    assert.equal(policies[0].params.q, 8);
    // 8 in 4 parts of 2: the part that admitted has at most 1 left, while
    // the whole had 8 - (i + 1).
    assert.ok(state[0].params.r <= 1, `r=${state[0].params.r} is one part's, a lower bound of the whole's ${7 - i}`);
  }
});

test("concurrency: granted and refused answers parse; the unit is concurrent requests", async () => {
  const team = freshKey("team");
  const held = sluice.fetch("/slow?hold_ms=600", { headers: { "X-Team": team } });
  await new Promise((resolve) => setTimeout(resolve, 150));
  const refused = await sluice.fetch("/slow", { headers: { "X-Team": team } });
  assert.equal(refused.status, 429);
  const { policies } = checkFields(refused);
  assert.deepEqual(policies[0].params, { q: 1, qu: "concurrent-requests" });
  const granted = await held;
  assert.equal(granted.status, 200);
  checkFields(granted);
  await granted.body?.cancel();
});

test("shadow: no RateLimit field for a limit not enforced; Sluice-Shadow parses", async () => {
  const ip = freshIp();
  for (const verdict of ["allow", "refuse"]) {
    const response = await from(ip, "/shadow");
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("ratelimit-policy"), null);
    assert.equal(response.headers.get("ratelimit"), null);
    const [token, params] = parseItem(response.headers.get("sluice-shadow"));
    assert.equal(String(token), verdict);
    if (verdict === "refuse") {
      assert.equal(params.get("violated"), "shadow");
      assert.ok(isCount(params.get("retry"), 1));
    }
  }
});

test("a ban: the refusal and the ban that follows send valid fields", async () => {
  const ip = freshIp();
  checkFields(await from(ip, "/flood"));
  const banning = await from(ip, "/flood");
  assert.equal(banning.status, 429);
  checkFields(banning);
  const banned = await from(ip, "/flood");
  assert.equal(banned.status, 429);
  assert.equal((await banned.json()).code, "banned");
  if (banned.headers.get("ratelimit-policy") !== null) checkFields(banned);
});

test("windows of 1 ms and 30 days, a quota of 1", async () => {
  const tiny = checkFields(await get("/tiny"));
  assert.deepEqual(tiny.policies[0].params, { q: 1, w: 1 });
  const ip = freshIp();
  const month = checkFields(await from(ip, "/month"));
  assert.deepEqual(month.policies[0].params, { q: 1, w: 2_592_000 });
  const refused = await from(ip, "/month");
  assert.equal(refused.status, 429);
  const { state } = checkFields(refused, { rateRefusal: true });
  assert.ok(state[0].params.t > 2_591_000 && state[0].params.t <= 2_592_000);
});

test("no rule, no policy: no field at all", async () => {
  const response = await get("/unlimited");
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("ratelimit-policy"), null);
  assert.equal(response.headers.get("ratelimit"), null);
});

test("decision API: policies, a cost above the limit (no sentinel anywhere), leases", async () => {
  const key = freshKey("api");
  const body = { key, policies: [{ name: "a", limit: 2, window_ms: 1 }, { name: "b", limit: 3, window_ms: 2_592_000_000 }] };
  const ok = await sluice.post("/_sluice/v1/limit", body);
  assert.equal(ok.status, 200);
  const parsed = checkFields(ok);
  assert.deepEqual(parsed.policies.map((m) => m.params.w), [1, 2_592_000]);
  const full = await sluice.post("/_sluice/v1/limit", { ...body, cost: 2 });
  assert.equal(full.status, 200);
  checkFields(full);
  const refused = await sluice.post("/_sluice/v1/limit", { ...body, cost: 1 });
  const fields = checkFields(refused);
  const answer = await refused.json();
  assert.equal(answer.allowed, false);
  assert.ok(Number.isSafeInteger(answer.retry_after_ms));
  assert.ok(fields.state.every((m) => "t" in m.params));
  // A cost above a limit can never be admitted: refused as invalid up
  // front, with no wait (and no sentinel) anywhere.
  for (const tooBig of [{ ...body, cost: 5 }, { key: freshKey(), limit: 1, window_ms: 1000, cost: 2 }]) {
    const response = await sluice.post("/_sluice/v1/limit", tooBig);
    const text = await response.text();
    assert.equal(response.status, 400);
    assert.equal(JSON.parse(text).field, "cost");
    assert.doesNotMatch(text, /18446744073709|1\.8446744073709/);
    assert.equal(response.headers.get("retry-after"), null);
    assert.equal(response.headers.get("ratelimit"), null);
  }
  const lease = await sluice.post("/_sluice/v1/leases", { key: freshKey("lock"), limit: 1, ttl_ms: 1000 });
  assert.equal(lease.status, 200);
  const leaseFields = checkFields(lease);
  assert.deepEqual(leaseFields.policies[0].params, { q: 1, qu: "concurrent-requests" });
});
