// Limits that change without a redeploy, end to end on workerd: per-key
// overrides through the admin API, kept in the key's own object, and plan
// tiers chosen by a JWT claim.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { Sluice, tempDir } from "./harness.mjs";

const ADMIN_TOKEN = "overrides-admin-token-0123456789abcdef";
const SECRET = "overrides-jwt-secret-0123456789abcdef";
const admin = { Authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };

function sign(claims) {
  const part = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const signed = `${part({ alg: "HS256", typ: "JWT" })}.${part(claims)}`;
  return `${signed}.${createHmac("sha256", SECRET).update(signed).digest("base64url")}`;
}
const hour = () => Math.floor(Date.now() / 1000) + 3600;

const config = {
  origin: "demo",
  jwt: { secret: "JWT_SECRET" },
  rules: [
    { id: "api", match: { path: "/api/*" }, key: "header:x-customer", limit: 2, window: "1m" },
    {
      id: "plans",
      match: { path: "/plans/*" },
      tiers: [
        { name: "pro", when: { claim: "plan", in: ["pro", "team"] }, limit: 5, window: "1m" },
        { name: "free", when: "registered", limit: 2, window: "1m" },
        { name: "anonymous", when: "anonymous", limit: 1, window: "1m" },
      ],
    },
    { id: "sale", match: { path: "/sale" }, scope: "global", limit: 10, window: "1m" },
  ],
};

let n = 0;
const customer = () => `acme-${Date.now()}-${++n}`;

