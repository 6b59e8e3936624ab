// The other algorithms over HTTP (redis-cell's throttle, the fixed window)
// and the admin API, end to end on workerd.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, eventually, API_TOKEN } from "./harness.mjs";

const TOKEN = "admin-token-for-e2e-0123456789-abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

const config = {
  rules: [
    { id: "api", match: { path: "/api/*" }, limit: 3, window: "1m" },
    {
      id: "login", match: { path: "/login" }, limit: 1, window: "1m",
      ban: { after: 2, within: "1m", for: "1m" },
    },
    { id: "fixed", match: { path: "/fixed" }, limit: 2, window: "1m", algorithm: "fixed_window" },
    { id: "cell", match: { path: "/cell" }, limit: 2, window: "1m", algorithm: "gcra" },
  ],
};

let sluice;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN, API_TOKEN } });
});
after(() => sluice?.stop());

let n = 0;
const freshIp = () => {
  n += 1;
  return `198.51.100.${n}`;
};
const from = (ip, path) => sluice.fetch(path, { headers: { "CF-Connecting-IP": ip } });
const throttle = (body) => sluice.post("/_sluice/v1/throttle", body);

describe("POST /v1/throttle: redis-cell's CL.THROTTLE", () => {
  test("answers as redis-cell does, with millisecond fields", async () => {
    const key = freshKey("user123");
    const began = Date.now();
    const first = await throttle({ key, max_burst: 15, count: 30, period_s: 60, quantity: 1 });
    assert.equal(first.status, 200);
    assert.deepEqual(await first.json(), {
      limited: false, limit: 16, remaining: 15,
      retry_after_s: -1, reset_after_s: 2, retry_after_ms: -1, reset_after_ms: 2000,
    });
    const rest = await throttle({ key, max_burst: 15, count: 30, period_s: 60, quantity: 15 });
    assert.equal((await rest.json()).remaining, 0);
    const limitedAnswer = await throttle({ key, max_burst: 15, count: 30, period_s: 60 });
    assert.equal(limitedAnswer.status, 200, "limited or not, as redis-cell answers");
    for (const answer of [first, limitedAnswer]) {
      assert.equal(answer.headers.get("ratelimit"), null, "no RateLimit fields: the body says it");
      assert.equal(answer.headers.get("ratelimit-policy"), null);
    }
    const limited = await limitedAnswer.json();
    const elapsed = Date.now() - began;
    assert.equal(limited.limited, true);
    // One emission interval (2 s) after the first unit, less the time
    // that has passed since it was sent: on a loaded machine, that can be
    // more than the answers' own latency.
    assert.ok(limited.retry_after_ms <= 2000 && limited.retry_after_ms >= 2000 - elapsed, `${limited.retry_after_ms} ms after ${elapsed} ms`);
    assert.equal(limited.retry_after_s, Math.ceil(limited.retry_after_ms / 1000));
    const peek = await (await throttle({ key, max_burst: 15, count: 30, period_s: 60, quantity: 0 })).json();
    assert.equal(peek.remaining, 0);
    const oversized = await (await throttle({ key: freshKey(), max_burst: 1, count: 1, period_s: 1, quantity: 3 })).json();
    assert.deepEqual([oversized.limited, oversized.retry_after_s], [true, -1]);
  });

  test("validates every field by name", async () => {
    const cases = [
      [{ max_burst: 1, count: 1, period_s: 1 }, "key"],
      [{ key: "k", count: 1, period_s: 1 }, "max_burst"],
      [{ key: "k", max_burst: 1, count: 0, period_s: 1 }, "count"],
      [{ key: "k", max_burst: 1, count: 1, period_s: 0 }, "period_s"],
      [{ key: "k", max_burst: 1, count: 1, period_s: 1, quantity: -1 }, "quantity"],
      [{ key: "k", max_burst: 1, count: 1, period_s: 1, extra: true }, "extra"],
    ];
    for (const [body, field] of cases) {
      const response = await throttle(body);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.equal((await response.json()).field, field);
    }
  });
});

