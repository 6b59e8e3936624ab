// client/ (sluice-client) against the real worker on workerd, over HTTP with
// a URL and through a binding (Miniflare's handle on the Sluice Worker is a
// Fetcher, as a service binding is): every method (reservations and their
// settle included), typed errors, withLease
// releasing on throw, and the timeout with fail-open and fail-closed when
// the key object hangs (the fault fixture in place of LIMITER).
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice as Harness, freshKey, API_TOKEN } from "./harness.mjs";
import { Sluice, SluiceError, SluiceUnavailableError, LeaseUnavailableError } from "../../client/index.js";

let harness;
const clients = {};
before(async () => {
  harness = await Harness.start({ faults: true, sluice: { timeout: "5s", rules: [] }, secrets: { API_TOKEN } });
  clients.url = new Sluice({ url: harness.base, token: API_TOKEN });
  clients.binding = new Sluice({ binding: await harness.mf.getWorker("sluice"), token: API_TOKEN });
});
after(() => harness?.stop());

for (const transport of ["url", "binding"]) {
  describe(`through a ${transport}`, () => {
    const sluice = () => clients[transport];

    test("limit: allowed, refused with retryAfter, reset in unix ms; cost 0 peeks", async () => {
      const key = freshKey("limit");
      const started = Date.now();
      const first = await sluice().limit({ key, limit: 2, window: "10s" });
      assert.deepEqual([first.success, first.limit, first.remaining, first.retryAfter], [true, 2, 1, 0]);
      assert.ok(first.reset >= started + 9_000 && first.reset <= Date.now() + 10_000, `reset ${first.reset - started}`);
      await sluice().limit(key, { limit: 2, window: 10_000 });
      const refused = await sluice().limit({ key, limit: 2, window: "10s" });
      assert.deepEqual([refused.success, refused.remaining], [false, 0]);
      assert.ok(refused.retryAfter > 9_000 && refused.retryAfter <= 10_000);
      const peek = await sluice().limit({ key, limit: 2, window: "10s", cost: 0 });
      assert.equal(peek.remaining, 0);
    });

    test("limit(identifier) with the client's default policy", async () => {
      const client = new Sluice({ url: harness.base, token: API_TOKEN, limit: 1, window: "1 m" });
      const key = freshKey("default");
      assert.equal((await client.limit(key)).success, true);
      assert.equal((await client.limit(key)).success, false);
    });

    test("policies: all or nothing, the refusing policy reported", async () => {
      const key = freshKey("policies");
      const policies = [
        { name: "burst", limit: 3, window: "1s" },
        { name: "minute", limit: 1, window: "1m", algorithm: "fixed_window" },
      ];
      const first = await sluice().limit({ key, policies });
      assert.deepEqual([first.success, first.violated], [true, []]);
      const second = await sluice().limit({ key, policies });
      assert.deepEqual([second.success, second.violated, second.limit, second.remaining], [false, ["minute"], 1, 0]);
      assert.equal(second.policies.find((p) => p.name === "burst").remaining, 2, "nothing recorded in the other");
      assert.equal(second.policies[1].window, 60_000);
    });

    test("layers: one per user under a global 2, all or nothing, the refusing layer named", async () => {
      const sale = freshKey("sale");
      const layers = (user) => [
        { key: `user:${user}`, name: "user", limit: 1, window: "1m" },
        { key: sale, name: "sale", limit: 2, window: "1m" },
      ];
      const [ann, bob, cat] = ["ann", "bob", "cat"].map((name) => `${name}-${freshKey("u")}`);
      const first = await sluice().limit({ layers: layers(ann) });
      assert.deepEqual([first.success, first.violated, first.layers.map((l) => l.name)], [true, [], ["user", "sale"]]);
      const again = await sluice().limit({ layers: layers(ann) });
      assert.deepEqual([again.success, again.violated, again.layers.length], [false, ["user"], 1]);
      assert.equal((await sluice().limit({ layers: layers(bob) })).success, true);
      const soldOut = await sluice().limit({ layers: layers(cat) });
      assert.deepEqual([soldOut.success, soldOut.violated, soldOut.limit], [false, ["sale"], 2]);
      assert.ok(soldOut.retryAfter > 50_000, `the sale's window: ${soldOut.retryAfter}`);
      const error = await sluice()
        .limit({ layers: [{ key: "a", limit: 1, window: "1s" }, { key: "a", limit: 1, window: "1s" }] })
        .catch((e) => e);
      assert.ok(error instanceof SluiceError && !(error instanceof SluiceUnavailableError));
      assert.deepEqual([error.status, error.field], [400, "layers[1].key"]);
    });

    test("reserve and settle: a pending refusal, a refund frees the unit, a kept one counts", async () => {
      const key = freshKey("reserve");
      const policy = { key, limit: 1, window: "10m" };
      const first = await sluice().limit({ ...policy, reserve: true, reservationTtl: "30s" });
      assert.equal(first.success, true);
      assert.match(first.reservation, /^[0-9a-f]+$/);
      const meanwhile = await sluice().limit({ ...policy, reserve: true });
      assert.deepEqual([meanwhile.success, meanwhile.pending, meanwhile.reservation], [false, true, null]);
      assert.ok(meanwhile.retryAfter <= 1000, `a short wait: ${meanwhile.retryAfter}`);
      assert.deepEqual(await sluice().settle({ key, reservation: first.reservation, keep: false }), { kept: false, repeated: false });
      const second = await sluice().limit({ ...policy, reserve: true });
      assert.equal(second.success, true, "the refund freed the unit");
      assert.deepEqual(await sluice().settle({ key, reservation: second.reservation, keep: true }), { kept: true, repeated: false });
      const full = await sluice().limit(policy);
      assert.deepEqual([full.success, full.pending, full.reservation], [false, false, null]);
      assert.ok(full.retryAfter > 500_000, "the kept one counts for the window");
      const unknown = await sluice().settle({ key, reservation: "0123abcd", keep: true }).catch((e) => e);
      assert.ok(unknown instanceof SluiceError);
      assert.deepEqual([unknown.status, unknown.code, unknown.field], [404, "no-such-reservation", "reservation"]);
      await assert.rejects(sluice().limit({ ...policy, reserv: true }), /unknown option "reserv"/);
    });

    test("throttle: redis-cell's answers, in ms", async () => {
      const key = freshKey("cell");
      const first = await sluice().throttle({ key, maxBurst: 1, count: 1, period: "60s" });
      assert.deepEqual([first.success, first.limit, first.remaining, first.retryAfter], [true, 2, 1, 0]);
      await sluice().throttle({ key, maxBurst: 1, count: 1, period: "1m" });
      const limited = await sluice().throttle({ key, maxBurst: 1, count: 1, period: 60_000 });
      assert.equal(limited.success, false);
      assert.ok(limited.retryAfter > 50_000 && limited.retryAfter <= 60_000);
      const tooMuch = await sluice().throttle({ key: freshKey("cell"), maxBurst: 1, count: 1, period: "1m", quantity: 5 });
      assert.deepEqual([tooMuch.success, tooMuch.retryAfter], [false, null]);
    });

    test("acquire, re-enter by leaseId, renew, release; conflicts and lapsed leases are typed errors", async () => {
      const key = freshKey("lease");
      const lease = await sluice().acquire({ key, limit: 1, ttl: "30s", owner: "client-test" });
      assert.equal(lease.granted, true);
      assert.match(lease.leaseId, /^[0-9a-f]{32}$/);
      assert.ok(lease.fence > 0 && lease.expires > Date.now());
      const busy = await sluice().acquire({ key, limit: 1 });
      assert.deepEqual([busy.granted, busy.leaseId, busy.inFlight], [false, null, 1]);
      assert.ok(busy.retryAfter > 0);
      const again = await sluice().acquire({ key, limit: 1, leaseId: lease.leaseId });
      assert.deepEqual([again.leaseId, again.holds, again.fence], [lease.leaseId, 2, lease.fence]);
      const conflict = await sluice().acquire({ key, limit: 5 }).catch((e) => e);
      assert.ok(conflict instanceof SluiceError);
      assert.deepEqual([conflict.status, conflict.code, conflict.field, conflict.problem["held-limit"]], [409, "lease-limit-conflict", "limit", 1]);
      const renewed = await sluice().renew(lease, { ttl: "1m" });
      assert.ok(renewed.expires > lease.expires);
      assert.equal((await sluice().release(lease)).released, false, "one hold left");
      assert.equal((await sluice().release(lease)).released, true);
      const gone = await sluice().renew(lease).catch((e) => e);
      assert.deepEqual([gone.status, gone.code], [404, "no-such-lease"]);
      const reenter = await sluice().acquire({ key, limit: 1, leaseId: lease.leaseId }).catch((e) => e);
      assert.deepEqual([reenter.code, reenter.field], ["no-such-lease", "lease_id"]);
    });

    test("withLease releases when fn throws; withLock excludes and waits", async () => {
      const key = freshKey("with");
      const boom = new Error("boom");
      let held;
      await assert.rejects(
        sluice().withLease(key, { limit: 1, ttl: "1m" }, async (lease) => {
          held = lease;
          throw boom;
        }),
        (e) => e === boom,
      );
      assert.equal((await sluice().renew(held).catch((e) => e)).code, "no-such-lease", "released");
      const free = await sluice().acquire({ key, limit: 1 });
      assert.equal(free.granted, true, "the key is free again");
      await sluice().release(free);

      const lock = freshKey("lock");
      const order = [];
      const first = sluice().withLock(lock, { ttl: "1m" }, async () => {
        order.push("first");
        await new Promise((resolve) => setTimeout(resolve, 300));
        order.push("first done");
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await assert.rejects(sluice().withLock(lock, () => order.push("never")), LeaseUnavailableError);
      const waiting = Date.now();
      await sluice().withLock(lock, { wait: 3000 }, () => order.push("second"));
      await first;
      assert.ok(Date.now() - waiting < 1500, `a waiter gets the lock soon after its release, not when it would lapse (${Date.now() - waiting} ms)`);
      assert.deepEqual(order, ["first", "first done", "second"]);
    });

    test("problems are typed errors naming the field; a wrong token is one too", async () => {
      const bad = await sluice().limit({ key: "", limit: 1, window: "1s", fail: "open" }).catch((e) => e);
      assert.ok(bad instanceof SluiceError);
      assert.deepEqual([bad.status, bad.code, bad.field], [400, "invalid-request", "key"]);
      const wrong = new Sluice(transport === "url" ? { url: harness.base, token: "x".repeat(40) } : { binding: await harness.mf.getWorker("sluice") });
      const unauthorized = await wrong.limit({ key: "k", limit: 1, window: "1s", fail: "open" }).catch((e) => e);
      assert.deepEqual([unauthorized.status, unauthorized.code], [401, "unauthorized"]);
    });
  });
}

describe("when the key object hangs", () => {
  before(() => harness.fault("hang"));
  after(() => harness.fault("pass"));

  test("the client's timeout cuts the call short; closed refuses, open admits, throw throws", async () => {
    const sluice = new Sluice({ url: harness.base, token: API_TOKEN, timeout: 300 });
    for (const [fail, success] of [["closed", false], ["open", true]]) {
      const started = Date.now();
      const result = await sluice.limit({ key: freshKey("hang"), limit: 5, window: "1m", fail });
      const took = Date.now() - started;
      assert.ok(took >= 280 && took < 2000, `${fail}: gave up after ${took} ms`);
      assert.deepEqual([result.success, result.reason, result.error.code], [success, "timeout", "timeout"], fail);
      assert.equal(result.retryAfter, success ? 0 : 1000);
    }
    assert.equal((await sluice.limit({ key: freshKey("hang"), limit: 5, window: "1m" })).success, false, "closed is the default");
    await assert.rejects(sluice.throttle({ key: "t", maxBurst: 1, count: 1, period: "1s", fail: "throw" }), SluiceUnavailableError);
    const lease = await sluice.acquire({ key: freshKey("hang"), limit: 1, fail: "open" });
    assert.deepEqual([lease.granted, lease.leaseId, lease.reason], [true, null, "timeout"]);
  });

  test("Sluice's own 503 takes the fail choice too", async () => {
    const quick = await Harness.start({ faults: true, sluice: { timeout: "100ms", rules: [] }, secrets: { API_TOKEN } });
    try {
      await quick.fault("hang");
      const sluice = new Sluice({ url: quick.base, token: API_TOKEN, timeout: 3000 });
      const closed = await sluice.limit({ key: "k", limit: 5, window: "1m" });
      assert.deepEqual([closed.success, closed.reason, closed.error.status, closed.error.code], [false, "error", 503, "unavailable"]);
      const open = await sluice.acquire({ key: "k", limit: 1, fail: "open" });
      assert.deepEqual([open.granted, open.reason], [true, "error"]);
    } finally {
      await quick.stop();
    }
  });
});
