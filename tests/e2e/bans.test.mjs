// Operators' bans over HTTP on workerd: a manual ban on an address or a
// network (IPv4 and IPv6 CIDR), on every rule and on Sluice's own
// endpoints; and a ban of one key on one rule, held in that key's object.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, API_TOKEN, eventually, anotherIsolate } from "./harness.mjs";

const TOKEN = "bans-admin-token-for-e2e-0123456789-abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };
const JWT_SECRET = "bans-e2e-jwt-secret-0123456789abcdef";

const config = {
  jwt: { secret: "JWT_SECRET" },
  rules: [
    { id: "api", match: { path: "/api/*" }, limit: 100, window: "1m" },
    { id: "search", match: { path: "/search" }, key: "header:x-api-key", limit: 100, window: "1m" },
    { id: "sale", match: { path: "/sale" }, scope: "global", split: 2, limit: 100, window: "1s" },
    { id: "tiers", match: { path: "/tiers" }, tiers: [
      { name: "pro", when: { claim: "plan", in: ["pro"] }, limit: 100, window: "1m" },
      { name: "free", key: "header:x-api-key", limit: 10, window: "1m" },
    ] },
    {
      id: "login", match: { path: "/login" }, limit: 1, window: "1m",
      ban: { after: 2, within: "1m", for: "10m", status: 403 },
    },
  ],
};

/** A second isolate of Sluice's worker, bound to the same objects. */
const secondIsolate = () =>
  anotherIsolate("sluice-b", { ADMIN_TOKEN: TOKEN, API_TOKEN, JWT_SECRET, SLUICE: { origin: "demo", ...config } });

let sluice;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN, API_TOKEN, JWT_SECRET }, workers: [secondIsolate()] });
});
after(() => sluice?.stop());

const from = (ip, path, headers = {}) =>
  sluice.fetch(path, { headers: { "CF-Connecting-IP": ip, ...headers } });