test("rules can use the fixed window and GCRA", async () => {
  const ip = freshIp();
  const statuses = async (path) => {
    const out = [];
    for (let i = 0; i < 3; i++) out.push((await from(ip, path)).status);
    return out;
  };
  assert.deepEqual(await statuses("/fixed"), [200, 200, 429]);
  assert.deepEqual(await statuses("/cell"), [200, 200, 429]);
  const refused = await from(ip, "/cell");
  assert.equal(refused.headers.get("ratelimit-policy"), '"cell";q=2;w=60');
  // GCRA earns a unit back every 30 s: the refusal before was told the
  // next one, so this one is told the one after it (spread retries).
  const wait = Number(refused.headers.get("retry-after"));
  assert.ok(wait > 30 && wait <= 60, `Retry-After ${wait}`);
});

describe("admin API authorisation", () => {
  test("without the token, or with a wrong one: 401, and nothing about keys", async () => {
    for (const auth of [{}, { Authorization: "Bearer wrong" }, { Authorization: `Basic ${TOKEN}` }, { Authorization: `Bearer ${TOKEN}x` }]) {
      for (const [method, path] of [["GET", "/bans"], ["GET", "/keys/api/1.2.3.4"], ["DELETE", "/keys/api/1.2.3.4"], ["PUT", "/bans/x"], ["GET", "/stats"]]) {
        // Each from its own address: ten failures from one are locked out.
        const headers = { ...auth, "CF-Connecting-IP": freshIp() };
        const response = await sluice.fetch(`/_sluice/admin${path}`, { method, headers });
        assert.equal(response.status, 401, `${method} ${path} ${JSON.stringify(auth)}`);
        assert.match(response.headers.get("www-authenticate"), /^Bearer/);
        const body = await response.text();
        assert.ok(!body.includes("1.2.3.4") && !body.includes("ban"), body);
      }
    }
  });

  test("ten failed attempts from one address in a minute lock it out with 429", async () => {
    const attacker = freshIp();
    const attempt = (token, ip = attacker) =>
      sluice.fetch("/_sluice/admin/stats", { headers: { Authorization: `Bearer ${token}`, "CF-Connecting-IP": ip } });
    for (let i = 0; i < 10; i++) {
      assert.equal((await attempt(`guess-${i}`)).status, 401, `attempt ${i + 1}`);
    }
    for (const token of ["guess-10", TOKEN]) {
      const locked = await attempt(token);
      assert.equal(locked.status, 429, "locked out, even with the right token: no oracle");
      const retryAfter = Number(locked.headers.get("retry-after"));
      assert.ok(retryAfter > 200 && retryAfter <= 300, `Retry-After ${retryAfter}`);
      const problem = await locked.json();
      assert.equal(problem.code, "too-many-failures");
    }
    assert.equal((await attempt(TOKEN, freshIp())).status, 200, "other addresses are not affected");
  });

  test("an ADMIN_TOKEN shorter than 32 characters is a configuration error", async () => {
    const weak = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: "a".repeat(31) } });
    try {
      for (const path of ["/_sluice/admin/stats", "/api/x"]) {
        const response = await weak.fetch(path, { headers: admin });
        assert.equal(response.status, 500, path);
        const problem = await response.json();
        assert.equal(problem.code, "invalid-config");
        assert.equal(problem.field, "ADMIN_TOKEN");
        assert.match(problem.detail, /32/);
        assert.ok(!problem.detail.includes("a".repeat(31)), "the token is not quoted");
      }
    } finally {
      await weak.stop();
    }
  });

  test("with no ADMIN_TOKEN secret, the admin API does not exist", async () => {
    const bare = await Sluice.start({ sluice: config });
    try {
      for (const headers of [{}, admin]) {
        const response = await bare.fetch("/_sluice/admin/bans", { headers });
        assert.equal(response.status, 404);
        assert.equal((await response.json()).code, "not-found");
      }
    } finally {
      await bare.stop();
    }
  });

  test("unknown admin paths and wrong methods", async () => {
    assert.equal((await sluice.fetch("/_sluice/admin/nothing", { headers: admin })).status, 404);
    const wrong = await sluice.fetch("/_sluice/admin/bans", { method: "POST", headers: admin });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "GET");
  });
});

