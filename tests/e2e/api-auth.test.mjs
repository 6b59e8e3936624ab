// Who may call the decision, throttle and lease APIs: with the API_TOKEN
// secret, only callers that present it; without it, nobody (the routes do
// not exist), unless the config says `api = "open"`. Every request here is
// sent with plain fetch, so each test controls its Authorization exactly.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, API_TOKEN, fetchAlone } from "./harness.mjs";

const ADMIN_TOKEN = "admin-token-for-api-auth-0123456789abc";

/** Every route under /v1 for `key`, with the lease `id` for the two that
 * take one, and what it answers when the call is let through. */
const routes = (key, id = "0123456789abcdef0123456789abcdef") => [
  { name: "limit", method: "POST", path: "/_sluice/v1/limit", body: { key, limit: 1, window_ms: 60_000 } },
  { name: "limit, policies", method: "POST", path: "/_sluice/v1/limit", body: { key, policies: [{ name: "p", limit: 1, window_ms: 60_000 }] } },
  { name: "throttle", method: "POST", path: "/_sluice/v1/throttle", body: { key, max_burst: 0, count: 1, period_s: 60 } },
  { name: "acquire", method: "POST", path: "/_sluice/v1/leases", body: { key, limit: 1, ttl_ms: 60_000 } },
  { name: "renew", method: "POST", path: `/_sluice/v1/leases/${id}/renew?key=${encodeURIComponent(key)}`, body: { ttl_ms: 60_000 } },
  { name: "release", method: "DELETE", path: `/_sluice/v1/leases/${id}?key=${encodeURIComponent(key)}` },
];

/** Sends `route` with `authorization`, over a connection of its own: a
 * refused call's body is never read, and the local runtime then closes the
 * connection after its 401, sometimes just as a client would reuse it for
 * the next call (about 1 in 150 here). */
const send = (sluice, route, authorization) => {
  const headers = { "content-type": "application/json" };
  if (authorization !== undefined) headers.authorization = authorization;
  const body = route.body === undefined ? undefined : JSON.stringify(route.body);
  return fetchAlone(sluice.base + route.path, { method: route.method, headers, body });
};

/** Authorization values that must not pass (undefined: no header at all). */
const WRONG = [
  undefined,
  "",
  "Bearer",
  "Bearer ",
  `Bearer ${API_TOKEN.slice(0, -1)}`,
  `Bearer ${API_TOKEN}x`,
  `Bearer ${API_TOKEN.slice(1)}`,
  `Basic ${API_TOKEN}`,
  `Token ${API_TOKEN}`,
  API_TOKEN,
  `Bearer  ${API_TOKEN}`,
  `Bearer ${ADMIN_TOKEN}`,
];

const RIGHT = `Bearer ${API_TOKEN}`;

async function assertUnauthorized(response, label) {
  assert.equal(response.status, 401, label);
  assert.match(response.headers.get("content-type"), /^application\/problem\+json/, label);
  assert.equal(response.headers.get("www-authenticate"), 'Bearer realm="sluice-api"', label);
  const problem = await response.json();
  assert.equal(problem.code, "unauthorized", label);
  assert.ok(!JSON.stringify(problem).includes(API_TOKEN.slice(0, 12)), "the token is not quoted");
}

