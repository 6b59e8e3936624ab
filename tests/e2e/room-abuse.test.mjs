// A waiting room against the abuses issue 36 lists, over HTTP on workerd:
// one address joining again and again without a cookie, other sites'
// pages and preflights taking places, banned clients joining, a stuffed
// pre-queue draw, and checkout reached without a session of the room.
// Each answer is checked for what it gives (a ticket, a place, the origin)
// and the shards' own counts for what it cost.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { createHmac, timingSafeEqual } from "node:crypto";
import { Sluice } from "./harness.mjs";

const SECRET = "room-secret-for-the-abuse-tests-0123456789";
const ADMIN = "room-abuse-admin-token-0123456789abcdef";
const OPERATOR = "192.0.2.200";

/** A request as a client sends it: from `ip`, with `cookie`, `headers`. */
function send(sluice, path, { ip, cookie, headers = {}, method = "GET" } = {}) {
  const fields = { accept: "application/json", ...headers };
  if (ip) fields["cf-connecting-ip"] = ip;
  if (cookie) fields.cookie = cookie;
  return sluice.fetch(path, { method, headers: fields });
}

/** The room's cookie an answer sets, `name=value`, or null. */
const cookieOf = (response) => response.headers.getSetCookie().map((line) => line.split(";")[0]).find((pair) => !pair.endsWith("=")) ?? null;

/** What a browser sends with each kind of request. */
const BROWSER = {
  navigation: { "sec-fetch-mode": "navigate", "sec-fetch-dest": "document", "sec-fetch-site": "none", "sec-fetch-user": "?1", accept: "text/html" },
  crossSiteLink: { "sec-fetch-mode": "navigate", "sec-fetch-dest": "document", "sec-fetch-site": "cross-site", accept: "text/html" },
  crossSiteImage: { "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image", "sec-fetch-site": "cross-site", accept: "image/avif,image/webp,*/*" },
  crossSiteFetch: { "sec-fetch-mode": "cors", "sec-fetch-dest": "empty", "sec-fetch-site": "cross-site", origin: "https://elsewhere.example" },
  crossSiteFrame: { "sec-fetch-mode": "navigate", "sec-fetch-dest": "iframe", "sec-fetch-site": "cross-site", accept: "text/html" },
  sameSiteFetch: { "sec-fetch-mode": "cors", "sec-fetch-dest": "empty", "sec-fetch-site": "same-origin" },
  preflight: {
    "sec-fetch-mode": "cors", "sec-fetch-dest": "empty", "sec-fetch-site": "cross-site",
    origin: "https://elsewhere.example", "access-control-request-method": "POST",
  },
};

