// Proxy mode, end to end on workerd: rules in front of the demo origin and in
// front of a real origin server.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createServer, request as httpRequest } from "node:http";
import { Sluice, freshKey } from "./harness.mjs";

const QUOTA = "https://iana.org/assignments/http-problem-types#quota-exceeded";

const rules = [
  { id: "api", match: { path: "/api/*", methods: ["GET", "POST"] }, key: "ip", limit: 3, window: "1m" },
  { id: "login", match: { path: "/login" }, key: "header:x-user+method", limit: 2, window: "1m" },
  { id: "thread", match: { path: "/threads/:id/reply" }, key: "cookie:session+path", limit: 1, window: "1m" },
  { id: "session", match: { path: "/session" }, key: "cookie:sid", limit: 2, window: "1m" },
];

const ip = () => `10.${rand()}.${rand()}.${rand()}`;
const rand = () => Math.floor(Math.random() * 250) + 1;

describe("in front of the demo origin", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({ sluice: { prefix: "/_sluice", origin: "demo", rules } });
  });
  after(() => sluice?.stop());

  test("admits with RateLimit headers, then refuses with 429 and a problem", async () => {
    const client = ip();
    for (let i = 0; i < 3; i++) {
      const response = await sluice.fetch("/api/items?page=2", { headers: { "CF-Connecting-IP": client } });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("ratelimit-policy"), '"api";q=3;w=60');
      assert.equal(response.headers.get("ratelimit"), `"api";r=${2 - i};t=60`);
      const echo = await response.json();
      assert.deepEqual([echo.method, echo.path, echo.rule, echo.key], ["GET", "/api/items", "api", client]);
      assert.equal(typeof echo.time_ms, "number");
    }
    const refused = await sluice.fetch("/api/items", { headers: { "CF-Connecting-IP": client } });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("content-type"), "application/problem+json");
    assert.equal(refused.headers.get("ratelimit-policy"), '"api";q=3;w=60');
    assert.match(refused.headers.get("ratelimit"), /^"api";r=0;t=(59|60)$/);
    const retryAfter = Number(refused.headers.get("retry-after"));
    assert.ok(retryAfter >= 59 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    const problem = await refused.json();
    assert.equal(problem.type, QUOTA);
    assert.equal(problem.status, 429);
    assert.equal(typeof problem.title, "string");
    assert.match(problem.detail, /api/);
    assert.deepEqual(problem["violated-policies"], ["api"]);
  });

  test("X-Forwarded-For is never trusted", async () => {
    const client = ip();
    for (let i = 0; i < 3; i++) {
      const response = await sluice.fetch("/api/x", {
        headers: { "CF-Connecting-IP": client, "X-Forwarded-For": ip() },
      });
      assert.equal(response.status, 200);
    }
    const spoofed = await sluice.fetch("/api/x", { headers: { "CF-Connecting-IP": client, "X-Forwarded-For": ip() } });
    assert.equal(spoofed.status, 429);
  });

  test("a request with no usable key is refused with 400, not waved through", async () => {
    const garbage = await sluice.fetch("/api/x", { headers: { "CF-Connecting-IP": "not-an-ip" } });
    assert.equal(garbage.status, 400);
    const problem = await garbage.json();
    assert.equal(problem.code, "missing-key");
    assert.match(problem.detail, /CF-Connecting-IP/);
    const noHeader = await sluice.fetch("/login", { method: "POST" });
    assert.equal(noHeader.status, 400);
    assert.match((await noHeader.json()).detail, /header:x-user/);
  });

  test("keys combine parts: header and method, cookie and path parameter", async () => {
    const user = freshKey("user");
    const login = (method) => sluice.fetch("/login", { method, headers: { "X-User": user } });
    assert.equal((await login("POST")).status, 200);
    assert.equal((await login("POST")).status, 200);
    assert.equal((await login("POST")).status, 429);
    assert.equal((await login("PUT")).status, 200, "another method is another key");
    const session = freshKey("s");
    const reply = (id) => sluice.fetch(`/threads/${id}/reply`, { headers: { Cookie: `theme=x; session=${session}` } });
    assert.equal((await reply(1)).status, 200);
    assert.equal((await reply(1)).status, 429);
    assert.equal((await reply(2)).status, 200, "another thread is another key");
  });

  test("a keyed cookie sent twice is refused with 400, so a client cannot pick its key", async () => {
    const real = freshKey("sid");
    const session = (cookie) => sluice.fetch("/session", { headers: { Cookie: cookie } });
    for (let i = 0; i < 6; i++) {
      for (const cookie of [
        `sid=junk${i}; sid=${real}`,
        `sid=${real}; sid=junk${i}`,
        `sid=${real} x=junk${i}`,
        `sid=junk${i}, sid=${real}`,
        `sid=junk${i}; a=x sid=${real}`,
      ]) {
        const response = await session(cookie);
        assert.equal(response.status, 400, cookie);
        const problem = await response.json();
        assert.equal(problem.code, "ambiguous-key");
        assert.equal(problem.field, "cookie:sid");
        assert.match(problem.detail, /more than once/);
      }
    }
    const twoFields = await raw(sluice.base, "/session", { headers: { Cookie: [`sid=junk`, `sid=${real}`] } });
    assert.equal(twoFields.status, 400, "two Cookie fields are read as one header");
    assert.equal((await session(`theme=a; sid=${real}; theme=b`)).status, 200, "other cookies may repeat");
    assert.equal((await session(`sid="${real}"`)).status, 200, "a quoted value is the same key");
    assert.equal((await session(`sid=${real}`)).status, 429, "the limit of 2 holds");
  });

  test("a keyed header sent twice is one value, the runtime's join, as the origin gets it", async () => {
    const user = freshKey("u");
    const twice = await raw(sluice.base, "/login", { method: "POST", headers: { "X-User": ["junk", user] } });
    assert.equal(twice.status, 200);
    assert.equal(JSON.parse(twice.body).key, `junk, ${user}|POST`);
  });

  test("the demo origin holds at most 32 requests at once; the rest answer 503 at once", async () => {
    const started = Date.now();
    const responses = await Promise.all(
      Array.from({ length: 40 }, () => sluice.fetch("/elsewhere?hold_ms=1500")),
    );
    const statuses = responses.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 200).length, 32, statuses.join(" "));
    const busy = responses.filter((r) => r.status === 503);
    assert.equal(busy.length, 8);
    assert.equal(busy[0].headers.get("retry-after"), "1");
    const problem = await busy[0].json();
    assert.equal(problem.code, "demo-busy");
    const peaks = await Promise.all(responses.filter((r) => r.status === 200).map((r) => r.json()));
    assert.ok(peaks.every((echo) => echo.peak_in_flight <= 32), "never more than 32 held");
    assert.ok(Date.now() - started < 5000);
    const after = await sluice.fetch("/elsewhere?hold_ms=10");
    assert.equal(after.status, 200, "held requests leave room when they end");
  });

  test("requests no rule matches pass through untouched", async () => {
    for (const [method, path] of [["GET", "/elsewhere"], ["DELETE", "/api/x"]]) {
      const response = await sluice.fetch(path, { method, headers: { "CF-Connecting-IP": "not-an-ip" } });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("ratelimit"), null);
      const echo = await response.json();
      assert.deepEqual([echo.method, echo.rule, echo.key], [method, null, null]);
    }
  });
});

