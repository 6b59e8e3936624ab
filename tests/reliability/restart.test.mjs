// Restart under load: while a driver sends a steady stream on a few keys, the
// runtime is killed with SIGKILL (persisted state) and started again, several
// times. Afterwards, from the answers the driver saw:
// - no window of a tight key ever held more than its limit;
// - every admission the driver saw is in the key's state (nothing forgotten);
// - every lease granted and not released is still held, none twice, and
//   never more than the limit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir, API_TOKEN } from "../e2e/harness.mjs";
import { runtime, FULL } from "./support.mjs";

const TOKEN = "reliability-admin-token-0123456789abcdef";
const TIGHT = { limit: 5, window_ms: 1000 };
const DURABLE = { limit: 1_000_000, window_ms: 600_000 };
const LEASES = { limit: 3, ttl_ms: 120_000 };

test("restart under load loses no admission and never exceeds a limit", { timeout: 600_000 }, async () => {
  const { dir, remove } = tempDir();
  const runs = FULL ? 8 : 3;
  const state = { url: null, stopped: false };
  const seen = [];
  const post = async (path, body) => {
    const sent = performance.now();
    try {
      const response = await fetch(state.url + path, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${API_TOKEN}` },
        body: JSON.stringify(body),
      });
      const answer = await response.json();
      return { sent, received: performance.now(), status: response.status, answer };
    } catch {
      return { sent, received: performance.now(), status: 0, answer: null };
    }
  };
  const release = async (key, id) => {
    try {
      const response = await fetch(`${state.url}/_sluice/v1/leases/${id}?key=${key}`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${API_TOKEN}` },
      });
      return response.status;
    } catch {
      return 0;
    }
  };
  const granted = new Map();
  const released = new Set();
  // A release whose answer was lost in a kill may or may not have happened.
  const maybeReleased = new Set();
  const refusedReleases = [];
  const releasing = new Set();
  const unsure = { leases: 0 };

  const driver = async (n) => {
    let i = 0;
    while (!state.stopped) {
      i += 1;
      const pick = (n + i) % 4;
      if (pick < 2) {
        const key = `tight-${(n + i) % 3}`;
        seen.push({ kind: "tight", key, ...(await post("/_sluice/v1/limit", { key, ...TIGHT })) });
      } else if (pick === 2) {
        // durable-0 is decided call by call; durable-1, hot and far from
        // its limit, mostly from admission blocks.
        const key = `durable-${n % 2}`;
        const local = key === "durable-1";
        seen.push({ kind: "durable", key, ...(await post("/_sluice/v1/limit", { key, ...DURABLE, local })) });
      } else {
        const held = [...granted.keys()].find((id) => !released.has(id) && !maybeReleased.has(id) && !releasing.has(id));
        if (held && i % 2 === 0) {
          // Claimed before the await, so no other driver releases it too.
          releasing.add(held);
          const status = await release("locks", held);
          if (status === 200) released.add(held);
          else if (status === 0) maybeReleased.add(held);
          else refusedReleases.push([held, status]);
        } else {
          const result = await post("/_sluice/v1/leases", { key: "locks", ...LEASES });
          if (result.status === 200 && result.answer.granted) granted.set(result.answer.lease_id, result);
          if (result.status !== 200) unsure.leases += 1;
        }
      }
      if (state.url === null) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  let current = null;
  try {
    current = await runtime(dir, { secrets: { ADMIN_TOKEN: TOKEN, API_TOKEN } });
    state.url = current.url;
    const drivers = Array.from({ length: 8 }, (_, n) => driver(n));
    for (let run = 0; run < runs; run++) {
      await new Promise((resolve) => setTimeout(resolve, 1200));
      await current.kill();
      state.url = null;
      current = await runtime(dir, { secrets: { ADMIN_TOKEN: TOKEN, API_TOKEN } });
      state.url = current.url;
    }
    await new Promise((resolve) => setTimeout(resolve, 800));
    state.stopped = true;
    await Promise.all(drivers);

    const admitted = seen.filter((s) => s.status === 200 && s.answer.allowed);
    const failed = seen.filter((s) => s.status === 0).length;
    assert.ok(admitted.length > 100, `the driver got ${admitted.length} admissions through`);
    assert.ok(failed > 0, "some requests hit a dead runtime: the kills happened under load");

    // No window of a tight key held more than its limit. An admission was
    // decided somewhere between its sending and its answer; if more than
    // `limit` admissions were all sent at or after `s` and answered before
    // `s + window`, they all fell in one window, a certain violation.
    for (const key of ["tight-0", "tight-1", "tight-2"]) {
      const mine = admitted.filter((s) => s.key === key).sort((a, b) => a.sent - b.sent);
      for (const first of mine) {
        const inside = mine.filter((s) => s.sent >= first.sent && s.received < first.sent + TIGHT.window_ms);
        assert.ok(inside.length <= TIGHT.limit, `${inside.length} admitted within one window of ${key}`);
      }
    }

    // Nothing admitted was forgotten: every admission the driver saw is in
    // the key's state, which may also hold admissions whose answer was lost.
    // With admission blocks (durable-1) the state also counts in full every
    // block still outstanding (its isolate killed, or holding it still), so
    // only the first bound holds there.
    const admin = { headers: { Authorization: `Bearer ${TOKEN}` } };
    for (const key of ["durable-0", "durable-1"]) {
      const acked = admitted.filter((s) => s.key === key).length;
      const lost = seen.filter((s) => s.key === key && s.status === 0).length;
      const state_ = await (await fetch(`${state.url}/_sluice/admin/keys/_api/${key}`, admin)).json();
      const used = state_.slots[0].used;
      assert.ok(used >= acked, `${key}: ${used} recorded, ${acked} acknowledged`);
      if (key === "durable-0") assert.ok(used <= acked + lost, `${key}: ${used} recorded, at most ${acked + lost} could have been`);
    }

    // Leases: every grant seen and not released is still held; no lease is
    // held twice; never more than the limit.
    const locks = await (await fetch(`${state.url}/_sluice/admin/keys/_api/locks`, admin)).json();
    const held = locks.leases.map((l) => l.id);
    assert.equal(new Set(held).size, held.length, "no lease twice");
    assert.ok(held.length <= LEASES.limit, `${held.length} leases held`);
    for (const [id] of granted) {
      if (!released.has(id) && !maybeReleased.has(id)) assert.ok(held.includes(id), `granted lease ${id} was lost`);
      if (released.has(id)) assert.ok(!held.includes(id), `released lease ${id} is still held`);
    }
    assert.deepEqual(refusedReleases, [], "the holder of a granted lease could always release it");
    const fences = [...granted.values()].map((g) => g.answer.fence);
    assert.equal(new Set(fences).size, fences.length, "every grant had its own fence");
  } finally {
    state.stopped = true;
    await current?.kill();
    remove();
  }
});
