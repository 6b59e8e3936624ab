// Bad input: a corpus of malformed requests (API bodies, keys, headers,
// admin calls, raw bytes on the socket) and malformed configs. Each gets a
// clear answer with the status docs/http-api.md promises, a problem+json body
// where Sluice answers, and is followed by a good request that must still
// be served: a panic would poison the wasm instance and fail everything after
// it. At the end the runtime's output holds no panic and no reinitialisation.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { createHmac } from "node:crypto";
import { Sluice, freshKey, API_TOKEN } from "../e2e/harness.mjs";

const ADMIN_TOKEN = "bad-input-admin-token-0123456789abcdef";
const JWT_SECRET = "bad-input-jwt-secret";
const PROBLEM = "application/problem+json";

let sluice;
before(async () => {
  sluice = await Sluice.start({
    secrets: { ADMIN_TOKEN, JWT_SECRET, API_TOKEN },
    sluice: {
      jwt: { secret: "JWT_SECRET", on_invalid: "reject" },
      rules: [
        { id: "ip", match: { path: "/ip/*" }, key: "ip", limit: 1000, window: "1m" },
        { id: "hdr", match: { path: "/hdr/*" }, key: "header:x-api-key", limit: 1000, window: "1m" },
        { id: "cookie", match: { path: "/cookie/*" }, key: "cookie:sid", limit: 1000, window: "1m" },
        {
          id: "tier",
          match: { path: "/tier/*" },
          tiers: [
            { name: "registered", when: "registered", limit: 100, window: "1m" },
            { name: "anonymous", when: "anonymous", limit: 10, window: "1m" },
          ],
        },
      ],
    },
  });
});
after(() => sluice?.stop());

const b64 = (value) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url");
const jwt = (header, claims, secret = JWT_SECRET) => {
  const unsigned = `${b64(header)}.${b64(claims)}`;
  return `${unsigned}.${createHmac("sha256", secret).update(unsigned).digest("base64url")}`;
};
const now = () => Math.floor(Date.now() / 1000);

const json = (path, body, headers = {}) => () =>
  sluice.fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
const get = (path, headers = {}) => () => sluice.fetch(path, { headers });
const limitBody = (over) => ({ key: freshKey(), limit: 10, window_ms: 1000, ...over });
const nested = (depth) => "[".repeat(depth) + "]".repeat(depth);

