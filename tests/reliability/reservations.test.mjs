// Reservations outlive the runtime: a unit reserved through the decision API
// is admitted (written) before it is answered, so a hard kill of the runtime
// (SIGKILL, persisted state) and a start on the same state forget nothing.
// Afterwards a refund gives the unit back, a keep counts it, and one left
// unsettled lapses into a kept admission (issue 27, item 2: an evicted or
// restarted object used to forget its reservations, refunding them all).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir, API_TOKEN } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const options = { secrets: { API_TOKEN } };

/** A client of the runtime currently serving `dir`. */
function client(current) {
  const post = async (path, body) => {
    const response = await fetch(current.url + path, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${API_TOKEN}` },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  };
  const policy = (key) => ({ key, limit: 2, window_ms: 600_000 });
  return {
    reserve: async (key, more = {}) => (await post("/_sluice/v1/limit", { ...policy(key), reserve: true, ...more })).body,
    remaining: async (key) => (await post("/_sluice/v1/limit", { ...policy(key), cost: 0 })).body.remaining,
    settle: (key, reservation, keep) => post("/_sluice/v1/limit/settle", { key, reservation, keep }),
  };
}

test("a reservation survives a hard restart: refunded, it frees its unit; kept, it counts", { timeout: 120_000 }, async () => {
  const { dir, remove } = tempDir();
  let current = await runtime(dir, options);
  try {
    let sluice = client(current);
    const refunded = await sluice.reserve("refund");
    const kept = await sluice.reserve("keep");
    for (const reserved of [refunded, kept]) {
      assert.equal(reserved.allowed, true);
      assert.equal(reserved.remaining, 1);
    }
    await current.kill();
    current = await runtime(dir, options);
    sluice = client(current);

    assert.equal(await sluice.remaining("refund"), 1, "the reservation still holds its unit after the restart");
    assert.equal(await sluice.remaining("keep"), 1);
    const refund = await sluice.settle("refund", refunded.reservation, false);
    assert.equal(refund.status, 200, JSON.stringify(refund.body));
    assert.deepEqual(refund.body, { kept: false, repeated: false });
    assert.equal(await sluice.remaining("refund"), 2, "the refund gave the unit back");
    const keep = await sluice.settle("keep", kept.reservation, true);
    assert.deepEqual(keep.body, { kept: true, repeated: false });
    assert.equal(await sluice.remaining("keep"), 1, "the kept reservation counts");

    await current.kill();
    current = await runtime(dir, options);
    sluice = client(current);
    assert.equal(await sluice.remaining("refund"), 2, "a refund is not undone by the next restart");
    assert.equal(await sluice.remaining("keep"), 1, "a keep is not undone by the next restart");
  } finally {
    await current?.kill();
    remove();
  }
});

test("a reservation left unsettled across a hard restart lapses into a kept admission", { timeout: 120_000 }, async () => {
  const { dir, remove } = tempDir();
  let current = await runtime(dir, options);
  try {
    let sluice = client(current);
    const ttl = 2000;
    const reserved = await sluice.reserve("lapse", { reservation_ttl_ms: ttl });
    const lapses = Date.now() + ttl;
    assert.equal(reserved.allowed, true);
    await current.kill();
    current = await runtime(dir, options);
    sluice = client(current);
    assert.equal(await sluice.remaining("lapse"), 1, "the reservation still holds its unit after the restart");
    // Past its lapse, a refund comes too late: the reservation was kept.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, lapses + 200 - Date.now())));
    const late = await sluice.settle("lapse", reserved.reservation, false);
    assert.equal(late.status, 404, JSON.stringify(late.body));
    assert.equal(late.body.code, "no-such-reservation");
    assert.equal(await sluice.remaining("lapse"), 1, "the lapsed reservation was kept, not refunded");

    await current.kill();
    current = await runtime(dir, options);
    assert.equal(await client(current).remaining("lapse"), 1, "kept for good");
  } finally {
    await current?.kill();
    remove();
  }
});
