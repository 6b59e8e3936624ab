// Operators' bans over HTTP on workerd: a manual ban on an address or a
// network (IPv4 and IPv6 CIDR), on every rule and on Sluice's own
// endpoints; and a ban of one key on one rule, held in that key's object.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, API_TOKEN, eventually, sluiceWorkerOptions } from "./harness.mjs";

const TOKEN = "bans-admin-token-for-e2e-0123456789-abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

const config = {
  rules: [
    { id: "api", match: { path: "/api/*" }, limit: 100, window: "1m" },
    { id: "search", match: { path: "/search" }, key: "header:x-api-key", limit: 100, window: "1m" },
    {
      id: "login", match: { path: "/login" }, limit: 1, window: "1m",
      ban: { after: 2, within: "1m", for: "10m", status: 403 },
    },
  ],
};

/** A second isolate of Sluice's worker, bound to the same objects. */
function secondIsolate() {
  const options = sluiceWorkerOptions({ ADMIN_TOKEN: TOKEN, API_TOKEN, SLUICE: { origin: "demo", ...config } });
  const durableObjects = Object.fromEntries(
    Object.entries(options.durableObjects).map(([binding, target]) => [binding, { ...target, scriptName: "sluice" }]),
  );
  delete options.assets;
  return { ...options, name: "sluice-b", durableObjects };
}

let sluice;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN, API_TOKEN }, workers: [secondIsolate()] });
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

  test("a network written with host bits, or a bad prefix, is a 400 naming the key", async () => {
    for (const bad of ["10.0.0.1/8", "10.0.0.0/33", "2001:db8::1/32", "10.0.0.0/x"]) {
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