describe("with the API_TOKEN secret", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({ sluice: { rules: [] }, secrets: { API_TOKEN, ADMIN_TOKEN } });
  });
  after(() => sluice?.stop());

  test("every route refuses every wrong token with 401 and changes nothing", async () => {
    const key = freshKey("auth");
    for (const route of routes(key)) {
      for (const authorization of WRONG) {
        await assertUnauthorized(await send(sluice, route, authorization), `${route.name}, ${JSON.stringify(authorization)}`);
      }
    }
    // Nothing above was recorded: each limit of 1 still has its one unit,
    // and the lock of 1 is free.
    const [limit, policies, throttle, acquire] = routes(key);
    assert.equal((await (await send(sluice, limit, RIGHT)).json()).allowed, true);
    assert.equal((await (await send(sluice, policies, RIGHT)).json()).allowed, true);
    assert.equal((await (await send(sluice, throttle, RIGHT)).json()).limited, false);
    const lease = await (await send(sluice, acquire, RIGHT)).json();
    assert.equal(lease.granted, true);

    const [, , , , renew, release] = routes(key, lease.lease_id);
    for (const authorization of WRONG) {
      await assertUnauthorized(await send(sluice, renew, authorization), `renew, ${JSON.stringify(authorization)}`);
      await assertUnauthorized(await send(sluice, release, authorization), `release, ${JSON.stringify(authorization)}`);
    }
    const renewed = await send(sluice, renew, RIGHT);
    assert.equal(renewed.status, 200);
    assert.equal((await renewed.json()).lease_id, lease.lease_id);
    const released = await send(sluice, release, RIGHT);
    assert.equal(released.status, 200, "the wrong-token DELETEs released nothing");
    assert.equal((await released.json()).released, true);
  });

  test("the right token is let through on every route (the scheme in any case)", async () => {
    const key = freshKey("auth-ok");
    const [limit, policies, throttle, acquire] = routes(key);
    for (const route of [limit, policies, throttle, acquire]) {
      const response = await send(sluice, route, `bearer ${API_TOKEN}`);
      assert.equal(response.status, 200, route.name);
    }
  });

  test("a caller without the token learns nothing about the routes", async () => {
    const probes = [
      { method: "GET", path: "/_sluice/v1/limit" },
      { method: "POST", path: "/_sluice/v1/nothing-here" },
      { method: "POST", path: "/_sluice/v1" },
      { method: "PUT", path: "/_sluice/v1/leases/x" },
    ];
    for (const probe of probes) {
      await assertUnauthorized(await send(sluice, probe), `${probe.method} ${probe.path}`);
    }
    assert.equal((await send(sluice, probes[0], RIGHT)).status, 405);
    assert.equal((await send(sluice, probes[1], RIGHT)).status, 404);
  });

  test("the API token opens neither the admin API nor anything else; health is public", async () => {
    const stats = await fetch(`${sluice.base}/_sluice/admin/stats`, {
      headers: { authorization: RIGHT, "cf-connecting-ip": "203.0.113.77" },
    });
    assert.equal(stats.status, 401);
    const health = await fetch(`${sluice.base}/_sluice/health`);
    assert.equal(health.status, 200);
  });
});

test("without the secret the API does not exist: the repository's own wrangler.toml", async () => {
  const sluice = await Sluice.start();
  try {
    const key = freshKey("closed");
    for (const route of routes(key)) {
      for (const authorization of [undefined, RIGHT]) {
        const response = await send(sluice, route, authorization);
        assert.equal(response.status, 404, route.name);
        assert.equal((await response.json()).code, "not-found");
      }
    }
    assert.equal((await fetch(`${sluice.base}/_sluice/health`)).status, 200);
    assert.equal((await fetch(`${sluice.base}/api/hello`, { headers: { "cf-connecting-ip": "203.0.113.8" } })).status, 200);
  } finally {
    await sluice.stop();
  }
});

test('api = "open" serves the API without a token, and a set token still binds', async () => {
  const open = await Sluice.start({ sluice: { api: "open", rules: [] } });
  try {
    const key = freshKey("open");
    const [limit, , throttle, acquire] = routes(key);
    for (const route of [limit, throttle, acquire]) {
      assert.equal((await send(open, route)).status, 200, route.name);
    }
  } finally {
    await open.stop();
  }
  const both = await Sluice.start({ sluice: { api: "open", rules: [] }, secrets: { API_TOKEN } });
  try {
    const [limit] = routes(freshKey("open-token"));
    await assertUnauthorized(await send(both, limit), "no token");
    assert.equal((await send(both, limit, RIGHT)).status, 200);
  } finally {
    await both.stop();
  }
});

test("a short API_TOKEN or an unknown api value is a configuration error naming the field", async () => {
  const short = "s".repeat(31);
  const cases = [
    [{ sluice: { rules: [] }, secrets: { API_TOKEN: short } }, "API_TOKEN"],
    [{ sluice: { api: "public", rules: [] }, secrets: { API_TOKEN } }, "SLUICE.api"],
  ];
  for (const [options, field] of cases) {
    const broken = await Sluice.start(options);
    try {
      for (const path of ["/_sluice/v1/limit", "/api/x"]) {
        const response = await fetch(broken.base + path, { method: "POST", headers: { authorization: `Bearer ${short}` } });
        assert.equal(response.status, 500, `${field} ${path}`);
        const problem = await response.json();
        assert.equal(problem.code, "invalid-config");
        assert.equal(problem.field, field);
        assert.ok(!problem.detail.includes(short), "the token is not quoted");
      }
    } finally {
      await broken.stop();
    }
  }
});