// [name, request, expected status, field named in the problem (optional)]
const corpus = [
  // The decision API's body.
  ["truncated JSON", json("/_sluice/v1/limit", '{"key":"k","limit":1'), 400, "body"],
  ["empty body", json("/_sluice/v1/limit", ""), 400, "body"],
  ["a JSON array", json("/_sluice/v1/limit", "[1,2,3]"), 400, "body"],
  ["a JSON string", json("/_sluice/v1/limit", '"key"'), 400, "body"],
  ["limit 1e400", json("/_sluice/v1/limit", '{"key":"k","limit":1e400,"window_ms":1000}'), 400, "body"],
  ["limit 2^64", json("/_sluice/v1/limit", '{"key":"k","limit":18446744073709551616,"window_ms":1000}'), 400, "limit"],
  ["limit 10^30", json("/_sluice/v1/limit", '{"key":"k","limit":1000000000000000000000000000000,"window_ms":1000}'), 400, "limit"],
  ["negative limit", json("/_sluice/v1/limit", limitBody({ limit: -1 })), 400, "limit"],
  ["limit 0", json("/_sluice/v1/limit", limitBody({ limit: 0 })), 400, "limit"],
  ["fractional limit", json("/_sluice/v1/limit", limitBody({ limit: 2.5 })), 400, "limit"],
  ['limit "NaN"', json("/_sluice/v1/limit", limitBody({ limit: "NaN" })), 400, "limit"],
  ['limit "Infinity"', json("/_sluice/v1/limit", limitBody({ limit: "Infinity" })), 400, "limit"],
  ["bare NaN literal", json("/_sluice/v1/limit", '{"key":"k","limit":NaN,"window_ms":1000}'), 400, "body"],
  ["negative window", json("/_sluice/v1/limit", limitBody({ window_ms: -1000 })), 400, "window_ms"],
  ["window over 30 days", json("/_sluice/v1/limit", limitBody({ window_ms: 31 * 86_400_000 })), 400, "window_ms"],
  ["cost over limit", json("/_sluice/v1/limit", limitBody({ cost: 11 })), 400, "cost"],
  ["negative cost", json("/_sluice/v1/limit", limitBody({ cost: -1 })), 400, "cost"],
  ["unknown field", json("/_sluice/v1/limit", limitBody({ limt: 3 })), 400, "limt"],
  ["nesting 10 000 deep", json("/_sluice/v1/limit", `{"key":${nested(10_000)}}`), 400, "body"],
  ["nested object as key", json("/_sluice/v1/limit", limitBody({ key: { a: { b: { c: 1 } } } })), 400, "key"],
  ["1 MiB body", json("/_sluice/v1/limit", `{"key":"${"x".repeat(1 << 20)}","limit":1,"window_ms":1000}`), 413],
  ["wrong content type", () => sluice.fetch("/_sluice/v1/limit", { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify(limitBody()) }), 400, "content-type"],
  ["no content type", () => sluice.fetch("/_sluice/v1/limit", { method: "POST", body: new Uint8Array(Buffer.from(JSON.stringify(limitBody()))) }), 400, "content-type"],
  ["policies not a list", json("/_sluice/v1/limit", { key: "k", policies: { a: 1 } }), 400, "policies"],
  ["policy without a window", json("/_sluice/v1/limit", { key: "k", policies: [{ name: "a", limit: 1 }] }), 400, "policies[0].window_ms"],
  ["unknown algorithm", json("/_sluice/v1/limit", limitBody({ algorithm: "leaky" })), 400, "algorithm"],
  // Keys.
  ["empty key", json("/_sluice/v1/limit", limitBody({ key: "" })), 400, "key"],
  ["10 KiB key", json("/_sluice/v1/limit", limitBody({ key: "k".repeat(10 * 1024) })), 400, "key"],
  ["NUL in a key", json("/_sluice/v1/limit", limitBody({ key: "a\u0000b" })), 400, "key"],
  ["escape sequence in a key", json("/_sluice/v1/limit", limitBody({ key: "a\u001b[2Jb" })), 400, "key"],
  ["lone surrogate in a key", json("/_sluice/v1/limit", '{"key":"\\ud800","limit":1,"window_ms":1000}'), 400, "body"],
  // The throttle endpoint.
  ["throttle: negative max_burst", json("/_sluice/v1/throttle", { key: "k", max_burst: -1, count: 1, period_s: 1 }), 400, "max_burst"],
  ["throttle: count 0", json("/_sluice/v1/throttle", { key: "k", max_burst: 1, count: 0, period_s: 1 }), 400, "count"],
  ["throttle: period 1e300", json("/_sluice/v1/throttle", { key: "k", max_burst: 1, count: 1, period_s: 1e300 }), 400, "period_s"],
  ["throttle: quantity as a string", json("/_sluice/v1/throttle", { key: "k", max_burst: 1, count: 1, period_s: 1, quantity: "1" }), 400, "quantity"],
  // Leases.
  ["lease: ttl 0", json("/_sluice/v1/leases", { key: "k", limit: 1, ttl_ms: 0 }), 400, "ttl_ms"],
  ["lease: owner not a string", json("/_sluice/v1/leases", { key: "k", limit: 1, ttl_ms: 1000, owner: 7 }), 400, "owner"],
  ["lease: lease_id not a string", json("/_sluice/v1/leases", { key: "k", limit: 1, ttl_ms: 1000, lease_id: 7 }), 400, "lease_id"],
  ["lease: re-enter an unknown lease", json("/_sluice/v1/leases", { key: "k", limit: 1, ttl_ms: 1000, lease_id: "nope" }), 404, "lease_id"],
  ["lease: renew an unknown lease", json("/_sluice/v1/leases/nope/renew?key=k", { ttl_ms: 1000 }), 404],
  ["lease: release without a key", () => sluice.fetch("/_sluice/v1/leases/nope", { method: "DELETE" }), 400, "key"],
  // Routing.
  ["unknown endpoint", get("/_sluice/v2/limit"), 404],
  ["wrong method", get("/_sluice/v1/limit"), 405],
  // Client addresses: only CF-Connecting-IP counts.
  ["CF-Connecting-IP not an address", get("/ip/x", { "CF-Connecting-IP": "not-an-ip" }), 400, "ip"],
  ["CF-Connecting-IP with a port", get("/ip/x", { "CF-Connecting-IP": "192.0.2.1:443" }), 400, "ip"],
  ["CF-Connecting-IP a list", get("/ip/x", { "CF-Connecting-IP": "192.0.2.1, 192.0.2.2" }), 400, "ip"],
  // Header and cookie keys.
  ["missing key header", get("/hdr/x"), 400, "header:x-api-key"],
  ["empty key header", get("/hdr/x", { "X-Api-Key": "" }), 400, "header:x-api-key"],
  ["empty cookie", get("/cookie/x", { Cookie: "sid=" }), 400, "cookie:sid"],
  ["garbled cookie header", get("/cookie/x", { Cookie: ";;==;sid" }), 400, "cookie:sid"],
  // Authorization.
  ["Bearer with nothing", get("/tier/x", { Authorization: "Bearer", "CF-Connecting-IP": "192.0.2.7" }), 401],
  ["Bearer with garbage", get("/tier/x", { Authorization: "Bearer garbage", "CF-Connecting-IP": "192.0.2.7" }), 401],
  ["Bearer with two words", get("/tier/x", { Authorization: "Bearer abc.def ghi", "CF-Connecting-IP": "192.0.2.7" }), 401],
  ["alg none", get("/tier/x", { Authorization: `Bearer ${b64({ alg: "none", typ: "JWT" })}.${b64({ sub: "u", exp: now() + 60 })}.`, "CF-Connecting-IP": "192.0.2.7" }), 401],
  ["expired token", get("/tier/x", { Authorization: `Bearer ${jwt({ alg: "HS256", typ: "JWT" }, { sub: "u", exp: now() - 3600 })}`, "CF-Connecting-IP": "192.0.2.7" }), 401],
  ["token signed with another secret", get("/tier/x", { Authorization: `Bearer ${jwt({ alg: "HS256" }, { sub: "u", exp: now() + 60 }, "guess")}`, "CF-Connecting-IP": "192.0.2.7" }), 401],
  ["header not JSON", get("/tier/x", { Authorization: `Bearer ${b64("{not json")}.${b64({ sub: "u" })}.sig`, "CF-Connecting-IP": "192.0.2.7" }), 401],
  ["sub claim an object", get("/tier/x", { Authorization: `Bearer ${jwt({ alg: "HS256" }, { sub: { id: 1 }, exp: now() + 60 })}`, "CF-Connecting-IP": "192.0.2.7" }), 400, "claim:sub"],
  ["token with no sub", get("/tier/x", { Authorization: `Bearer ${jwt({ alg: "HS256" }, { exp: now() + 60 })}`, "CF-Connecting-IP": "192.0.2.7" }), 400, "claim:sub"],
  // The admin API.
  ["admin: no token", get("/_sluice/admin/stats"), 401],
  ["admin: wrong token", get("/_sluice/admin/stats", { Authorization: "Bearer nope" }), 401],
  ["admin: token as Basic", get("/_sluice/admin/stats", { Authorization: `Basic ${b64(`admin:${ADMIN_TOKEN}`)}` }), 401],
  ["admin: ban for forever", () => sluice.fetch("/_sluice/admin/bans/k", { method: "PUT", headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: '{"for":"forever"}' }), 400, "for"],
  ["admin: ban body truncated", () => sluice.fetch("/_sluice/admin/bans/k", { method: "PUT", headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: '{"for":' }), 400, "body"],
  ["admin: unknown rule", get("/_sluice/admin/keys/nope/k", { Authorization: `Bearer ${ADMIN_TOKEN}` }), 404],
  // The decision API's token.
  ["API: empty Authorization", json("/_sluice/v1/limit", limitBody(), { Authorization: "" }), 401],
  ["API: the admin token", json("/_sluice/v1/limit", limitBody(), { Authorization: `Bearer ${ADMIN_TOKEN}` }), 401],
  ["API: token as Basic", json("/_sluice/v1/leases", { key: "k", limit: 1, ttl_ms: 1000 }, { Authorization: `Basic ${b64(`api:${API_TOKEN}`)}` }), 401],
  ["API: 10 KiB token", json("/_sluice/v1/throttle", { key: "k", max_burst: 1, count: 1, period_s: 1 }, { Authorization: `Bearer ${"t".repeat(10_240)}` }), 401],
];

