// What an operator trips over (issue 19), end to end on workerd: bans that
// end when they end, IPv6 manual bans, the deny list on Sluice's own
// endpoints, leases when the client goes away, short retries for a full
// concurrency limit, an origin that leads back to Sluice, and admin routes
// for split and tiered rules.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { Sluice, freshKey, eventually, API_TOKEN } from "./harness.mjs";

const TOKEN = "admin-token-for-e2e-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

const config = {
  jwt: { secret: "JWT_SECRET" },
  deny: ["192.0.2.0/24"],
  rules: [
    {
      id: "short", match: { path: "/short" }, limit: 1, window: "1m",
      ban: { after: 2, within: "1m", for: "2s", multiplier: 2, max: "1h" },
    },
    { id: "api", match: { path: "/api/*" }, tiers: [
      { name: "registered", when: "registered", limit: 100, window: "1m" },
      { name: "anonymous", when: "anonymous", limit: 10, window: "1m" },
    ] },
    { id: "sale", match: { path: "/sale" }, scope: "global", split: 4, limit: 40, window: "1s" },
    { id: "slow", match: { path: "/slow" }, concurrency: 1, lease_ttl: "30s" },
    { id: "open", match: { path: "/open" }, limit: 1000, window: "1m" },
  ],
};

let sluice;
before(async () => {
  sluice = await Sluice.start({
    sluice: config,
    secrets: { ADMIN_TOKEN: TOKEN, API_TOKEN, JWT_SECRET: "sluice-e2e-secret-0123456789abcdef" },
  });
});
after(() => sluice?.stop());

let n = 0;
const freshIp = () => {
  n += 1;
  return `198.18.19.${n}`;
};
const from = (ip, path, init = {}) =>
  sluice.fetch(path, { ...init, headers: { "CF-Connecting-IP": ip, ...(init.headers ?? {}) } });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

describe("bans shorter than the rule's window (item 1)", () => {
  test("once the ban ends, the refusal is the quota's and counts toward the next offence", async () => {
    const ip = freshIp();
    assert.equal((await from(ip, "/short")).status, 200);
    const quota = await from(ip, "/short");
    assert.equal((await quota.json()).code, "quota-exceeded");
    const banned = await from(ip, "/short");
    const body = await banned.json();
    assert.equal(body.code, "banned");
    const until = Date.parse(body["banned-until"]);
    assert.ok(until - Date.now() <= 2000 && until - Date.now() > 0, body["banned-until"]);
    // Retry-After is when a request can pass: the window's end, not the
    // ban's, and the body says so.
    const retry = Number(banned.headers.get("retry-after"));
    assert.ok(retry >= 58 && retry <= 60, `Retry-After ${retry}`);
    assert.match(body.detail, /admits requests again/);
    // Answered from the isolate's cache until the ban ends...
    assert.equal((await (await from(ip, "/short")).json()).code, "banned");
    await sleep(Math.max(0, until - Date.now()) + 300);
    // ...and by the object after it: a quota refusal, with its own retry.
    // The first quota refusal was told the one place's next moment (60 s),
    // so this one is told its lap after that (a window and a second
    // later): retries are spread over the moments places free.
    const after = await from(ip, "/short");
    const afterBody = await after.json();
    assert.equal(afterBody.code, "quota-exceeded", JSON.stringify(afterBody));
    const spread = Number(after.headers.get("retry-after"));
    assert.ok(spread > 110 && spread <= 122, `Retry-After ${spread}`);
    const state = await (await sluice.fetch(`/_sluice/admin/keys/short/${ip}`, { headers: admin })).json();
    assert.equal(state.ban, null);
    // That refusal was the first strike of the second offence.
    const second = await (await from(ip, "/short")).json();
    assert.equal(second.code, "banned");
    assert.equal(second.offences, 2);
  });
});

describe("manual bans on IPv6 addresses (item 2)", () => {
  test("a ban on one address refuses its /64, and says so", async () => {
    const put = await sluice.fetch("/_sluice/admin/bans/2001:db8:aa:cc::5", {
      method: "PUT",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify({ for: "1m" }),
    });
    assert.equal(put.status, 200);
    assert.equal((await put.json()).banned, "2001:db8:aa:cc::/64");
    for (const ip of ["2001:db8:aa:cc::5", "2001:db8:aa:cc:1:2:3:4"]) {
      const refused = await from(ip, "/open");
      assert.equal(refused.status, 429, ip);
      const body = await refused.json();
      assert.equal(body.code, "banned");
      assert.doesNotMatch(body.detail, /operator.*operator/, "the default reason is not repeated");
    }
    assert.equal((await from("2001:db8:aa:cd::5", "/open")).status, 200, "another /64");
    const bans = (await (await sluice.fetch("/_sluice/admin/bans", { headers: admin })).json()).bans;
    assert.ok(bans.some((b) => b.key === "2001:db8:aa:cc::/64"));
    const lifted = await sluice.fetch("/_sluice/admin/bans/2001:db8:aa:cc::5", { method: "DELETE", headers: admin });
    assert.equal(lifted.status, 200);
    assert.equal((await from("2001:db8:aa:cc::5", "/open")).status, 200);
  });
});

