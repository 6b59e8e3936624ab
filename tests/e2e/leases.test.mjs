// Concurrency limits and leases, end to end on workerd: at most N requests
// at the origin, FIFO waiting, leases that lapse, renewals, fences, locks
// re-entered only by lease id, limits fixed while held, and leases
// surviving a runtime restart.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, tempDir, eventually, sleepUntil, okOrigin, API_TOKEN } from "./harness.mjs";

const config = {
  rules: [
    { id: "report", match: { path: "/report" }, key: "header:x-team", concurrency: 10, lease_ttl: "30s" },
    {
      id: "queued", match: { path: "/queued" }, key: "header:x-team", concurrency: 10,
      queue: { max_wait: "3s", max_len: 100 },
    },
    {
      id: "brief", match: { path: "/brief" }, key: "header:x-team", concurrency: 1,
      queue: { max_wait: "300ms", max_len: 10 },
    },
  ],
};

const acquire = (s, body) => s.post("/_sluice/v1/leases", body).then((r) => r.json());
const renew = (s, id, key, ttl_ms) =>
  s.post(`/_sluice/v1/leases/${id}/renew?key=${encodeURIComponent(key)}`, ttl_ms ? { ttl_ms } : {});
const release = (s, id, key) =>
  s.fetch(`/_sluice/v1/leases/${id}?key=${encodeURIComponent(key)}`, { method: "DELETE" });

describe("a concurrency = 10 rule in front of a slow origin", () => {
  test("30 concurrent slow requests: never more than 10 at the origin, the rest refused cleanly", async () => {
    const sluice = await Sluice.start({ sluice: config });
    try {
      const team = freshKey("team");
      const answers = await Promise.all(
        Array.from({ length: 30 }, () => sluice.fetch("/report?hold_ms=400", { headers: { "X-Team": team } })),
      );
      const bodies = await Promise.all(answers.map((r) => r.json()));
      const admitted = bodies.filter((_, i) => answers[i].status === 200);
      const refused = answers.filter((r) => r.status === 429);
      assert.equal(admitted.length + refused.length, 30, "every request finished or was refused");
      assert.equal(admitted.length, 10);
      assert.ok(Math.max(...admitted.map((b) => b.in_flight)) <= 10);
      assert.ok(Math.max(...admitted.map((b) => b.peak_in_flight)) <= 10);
      const refusal = refused[0];
      assert.match(refusal.headers.get("ratelimit-policy"), /"report.concurrency";q=10;qu="concurrent-requests"/);
      assert.equal(refusal.headers.get("ratelimit"), '"report.concurrency";r=0');
      assert.ok(Number(refusal.headers.get("retry-after")) >= 1);
      const problem = bodies[answers.indexOf(refusal)];
      assert.deepEqual(problem["violated-policies"], ["report.concurrency"]);
      // Every lease went back once its response was delivered.
      await eventually(async () => {
        const next = await sluice.fetch("/report", { headers: { "X-Team": team } });
        return next.status === 200 && next.headers.get("ratelimit") === '"report.concurrency";r=9';
      });
    } finally {
      await sluice.stop();
    }
  });

  test("with a queue, all 30 are served first come first served, 10 at a time", async () => {
    const sluice = await Sluice.start({ sluice: config });
    try {
      const team = freshKey("team");
      const started = Date.now();
      const answers = await Promise.all(
        Array.from({ length: 30 }, () => sluice.fetch("/queued?hold_ms=300", { headers: { "X-Team": team } })),
      );
      const bodies = await Promise.all(answers.map((r) => r.json()));
      assert.deepEqual(new Set(answers.map((r) => r.status)), new Set([200]));
      assert.equal(Math.max(...bodies.map((b) => b.peak_in_flight)), 10, "full, and never more");
      assert.ok(Date.now() - started >= 850, "three waves of 300 ms");
    } finally {
      await sluice.stop();
    }
  });

  // The wait's timer wakes a call the key object first tried to answer at
  // once (src/edge/rpc.rs, `answer_now`): it must still end the wait.
  test("a queued request whose wait runs out is refused when it does, not left waiting", async () => {
    // An origin that holds each request 2.5 s and says when the first has
    // arrived: a request at the origin has taken the rule's one lease.
    let reached;
    const arrived = new Promise((resolve) => (reached = resolve));
    const { server: slow, url } = await okOrigin(() => reached(), 2_500);
    const sluice = await Sluice.start({ sluice: { ...config, origin: url } });
    try {
      const team = freshKey("team");
      const holding = sluice.fetch("/brief", { headers: { "X-Team": team } });
      await arrived;
      const started = Date.now();
      const queued = await sluice.fetch("/brief", { headers: { "X-Team": team } });
      const waited = Date.now() - started;
      assert.equal(queued.status, 429);
      assert.ok(waited >= 250 && waited < 2000, `refused after ${waited} ms`);
      assert.equal((await holding).status, 200);
    } finally {
      await sluice.stop();
      slow.close();
    }
  });
});

