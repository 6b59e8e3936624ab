// Path spellings, end to end on workerd: every spelling of a protected path
// reaches its rule, whether the origin is the demo or a server of its own.
// Requests go out through node:http with the path exactly as written, since
// fetch() would resolve dot segments before sending.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest, createServer } from "node:http";
import { Sluice } from "./harness.mjs";

const rules = [
  { id: "api", match: { path: "/api/*" }, key: "ip", limit: 1, window: "1m" },
  { id: "login", match: { path: "/login", methods: ["POST"] }, key: "ip", limit: 1, window: "1m" },
  { id: "by-method", match: { path: "/m/*", methods: ["GET"] }, key: "ip+method", limit: 1, window: "1m" },
  { id: "dav", match: { path: "/dav/*", methods: ["PROPFIND"] }, key: "ip+method", limit: 1, window: "1m" },
];

let next = 1;
const client = () => `198.18.${Math.floor(next / 250)}.${(next++ % 250) + 1}`;

/** A request with `path` sent byte for byte; resolves to {status, body}. */
function raw(base, method, path, ip) {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, method, path, headers: { "CF-Connecting-IP": ip, "content-length": 0 } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const apiSpellings = ["/%61pi/hello", "//api/hello", "/API/hello", "/api%2fhello", "/Api/./hello", "/x/../api/hello", "/api;s=1/hello"];
const loginSpellings = ["/Login", "/LOGIN/", "/login/", "//login", "/%6cogin", "/login;jsessionid=1", "/a/%2e%2e/login"];

describe("with the demo origin", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({ sluice: { origin: "demo", rules } });
  });
  after(() => sluice?.stop());

  for (const [name, method, canonical, spellings] of [
    ["api", "GET", "/api/hello", apiSpellings],
    ["login", "POST", "/login", loginSpellings],
  ]) {
    test(`every spelling of ${canonical} counts against rule ${name}`, async () => {
      for (const spelling of spellings) {
        const ip = client();
        const first = await raw(sluice.base, method, canonical, ip);
        assert.equal(first.status, 200, `${canonical} first`);
        const second = await raw(sluice.base, method, spelling, ip);
        assert.equal(second.status, 429, `${spelling} after ${canonical}: ${second.body}`);
        const fresh = client();
        const spelled = await raw(sluice.base, method, spelling, fresh);
        assert.equal(spelled.status, 200, `${spelling} first`);
        assert.equal(JSON.parse(spelled.body).rule, name, `${spelling} is limited by ${name}`);
      }
    });
  }

  test("a method worker-rs does not name is matched, keyed and forwarded by its own name", async () => {
    // `worker::Method` reads PROPFIND (and any method it has no variant
    // for) as GET: a rule for PROPFIND never matched, a GET-only rule
    // counted it, and the origin received a GET.
    const ip = client();
    const first = await raw(sluice.base, "PROPFIND", "/dav/x", ip);
    assert.equal(first.status, 200, first.body);
    const seen = JSON.parse(first.body);
    assert.deepEqual([seen.method, seen.rule, seen.key], ["PROPFIND", "dav", `${ip}|PROPFIND`]);
    assert.equal((await raw(sluice.base, "PROPFIND", "/dav/x", ip)).status, 429, "the rule for PROPFIND counts it");

    const other = client();
    assert.equal((await raw(sluice.base, "GET", "/m/x", other)).status, 200);
    const propfind = await raw(sluice.base, "PROPFIND", "/m/x", other);
    assert.equal(propfind.status, 200, "a GET-only rule does not count PROPFIND");
    assert.equal(JSON.parse(propfind.body).method, "PROPFIND");
    assert.equal((await raw(sluice.base, "GET", "/m/x", other)).status, 429, "nor does PROPFIND use up its GET");
    const own = await raw(sluice.base, "PROPFIND", "/_sluice/health", client());
    assert.equal(own.status, 405, "Sluice's own routes serve no method they do not name");
  });
});

describe("in front of an origin with its own routing", () => {
  let sluice;
  let origin;
  const seen = [];
  before(async () => {
    // A case-insensitive, slash-forgiving origin, as Express is by default.
    origin = createServer((req, res) => {
      seen.push(req.method === "POST" ? req.url : `${req.method} ${req.url}`);
      const route = req.url.toLowerCase().replace(/\/+$/, "");
      res.writeHead(route === "/login" ? 200 : 404, { "content-type": "text/plain" });
      res.end(route);
    });
    await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const { port } = origin.address();
    sluice = await Sluice.start({ sluice: { origin: `http://127.0.0.1:${port}`, rules } });
  });
  after(async () => {
    await sluice?.stop();
    origin?.close();
  });

  test("/Login, /LOGIN/ and /login/ do not get past a limit on /login; the origin sees the client's spelling", async () => {
    const ip = client();
    assert.equal((await raw(sluice.base, "POST", "/login", ip)).status, 200);
    for (const spelling of ["/Login", "/LOGIN/", "/login/"]) {
      const answer = await raw(sluice.base, "POST", spelling, ip);
      assert.equal(answer.status, 429, spelling);
    }
    const other = client();
    assert.equal((await raw(sluice.base, "POST", "/LOGIN/", other)).status, 200);
    assert.equal(seen.at(-1), "/LOGIN/", "forwarded as sent");
  });

  test("the origin receives a method worker-rs does not name as sent, not as GET", async () => {
    const ip = client();
    assert.equal((await raw(sluice.base, "PROPFIND", "/dav/report", ip)).status, 404);
    assert.equal(seen.at(-1), "PROPFIND /dav/report");
    assert.equal((await raw(sluice.base, "PROPFIND", "/dav/report", ip)).status, 429, "and its rule counted it");
  });
});
