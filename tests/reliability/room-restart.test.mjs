// A waiting room through hard restarts: the runtime is killed (SIGKILL,
// persisted state) and started again with sessions live, tickets waiting
// and an offer not yet claimed. Afterwards every ticket keeps its place,
// every session its place in the count, the unclaimed offer is still
// there to claim, and new arrivals queue behind everyone. An operator's
// state (paused, closed, open again) is kept in the shard through each
// restart, and so is an offer it held still.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir } from "../e2e/harness.mjs";
import { Visitor } from "../e2e/room-visitor.mjs";
import { runtime } from "./support.mjs";

const SECRET = "room-secret-for-the-restart-test-0123456";
const ADMIN = "room-restart-admin-token-0123456789abcdef";
const OPTIONS = {
  sluice: {
    origin: "demo",
    rules: [{ id: "shop", match: { path: "/shop/*" }, waiting_room: { active: 2, per_minute: 100, shards: 1, refresh: "2s" } }],
  },
  secrets: { ROOM_SECRET: SECRET, ADMIN_TOKEN: ADMIN },
};

/** Runs `use` against a runtime on a fresh persisted directory: `at`
 * fetches from whichever runtime is up, `visitor()` is a new visitor
 * through it, `restart()` kills it (SIGKILL) and starts another on the
 * same state. The runtime is stopped and the directory removed after. */
async function withRuntime(use, options = OPTIONS) {
  const { dir, remove } = tempDir();
  let current = null;
  const at = (path, init) => fetch(current.url + path, init);
  // `down` ms without a runtime; `next` options (a new config) after.
  const restart = async ({ down = 0, next = options } = {}) => {
    await current.kill();
    await new Promise((resolve) => setTimeout(resolve, down));
    current = await runtime(dir, next);
  };
  try {
    current = await runtime(dir, options);
    await use({ at, visitor: () => new Visitor(at), restart });
  } finally {
    await current?.kill();
    remove();
  }
}

test("a runtime restart keeps every ticket and session", { timeout: 120_000 }, () => withRuntime(async ({ at, visitor, restart }) => {
  const figures = async () => (await at("/_sluice/admin/rooms/shop", { headers: { authorization: `Bearer ${ADMIN}` } })).json();
  const [a, b] = [visitor(), visitor()];
  assert.equal((await a.get("/shop/a")).status, 200);
  assert.equal((await b.get("/shop/b")).status, 200);
  const waiting = [visitor(), visitor(), visitor()];
  for (const [i, v] of waiting.entries()) assert.equal((await v.get("/shop/w")).body.position, i + 1);

  await restart();
  // The two sessions still count: nobody else gets in.
  let report = await figures();
  assert.deepEqual([report.active, report.waiting], [2, 3]);
  for (const [i, v] of waiting.entries()) assert.equal((await v.get("/shop/w")).body.position, i + 1, `ticket ${i}`);
  const late = visitor();
  assert.equal((await late.get("/shop/late")).body.position, 4, "a new arrival queues behind every kept ticket");
  // The sessions pass, and the origin can still end them.
  assert.equal((await a.get("/shop/a")).status, 200);
  assert.equal((await a.get("/shop/a?room=end")).status, 200);

  // An offer made before a kill is still there to claim after it.
  report = await figures();
  assert.deepEqual([report.active, report.offered], [1, 1]);
  await restart();
  const claimed = await waiting[0].get("/shop/w");
  assert.equal(claimed.status, 200, `the offered ticket claims its place after the restart: ${claimed.text}`);
  assert.equal((await waiting[1].get("/shop/w")).body.position, 1);
  report = await figures();
  assert.deepEqual([report.active, report.offered, report.waiting], [2, 0, 3]);

  await restart();
  assert.equal((await b.get("/shop/b?room=end")).status, 200);
  assert.equal((await waiting[1].get("/shop/w")).status, 200);
  assert.equal((await waiting[2].get("/shop/w")).body.position, 1);
  assert.equal((await late.get("/shop/late")).body.position, 2);
}));