describe("the lease API", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({ secrets: { API_TOKEN } });
  });
  after(() => sluice?.stop());

  test("a lease acquired and never released is reclaimed by the alarm after its TTL", async () => {
    const key = freshKey("lock");
    const first = await acquire(sluice, { key, limit: 1, ttl_ms: 400 });
    assert.equal(first.granted, true);
    assert.equal(typeof first.lease_id, "string");
    assert.ok(first.lease_id.length >= 32, "lease ids cannot be guessed");
    const busy = await acquire(sluice, { key, limit: 1, ttl_ms: 400 });
    assert.deepEqual([busy.granted, busy.in_flight, busy.lease_id], [false, 1, null]);
    assert.ok(busy.retry_after_ms > 0 && busy.retry_after_ms <= 400);
    const object = `api:${key}`;
    await eventually(async () => (await sluice.inspect(object)).has_storage === false, 5000);
    const second = await acquire(sluice, { key, limit: 1, ttl_ms: 400 });
    assert.equal(second.granted, true);
    assert.ok(second.fence > first.fence, "fences grow even after the key's storage was freed");
  });

  test("renewing keeps a lease alive; letting it go lets it lapse", async () => {
    const key = freshKey("renew");
    const held = await acquire(sluice, { key, limit: 1, ttl_ms: 400 });
    const start = Date.now();
    for (const at of [200, 400, 600, 800]) {
      await sleepUntil(start + at);
      const renewed = await renew(sluice, held.lease_id, key, 400);
      assert.equal(renewed.status, 200);
      const body = await renewed.json();
      assert.equal(body.fence, held.fence);
      assert.ok(body.expires_ms > held.expires_ms);
    }
    assert.equal((await acquire(sluice, { key, limit: 1, ttl_ms: 400 })).granted, false, "still held at 800 ms");
    await eventually(async () => (await acquire(sluice, { key, limit: 1, ttl_ms: 400 })).granted, 3000);
    assert.equal((await renew(sluice, held.lease_id, key, 400)).status, 404, "too late to renew");
  });

  test("a lock is re-entrant for the holder of its lease id and frees when the holds return to zero", async () => {
    const key = freshKey("owned");
    const a1 = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000, owner: "worker-a" });
    const a2 = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000, lease_id: a1.lease_id });
    assert.deepEqual([a2.granted, a2.lease_id, a2.fence, a2.holds], [true, a1.lease_id, a1.fence, 2]);
    assert.equal((await acquire(sluice, { key, limit: 1, ttl_ms: 30_000, owner: "worker-b" })).granted, false);
    const once = await (await release(sluice, a1.lease_id, key)).json();
    assert.deepEqual([once.holds, once.released], [1, false]);
    assert.equal((await acquire(sluice, { key, limit: 1, ttl_ms: 30_000, owner: "worker-b" })).granted, false);
    const twice = await (await release(sluice, a1.lease_id, key)).json();
    assert.deepEqual([twice.holds, twice.released], [0, true]);
    const b = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000, owner: "worker-b" });
    assert.equal(b.granted, true);
    assert.ok(b.fence > a1.fence);
    const gone = await sluice.post("/_sluice/v1/leases", { key, limit: 1, ttl_ms: 30_000, lease_id: a1.lease_id });
    assert.equal(gone.status, 404, "a released lease cannot be re-entered");
    assert.deepEqual(
      [gone.headers.get("content-type"), (await gone.json()).field],
      ["application/problem+json", "lease_id"],
    );
  });

  test("an owner name alone enters nobody's lock, so it cannot release it either", async () => {
    const key = freshKey("named");
    const mine = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000, owner: "worker" });
    assert.equal(mine.granted, true);
    const intruder = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000, owner: "worker" });
    assert.deepEqual([intruder.granted, intruder.lease_id], [false, null]);
    assert.equal((await release(sluice, "worker", key)).status, 404);
    const still = await (await release(sluice, mine.lease_id, key)).json();
    assert.deepEqual([still.holds, still.released], [0, true], "held once, by its holder");
  });

  test("a key's lease limit is fixed while leases are held: another one is a 409 naming the field", async () => {
    const key = freshKey("limit");
    const lock = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000 });
    assert.equal(lock.granted, true);
    for (const body of [{ key, limit: 2, ttl_ms: 30_000 }, { key, limit: 2, ttl_ms: 30_000, lease_id: lock.lease_id }]) {
      const wider = await sluice.post("/_sluice/v1/leases", body);
      assert.equal(wider.status, 409);
      assert.equal(wider.headers.get("content-type"), "application/problem+json");
      const problem = await wider.json();
      assert.deepEqual([problem.code, problem.field, problem["held-limit"]], ["lease-limit-conflict", "limit", 1]);
    }
    assert.equal((await acquire(sluice, { key, limit: 1, ttl_ms: 30_000 })).granted, false, "still one holder");
    await release(sluice, lock.lease_id, key);
    const next = await acquire(sluice, { key, limit: 2, ttl_ms: 30_000 });
    assert.equal(next.granted, true, "free to change once nothing is held");
  });

  test("fences keep growing through quick release-and-acquire rounds", async () => {
    const key = freshKey("quick");
    let last = 0;
    for (let i = 0; i < 60; i++) {
      const lease = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000 });
      assert.equal(lease.granted, true);
      assert.ok(lease.fence > last, `round ${i}: ${lease.fence} after ${last}`);
      assert.ok(Number.isSafeInteger(lease.fence));
      last = lease.fence;
      assert.equal((await release(sluice, lease.lease_id, key)).status, 200);
    }
  });

  test("nobody can release someone else's lease", async () => {
    const key = freshKey("mine");
    const held = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000 });
    for (const [id, k] of [["0".repeat(32), key], [held.lease_id, `${key}-other`], ["x", key]]) {
      const response = await release(sluice, id, k);
      assert.equal(response.status, 404);
      assert.equal((await response.json()).code, "no-such-lease");
    }
    assert.equal((await acquire(sluice, { key, limit: 1, ttl_ms: 30_000 })).granted, false, "still held");
    assert.equal((await release(sluice, held.lease_id, key)).status, 200);
    assert.equal((await release(sluice, held.lease_id, key)).status, 404, "released once only");
  });

  test("fences strictly increase across grants", async () => {
    const key = freshKey("fence");
    const fences = [];
    for (let i = 0; i < 5; i++) {
      const lease = await acquire(sluice, { key, limit: 1, ttl_ms: 30_000 });
      fences.push(lease.fence);
      await release(sluice, lease.lease_id, key);
    }
    assert.ok(fences.every((f, i) => i === 0 || f > fences[i - 1]), JSON.stringify(fences));
  });

  test("invalid lease calls answer 400 naming the field", async () => {
    for (const [body, field] of [[{ limit: 1, ttl_ms: 1 }, "key"], [{ key: "k", ttl_ms: 1 }, "limit"], [{ key: "k", limit: 1 }, "ttl_ms"], [{ key: "k", limit: 1, ttl_ms: 1, owner: 3 }, "owner"]]) {
      const response = await sluice.post("/_sluice/v1/leases", body);
      assert.equal(response.status, 400);
      assert.equal((await response.json()).field, field);
    }
    const noKey = await sluice.fetch("/_sluice/v1/leases/abc", { method: "DELETE" });
    assert.equal(noKey.status, 400);
    assert.equal((await noKey.json()).field, "key");
    assert.equal((await sluice.fetch("/_sluice/v1/leases/abc?key=k")).status, 405);
  });
});

test("leases and fences survive a restart of the runtime", async () => {
  const { dir, remove } = tempDir();
  const key = freshKey("durable");
  try {
    let sluice = await Sluice.start({ persist: dir, secrets: { API_TOKEN } });
    const held = await acquire(sluice, { key, limit: 1, ttl_ms: 60_000, owner: "w" });
    await sluice.stop();
    sluice = await Sluice.start({ persist: dir, secrets: { API_TOKEN } });
    try {
      assert.equal((await acquire(sluice, { key, limit: 1, ttl_ms: 60_000 })).granted, false, "still held");
      const again = await acquire(sluice, { key, limit: 1, ttl_ms: 60_000, lease_id: held.lease_id });
      assert.deepEqual([again.lease_id, again.holds], [held.lease_id, 2], "re-entrant across the restart");
      await release(sluice, held.lease_id, key);
      assert.equal((await release(sluice, held.lease_id, key)).status, 200);
      const next = await acquire(sluice, { key, limit: 1, ttl_ms: 60_000 });
      assert.equal(next.granted, true);
      assert.ok(next.fence > held.fence);
    } finally {
      await sluice.stop();
    }
  } finally {
    remove();
  }
});