test("inspect and reset a key", async () => {
  const ip = freshIp();
  for (let i = 0; i < 3; i++) await from(ip, "/api/x");
  assert.equal((await from(ip, "/api/x")).status, 429);
  const inspected = await sluice.fetch(`/_sluice/admin/keys/api/${ip}`, { headers: admin });
  assert.equal(inspected.status, 200);
  const state = await inspected.json();
  assert.equal(state.object, `rule:api:${ip}`);
  assert.equal(state.slots.length, 1);
  assert.deepEqual([state.slots[0].policy, state.slots[0].used, state.slots[0].remaining], ["api", 3, 0]);
  assert.ok(state.slots[0].reset_ms > 50_000);
  assert.equal(state.ban, null);

  const reset = await sluice.fetch(`/_sluice/admin/keys/api/${ip}`, { method: "DELETE", headers: admin });
  assert.deepEqual(await reset.json(), { object: `rule:api:${ip}`, reset: true });
  const again = await from(ip, "/api/x");
  assert.equal(again.status, 200, "the reset key starts afresh, cache included");
  assert.equal(again.headers.get("ratelimit"), '"api";r=2;t=60');
  const unknown = await (await sluice.fetch("/_sluice/admin/keys/api/203.0.113.250", { headers: admin })).json();
  assert.deepEqual(
    unknown.slots.map((s) => [s.policy, s.limit, s.used, s.remaining, s.reset_ms]),
    [["api", 3, 0, 3, 0]],
    "a key with no state shows the limit in force, unused",
  );
});

test("decision-API keys are addressed under _api", async () => {
  const key = freshKey("user:42");
  await sluice.post("/_sluice/v1/limit", { key, limit: 5, window_ms: 60_000, cost: 2 });
  const state = await (await sluice.fetch(`/_sluice/admin/keys/_api/${encodeURIComponent(key)}`, { headers: admin })).json();
  assert.equal(state.object, `api:${key}`);
  assert.equal(state.slots[0].used, 2);
  assert.deepEqual(state.leases, []);

  const lease = await (await sluice.post("/_sluice/v1/leases", { key, limit: 2, ttl_ms: 60_000, owner: "worker-1" })).json();
  const held = await (await sluice.fetch(`/_sluice/admin/keys/_api/${encodeURIComponent(key)}`, { headers: admin })).json();
  assert.deepEqual(held.leases.map((l) => [l.id, l.fence, l.owner]), [[lease.lease_id, lease.fence, "worker-1"]]);
});

test("GET /admin/rules spells rules as the config does", async () => {
  const { rules } = await (await sluice.fetch("/_sluice/admin/rules", { headers: admin })).json();
  const cell = rules.find((rule) => rule.id === "cell");
  assert.deepEqual(cell.paths, { case: "insensitive", trailing_slash: "ignore" });
  assert.deepEqual(cell.tiers[0].policies, [{ name: "cell", limit: 2, window_ms: 60_000, algorithm: "gcra", burst: 1 }]);
});

test("a rule the config does not have is a 404, not an empty key", async () => {
  const response = await sluice.fetch("/_sluice/admin/keys/no-such-rule/1.2.3.4", { headers: admin });
  assert.equal(response.status, 404);
  assert.equal((await response.json()).field, "rule");
});

