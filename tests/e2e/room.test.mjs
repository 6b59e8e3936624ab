// Waiting rooms over HTTP, on workerd: visitors queue, see their position
// fall and are let in; never more than `active` at once, whatever the
// isolate; the origin's `Sluice-Room: end` lets the next one in; tickets
// are signed, and anything altered joins at the back.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { Miniflare } from "miniflare";
import { Sluice, sluiceWorkerOptions, anotherIsolate } from "./harness.mjs";
import { Visitor } from "./room-visitor.mjs";

const SECRET = "room-secret-for-the-e2e-tests-0123456789";
const ADMIN = "room-admin-token-for-e2e-0123456789abcdef";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const room = (fields) => ({ rules: [{ id: "shop", match: { path: "/shop/*" }, waiting_room: fields }] });

async function start(sluice, extra = {}) {
  return Sluice.start({ sluice, secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN }, ...extra });
}

async function figures(sluice, rule = "shop") {
  const response = await sluice.fetch(`/_sluice/admin/rooms/${rule}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(response.status, 200);
  return response.json();
}

describe("200 visitors on active = 20, per_minute = 600, over two isolates", () => {
  // Every visitor from one address, under a join limit above their
  // joins: this test is about places, and one join key's object costs the
  // local runtime far less than 200 new ones arriving in a second.
  const config = room({ active: 20, per_minute: 600, shards: 4, refresh: "1s", session: "30s", join: { limit: 1_000, window: "1m" } });
  let sluice;
  before(async () => {
    sluice = await start(config, { workers: [anotherIsolate("sluice-b", { ROOM_SECRET: SECRET, SLUICE: { origin: "demo", ...config } })] });
  });
  after(() => sluice?.stop());

  test("never more than 20 at once, positions fall, everyone is let in, and end lets the next one in", { timeout: 240_000 }, async () => {
    const isolates = [(path, init) => sluice.fetch(path, init)];
    const other = await sluice.worker("sluice-b");
    isolates.push((path, init) => other.fetch(`http://sluice${path}`, init));

    const visits = [];
    const visit = async (n) => {
      const visitor = new Visitor(isolates[n % 2], "198.18.0.1");
      const positions = [];
      for (;;) {
        const answer = await visitor.get(`/shop/item-${n}`);
        if (answer.status === 200) {
          // In: one more page, then the origin ends the session.
          const session = answer.body.key;
          const more = await visitor.get("/shop/cart?hold_ms=150");
          assert.equal(more.status, 200, "a session passes on its signature");
          assert.equal(more.body.key, session);
          const ending = await visitor.get("/shop/checkout?room=end");
          assert.equal(ending.status, 200);
          assert.equal(ending.headers.get("sluice-room"), null, "the origin's field never reaches the visitor");
          assert.equal(visitor.cookie, null, "the session cookie is deleted");
          visits.push({ n, session, positions, in: answer.received, out: ending.sent });
          return;
        }
        assert.equal(answer.status, 503, answer.text);
        assert.equal(answer.body.state, "waiting");
        assert.equal(answer.headers.get("retry-after"), "1");
        positions.push(answer.body.position);
        await sleep(answer.body.refresh_s * 1000 * (0.5 + Math.random()));
      }
    };
    let watching = true;
    const seen = [];
    const watch = (async () => {
      while (watching) {
        const report = await figures(sluice);
        seen.push(report.active + report.offered);
        await sleep(250);
      }
    })();
    await Promise.all(Array.from({ length: 200 }, (_, n) => sleep(n * 5).then(() => visit(n))));
    watching = false;
    await watch;

    assert.equal(visits.length, 200, "every visitor was let in");
    assert.equal(new Set(visits.map((v) => v.session)).size, 200, "each with a session of its own");
    // A session was live from before its first answer arrived until after
    // its end was sent: more than 20 of those at one instant would be a
    // certain breach.
    const events = visits.flatMap((v) => [[v.in, 1], [v.out, -1]]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let live = 0;
    let most = 0;
    for (const [, step] of events) {
      live += step;
      most = Math.max(most, live);
    }
    assert.ok(most <= 20, `${most} sessions certainly live at once`);
    assert.ok(most >= 10, `only ${most} at once: the room was never full, the test proves little`);
    assert.ok(Math.max(...seen) <= 20, `the shards counted ${Math.max(...seen)} sessions and offers`);
    const waited = visits.filter((v) => v.positions.length > 0);
    assert.ok(waited.length >= 150, `${waited.length} visitors waited`);
    for (const { n, positions } of waited) {
      for (let i = 1; i < positions.length; i++) {
        assert.ok(positions[i] <= positions[i - 1], `visitor ${n}'s position rose: ${positions}`);
      }
    }
    const fell = waited.filter((v) => v.positions.at(-1) < v.positions[0]).length;
    assert.ok(fell >= waited.length / 2, `only ${fell} of ${waited.length} saw their position fall`);
    const report = await figures(sluice);
    assert.equal(report.active, 0, "every session ended");
    assert.equal(report.shards.length, 4);
  });
});