describe("per-key overrides", () => {
  let sluice;
  let persisted;
  before(async () => {
    persisted = tempDir();
    sluice = await Sluice.start({ sluice: config, persist: persisted.dir, secrets: { ADMIN_TOKEN, JWT_SECRET: SECRET } });
  });
  after(async () => {
    await sluice?.stop();
    persisted?.remove();
  });

  const call = (who) => sluice.fetch("/api/x", { headers: { "X-Customer": who } });
  const override = (who, body, method = "PUT") =>
    sluice.fetch(`/_sluice/admin/keys/api/${encodeURIComponent(who)}/override`, {
      method,
      headers: admin,
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  test("an override applies from the next decision, counts earlier admissions, shows, and is lifted", async () => {
    const who = customer();
    assert.equal((await call(who)).status, 200);
    assert.equal((await call(who)).status, 200);
    assert.equal((await call(who)).status, 429);
    const put = await override(who, { limit: 4, window: "1m", reason: "launch week" });
    assert.equal(put.status, 200);
    assert.equal((await put.json()).override.policies[0].limit, 4);
    const third = await call(who);
    assert.equal(third.status, 200, "the refusal cached before the override is forgotten");
    assert.equal(third.headers.get("ratelimit-policy"), '"api";q=4;w=60');
    assert.equal((await call(who)).status, 200);
    assert.equal((await call(who)).status, 429, "two earlier admissions count against the new limit");
    const state = await (await sluice.fetch(`/_sluice/admin/keys/api/${who}`, { headers: admin })).json();
    assert.equal(state.override.reason, "launch week");
    assert.equal(state.override.source, "admin");
    assert.equal(state.override.until_ms, null);
    assert.equal((await override(who, undefined, "DELETE")).status, 200);
    assert.equal((await override(who, undefined, "DELETE")).status, 404, "nothing left to lift");
    const after = await (await sluice.fetch(`/_sluice/admin/keys/api/${who}`, { headers: admin })).json();
    assert.equal(after.override, null);
  });

  test("unlimited admits everything and sends no RateLimit fields; it lapses after `for`", async () => {
    const who = customer();
    assert.equal((await override(who, { unlimited: true, for: "1500ms" })).status, 200);
    for (let i = 0; i < 6; i++) {
      const response = await call(who);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("ratelimit"), null);
    }
    await new Promise((resolve) => setTimeout(resolve, 1600));
    // The rule's limit is back; nothing admitted while unlimited was logged.
    assert.equal((await call(who)).status, 200);
    assert.equal((await call(who)).status, 200);
    assert.equal((await call(who)).status, 429);
  });

  test("an override on a key with no state costs one object and survives a restart", async () => {
    const who = customer();
    assert.equal((await override(who, { limit: 1, window: "1m" })).status, 200);
    await sluice.stop();
    sluice = await Sluice.start({ sluice: config, persist: persisted.dir, secrets: { ADMIN_TOKEN, JWT_SECRET: SECRET } });
    assert.equal((await call(who)).status, 200);
    assert.equal((await call(who)).status, 429, "the override's limit of 1 holds after a restart");
  });

  test("bad bodies and routes are refused, naming the field, and change nothing", async () => {
    const who = customer();
    for (const [body, field] of [
      [{ limit: -1, window: "1m" }, "limit"],
      [{ limit: 5, window: "0s" }, "window"],
      [{ limit: 5, window: "30s" }, "window"],
      [{ limit: 5, window: "1m", algorithm: "fixed_window" }, "algorithm"],
      [{ limit: "5", window: "1m" }, "limit"],
      [{ limit: 5, window: "1m", colour: "red" }, "colour"],
      [{ limit: 5 }, "window"],
      [{ unlimited: true, limit: 5, window: "1m" }, "unlimited"],
      [{ limit: 5, window: "1m", for: "forever" }, "for"],
      [{ policies: [{ name: "x", limit: 1, window: "1s" }, { limit: 2, window: "1s" }] }, "policies[1].name"],
      [[1, 2], "body"],
    ]) {
      const response = await override(who, body);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.equal((await response.json()).field, field, JSON.stringify(body));
    }
    const state = await (await sluice.fetch(`/_sluice/admin/keys/api/${who}`, { headers: admin })).json();
    assert.equal(state.override, null);
    const other = [
      [`/_sluice/admin/keys/nope/${who}/override`, 404, "rule"],
      [`/_sluice/admin/keys/sale/*/override`, 400, "rule"],
      [`/_sluice/admin/keys/_api/${who}/override`, 400, "rule"],
      [`/_sluice/admin/keys/api/${"k".repeat(513)}/override`, 400, "key"],
    ];
    for (const [path, status, field] of other) {
      const response = await sluice.fetch(path, { method: "PUT", headers: admin, body: JSON.stringify({ limit: 5, window: "1m" }) });
      assert.equal(response.status, status, path.slice(0, 60));
      assert.equal((await response.json()).field, field);
    }
    const noToken = await sluice.fetch(`/_sluice/admin/keys/api/${who}/override`, { method: "PUT", body: "{}" });
    assert.equal(noToken.status, 401);
  });

  test("the policies form names its policies as the config does, and replaces the rule's", async () => {
    const who = customer();
    const put = await override(who, { policies: [{ limit: 5, window: "1m" }, { name: "burst", limit: 1, window: "10s" }] });
    assert.equal(put.status, 400, "several policies each need a name");
    assert.equal((await put.json()).field, "policies[0].name");
    const named = await override(who, { policies: [{ name: "burst", limit: 1, window: "10s" }] });
    assert.equal(named.status, 200);
    assert.equal((await call(who)).status, 200);
    const refused = await call(who);
    assert.equal(refused.status, 429);
    assert.deepEqual((await refused.json())["violated-policies"], ["api.burst"]);
  });
});

describe("plan tiers from a JWT claim", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN, JWT_SECRET: SECRET } });
  });
  after(() => sluice?.stop());

  const as = (claims) => ({ headers: { Authorization: `Bearer ${sign({ exp: hour(), ...claims })}`, "CF-Connecting-IP": "198.18.3.3" } });

  test("each plan gets its tier, and a caller whose plan changes switches tier", async () => {
    const sub = customer();
    const free = await sluice.fetch("/plans/x", as({ sub }));
    assert.equal(free.headers.get("ratelimit-policy"), '"plans.free";q=2;w=60');
    const pro = await sluice.fetch("/plans/x", as({ sub, plan: "pro" }));
    assert.equal(pro.headers.get("ratelimit-policy"), '"plans.pro";q=5;w=60');
    const team = await sluice.fetch("/plans/x", as({ sub, plan: "team" }));
    assert.equal(team.headers.get("ratelimit"), '"plans.pro";r=3;t=60', "team shares the pro tier's state");
    const anonymous = await sluice.fetch("/plans/x", { headers: { "CF-Connecting-IP": "198.18.3.4" } });
    assert.equal(anonymous.headers.get("ratelimit-policy"), '"plans.anonymous";q=1;w=60');
  });
});
