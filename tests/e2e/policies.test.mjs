// Policies for real traffic, end to end on workerd: tiers with JWTs, several
// windows at once, per-user actions, escalating bans and the isolate's
// refusal cache, allow and deny lists, IPv6 grouping, shadow mode.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { Sluice, freshKey, eventually, sleepUntil } from "./harness.mjs";

const SECRET = "sluice-e2e-secret-0123456789abcdef";

/** An HS256 JWT, signed the way any issuer would. */
function sign(claims, secret = SECRET) {
  const part = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const signed = `${part({ alg: "HS256", typ: "JWT" })}.${part(claims)}`;
  return `${signed}.${createHmac("sha256", secret).update(signed).digest("base64url")}`;
}

const hour = () => Math.floor(Date.now() / 1000) + 3600;
const bearer = (token) => ({ Authorization: `Bearer ${token}` });
let counter = 0;
const freshIp = () => {
  counter += 1;
  return `198.18.${Math.floor(counter / 250)}.${(counter % 250) + 1}`;
};

const tiers = [
  { name: "registered", when: "registered", limit: 100, window: "1m" },
  { name: "anonymous", when: "anonymous", limit: 10, window: "1m" },
];

const config = {
  jwt: { secret: "JWT_SECRET" },
  allow: ["10.9.0.0/16", "2001:db8:a::/48"],
  deny: ["192.0.2.0/24", "2001:db8:bad::/48"],
  rules: [
    { id: "api", match: { path: "/api/*" }, tiers },
    {
      id: "search", match: { path: "/search" },
      policies: [{ name: "second", limit: 10, window: "1s" }, { name: "day", limit: 1000, window: "1d" }],
    },
    {
      id: "quick", match: { path: "/quick" },
      policies: [{ name: "second", limit: 5, window: "1s" }, { name: "day", limit: 12, window: "1d" }],
    },
    {
      id: "reply", match: { path: "/threads/:id/reply", methods: ["POST"] },
      action: "reply", key: "{sub}:{action}", limit: 5, window: "10s",
    },
    {
      id: "login", match: { path: "/login" }, limit: 1, window: "500ms",
      ban: { after: 3, within: "10s", for: "1s", multiplier: 2, max: "4s" },
    },
    {
      id: "flood", match: { path: "/flood" }, limit: 1, window: "1m",
      ban: { after: 2, within: "1m", for: "1m", status: 403 },
    },
    { id: "v6", match: { path: "/v6" }, limit: 2, window: "1m", deny: ["203.0.113.66"] },
    { id: "shadow", match: { path: "/shadow" }, limit: 2, window: "1m", shadow: true },
  ],
};

let sluice;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { JWT_SECRET: SECRET } });
});
after(() => sluice?.stop());

const get = (path, headers = {}) => sluice.fetch(path, { headers: { "CF-Connecting-IP": freshIp(), ...headers } });

/** Sends `n` requests one after another; returns their statuses. */
async function statuses(n, send) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const response = await send();
    await response.arrayBuffer();
    out.push(response.status);
  }
  return out;
}

describe("tiers: registered callers 100 a minute, anonymous callers 10", () => {
  test("a valid HS256 token gets the registered tier, keyed by sub", async () => {
    const token = sign({ sub: freshKey("alice"), exp: hour() });
    const first = await get("/api/items", bearer(token));
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("ratelimit-policy"), '"api.registered";q=100;w=60');
    assert.equal(first.headers.get("ratelimit"), '"api.registered";r=99;t=60');
    // From a changing IP: the key is the subject, not the address.
    const rest = await statuses(99, () => get("/api/items", bearer(token)));
    assert.deepEqual(new Set(rest), new Set([200]));
    const refused = await get("/api/items", bearer(token));
    assert.equal(refused.status, 429);
    assert.deepEqual((await refused.json())["violated-policies"], ["api.registered"]);
  });

  test("no token gets the anonymous tier, keyed by IP", async () => {
    const ip = freshIp();
    const send = () => sluice.fetch("/api/items", { headers: { "CF-Connecting-IP": ip } });
    const first = await send();
    assert.equal(first.headers.get("ratelimit-policy"), '"api.anonymous";q=10;w=60');
    assert.deepEqual(await statuses(10, send), [...Array(9).fill(200), 429]);
  });

  test("a forged or expired token is never treated as registered", async () => {
    for (const token of [
      sign({ sub: "mallory", exp: hour() }, "not-the-secret"),
      sign({ sub: "mallory", exp: Math.floor(Date.now() / 1000) - 60 }),
      `${sign({ sub: "mallory" }).slice(0, -4)}AAAA`,
      "not.a.jwt",
    ]) {
      const response = await get("/api/items", bearer(token));
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("ratelimit-policy"), '"api.anonymous";q=10;w=60', token);
    }
  });
});