test("a runtime restart keeps an operator's state in every shard, and an offer that stands still", { timeout: 120_000 }, () => withRuntime(async ({ at, visitor, restart }) => {
  const call = async (method, path, body) => {
    const response = await at(`/_sluice/admin${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body && JSON.stringify(body),
    });
    assert.equal(response.status, 200, `${method} ${path}: ${await response.clone().text()}`);
    return response.json();
  };
  const [a, b] = [visitor(), visitor()];
  assert.equal((await a.get("/shop/a")).status, 200);
  assert.equal((await b.get("/shop/b")).status, 200);
  const [c, d] = [visitor(), visitor()];
  assert.equal((await c.get("/shop/w")).body.position, 1);
  assert.equal((await d.get("/shop/w")).body.position, 2);
  // a leaves: c's turn comes, and the room is paused before c claims it.
  assert.equal((await a.get("/shop/a?room=end")).status, 200);
  await call("PUT", "/rules/shop/state", { state: "paused", reason: "stock count" });

  await restart();
  let answer = await c.get("/shop/w");
  assert.equal(answer.status, 503, "paused after the restart: c cannot claim its offer");
  assert.deepEqual([answer.body.paused, answer.body.reason, answer.body.position], [true, "stock count", 1]);
  // d is next once c's offer is claimed (an offered ticket shows 1
  // too); a newcomer queues behind d, though a place is free.
  assert.deepEqual([(await d.get("/shop/w")).body.position, (await visitor().get("/shop/n")).body.position], [1, 2]);
  const read = await call("GET", "/rules/shop/state");
  assert.deepEqual([read.state, read.reason, read.where], ["paused", "stock count", "shards"]);
  let report = await call("GET", "/rooms/shop");
  assert.deepEqual([report.state, report.active, report.offered], ["paused", 1, 1]);

  await call("PUT", "/rules/shop/state", { state: "closed", reason: "sold out" });
  await restart();
  answer = await visitor().get("/shop/n");
  assert.equal(answer.status, 410);
  assert.equal(answer.body.reason, "sold out");
  assert.equal((await d.get("/shop/w")).status, 410);
  assert.equal((await b.get("/shop/b")).status, 200, "the session runs on");

  await call("PUT", "/rules/shop/state", { state: "open" });
  await restart();
  // The offer stood still through all of it: c claims it now.
  assert.equal((await c.get("/shop/w")).status, 200);
  assert.equal((await d.get("/shop/w")).body.position, 1);
  report = await call("GET", "/rooms/shop");
  assert.deepEqual([report.state, report.active, report.offered], ["open", 2, 0]);
}));

/** A room of `active` places on `shards` shards, opening at `opensAt`. */
const room = (room) => ({
  ...OPTIONS,
  sluice: { ...OPTIONS.sluice, rules: [{ ...OPTIONS.sluice.rules[0], waiting_room: { per_minute: 100, refresh: "2s", ...room } }] },
});
const admin = (at, method, path) => at(`/_sluice/admin${path}`, { method, headers: { authorization: `Bearer ${ADMIN}` } });

test("an offered place survives an outage longer than its grace", { timeout: 120_000 }, () => withRuntime(async ({ visitor, restart }) => {
  const [a, b] = [visitor(), visitor()];
  assert.equal((await a.get("/shop/a")).status, 200);
  assert.equal((await b.get("/shop/b")).body.position, 1);
  // a ends: b is offered a's place (its grace is 8 s at a 2 s refresh),
  // and the runtime is down for 12 s before b comes back.
  assert.equal((await a.get("/shop/a?room=end")).status, 200);
  await restart({ down: 12_000 });
  const c = visitor();
  assert.notEqual((await c.get("/shop/c")).status, 200, "a newcomer does not take b's place");
  assert.equal((await b.get("/shop/b")).status, 200, "b claims the place it was offered before the outage");
  assert.equal((await c.get("/shop/c")).body.position, 1);
}, room({ active: 1, shards: 1 })));

test("a new opens_at reaches every shard, and a reset starts a rehearsed room over", { timeout: 120_000 }, () => withRuntime(async ({ at, visitor, restart }) => {
  // A rehearsal: opened an hour ago, four shards, places for everyone.
  const rehearsed = Array.from({ length: 8 }, () => visitor());
  for (const v of rehearsed) assert.equal((await v.get("/shop/r")).status, 200);
  // The real opening, a week ahead: no shard lets anyone in, old ticket
  // or session, and newcomers join the pre-queue.
  const opensAt = new Date(Date.now() + 7 * 86_400_000).toISOString();
  await restart({ next: room({ active: 20, shards: 4, opens_at: opensAt }) });
  for (let i = 0; i < 12; i++) {
    const answer = await visitor().get("/shop/n");
    assert.equal(answer.status, 503, `newcomer ${i}`);
    assert.equal(answer.body.state, "pre-queue");
  }
  let report = await (await admin(at, "GET", "/rooms/shop")).json();
  assert.deepEqual([report.active, report.offered], [0, 0], "the rehearsal's sessions ended");
  assert.equal(report.waiting, 12);
  // A reset (the token needed) empties the pre-queue too.
  assert.equal((await at("/_sluice/admin/rooms/shop", { method: "DELETE" })).status, 401);
  const reset = await admin(at, "DELETE", "/rooms/shop");
  assert.equal(reset.status, 200);
  report = await reset.json();
  assert.deepEqual([report.active, report.offered, report.waiting], [0, 0, 0]);
  await restart({ next: room({ active: 20, shards: 4, opens_at: opensAt }) });
  report = await (await admin(at, "GET", "/rooms/shop")).json();
  assert.deepEqual([report.active, report.offered, report.waiting], [0, 0, 0], "the reset survives a restart");
  assert.equal((await visitor().get("/shop/n")).body.state, "pre-queue");
}, room({ active: 20, shards: 4, opens_at: new Date(Date.now() - 3_600_000).toISOString() })));
