// Proxy mode, end to end on workerd: rules in front of the demo origin and in
// front of a real origin server.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Sluice, freshKey } from "./harness.mjs";

const QUOTA = "https://iana.org/assignments/http-problem-types#quota-exceeded";

const rules = [
  { id: "api", match: { path: "/api/*", methods: ["GET", "POST"] }, key: "ip", limit: 3, window: "1m" },
  { id: "login", match: { path: "/login" }, key: "header:x-user+method", limit: 2, window: "1m" },
  { id: "thread", match: { path: "/threads/:id/reply" }, key: "cookie:session+path", limit: 1, window: "1m" },
];

const ip = () => `10.${rand()}.${rand()}.${rand()}`;
const rand = () => Math.floor(Math.random() * 250) + 1;

describe("in front of the demo origin", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({ sluice: { prefix: "/_sluice", origin: "", rules } });
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
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(201, { "content-type": "text/plain", "x-origin": "yes" });
        res.end(`origin saw ${req.method} ${req.url}`);
      });
    });
    await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const { port } = origin.address();
    sluice = await Sluice.start({
      sluice: { prefix: "/_limits", origin: `http://127.0.0.1:${port}`, rules },
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

  test("unmatched requests reach the origin without RateLimit headers", async () => {
    const response = await sluice.fetch("/static/app.js");
    assert.equal(response.status, 201);
    assert.equal(response.headers.get("ratelimit"), null);
    assert.equal(seen.at(-1).url, "/static/app.js");
  });

  test("the prefix is configurable and only Sluice's own paths are taken", async () => {
    assert.equal((await sluice.fetch("/_limits/health")).status, 200);
    const other = await sluice.fetch("/_sluice/health");
    assert.equal(other.status, 201, "the default prefix is an origin path here");
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
});