describe("one room, one place", () => {
  // A room per test, so that no test depends on another's leftovers.
  const single = (id) => ({ id, match: { path: `/${id}/*` }, waiting_room: { active: 1, per_minute: 100, shards: 1, refresh: "2s" } });
  const config = {
    rules: [
      ...["shop", "page", "tamper", "ops"].map(single),
      { ...single("shoes"), waiting_room: { ...single("shoes").waiting_room, secret: "SHOES_SECRET" } },
      { id: "api", match: { path: "/api/*" }, limit: 100, window: "1m" },
    ],
  };
  let sluice;
  before(async () => {
    sluice = await start(config, { secrets: { ROOM_SECRET: SECRET, SHOES_SECRET: `${SECRET}-shoes`, ADMIN_TOKEN: ADMIN } });
  });
  after(() => sluice?.stop());
  const visitor = () => new Visitor((path, init) => sluice.fetch(path, init));

  test("the origin's Sluice-Room: end lets the next one in at once", async () => {
    const a = visitor();
    const b = visitor();
    assert.equal((await a.get("/shop/a")).status, 200);
    const waiting = await b.get("/shop/b");
    assert.equal(waiting.status, 503);
    assert.deepEqual(waiting.body, { state: "waiting", position: 1, wait_s: waiting.body.wait_s, refresh_s: 2 });
    assert.equal((await b.get("/shop/b")).status, 503, "still full");
    // Another word in the field is taken out too, and ends nothing.
    const kept = await a.get("/shop/more?room=later");
    assert.equal(kept.status, 200);
    assert.equal(kept.headers.get("sluice-room"), null);
    assert.equal(kept.headers.get("set-cookie"), null);
    assert.equal((await b.get("/shop/b")).status, 503, "still full");
    const ended = await a.get("/shop/done?room=end");
    assert.equal(ended.status, 200);
    assert.equal(ended.headers.get("sluice-room"), null);
    assert.match(ended.headers.get("set-cookie"), /^sluice_room_shop=; Path=\/; Max-Age=0; HttpOnly; SameSite=Lax$/);
    const next = await b.get("/shop/b");
    assert.equal(next.status, 200, "let in on the next refresh, without waiting for anything to lapse");
    assert.match(next.headers.get("set-cookie"), /^sluice_room_shop=v1\.s\.shop\.0\.\d+\.\d+\.\d+\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=(299|300); HttpOnly; SameSite=Lax$/);
    // a is a newcomer again, and waits behind nobody but b's session.
    const again = await a.get("/shop/a");
    assert.equal(again.status, 503);
    await b.get("/shop/x?room=end");
  });

  test("the waiting page: HTML of its own, refreshing itself, under a strict policy; or JSON", async () => {
    const holder = visitor();
    assert.equal((await holder.get("/page/a")).status, 200);
    const html = await visitor().get("/page/page", { accept: "text/html,application/xhtml+xml,*/*;q=0.8" });
    assert.equal(html.status, 503);
    assert.equal(html.headers.get("content-type"), "text/html; charset=utf-8");
    assert.equal(html.headers.get("retry-after"), "2");
    assert.equal(html.headers.get("cache-control"), "no-store");
    const policy = html.headers.get("content-security-policy");
    assert.match(policy, /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]{43}='; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/);
    assert.match(html.text, /<meta http-equiv="refresh" content="2">/);
    assert.match(html.text, /<dt>Your place in line<\/dt><dd>1<\/dd>/);
    assert.doesNotMatch(html.text, /<script/i);
    const json = await visitor().get("/page/page");
    assert.equal(json.headers.get("content-type"), "application/json");
    assert.deepEqual(Object.keys(json.body).sort(), ["position", "refresh_s", "state", "wait_s"]);
    assert.equal(json.body.position, 2);
    await holder.get("/page/x?room=end");
  });

  test("an altered, foreign or expired cookie is no ticket: the visitor joins at the back", async () => {
    const holder = visitor();
    assert.equal((await holder.get("/tamper/a")).status, 200);
    const first = visitor();
    const line = (await first.get("/tamper/a")).body.position;
    const second = visitor();
    assert.equal((await second.get("/tamper/a")).body.position, line + 1);
    // Every kind of tampering with the first visitor's ticket.
    const [name, value] = first.cookie.split("=");
    const flip = (text, i) => text.slice(0, i) + (text[i] === "1" ? "2" : "1") + text.slice(i + 1);
    const place = value.split(".")[4];
    // Signed with the right secret (which only Sluice should hold), but a
    // day old: expired.
    const payload = `v1.t.tamper.0.${place}.${Date.now() - 86_400_001}.0`;
    const signature = createHmac("sha256", SECRET).update(payload).digest("base64url");
    const forged = [
      `${name}=${payload}.${signature}`,
      `${name}=${value.replace(`.${place}.`, ".p0.")}`,
      `${name}=${flip(value, value.length - 5)}`,
      `${name}=${value.replace("v1.t.tamper.", "v1.t.shoes.")}`,
      `${name}=${value.split(".").slice(0, -1).join(".")}`,
      `${name}=garbage`,
    ];
    for (const cookie of forged) {
      const answer = await visitor().get("/tamper/a", { cookie });
      assert.equal(answer.status, 503);
      assert.ok(answer.body.position > line + 1, `${cookie} kept a place: ${answer.body.position}`);
    }
    // A ticket of one room is nothing in another (here also signed with
    // another secret): a newcomer, let into the empty room.
    const shoes = await visitor().get("/shoes/a", { cookie: first.cookie.replace("sluice_room_tamper", "sluice_room_shoes") });
    assert.equal(shoes.status, 200);
    assert.equal(shoes.body.key, "0.0");
    // The genuine ticket still holds its place.
    assert.equal((await first.get("/tamper/a")).body.position, line);
    // A copy of it holds the same place, not a second one.
    const copy = await visitor().get("/tamper/a", { cookie: first.cookie });
    assert.equal(copy.body.position, line);
    await holder.get("/tamper/x?room=end");
  });

  test("operators read each room's figures; bad routes are problems naming the field", async () => {
    const holder = visitor();
    await holder.get("/ops/a");
    await visitor().get("/ops/b");
    const report = await figures(sluice, "ops");
    assert.equal(report.rule, "ops");
    assert.equal(report.active_limit, 1);
    assert.ok(report.active + report.offered >= 1);
    assert.ok(report.waiting >= 1);
    assert.equal(report.shards[0].places, 1);
    assert.ok(report.history.length >= 1);
    const all = await (await sluice.fetch("/_sluice/admin/rooms", { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    assert.deepEqual(all.rooms.map((r) => r.rule), ["shop", "page", "tamper", "ops", "shoes"]);
    const auth = { headers: { authorization: `Bearer ${ADMIN}` } };
    for (const [path, status] of [["/_sluice/admin/rooms/nope", 404], ["/_sluice/admin/rooms/api", 404]]) {
      const answer = await sluice.fetch(path, auth);
      assert.equal(answer.status, status);
      assert.equal(answer.headers.get("content-type"), "application/problem+json");
      assert.equal((await answer.json()).field, "rule");
    }
    assert.equal((await sluice.fetch("/_sluice/admin/rooms/ops", { ...auth, method: "POST" })).status, 405);
    assert.equal((await sluice.fetch("/_sluice/admin/rooms/ops")).status, 401);
    assert.equal((await sluice.fetch("/_sluice/admin/rooms/ops", { method: "DELETE" })).status, 401, "a reset needs the token");
    const nope = await sluice.fetch("/_sluice/admin/rooms/nope", { ...auth, method: "DELETE" });
    assert.deepEqual([nope.status, (await nope.json()).field], [404, "rule"], "a reset of no room is a 404 naming the field");
    await holder.get("/ops/x?room=end");
  });
});

test("an event that opens at a time: a pre-queue, drawn at opening", { timeout: 60_000 }, async () => {
  const opensAt = Date.now() + 4_000;
  const sluice = await start(room({ active: 2, per_minute: 100, shards: 1, refresh: "1s", opens_at: new Date(opensAt).toISOString() }));
  try {
    const visitors = Array.from({ length: 6 }, () => new Visitor((path, init) => sluice.fetch(path, init)));
    for (const v of visitors) {
      const answer = await v.get("/shop/sale");
      assert.equal(answer.status, 503);
      assert.equal(answer.body.state, "pre-queue");
      assert.equal(Date.parse(answer.body.opens_at), Math.floor(opensAt));
      assert.ok(answer.body.opens_in_s > 0 && answer.body.opens_in_s <= 4);
    }
    await sleep(opensAt - Date.now() + 2_100);
    const answers = [];
    for (const v of visitors) answers.push(await v.get("/shop/sale"));
    assert.equal(answers.filter((a) => a.status === 200).length, 2, "two places at opening");
    const positions = answers.filter((a) => a.status === 503).map((a) => a.body.position).sort();
    assert.deepEqual(positions, [1, 2, 3, 4], "the rest hold the other places of the draw");
    // A drawn ticket's page says the draw set the order; a later
    // arrival's says arrival did.
    const drawn = visitors[answers.findIndex((a) => a.status === 503)];
    const page = await drawn.get("/shop/sale", { accept: "text/html" });
    assert.match(page.text, /in the order the draw at opening gave them/);
    assert.doesNotMatch(page.text, /arrived/);
    const later = new Visitor((path, init) => sluice.fetch(path, init));
    const late = await later.get("/shop/sale");
    assert.equal(late.body.position, 5, "a later arrival queues behind the whole pre-queue");
    assert.match((await later.get("/shop/sale", { accept: "text/html" })).text, /in the order they arrived/);
  } finally {
    await sluice.stop();
  }
});

test("a room without its secret, or with a short one, is an invalid config naming the field", async () => {
  for (const secrets of [{}, { ROOM_SECRET: "short" }]) {
    const sluice = await Sluice.start({ sluice: room({ active: 1, per_minute: 1 }), secrets });
    try {
      const answer = await sluice.fetch("/anything");
      assert.equal(answer.status, 500);
      const problem = await answer.json();
      assert.equal(problem.field, "SLUICE.rules[0].waiting_room.secret");
    } finally {
      await sluice.stop();
    }
  }
});

test("a room without the ROOM binding is an invalid config naming the room", async () => {
  const options = sluiceWorkerOptions({ ROOM_SECRET: SECRET, SLUICE: { origin: "demo", ...room({ active: 1, per_minute: 1 }) } });
  delete options.assets;
  delete options.durableObjects.ROOM;
  const mf = new Miniflare({ workers: [options], host: "127.0.0.1", port: 0 });
  try {
    const answer = await fetch(new URL("/shop/a", await mf.ready));
    assert.equal(answer.status, 500);
    assert.equal((await answer.json()).field, "SLUICE.rules[0].waiting_room");
  } finally {
    await mf.dispose();
  }
});