describe("the top-level deny list (item 3)", () => {
  test("holds on Sluice's own endpoints too", async () => {
    const health = await from("192.0.2.7", "/_sluice/health");
    assert.equal(health.status, 403);
    assert.equal((await health.json()).code, "denied");
    const decision = await from("192.0.2.7", "/_sluice/v1/limit", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: freshKey(), limit: 1, window_ms: 1000 }),
    });
    assert.equal(decision.status, 403);
    assert.equal((await from("192.0.2.7", "/_sluice/admin/bans", { headers: admin })).status, 403);
    assert.equal((await from(freshIp(), "/_sluice/health")).status, 200);
  });
});

describe("concurrency (items 4 and 10)", () => {
  test("a full key asks for a short retry, not the lease TTL", async () => {
    const ip = freshIp();
    const held = from(ip, "/slow?hold_ms=1500");
    await sleep(300);
    const refused = await from(ip, "/slow");
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal((await held).status, 200);
  });

  test("a client that goes away keeps its slot while the origin works, then frees it", async () => {
    const ip = freshIp();
    const gone = new AbortController();
    const started = Date.now();
    const abandoned = from(ip, "/slow?hold_ms=1500", { signal: gone.signal }).catch(() => "aborted");
    await sleep(300);
    gone.abort();
    assert.equal(await abandoned, "aborted");
    // The origin still works on the request, so the slot stays taken...
    assert.equal((await from(ip, "/slow")).status, 429);
    // ...and frees when the origin is done, long before the 30 s TTL.
    await eventually(async () => (await from(ip, "/slow")).status === 200, 6000, 100);
    assert.ok(Date.now() - started < 6000);
  });
});

describe("admin routes for split and tiered rules (items 8, 9, 13)", () => {
  test("a split part out of range is a 404 naming the key", async () => {
    const ok = await sluice.fetch("/_sluice/admin/keys/sale/*%233", { headers: admin });
    assert.equal(ok.status, 200);
    for (const key of ["*%234", "*%23", "x"]) {
      const missing = await sluice.fetch(`/_sluice/admin/keys/sale/${key}`, { headers: admin });
      assert.equal(missing.status, 404, key);
      const body = await missing.json();
      assert.equal(body.field, "key");
      assert.match(body.detail, /\*#0 to \*#3/);
    }
  });

  test("a tiered rule's id answers every tier's state; an unknown tier lists them", async () => {
    const ip = freshIp();
    assert.equal((await from(ip, "/api/x")).status, 200);
    const state = await sluice.fetch(`/_sluice/admin/keys/api/${ip}`, { headers: admin });
    assert.equal(state.status, 200);
    const body = await state.json();
    assert.deepEqual(body.tiers.map((t) => t.rule), ["api.registered", "api.anonymous"]);
    assert.equal(body.tiers[1].slots[0].used, 1);
    const unknown = await sluice.fetch(`/_sluice/admin/keys/api.gold/${ip}`, { headers: admin });
    assert.equal(unknown.status, 404);
    assert.match((await unknown.json()).detail, /api\.registered, api\.anonymous/);
  });

  test("stats?since= must be milliseconds", async () => {
    for (const since of ["abc", "-5"]) {
      const bad = await sluice.fetch(`/_sluice/admin/stats?since=${since}`, { headers: admin });
      assert.equal(bad.status, 400, since);
      assert.equal((await bad.json()).field, "since");
    }
    assert.equal((await sluice.fetch(`/_sluice/admin/stats?since=0`, { headers: admin })).status, 200);
  });
});

describe("a peek (item 12)", () => {
  test("says whether one more request would pass", async () => {
    const key = freshKey("peek");
    const ask = (cost) => sluice.post("/_sluice/v1/limit", { key, limit: 1, window_ms: 60000, cost });
    assert.equal((await (await ask(0)).json()).would_allow, true);
    await ask(1);
    const peek = await (await ask(0)).json();
    assert.deepEqual([peek.allowed, peek.remaining, peek.would_allow], [true, 0, false]);
  });
});

/** A port nothing listens on now. */
function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

describe("an origin that leads back to Sluice (item 7)", () => {
  test("answers 508 instead of forwarding to itself forever", async () => {
    const port = await freePort();
    const looping = await Sluice.start({
      port,
      sluice: { origin: `http://127.0.0.1:${port}`, rules: [{ id: "all", limit: 100, window: "1m" }] },
    });
    try {
      const response = await looping.fetch("/anything", {
        headers: { "CF-Connecting-IP": "198.18.19.250" },
        signal: AbortSignal.timeout(5000),
      });
      assert.equal(response.status, 508);
      assert.equal((await response.json()).code, "loop-detected");
      // One pass counted, not one per round trip.
      const again = await looping.fetch("/anything", {
        headers: { "CF-Connecting-IP": "198.18.19.250" },
        signal: AbortSignal.timeout(5000),
      });
      assert.equal(again.headers.get("ratelimit"), '"all";r=98;t=60');
    } finally {
      await looping.stop();
    }
  });
});

describe("configs that cannot work (item 6)", () => {
  test("an origin port out of range is refused, naming origin", async () => {
    const broken = await Sluice.start({ sluice: { origin: "https://x:99999" } });
    try {
      const response = await broken.fetch("/anything");
      assert.equal(response.status, 500);
      const body = await response.json();
      assert.equal(body.field, "SLUICE.origin");
      assert.match(body.detail, /port/);
    } finally {
      await broken.stop();
    }
  });
});