async function admin(sluice, method, path, body) {
  const response = await sluice.fetch(`/_sluice/admin${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, "cf-connecting-ip": OPERATOR, ...(body ? { "content-type": "application/json" } : {}) },
    body: body && JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** A room's figures: waiting, active, and the calls its shards served. */
async function figures(sluice, rule) {
  const { status, body } = await admin(sluice, "GET", `/rooms/${rule}`);
  assert.equal(status, 200, JSON.stringify(body));
  return { ...body, calls: body.shards.reduce((sum, shard) => sum + shard.calls, 0) };
}

/** How many shard calls happened between two readings of `figures`:
 * each reading is one call per shard itself. */
const callsBetween = (before, after) => after.calls - before.calls - after.shards.length;

describe("rooms with today's fields, and the default join limit", () => {
  const room = (id, fields = {}) => ({ id, match: { path: `/${id}/*` }, waiting_room: { active: 1, per_minute: 100, shards: 1, refresh: "2s", ...fields } });
  let sluice;
  before(async () => {
    sluice = await Sluice.start({
      sluice: {
        rules: [
          room("crowd"),
          room("gate"),
          { ...room("held"), deny: ["203.0.113.128/25"] },
          room("drop", { active: 2, shards: 2, opens_at: new Date(Date.now() + 3_600_000).toISOString() }),
        ],
      },
      secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN },
    });
  });
  after(() => sluice?.stop());

  test("10 cookieless joins from one address take at most 5 places, and the rest cost no shard call", async () => {
    const holder = await send(sluice, "/crowd/", { ip: "198.18.0.1" });
    assert.equal(holder.status, 200, "the first visitor walks in");
    const before = await figures(sluice, "crowd");
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await send(sluice, "/crowd/item", { ip: "203.0.113.10" }));
    const tickets = answers.filter((a) => a.status === 503 && cookieOf(a));
    const refused = answers.filter((a) => a.status === 429);
    assert.equal(tickets.length, 5, `places taken: ${answers.map((a) => a.status)}`);
    assert.equal(refused.length, 5);
    for (const answer of refused) {
      assert.equal(cookieOf(answer), null, "a refusal hands out no ticket");
      assert.ok(Number(answer.headers.get("retry-after")) >= 1);
      const problem = await answer.json();
      assert.deepEqual(problem["violated-policies"], ["crowd"]);
      assert.equal(problem.code, "quota-exceeded");
    }
    const after = await figures(sluice, "crowd");
    assert.equal(callsBetween(before, after), 5, "only the five joins called a shard");
    assert.equal(after.waiting, 5);
    // The next visitor from elsewhere queues behind five, not ten.
    const next = await send(sluice, "/crowd/item", { ip: "198.18.0.2" });
    assert.equal(next.status, 503);
    assert.equal((await next.json()).position, 6);
    // The join key shows among the rule's top refused keys.
    const top = await admin(sluice, "GET", "/top?rule=crowd");
    assert.equal(top.status, 200);
    assert.ok(top.body.keys.some((k) => k.key === "203.0.113.10" && k.count >= 5), JSON.stringify(top.body));
  });

  test("preflights, HEADs, cross-site images, fetches and frames take no place and cost no shard call; a link from another site joins", async () => {
    const holder = await send(sluice, "/gate/", { ip: "198.18.1.1" });
    assert.equal(holder.status, 200);
    const before = await figures(sluice, "gate");
    const kinds = [
      ["OPTIONS", BROWSER.preflight],
      ["GET", BROWSER.crossSiteImage],
      ["GET", BROWSER.crossSiteFetch],
      ["GET", BROWSER.crossSiteFrame],
      ["GET", BROWSER.sameSiteFetch],
      ["OPTIONS", {}],
      ["HEAD", {}],
      ["HEAD", BROWSER.navigation],
    ];
    for (const [i, [method, headers]] of kinds.entries()) {
      const answer = await send(sluice, "/gate/i1.png", { ip: `203.0.113.${20 + i}`, method, headers });
      const seen = `${method} ${JSON.stringify(headers)}`;
      assert.equal(answer.status, 403, seen);
      assert.equal(cookieOf(answer), null, seen);
      assert.equal(answer.headers.get("content-type"), "application/problem+json");
      if (method === "HEAD") continue;
      const problem = await answer.json();
      assert.deepEqual([problem.code, problem.room], ["room-required", "gate"], seen);
    }
    const after = await figures(sluice, "gate");
    assert.equal(callsBetween(before, after), 0, "no shard was asked");
    assert.equal(after.waiting, 0, "nobody joined");
    // Following a link from another site is a page load: it joins.
    const link = await send(sluice, "/gate/item", { ip: "198.18.1.2", headers: BROWSER.crossSiteLink });
    assert.equal(link.status, 503);
    assert.ok(cookieOf(link));
    assert.match(link.headers.get("content-type"), /^text\/html/);
    // A session passes whatever kind of request carries it.
    const image = await send(sluice, "/gate/i1.png", { ip: "198.18.1.1", cookie: cookieOf(holder), headers: { ...BROWSER.sameSiteFetch, "sec-fetch-dest": "image" } });
    assert.equal(image.status, 200);
  });

  test("a banned address, a banned network and a banned join key are refused on a room path before any shard call", async () => {
    const inside = await send(sluice, "/held/", { ip: "198.51.100.20" });
    assert.equal(inside.status, 200, "a session from a network about to be banned");
    assert.equal((await admin(sluice, "PUT", "/bans/203.0.113.50", { for: "10m", reason: "bot" })).status, 200);
    assert.equal((await admin(sluice, "PUT", `/bans/${encodeURIComponent("198.51.100.0/24")}`, { for: "10m", reason: "bot farm" })).status, 200);
    const refusedBan = async (clients) => {
      const before = await figures(sluice, "held");
      for (const [ip, cookie] of clients) {
        for (const headers of [{}, BROWSER.navigation]) {
          const answer = await send(sluice, "/held/item", { ip, cookie, headers });
          assert.equal(answer.status, 429, `${ip} ${JSON.stringify(headers)}`);
          assert.equal(cookieOf(answer), null);
          const problem = JSON.parse(await answer.text());
          assert.equal(problem.code, "banned", JSON.stringify(problem));
        }
      }
      const after = await figures(sluice, "held");
      assert.equal(callsBetween(before, after), 0, "no shard was asked");
      assert.equal(after.waiting, 0);
    };
    await refusedBan([["203.0.113.50"], ["198.51.100.9"], ["198.51.100.20", cookieOf(inside)]]);
    // The room's deny list, as any rule's: 403 denied, no shard call.
    const before = await figures(sluice, "held");
    for (const headers of [{}, BROWSER.navigation]) {
      const denied = await send(sluice, "/held/item", { ip: "203.0.113.200", headers });
      assert.deepEqual([denied.status, (await denied.json()).code], [403, "denied"]);
    }
    assert.equal(callsBetween(before, await figures(sluice, "held")), 0);
    const keyBan = await admin(sluice, "PUT", "/keys/held/203.0.113.60/ban", { for: "10m", reason: "joins too often" });
    assert.equal(keyBan.status, 200, JSON.stringify(keyBan.body));
    assert.equal(keyBan.body.object, "rule:held:203.0.113.60");
    await refusedBan([["203.0.113.60"]]);
    // The join key's ban is one key's: another address joins.
    assert.equal((await send(sluice, "/held/item", { ip: "203.0.113.61" })).status, 503);
  });

  test("a stuffed pre-queue draw holds at most the join limit of one address", async () => {
    const stuffer = [];
    for (let i = 0; i < 90; i++) stuffer.push(await send(sluice, "/drop/", { ip: "203.0.113.90" }));
    const tickets = new Set(stuffer.filter((a) => a.status === 503).map(cookieOf).filter(Boolean));
    for (let i = 0; i < 10; i++) {
      const shopper = await send(sluice, "/drop/", { ip: `198.18.9.${i + 1}` });
      assert.equal(shopper.status, 503);
      const seen = await shopper.json();
      assert.equal(seen.state, "pre-queue");
      // An hour before the opening, a page refreshes every 5 minutes, not every 2 s.
      assert.deepEqual([seen.refresh_s, shopper.headers.get("retry-after")], [300, "300"]);
    }
    assert.ok(tickets.size <= 5, `one address holds ${tickets.size} places in the draw`);
    const report = await figures(sluice, "drop");
    assert.equal(report.waiting, tickets.size + 10, "the draw holds the stuffer's few and every shopper");
  });
});

/** The docs' snippet that verifies a `Sluice-Room-Pass` at the origin,
 * taken from docs/http-api.md as a shop would copy it. */
function docsVerifier() {
  const docs = readFileSync(new URL("../../docs/http-api.md", import.meta.url), "utf8");
  const block = docs.split("```js").map((b) => b.split("```")[0]).find((b) => b.includes("function verifyRoomPass"));
  assert.ok(block, "docs/http-api.md shows verifyRoomPass");
  const code = block.replace(/^import .*$/m, "");
  return new Function("createHmac", "timingSafeEqual", `${code}\nreturn verifyRoomPass;`)(createHmac, timingSafeEqual);
}

/** Runs the challenge page's own script (src/room/challenge.js) on
 * `puzzle`, as a browser would: the cookie value it sets. */
function solveAsThePage(puzzle, work, cookie) {
  const script = readFileSync(new URL("../../src/room/challenge.js", import.meta.url), "utf8");
  let set = null;
  const document = { getElementById: () => ({ dataset: { puzzle, work: String(work), cookie } }), set cookie(value) { set = value; } };
  const location = { protocol: "http:", href: "", replace() {} };
  new Function("document", "location", "setTimeout", script)(document, location, (next) => next());
  return set.split(";")[0];
}

describe("rules behind a room, the pre-queue's cap and the challenge", () => {
  const PASS_SECRET = "the-shop-s-own-pass-secret-0123456789abcdef";
  const seen = [];
  let origin;
  let sluice;
  before(async () => {
    origin = createServer((req, res) => {
      seen.push({ method: req.method, url: req.url, pass: req.headers["sluice-room-pass"] });
      const end = req.url.includes("room=end") ? { "sluice-room": "end" } : {};
      res.writeHead(200, { "content-type": "application/json", ...end });
      res.end(JSON.stringify({ url: req.url }));
    });
    await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const room = (id, fields) => ({ id, match: { path: `/${id}/*` }, waiting_room: { active: 1, per_minute: 100, shards: 1, refresh: "2s", ...fields } });
    sluice = await Sluice.start({
      sluice: {
        origin: `http://127.0.0.1:${origin.address().port}`,
        rules: [
          room("shop", { pass_secret: "SHOP_PASS_SECRET" }),
          { id: "buy", match: { path: "/checkout", methods: ["POST"] }, room: "shop", key: "ip", limit: 2, window: "1m" },
          room("drop", { active: 2, shards: 2, opens_at: new Date(Date.now() + 3_600_000).toISOString(), join: { limit: 2, window: "1s" } }),
          room("work", { challenge: { work: 10 } }),
        ],
      },
      secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN, SHOP_PASS_SECRET: PASS_SECRET },
    });
  });
  after(async () => {
    await sluice?.stop();
    origin?.close();
  });

  test("checkout without a session never reaches the origin; with one, the origin gets a pass it can verify", async () => {
    const verify = docsVerifier();
    const holder = await send(sluice, "/shop/", { ip: "198.18.2.1" });
    assert.equal(holder.status, 200);
    const session = cookieOf(holder);
    const before = seen.length;
    const fetched = await send(sluice, "/checkout", { method: "POST", ip: "203.0.113.70", headers: BROWSER.sameSiteFetch });
    assert.equal(fetched.status, 403);
    const problem = await fetched.json();
    assert.deepEqual([problem.code, problem.room], ["room-required", "shop"]);
    const api = await send(sluice, "/checkout", { method: "POST", ip: "203.0.113.71" });
    assert.equal(api.status, 503, "an API client joins the room, full now");
    assert.equal((await api.json()).state, "waiting");
    assert.ok(cookieOf(api));
    const page = await send(sluice, "/checkout", { method: "POST", ip: "203.0.113.72", headers: BROWSER.navigation });
    assert.equal(page.status, 503);
    assert.match(await page.text(), /You are in line/);
    assert.equal(seen.length, before, "the origin saw none of them");

    const bought = await send(sluice, "/checkout", { method: "POST", ip: "198.18.2.1", cookie: session, headers: { "sluice-room-pass": "v1.pass.shop.0-0.99999999999999.forged" } });
    assert.equal(bought.status, 200);
    assert.match(bought.headers.get("ratelimit"), /^"buy";r=1;t=\d+$/, "the rule's own limit applies");
    const reached = seen.at(-1);
    assert.deepEqual([reached.method, reached.url], ["POST", "/checkout"]);
    const proved = verify(reached.pass, "shop", PASS_SECRET);
    assert.equal(proved?.session, "0-0", `the origin verifies ${reached.pass}`);
    assert.ok(proved.expires > Date.now());
    assert.equal(verify(reached.pass, "shop", SECRET), null, "signed with the pass secret, not the cookies'");
    assert.equal(verify(reached.pass, "shoes", PASS_SECRET), null);
    // A changed signature (its first character: the last one's low bits are padding).
    const cut = reached.pass.lastIndexOf(".") + 1;
    const altered = `${reached.pass.slice(0, cut)}${reached.pass[cut] === "A" ? "B" : "A"}${reached.pass.slice(cut + 1)}`;
    assert.equal(verify(altered, "shop", PASS_SECRET), null);
    assert.equal(verify(reached.pass, "shop", PASS_SECRET, proved.expires), null, "expired");
    assert.ok(verify(seen[before - 1].pass, "shop", PASS_SECRET), "the room's own paths carry it too");

    // The origin ends the session on its confirmation; the rule's limit
    // holds whatever the room says.
    const ended = await send(sluice, "/checkout?room=end", { method: "POST", ip: "198.18.2.1", cookie: session });
    assert.equal(ended.status, 200);
    assert.match(ended.headers.get("set-cookie"), /^sluice_room_shop=; Path=\/; Max-Age=0/);
    assert.equal((await send(sluice, "/checkout", { method: "POST", ip: "198.18.2.1", cookie: session })).status, 429);
    const next = await send(sluice, "/checkout", { method: "POST", ip: "203.0.113.71", cookie: cookieOf(api) });
    assert.equal(next.status, 200, "the ticket that joined from checkout is let in there");
    // A client's own pass reaches no origin, on any path.
    await send(sluice, "/elsewhere", { headers: { "sluice-room-pass": "v1.pass.shop.0-0.1.x" } });
    assert.deepEqual([seen.at(-1).url, seen.at(-1).pass], ["/elsewhere", undefined]);
  });

  test("the pre-queue's cap holds however long a client keeps joining", async () => {
    const tickets = new Set();
    let refused = 0;
    for (let i = 0; i < 12; i++) {
      const answer = await send(sluice, "/drop/", { ip: "203.0.113.91" });
      if (answer.status === 503 && cookieOf(answer)) tickets.add(cookieOf(answer));
      if (answer.status === 429) refused += 1;
      await new Promise((resolve) => setTimeout(resolve, 350));
    }
    assert.equal(tickets.size, 2, "the join limit, 2 a second, would have let in about 8");
    assert.equal(refused, 10);
    const report = await figures(sluice, "drop");
    assert.equal(report.waiting, 2);
  });

  test("a challenge: the page's puzzle solved once gives one place, a copy none", async () => {
    const first = await send(sluice, "/work/", { ip: "198.18.3.1" });
    assert.equal(first.status, 503);
    assert.equal(cookieOf(first), null, "no ticket before the work");
    const puzzle = await first.json();
    assert.deepEqual([puzzle.state, puzzle.work, puzzle.cookie], ["challenge", 10, "sluice_work_work"]);
    const solved = solveAsThePage(puzzle.puzzle, puzzle.work, puzzle.cookie);
    const wrong = `${solved.split(".").slice(0, -1).join(".")}.x`;
    const before = await figures(sluice, "work");
    const refused = async (cookie, ip = "198.18.3.1") => {
      const again = await send(sluice, "/work/", { ip, cookie });
      assert.equal(again.status, 400, cookie.slice(0, 80));
      assert.equal(cookieOf(again), null, "no ticket");
      const problem = await again.json();
      assert.deepEqual([problem.code, problem.field, problem.work, problem.cookie], ["invalid-request", "sluice_work_work", 10, "sluice_work_work"]);
      assert.match(problem.puzzle, /^v1\.w\.work\.10\./, "a puzzle to solve instead");
      return problem;
    };
    const huge = `sluice_work_work=${puzzle.puzzle}.${"9".repeat(5000)}`;
    const forged = `sluice_work_work=${puzzle.puzzle.replace(".10.", ".1.")}.0`;
    for (const cookie of [wrong, `sluice_work_work=${puzzle.puzzle}.1`, huge, forged, `sluice_work_work=${"x.".repeat(3000)}`, "sluice_work_work=."]) await refused(cookie);
    assert.equal(callsBetween(before, await figures(sluice, "work")), 0, "no shard was asked");
    const entered = await send(sluice, "/work/", { ip: "198.18.3.1", cookie: solved });
    assert.equal(entered.status, 200);
    assert.match(entered.headers.getSetCookie().join("\n"), /^sluice_work_work=; Path=\/; Max-Age=0/m, "the work cookie is spent");
    const fresh = await refused(solved, "198.18.3.2");
    assert.notEqual(fresh.puzzle, puzzle.puzzle, "a replayed answer gets a puzzle of its own, no place");
    const report = await figures(sluice, "work");
    assert.deepEqual([report.active, report.waiting], [1, 0]);
    // The page: its script solves and loads it again; here, the HTML.
    const html = await send(sluice, "/work/", { ip: "198.18.3.3", headers: BROWSER.navigation });
    assert.match(html.headers.get("content-security-policy"), /script-src 'sha256-[A-Za-z0-9+/]{43}='/);
    assert.match(await html.text(), /<p id="work" data-puzzle="v1\.w\.work\.10\.\d+\.\d+\.[A-Za-z0-9_-]{43}" data-work="10" data-cookie="sluice_work_work">/);
  });
});