test("a config naming a secret that is not set answers 500 naming the field", async () => {
  // Only the secrets a test passes reach the worker: a JWT_SECRET in the
  // developer's .dev.vars, .env or environment must not fill this gap.
  const unset = await Sluice.start({ sluice: config });
  try {
    const response = await unset.fetch("/api/x", { headers: { "CF-Connecting-IP": freshIp() } });
    assert.equal(response.status, 500);
    const problem = await response.json();
    assert.equal(problem.code, "invalid-config");
    assert.equal(problem.field, "SLUICE.jwt.secret");
  } finally {
    await unset.stop();
  }
});

test("an invalid token can be refused with 401 instead", async () => {
  const strict = await Sluice.start({
    sluice: { ...config, jwt: { secret: "JWT_SECRET", on_invalid: "reject" } },
    secrets: { JWT_SECRET: SECRET },
  });
  try {
    const forged = await strict.fetch("/api/x", {
      headers: { "CF-Connecting-IP": freshIp(), ...bearer(sign({ sub: "m" }, "wrong")) },
    });
    assert.equal(forged.status, 401);
    assert.match(forged.headers.get("www-authenticate"), /invalid_token/);
    const problem = await forged.json();
    assert.equal(problem.code, "invalid-token");
    assert.ok(!problem.detail.includes("wrong"), "the detail does not echo secrets");
    const valid = await strict.fetch("/api/x", {
      headers: { "CF-Connecting-IP": freshIp(), ...bearer(sign({ sub: "ok", exp: hour() })) },
    });
    assert.equal(valid.status, 200);
    assert.equal(valid.headers.get("ratelimit-policy"), '"api.registered";q=100;w=60');
  } finally {
    await strict.stop();
  }
});

test("a missing JWT secret is a configuration error naming the field", async () => {
  const unset = await Sluice.start({ sluice: config });
  try {
    const response = await unset.fetch("/anything");
    assert.equal(response.status, 500);
    assert.equal((await response.json()).field, "SLUICE.jwt.secret");
  } finally {
    await unset.stop();
  }
});

describe("several windows at once, all or nothing", () => {
  test("10 per second and 1 000 per day", async () => {
    const ip = freshIp();
    const send = () => sluice.fetch("/search", { headers: { "CF-Connecting-IP": ip } });
    const start = Date.now();
    const first = await send();
    assert.equal(first.headers.get("ratelimit-policy"), '"search.second";q=10;w=1, "search.day";q=1000;w=86400');
    assert.match(first.headers.get("ratelimit"), /^"search.second";r=9;t=1, "search.day";r=999;t=86400$/);
    assert.deepEqual(await statuses(9, send), Array(9).fill(200));
    const refused = await send();
    assert.equal(refused.status, 429);
    assert.deepEqual((await refused.json())["violated-policies"], ["search.second"]);
    assert.match(refused.headers.get("ratelimit"), /"search.day";r=990;/, "the refusal took nothing from the day");
    await sleepUntil(start + 1100);
    const again = await send();
    assert.equal(again.status, 200);
    assert.match(again.headers.get("ratelimit"), /"search.day";r=989;/);
  });

  test("the longer window refuses once it is spent (5 per second, 12 per day)", async () => {
    const ip = freshIp();
    const send = () => sluice.fetch("/quick", { headers: { "CF-Connecting-IP": ip } });
    const start = Date.now();
    assert.deepEqual(await statuses(6, send), [200, 200, 200, 200, 200, 429]);
    await sleepUntil(start + 1100);
    assert.deepEqual(await statuses(5, send), Array(5).fill(200));
    await sleepUntil(start + 2200);
    assert.deepEqual(await statuses(2, send), [200, 200]);
    const refused = await send();
    assert.equal(refused.status, 429);
    assert.deepEqual((await refused.json())["violated-policies"], ["quick.day"]);
    assert.ok(Number(refused.headers.get("retry-after")) > 86_000);
  });
});

test("per-user actions: at most 5 replies per 10 s per user", async () => {
  const alice = sign({ sub: freshKey("alice"), exp: hour() });
  const bob = sign({ sub: freshKey("bob"), exp: hour() });
  const reply = (token, thread) => sluice.fetch(`/threads/${thread}/reply`, { method: "POST", headers: bearer(token) });
  const first = await reply(alice, 1);
  const echo = await first.json();
  assert.match(echo.key, /^alice-.*:reply$/);
  assert.deepEqual(await statuses(5, () => reply(alice, 1)), [200, 200, 200, 200, 429]);
  assert.equal((await reply(alice, 2)).status, 429, "another thread, the same user and action");
  assert.equal((await reply(bob, 1)).status, 200, "another user");
  const anonymous = await sluice.fetch("/threads/1/reply", { method: "POST" });
  assert.equal(anonymous.status, 400, "no subject, no key");
});

