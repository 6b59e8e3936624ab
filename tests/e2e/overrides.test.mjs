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
    { id: "report", match: { path: "/report" }, key: "header:x-customer", concurrency: 2 },
    { id: "hot", match: { path: "/hot" }, key: "header:x-customer", limit: 20, window: "1m" },
    { id: "stock", match: { path: "/stock" }, scope: "global", split: 4, limit: 20, window: "1m" },
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

  test("after a quota of 20 is raised to 30, every answer announces q=30, from a block or not, split or not", async () => {
    const who = customer();
    const raised = [
      await override(who, { limit: 30, window: "1m" }).then((r) => r.status),
      await sluice.fetch("/_sluice/admin/keys/hot/" + who + "/override", {
        method: "PUT",
        headers: admin,
        body: JSON.stringify({ limit: 30, window: "1m" }),
      }).then((r) => r.status),
      await sluice.fetch("/_sluice/admin/rules/stock/override", {
        method: "PUT",
        headers: admin,
        body: JSON.stringify({ limit: 30 }),
      }).then((r) => r.status),
    ];
    assert.deepEqual(raised, [200, 200, 200]);
    for (const [path, name] of [["/hot", "hot"], ["/stock", "stock"]]) {
      // A hot key: after its first decisions, its answers come from the
      // isolate's admission blocks. A split quota's request may be refused
      // with room left in parts it did not try; its answer says q=30 too.
      let admitted = 0;
      for (let sent = 1; sent <= 30; sent++) {
        const answer = await sluice.fetch(path, { headers: { "X-Customer": who } });
        admitted += answer.status === 200 ? 1 : 0;
        assert.equal(answer.headers.get("ratelimit-policy"), `"${name}";q=30;w=60`, `${path} #${sent}`);
        const r = Number(/;r=(\d+)/.exec(answer.headers.get("ratelimit"))[1]);
        assert.ok(r <= 30 - admitted, `${path} #${sent}: r=${r} is more than what is left`);
      }
      assert.ok(admitted > 20, `${path}: ${admitted} admitted, more than the config's 20`);
    }
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
      [`/_sluice/admin/keys/nope/${who}/override`, 404, "rule", /no rule "nope"/],
      [`/_sluice/admin/keys/plans.gold/${who}/override`, 404, "rule", /plans\.pro, plans\.free, plans\.anonymous/],
      [`/_sluice/admin/keys/plans/${who}/override`, 400, "rule", /override one of plans\.pro, plans\.free, plans\.anonymous/],
      [`/_sluice/admin/keys/sale/*/override`, 400, "rule", /global/],
      [`/_sluice/admin/keys/report/${who}/override`, 400, "rule", /only concurrency/],
      [`/_sluice/admin/keys/_api/${who}/override`, 400, "rule", /decision-API/],
      [`/_sluice/admin/keys/api/${"k".repeat(513)}/override`, 400, "key", /at most 512 bytes/],
    ];
    for (const [path, status, field, detail] of other) {
      const response = await sluice.fetch(path, { method: "PUT", headers: admin, body: JSON.stringify({ limit: 5, window: "1m" }) });
      assert.equal(response.status, status, path.slice(0, 60));
      const problem = await response.json();
      assert.equal(problem.field, field, path.slice(0, 60));
      assert.match(problem.detail, detail);
    }
    const concurrency = await (await sluice.fetch(`/_sluice/admin/keys/report/${who}`, { headers: admin })).json();
    assert.equal(concurrency.override, null, "nothing was set on the concurrency-only rule");
    const noToken = await sluice.fetch(`/_sluice/admin/keys/api/${who}/override`, { method: "PUT", body: "{}" });
    assert.equal(noToken.status, 401);
  });

  test("the policies form names its policies as the config does, adds its own, and keeps the rule's it leaves out", async () => {
    const who = customer();
    const put = await override(who, { policies: [{ limit: 5, window: "1m" }, { name: "burst", limit: 1, window: "10s" }] });
    assert.equal(put.status, 400, "several policies each need a name");
    assert.equal((await put.json()).field, "policies[0].name");
    const named = await override(who, { policies: [{ name: "burst", limit: 1, window: "10s" }] });
    assert.equal(named.status, 200);
    const first = await call(who);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("ratelimit-policy"), '"api";q=2;w=60, "api.burst";q=1;w=10', "the rule's 2 a minute stays");
    const refused = await call(who);
    assert.equal(refused.status, 429);
    assert.deepEqual((await refused.json())["violated-policies"], ["api.burst"]);
    const state = await (await sluice.fetch(`/_sluice/admin/keys/api/${who}`, { headers: admin })).json();
    assert.deepEqual(state.slots.map((s) => [s.policy, s.limit, s.used]), [["api", 2, 1], ["api.burst", 1, 1]]);
  });

  test("an override's text says what it does: a window or algorithm stays the rule's", async () => {
    const response = await override(customer(), { policies: [{ limit: 5, window: "1h" }] });
    assert.equal(response.status, 400);
    const problem = await response.json();
    assert.equal(problem.field, "window");
    assert.match(problem.detail, /an override changes its limit, or adds a policy under another name/);
  });
});

describe("the admin key view after a config change", () => {
  test("shows the limits the config sets now, not those the key stored", async () => {
    const persisted = tempDir();
    const rule = (limit) => ({
      origin: "demo",
      rules: [{ id: "api", match: { path: "/api/*" }, key: "header:x-customer", limit, window: "1m" }],
    });
    let sluice = await Sluice.start({ sluice: rule(10), persist: persisted.dir, secrets: { ADMIN_TOKEN } });
    try {
      const who = customer();
      const call = () => sluice.fetch("/api/x", { headers: { "X-Customer": who } });
      const first = Date.now();
      assert.equal((await call()).status, 200);
      assert.equal((await call()).status, 200);
      await sluice.stop();
      sluice = await Sluice.start({ sluice: rule(3), persist: persisted.dir, secrets: { ADMIN_TOKEN } });
      const view = async (key) => (await (await sluice.fetch(`/_sluice/admin/keys/api/${key}`, { headers: admin })).json()).slots;
      const limits = (slots) => slots.map((s) => [s.policy, s.limit, s.used, s.remaining]);
      assert.deepEqual(limits(await view(who)), [["api", 3, 2, 1]], "the config's 3, with the two admissions logged under 10");
      assert.deepEqual(limits(await view(customer())), [["api", 3, 0, 3]], "a key with no state shows the limit in force");
      const put = await sluice.fetch(`/_sluice/admin/keys/api/${who}/override`, {
        method: "PUT",
        headers: { ...admin, "content-type": "application/json" },
        body: JSON.stringify({ limit: 5, window: "1m" }),
      });
      assert.equal(put.status, 200);
      assert.deepEqual(limits(await view(who)), [["api", 5, 2, 3]], "or the override's");
      // t counts down from the first admission, a restart ago: 60 only if
      // all this took under a second.
      const [, t] = (await call()).headers.get("ratelimit").match(/^"api";r=2;t=(\d+)$/) ?? [];
      const elapsed = Math.ceil((Date.now() - first) / 1000);
      assert.ok(Number(t) <= 60 && Number(t) >= 60 - elapsed, `as the next decision reads it: t=${t} after ${elapsed} s`);
    } finally {
      await sluice.stop();
      persisted.remove();
    }
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