describe("in front of a real origin", () => {
  let sluice;
  let origin;
  const seen = [];
  before(async () => {
    origin = createServer((req, res) => {
      const chunks = [];
      req.on("data", (chunk) => chunks.push(chunk));
      req.on("end", () => {
        const bytes = Buffer.concat(chunks);
        seen.push({ method: req.method, url: req.url, headers: req.headers, rawHeaders: req.rawHeaders, body: bytes.toString(), bytes });
        res.writeHead(201, { "content-type": "text/plain", "x-origin": "yes" });
        res.end(`origin saw ${req.method} ${req.url}`);
      });
    });
    await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const { port } = origin.address();
    sluice = await Sluice.start({
      sluice: { prefix: "/_limits", origin: `http://127.0.0.1:${port}`, rules, keep_headers: ["CF-IPCountry"] },
    });
  });
  after(async () => {
    await sluice?.stop();
    origin?.close();
  });

  test("forwards method, path, query, headers and body untouched, adding RateLimit headers", async () => {
    const response = await sluice.fetch("/api/orders?id=7&x=a%20b", {
      method: "POST",
      headers: { "CF-Connecting-IP": ip(), "content-type": "application/json", "x-custom": "kept" },
      body: '{"qty":2}',
    });
    assert.equal(response.status, 201);
    assert.equal(response.headers.get("x-origin"), "yes");
    assert.equal(response.headers.get("ratelimit-policy"), '"api";q=3;w=60');
    assert.equal(await response.text(), "origin saw POST /api/orders?id=7&x=a%20b");
    const request = seen.at(-1);
    assert.equal(request.body, '{"qty":2}');
    assert.equal(request.headers["x-custom"], "kept");
    assert.equal(request.headers["content-type"], "application/json");
  });

  test("a proxied body reaches the origin byte for byte, beside the prefix too, declared or chunked", async () => {
    // Every byte value, so not UTF-8, to paths beside the prefix
    // (/_limits): Sluice reads the bodies sent to its own paths, never
    // those it forwards.
    const bytes = Buffer.from(Array.from({ length: 3 * 256 }, (_, i) => (i * 7) % 256));
    for (const path of ["/api/upload", "/_limitsx/upload", "/static/_limits/upload", "/upload?to=/_limits"]) {
      for (const chunked of [false, true]) {
        const body = chunked ? new Blob([bytes]).stream() : bytes;
        const response = await sluice.fetch(path, {
          method: "POST",
          headers: { "CF-Connecting-IP": ip(), "content-type": "application/octet-stream" },
          body,
          ...(chunked ? { duplex: "half" } : {}),
        });
        assert.equal(response.status, 201, `${path}`);
        await response.text();
        const request = seen.at(-1);
        assert.equal(request.url, path);
        assert.ok(request.bytes.equals(bytes), `${path} (chunked ${chunked}): the origin got ${request.bytes.length} bytes`);
        if (!chunked) assert.equal(request.headers["content-length"], String(bytes.length));
      }
    }
  });

  test("unmatched requests reach the origin without RateLimit headers", async () => {
    const response = await sluice.fetch("/static/app.js");
    assert.equal(response.status, 201);
    assert.equal(response.headers.get("ratelimit"), null);
    assert.equal(seen.at(-1).url, "/static/app.js");
  });

  test("hop-by-hop headers stop at Sluice, and X-Forwarded-For is Sluice's own", async () => {
    const { status, body } = await raw(sluice.base, "/api/hops", {
      method: "POST",
      headers: {
        "CF-Connecting-IP": "203.0.113.9",
        Connection: "keep-alive, x-hop-named",
        "X-Hop-Named": "secret-for-the-next-hop",
        "Keep-Alive": "timeout=5",
        "Proxy-Authorization": "Basic cHJveHk6cGFzcw==",
        "Proxy-Connection": "keep-alive",
        TE: "trailers",
        Trailer: "x-checksum",
        "X-Forwarded-For": "6.6.6.6, 7.7.7.7",
        Forwarded: "for=6.6.6.6",
        "X-Real-IP": "6.6.6.6",
        "X-Kept": "yes",
      },
      chunks: ["part one, ", "part two"],
    });
    assert.equal(status, 201);
    assert.equal(body, "origin saw POST /api/hops");
    const got = seen.at(-1).headers;
    for (const name of ["x-hop-named", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer", "upgrade", "forwarded", "x-real-ip"]) {
      assert.equal(got[name], undefined, `${name} reached the origin`);
    }
    assert.doesNotMatch(got.connection ?? "", /x-hop-named/);
    assert.equal(got["x-forwarded-for"], "203.0.113.9", "the client address Sluice trusts, alone");
    assert.equal(got["x-kept"], "yes");
    assert.equal(seen.at(-1).body, "part one, part two", "a chunked body arrives whole");
  });

  test("a client's forwarding claims are dropped; Sluice says the host and scheme it received", async () => {
    const claims = {
      "X-Forwarded-Host": "evil.example",
      "X-Forwarded-Proto": "https",
      "X-Forwarded-Port": "443",
      "X-Forwarded-Prefix": "/evil",
      "X-Original-URL": "/admin",
      "X-Rewrite-URL": "/admin",
      "True-Client-IP": "6.6.6.6",
      "X-Client-IP": "6.6.6.6",
      "cf-access-authenticated-user-email": "ceo@example.com",
      "cf-ray": "forged",
    };
    for (const path of ["/api/claims", "/static/claims"]) {
      const response = await sluice.fetch(path, {
        headers: { ...claims, "CF-Connecting-IP": "203.0.113.7", "CF-IPCountry": "XX", "X-Kept": "yes" },
      });
      assert.equal(response.status, 201, path);
      const got = seen.at(-1).headers;
      for (const name of Object.keys(claims).map((n) => n.toLowerCase())) {
        if (name === "x-forwarded-host" || name === "x-forwarded-proto") continue;
        assert.equal(got[name], undefined, `${path}: ${name} reached the origin`);
      }
      assert.equal(got["x-forwarded-host"], new URL(sluice.base).host, "the host Sluice received");
      assert.equal(got["x-forwarded-proto"], "http", "the scheme Sluice received");
      assert.equal(got["cf-ipcountry"], "XX", "kept by keep_headers");
      assert.equal(got["cf-connecting-ip"], undefined, "cf- fields are the platform's to set");
      assert.equal(got["x-forwarded-for"], "203.0.113.7");
      assert.equal(got["x-kept"], "yes");
    }
  });

  test("an Upgrade header is not forwarded", async () => {
    const { status } = await raw(sluice.base, "/static/up", {
      headers: { Connection: "upgrade", Upgrade: "example/1", "CF-Connecting-IP": "203.0.113.10" },
    });
    assert.equal(status, 201);
    assert.equal(seen.at(-1).headers.upgrade, undefined);
  });

  test("a header sent twice reaches the origin as the one field Sluice keyed on", async () => {
    const user = freshKey("u");
    const { status } = await raw(sluice.base, "/login", { method: "POST", headers: { "X-User": ["junk", user] } });
    assert.equal(status, 201);
    const raws = seen.at(-1).rawHeaders;
    const fields = raws.filter((_, i) => i % 2 === 0 && raws[i].toLowerCase() === "x-user").length;
    assert.equal(fields, 1, JSON.stringify(raws));
    assert.equal(seen.at(-1).headers["x-user"], `junk, ${user}`);
  });

  test("without a usable client address, a client's X-Forwarded-For is dropped", async () => {
    // Miniflare fills in CF-Connecting-IP when a request has none, as
    // Cloudflare does; a garbled one is the local stand-in for "unknown".
    const response = await sluice.fetch("/static/xff", {
      headers: { "CF-Connecting-IP": "not-an-ip", "X-Forwarded-For": "6.6.6.6" },
    });
    assert.equal(response.status, 201);
    assert.equal(seen.at(-1).headers["x-forwarded-for"], undefined);
  });

  test("the prefix is configurable and only Sluice's own paths are taken", async () => {
    assert.equal((await sluice.fetch("/_limits/health")).status, 200);
    const other = await sluice.fetch("/_sluice/health");
    assert.equal(other.status, 201, "the default prefix is an origin path here");
  });
});

describe("an origin locked to Sluice", () => {
  const SECRET = "origin-secret-0123456789-abcdefghijklmnop";
  let sluice;
  let origin;
  const seen = [];
  before(async () => {
    origin = createServer((req, res) => {
      seen.push(req.headers);
      const locked = req.headers["x-sluice-auth"] === SECRET;
      res.writeHead(locked ? 200 : 403, { "content-type": "text/plain" });
      res.end(locked ? "through sluice" : "go away");
    });
    await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const { port } = origin.address();
    sluice = await Sluice.start({
      sluice: {
        origin: `http://127.0.0.1:${port}`,
        origin_auth: { header: "x-sluice-auth", secret: "ORIGIN_SECRET" },
        rules,
      },
      secrets: { ORIGIN_SECRET: SECRET },
    });
  });
  after(async () => {
    await sluice?.stop();
    origin?.close();
  });

  test("the origin gets the secret header on limited and unlimited requests", async () => {
    for (const path of ["/api/locked", "/static/locked"]) {
      const response = await sluice.fetch(path, { headers: { "CF-Connecting-IP": ip() } });
      assert.equal(response.status, 200, path);
      assert.equal(await response.text(), "through sluice");
      assert.equal(seen.at(-1)["x-sluice-auth"], SECRET);
    }
  });

  test("a client's own copy of the header is replaced, never passed on", async () => {
    const response = await sluice.fetch("/static/forged", { headers: { "X-Sluice-Auth": "guess" } });
    assert.equal(response.status, 200);
    assert.equal(seen.at(-1)["x-sluice-auth"], SECRET);
    const naming = await raw(sluice.base, "/static/named", { headers: { Connection: "x-sluice-auth", "X-Sluice-Auth": "guess" } });
    assert.equal(naming.status, 200, "naming it in Connection does not strip Sluice's copy");
    assert.equal(seen.at(-1)["x-sluice-auth"], SECRET);
  });

  test("the secret never comes back to the client", async () => {
    const response = await sluice.fetch("/static/echo");
    const text = await response.text();
    assert.ok(![...response.headers.values()].some((v) => v.includes(SECRET)) && !text.includes(SECRET));
  });

  test("a missing or short secret is a configuration error naming the field", async () => {
    const config = { origin: "route", origin_auth: { secret: "ORIGIN_SECRET" } };
    for (const secrets of [{}, { ORIGIN_SECRET: "too-short" }]) {
      const broken = await Sluice.start({ sluice: config, secrets });
      try {
        const response = await broken.fetch("/anything");
        assert.equal(response.status, 500);
        assert.equal((await response.json()).field, "SLUICE.origin_auth.secret");
      } finally {
        await broken.stop();
      }
    }
  });
});

describe("with an invalid configuration", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({
      sluice: { rules: [{ id: "api", match: { path: "/api/*" }, limit: 10, window: "1 minute" }] },
    });
  });
  after(() => sluice?.stop());

  test("every request answers 500 naming the bad field", async () => {
    for (const path of ["/api/x", "/elsewhere", "/_sluice/health"]) {
      const response = await sluice.fetch(path);
      assert.equal(response.status, 500);
      assert.equal(response.headers.get("content-type"), "application/problem+json");
      const problem = await response.json();
      assert.equal(problem.field, "SLUICE.rules[0].window");
      assert.match(problem.detail, /SLUICE\.rules\[0\]\.window/);
    }
  });

  test("the demo origin is never a default: an empty or missing origin is refused", async () => {
    // A JSON string is passed as it is; the harness fills in no origin.
    for (const sluiceVar of [JSON.stringify({ rules: [] }), { origin: "" }]) {
      const broken = await Sluice.start({ sluice: sluiceVar });
      try {
        const response = await broken.fetch("/anything");
        assert.equal(response.status, 500);
        const problem = await response.json();
        assert.equal(problem.field, "SLUICE.origin");
        assert.match(problem.detail, /"demo"/);
      } finally {
        await broken.stop();
      }
    }
  });
});

/** A request through node:http, which (unlike fetch) sends hop-by-hop
 * headers as given; `chunks` are written one by one, so the body goes
 * chunked. */
function raw(base, path, { method = "GET", headers = {}, chunks = [] } = {}) {
  return new Promise((resolve, reject) => {
    const req = httpRequest(base + path, { method, headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on("error", reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}