const adminCall = (method, path, body, from = "192.0.2.200") =>
  sluice.fetch(`/_sluice/admin${path}`, {
    method,
    headers: { ...admin, "CF-Connecting-IP": from, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

describe("a manual ban on a network", () => {
  for (const [network, inside, outside] of [
    ["10.0.0.0/8", ["10.0.0.1", "10.200.3.4", "10.255.255.255", "::ffff:10.9.9.9"], ["11.0.0.1", "9.255.255.255"]],
    ["2001:db8::/32", ["2001:db8::1", "2001:db8:ffff:1::9"], ["2001:db9::1", "2001:db7:ffff::1"]],
  ]) {
    test(`${network} refuses every address inside it, on every rule and on Sluice's own endpoints`, async () => {
      const put = await adminCall("PUT", `/bans/${encodeURIComponent(network)}`, { for: "10m", reason: "attack" });
      assert.equal(put.status, 200);
      const placed = await put.json();
      assert.equal(placed.banned, network);
      try {
        for (const ip of inside) {
          for (const path of ["/api/x", "/login"]) {
            const response = await from(ip, path);
            assert.notEqual(response.status, 200, `${ip} ${path}`);
            const problem = await response.json();
            assert.equal(problem.code, "banned", `${ip} ${path}`);
            assert.match(problem.detail, /attack/);
          }
          const health = await from(ip, "/_sluice/health");
          assert.equal(health.status, 429, `${ip} /health`);
          assert.equal((await health.json()).code, "banned");
          const decision = await from(ip, "/_sluice/v1/limit");
          assert.equal(decision.status, 429, `${ip} /v1/limit`);
        }
        for (const ip of outside) {
          assert.equal((await from(ip, "/api/x")).status, 200, ip);
          assert.equal((await from(ip, "/_sluice/health")).status, 200, ip);
        }
        const listed = await (await adminCall("GET", "/bans")).json();
        assert.ok(listed.bans.some((b) => b.key === network && b.source === "manual"), "listed");
      } finally {
        const lifted = await adminCall("DELETE", `/bans/${encodeURIComponent(network)}`);
        assert.equal(lifted.status, 200);
      }
      assert.equal((await from(inside[0], "/api/x")).status, 200, "lifted");
      assert.equal((await from(inside[0], "/_sluice/health")).status, 200, "lifted");
    });
  }

  test("another isolate learns a network ban from the hubs", async () => {
    const other = await sluice.worker("sluice-b");
    const fromOther = (ip) => other.fetch("http://sluice/api/x", { headers: { "CF-Connecting-IP": ip } });
    const put = await adminCall("PUT", `/bans/${encodeURIComponent("172.16.0.0/12")}`, { for: "10m" });
    assert.equal(put.status, 200);
    try {
      // Its first request starts its first report, whose answer carries
      // the manual bans.
      await eventually(async () => (await fromOther("172.31.0.1")).status === 429, 5_000, 100);
      assert.equal((await fromOther("172.32.0.1")).status, 200, "outside the network");
    } finally {
      await adminCall("DELETE", `/bans/${encodeURIComponent("172.16.0.0/12")}`);
    }
  });

  test("a network written with host bits, a bad prefix, or a key over 512 bytes is a 400 naming the key", async () => {
    for (const bad of ["10.0.0.1/8", "10.0.0.0/33", "2001:db8::1/32", "10.0.0.0/x", "k".repeat(513)]) {
      const response = await adminCall("PUT", `/bans/${encodeURIComponent(bad)}`, { for: "1m" });
      assert.equal(response.status, 400, bad);
      const problem = await response.json();
      assert.equal(problem.field, "key", bad);
    }
  });

  test("a ban that would cover the operator's own address is refused, so it cannot lock out the admin API", async () => {
    const response = await adminCall("PUT", `/bans/${encodeURIComponent("203.0.113.0/24")}`, { for: "1m" }, "203.0.113.77");
    assert.equal(response.status, 400);
    const problem = await response.json();
    assert.equal(problem.field, "key");
    assert.match(problem.detail, /203\.0\.113\.77/);
    assert.equal((await from("203.0.113.5", "/api/x")).status, 200, "nothing was banned");
  });
});

describe("a ban of one key on one rule", () => {
  const keyBan = (method, rule, key, body) =>
    adminCall(method, `/keys/${encodeURIComponent(rule)}/${encodeURIComponent(key)}/ban`, body);
  const search = (ip, apiKey) => from(ip, "/search", { "x-api-key": apiKey });

  test("bans that key on that rule only, never the client whose address it spells", async () => {
    // An attacker sends a victim's address as its API key.
    const victim = "10.3.3.3";
    const put = await keyBan("PUT", "search", victim, { for: "10m", reason: "key abuse" });
    assert.equal(put.status, 200);
    const placed = await put.json();
    assert.equal(placed.rule, "search");
    assert.equal(placed.key, victim);
    assert.equal(placed.object, `rule:search:${victim}`);
    assert.equal(placed.reason, "key abuse");
    assert.equal(placed.replaced, null);
    assert.ok(placed.until_ms > Date.now() + 590_000);

    for (const ip of ["198.51.100.7", "198.51.100.8"]) {
      const refused = await search(ip, victim);
      assert.equal(refused.status, 429, ip);
      const problem = await refused.json();
      assert.equal(problem.code, "banned");
      assert.match(problem.detail, /key abuse/);
      assert.ok(Number(refused.headers.get("retry-after")) > 590);
    }
    assert.equal((await search("198.51.100.7", "another-key")).status, 200, "other keys of the rule");
    assert.equal((await from(victim, "/api/x")).status, 200, "the client at that address, on other rules");
    assert.equal((await search(victim, "its-own-key")).status, 200, "the client at that address, on this rule");

    const state = await (await adminCall("GET", `/keys/search/${victim}`)).json();
    assert.equal(state.ban.reason, "key abuse");
    assert.equal(state.manual_ban, null);
    const listed = (await (await adminCall("GET", "/bans")).json()).bans;
    assert.ok(listed.some((b) => b.key === victim && b.source === "rule:search"), "listed under its rule");

    const again = await keyBan("PUT", "search", victim, { for: "1h" });
    assert.equal(again.status, 200);
    assert.equal((await again.json()).replaced.reason, "key abuse", "says it replaced one");

    const lifted = await keyBan("DELETE", "search", victim);
    assert.equal(lifted.status, 200);
    assert.equal((await lifted.json()).lifted.until_ms > Date.now(), true);
    assert.equal((await search("198.51.100.9", victim)).status, 200, "lifted");
    const listedAfter = (await (await adminCall("GET", "/bans")).json()).bans;
    assert.ok(!listedAfter.some((b) => b.key === victim && b.source === "rule:search"), "no longer listed");
    assert.equal((await keyBan("DELETE", "search", victim)).status, 404);
  });

  test("lifting a rule's own ban keeps the key's log", async () => {
    const ip = "198.51.100.30";
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await from(ip, "/login")).status);
    assert.deepEqual(statuses, [200, 429, 403]);
    const lifted = await keyBan("DELETE", "login", ip);
    assert.equal(lifted.status, 200);
    const after = await from(ip, "/login");
    assert.equal((await after.json()).code, "quota-exceeded", "the log still holds the admission");
  });

  test("a tiered rule's id bans the key in every tier", async () => {
    const put = await keyBan("PUT", "tiers", "shared-key", { for: "1m" });
    assert.equal(put.status, 200);
    const placed = await put.json();
    assert.deepEqual(placed.tiers.map((t) => t.object), ["rule:tiers.pro:shared-key", "rule:tiers.free:shared-key"]);
    const refused = await from("198.51.100.40", "/tiers", { "x-api-key": "shared-key" });
    assert.equal((await refused.json()).code, "banned");
    assert.equal((await keyBan("DELETE", "tiers.free", "shared-key")).status, 200);
    assert.equal((await from("198.51.100.40", "/tiers", { "x-api-key": "shared-key" })).status, 200);
  });

  test("validates the rule, the key and the body", async () => {
    const cases = [
      ["nope", "k", { for: "1m" }, 404, "rule"],
      ["sale", "*", { for: "1m" }, 400, "rule"],
      ["search", "k", { for: "forever" }, 400, "for"],
      ["search", "k", { for: "1m", reason: "r".repeat(201) }, 400, "reason"],
      ["search", "k", { for: "1m", why: "x" }, 400, "why"],
      ["search", "k".repeat(513), { for: "1m" }, 400, "key"],
    ];
    for (const [rule, key, body, status, field] of cases) {
      const response = await keyBan("PUT", rule, key, body);
      assert.equal(response.status, status, `${rule} ${field}`);
      assert.equal((await response.json()).field, field, `${rule} ${field}`);
    }
    const wrong = await adminCall("POST", "/keys/search/k/ban");
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "PUT, DELETE");
  });
});