const good = async () => {
  const response = await json("/_sluice/v1/limit", limitBody())();
  assert.equal(response.status, 200, "the next good request is served");
  assert.equal((await response.json()).allowed, true);
};

test(`a corpus of ${corpus.length} malformed requests, each followed by a good one`, async () => {
  assert.ok(corpus.length >= 40);
  for (const [name, send, status, field] of corpus) {
    const response = await send();
    const body = await response.text();
    assert.equal(response.status, status, `${name}: ${body.slice(0, 300)}`);
    assert.equal(response.headers.get("content-type"), PROBLEM, `${name}: a problem body`);
    const problem = JSON.parse(body);
    assert.equal(problem.status, status, name);
    assert.ok(problem.detail, `${name}: the problem says what is wrong`);
    if (field) assert.equal(problem.field, field, `${name}: ${problem.detail}`);
    await good();
  }
});

test("client addresses forged in other headers are ignored", async () => {
  // Locally the runtime sets CF-Connecting-IP to the socket's address, as
  // Cloudflare's edge does in production; the forged headers name others.
  const forged = [
    { "X-Forwarded-For": "192.0.2.1" },
    { "X-Forwarded-For": "192.0.2.1, 198.51.100.2" },
    { "X-Real-IP": "192.0.2.1" },
    { "True-Client-IP": "192.0.2.1" },
    { Forwarded: "for=192.0.2.1" },
    { "X-Client-IP": "192.0.2.1" },
  ];
  for (const headers of forged) {
    const response = await sluice.fetch("/ip/x", { headers });
    assert.equal(response.status, 200);
    assert.equal((await response.json()).key, "127.0.0.1", JSON.stringify(headers));
  }
});

