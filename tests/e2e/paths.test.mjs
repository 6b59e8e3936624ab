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

  test("a method the runtime does not name is matched, keyed and forwarded as the same GET", async () => {
    // The rule reads a method `worker` does not know (PROPFIND) as GET, and
    // so is it forwarded; were it keyed under its own name, it would be a
    // second allowance of a GET-only rule.
    for (const order of [["GET", "PROPFIND"], ["PROPFIND", "GET"]]) {
      const ip = client();
      const first = await raw(sluice.base, order[0], "/m/x", ip);
      assert.equal(first.status, 200, `${order[0]} first`);
      assert.equal(JSON.parse(first.body).method, "GET");
      const second = await raw(sluice.base, order[1], "/m/x", ip);
      assert.equal(second.status, 429, `${order[1]} after ${order[0]}: ${second.body}`);
    }
  });
});

describe("in front of an origin with its own routing", () => {
  let sluice;
  let origin;
  const seen = [];
  before(async () => {
    // A case-insensitive, slash-forgiving origin, as Express is by default.
    origin = createServer((req, res) => {
      seen.push(req.url);
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
});