describe("bans", () => {
  const putBan = (key, body) =>
    sluice.fetch(`/_sluice/admin/bans/${encodeURIComponent(key)}`, {
      method: "PUT",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const listed = async () => (await (await sluice.fetch("/_sluice/admin/bans", { headers: admin })).json()).bans;

  test("a manual ban refuses the key on every rule until it is lifted", async () => {
    const ip = freshIp();
    const put = await putBan(ip, { for: "10m", reason: "scraping" });
    assert.equal(put.status, 200);
    const placed = await put.json();
    assert.equal(placed.reason, "scraping");
    assert.equal(placed.replaced, false, "a new ban");
    const rePut = await putBan(ip, { for: "10m", reason: "scraping" });
    assert.equal((await rePut.json()).replaced, true, "a ban PUT again replaces the one that held");
    for (const path of ["/api/x", "/login", "/fixed"]) {
      const response = await from(ip, path);
      assert.equal(response.status, 429, path);
      const problem = await response.json();
      assert.equal(problem.code, "banned");
      assert.match(problem.detail, /scraping/);
      assert.ok(Number(response.headers.get("retry-after")) > 590);
    }
    assert.equal((await from(ip, "/elsewhere")).status, 200, "paths no rule limits are not refused");
    const ban = (await listed()).find((b) => b.key === ip);
    assert.deepEqual([ban.source, ban.reason], ["manual", "scraping"]);
    assert.equal(ban.until, new Date(ban.until_ms).toISOString());
    const inspected = await (await sluice.fetch(`/_sluice/admin/keys/api/${ip}`, { headers: admin })).json();
    assert.equal(inspected.manual_ban.reason, "scraping");

    const lifted = await sluice.fetch(`/_sluice/admin/bans/${ip}`, { method: "DELETE", headers: admin });
    assert.equal(lifted.status, 200);
    assert.equal((await from(ip, "/api/x")).status, 200);
    assert.equal((await listed()).find((b) => b.key === ip), undefined);
    const again = await sluice.fetch(`/_sluice/admin/bans/${ip}`, { method: "DELETE", headers: admin });
    assert.equal(again.status, 404);
  });

  test("bans are listed with their end and reason, and drop off when they expire", async () => {
    const key = freshKey("short");
    await putBan(key, { for: "1s", reason: "brief" });
    assert.ok((await listed()).some((b) => b.key === key && b.reason === "brief"));
    await eventually(async () => !(await listed()).some((b) => b.key === key), 5000);
  });

  test("automatic bans from rules are listed too", async () => {
    const ip = freshIp();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await from(ip, "/login")).status);
    assert.deepEqual(statuses, [200, 429, 429]);
    const ban = await eventually(async () => (await listed()).find((b) => b.key === ip), 5000);
    assert.equal(ban.source, "rule:login");
    assert.equal(ban.reason, "2 refusals within 1m (offence 1)", "in the config's words");
    const view = await (await sluice.fetch(`/_sluice/admin/keys/login/${ip}`, { headers: admin })).json();
    assert.deepEqual(
      [view.ban.reason, view.ban.offences, view.ban.started],
      ["2 refusals within 1m (offence 1)", 1, false],
      "started: whether this very call started the ban, never a peek",
    );
    // A reset lifts it, in the key object and in the listing.
    await sluice.fetch(`/_sluice/admin/keys/login/${ip}`, { method: "DELETE", headers: admin });
    assert.equal((await listed()).find((b) => b.key === ip), undefined);
    assert.equal((await from(ip, "/login")).status, 200);
  });

  test("a ban needs a valid duration", async () => {
    for (const [body, field] of [[{}, "for"], [{ for: "forever" }, "for"], [{ for: "1m", reason: 1 }, "reason"]]) {
      const response = await putBan("k", body);
      assert.equal(response.status, 400);
      assert.equal((await response.json()).field, field);
    }
  });
});

test("stats add up to the requests sent", async () => {
  const fresh = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN, API_TOKEN } });
  try {
    const since = Date.now() - 1000;
    const ips = ["192.0.2.11", "192.0.2.12"];
    for (const ip of ips) {
      for (let i = 0; i < 5; i++) await fresh.fetch("/api/x", { headers: { "CF-Connecting-IP": ip } });
    }
    for (let i = 0; i < 4; i++) await fresh.post("/_sluice/v1/limit", { key: "s", limit: 3, window_ms: 60_000 });
    const stats = async () => {
      const response = await fresh.fetch(`/_sluice/admin/stats?since=${since}`, { headers: admin });
      assert.equal(response.status, 200);
      return response.json();
    };
    const answer = await stats();
    const api = answer.rules.find((r) => r.rule === "api");
    assert.deepEqual([api.admitted, api.refused, api.failed], [6, 4, 0]);
    const minutes = api.per_minute.reduce((sum, m) => sum + m.admitted + m.refused, 0);
    assert.equal(minutes, 10, "the last hour per minute adds up to the same");
    const decisions = answer.rules.find((r) => r.rule === "_api");
    assert.deepEqual([decisions.admitted, decisions.refused], [3, 1]);
    const topOf = async (rule) => (await (await fresh.fetch(`/_sluice/admin/top?rule=${rule}`, { headers: admin })).json()).keys;
    const top = (await topOf("api")).map((k) => [k.key, k.count, k.error]).sort();
    assert.deepEqual(top, [["192.0.2.11", 2, 0], ["192.0.2.12", 2, 0]], "the top refused keys");
    assert.deepEqual((await topOf("_api")).map((k) => k.key), ["s"]);
    assert.equal(Object.keys(answer.shared).length, 16, "every hub answered with its figures");
    assert.deepEqual(answer.unreachable, []);
    for (const hub of Object.values(answer.shared)) assert.equal(typeof hub.requests, "number");
    const later = await (await fresh.fetch(`/_sluice/admin/stats?since=${Date.now() + 120_000}`, { headers: admin })).json();
    assert.equal(later.rules.find((r) => r.rule === "api").admitted, 0, "nothing since a later time");
  } finally {
    await fresh.stop();
  }
});