test("a ban starts after the threshold, escalates on the second offence, and ends", async () => {
  const ip = freshIp();
  const send = () => sluice.fetch("/login", { headers: { "CF-Connecting-IP": ip } });
  const offend = async () => {
    assert.equal((await send()).status, 200);
    const refusals = [];
    for (let i = 0; i < 3; i++) refusals.push(await send());
    const bodies = await Promise.all(refusals.map((r) => r.json()));
    assert.deepEqual(bodies.map((b) => b.code), ["quota-exceeded", "quota-exceeded", "banned"]);
    return { response: refusals[2], problem: bodies[2] };
  };
  const first = await offend();
  assert.equal(first.response.status, 429);
  assert.equal(first.problem.offences, 1);
  assert.equal(first.response.headers.get("retry-after"), "1");
  const until = Date.parse(first.problem["banned-until"]);
  assert.ok(until > Date.now() && until <= Date.now() + 1000, first.problem["banned-until"]);
  // Still banned once the window itself would have room again.
  await sleepUntil(Date.now() + 600);
  const banned = await send();
  assert.equal(banned.status, 429);
  assert.equal((await banned.json()).code, "banned");
  await eventually(async () => (await send()).status !== 429 || null, 5000);
  // That probe was admitted; let its window pass before offending again.
  await sleepUntil(Date.now() + 600);

  const second = await offend();
  assert.equal(second.problem.offences, 2);
  assert.equal(second.response.headers.get("retry-after"), "2");
  const secondUntil = Date.parse(second.problem["banned-until"]);
  assert.ok(secondUntil - Date.now() > 1000 && secondUntil - Date.now() <= 2000);
  await eventually(async () => (await send()).status !== 429 || null, 5000);
});

test("a flood of 1 000 requests from a banned key barely reaches its Durable Object", async () => {
  const ip = freshIp();
  const send = () => sluice.fetch("/flood", { headers: { "CF-Connecting-IP": ip } });
  assert.deepEqual(await statuses(3, send), [200, 429, 403], "banned (403) at the second refusal");
  const object = `rule:flood:${ip}`;
  const before = (await sluice.inspect(object)).checks;
  for (let batch = 0; batch < 20; batch++) {
    const answers = await Promise.all(Array.from({ length: 50 }, () => send()));
    for (const answer of answers) {
      assert.equal(answer.status, 403);
      // The ban's time left: at most its minute, however long the flood takes.
      const left = Number(answer.headers.get("retry-after"));
      assert.ok(left > 0 && left <= 60, `retry-after ${left}`);
      await answer.arrayBuffer();
    }
  }
  const reached = (await sluice.inspect(object)).checks - before;
  assert.ok(reached <= 3, `the object was reached ${reached} times by 1 000 requests`);
});

describe("allow and deny lists", () => {
  test("allow-listed IPv4 and IPv6 callers skip the rule", async () => {
    for (const ip of ["10.9.1.1", "2001:db8:a:1::7"]) {
      const send = () => sluice.fetch("/v6", { headers: { "CF-Connecting-IP": ip } });
      for (let i = 0; i < 4; i++) {
        const response = await send();
        assert.equal(response.status, 200, ip);
        assert.equal(response.headers.get("ratelimit"), null, "the rule did not apply");
      }
    }
  });

  test("deny-listed callers get 403 before anything else, on every path", async () => {
    for (const [ip, path] of [["192.0.2.77", "/v6"], ["192.0.2.1", "/elsewhere"], ["2001:db8:bad:9::1", "/api/x"]]) {
      const response = await sluice.fetch(path, { headers: { "CF-Connecting-IP": ip } });
      assert.equal(response.status, 403, `${ip} ${path}`);
      assert.equal(response.headers.get("content-type"), "application/problem+json");
      assert.equal((await response.json()).code, "denied");
    }
  });

  test("a rule's own deny list applies to that rule only", async () => {
    const ip = "203.0.113.66";
    assert.equal((await sluice.fetch("/v6", { headers: { "CF-Connecting-IP": ip } })).status, 403);
    assert.equal((await sluice.fetch("/elsewhere", { headers: { "CF-Connecting-IP": ip } })).status, 200);
  });
});

test("IPv6 clients are grouped by their /64", async () => {
  const send = (ip) => sluice.fetch("/v6", { headers: { "CF-Connecting-IP": ip } }).then((r) => r.status);
  assert.equal(await send("2001:db8:1:2::1"), 200);
  assert.equal(await send("2001:db8:1:2:aaaa::2"), 200);
  assert.equal(await send("2001:db8:1:2:ffff:ffff:ffff:ffff"), 429, "a third address in the same /64");
  assert.equal(await send("2001:db8:1:3::1"), 200, "the next /64 is another client");
});

test("shadow mode decides and records but refuses nothing", async () => {
  const ip = freshIp();
  const send = () => sluice.fetch("/shadow", { headers: { "CF-Connecting-IP": ip } });
  const verdicts = [];
  for (let i = 0; i < 4; i++) {
    const response = await send();
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("ratelimit"), null);
    verdicts.push(response.headers.get("sluice-shadow"));
  }
  assert.deepEqual(verdicts.slice(0, 2), ["allow", "allow"]);
  // The third request would be told the first place's moment, the fourth
  // the second's, a little jitter later (spread retries).
  for (const verdict of verdicts.slice(2)) assert.match(verdict, /^refuse;violated="shadow";retry=(59|60|61)$/);
  assert.match(sluice.output(), /shadow rule shadow would refuse/);
});