test("a 10 KiB header key is hashed, not refused, and still limits", async () => {
  const key = "h".repeat(10 * 1024);
  const response = await sluice.fetch("/hdr/x", { headers: { "X-Api-Key": key } });
  assert.equal(response.status, 200);
  assert.match((await response.json()).key, /^sha256:/);
});

/** Sends raw bytes on a fresh connection; resolves to the status code, or 0
 * when the runtime closed the connection without answering. */
function raw(bytes) {
  const { hostname, port } = new URL(sluice.base);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let answer = "";
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(Number(answer.match(/^HTTP\/1\.[01] (\d{3})/)?.[1] ?? 0)));
    socket.end(Buffer.concat([Buffer.from(bytes, "latin1")]));
  });
}

const request = (path, headers) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${headers.map((h) => `${h}\r\n`).join("")}\r\n`;

test("raw bytes on the socket: invalid UTF-8 and control characters in headers", async () => {
  const cases = [
    ["invalid UTF-8 in a key header", request("/hdr/x", ["X-Api-Key: caf\xe9\xff\xfe"]), [200]],
    ["invalid UTF-8 in a cookie", request("/cookie/x", ["Cookie: sid=\xc3\x28"]), [200]],
    ["invalid UTF-8 in CF-Connecting-IP", request("/ip/x", ["CF-Connecting-IP: 192.0.2.\xff"]), [400]],
    ["invalid UTF-8 in Authorization", request("/tier/x", ["CF-Connecting-IP: 192.0.2.8", "Authorization: Bearer \xff\xfe.\xfd"]), [401]],
    ["control character in a key header", request("/hdr/x", ["X-Api-Key: a\x01b"]), [400]],
    ["escape in a key header", request("/hdr/x", ["X-Api-Key: a\x1b[2Jb"]), [400]],
    ["NUL in a header", request("/hdr/x", ["X-Api-Key: a\x00b"]), [0, 400]],
    ["bare LF line endings", "GET /hdr/x HTTP/1.1\nHost: x\nX-Api-Key: k\nConnection: close\n\n", [0, 200, 400]],
    ["invalid UTF-8 in the path", request("/hdr/\xff\xfe", ["X-Api-Key: k"]), [0, 200, 400]],
  ];
  for (const [name, bytes, statuses] of cases) {
    const status = await raw(bytes);
    assert.ok(statuses.includes(status), `${name}: answered ${status}, expected one of ${statuses}`);
    await good();
  }
});

test("nothing panicked and the wasm instance was never reinitialised", () => {
  const output = sluice.output();
  assert.doesNotMatch(output, /panicked/);
  assert.doesNotMatch(output, /Reinitializing/i);
});

// Invalid configs: every request answers 500 problem+json naming the field.
const configs = [
  ["duplicate rule ids", { rules: [{ id: "a", limit: 1, window: "1s" }, { id: "a", limit: 1, window: "1s" }] }, "SLUICE.rules[1].id"],
  ["limit as a string", { rules: [{ id: "a", limit: "ten", window: "1s" }] }, "SLUICE.rules[0].limit"],
  ["limit overflowing", { rules: [{ id: "a", limit: 1e30, window: "1s" }] }, "SLUICE.rules[0].limit"],
  ["unknown window unit", { rules: [{ id: "a", limit: 1, window: "5 parsecs" }] }, "SLUICE.rules[0].window"],
  ["unknown field", { rules: [{ id: "a", limit: 1, window: "1s", limt: 2 }] }, "SLUICE.rules[0]"],
  ["prefix without a slash", { prefix: "sluice" }, "SLUICE.prefix"],
  ["a prefix over a rule's paths", { prefix: "/api", rules: [{ id: "a", match: { path: "/api/*" }, limit: 1, window: "1s" }] }, "SLUICE.prefix"],
  ["an action no key uses", { rules: [{ id: "a", action: "reply", limit: 1, window: "1s" }] }, "SLUICE.rules[0].action"],
  ["keep_headers naming a field Sluice never drops", { keep_headers: ["x-custom"] }, "SLUICE.keep_headers[0]"],
  ["SLUICE as broken JSON text", '{"rules": [', "SLUICE"],
  ["SLUICE a number", 5, "SLUICE"],
  ["rules not a list", { rules: { id: "a" } }, "SLUICE.rules"],
];

test(`${configs.length} invalid configs: every request is refused with 500 naming the field`, async () => {
  for (const [name, config, field] of configs) {
    const broken = await Sluice.start({ sluice: config });
    try {
      for (const path of ["/_sluice/health", "/anything"]) {
        const response = await broken.fetch(path);
        assert.equal(response.status, 500, name);
        assert.equal(response.headers.get("content-type"), PROBLEM, name);
        const problem = await response.json();
        assert.ok(problem.detail.includes(field), `${name}: ${problem.detail}`);
      }
      assert.doesNotMatch(broken.output(), /panicked/);
    } finally {
      await broken.stop();
    }
  }
});
