// Timing: a block is held only while the key is hot (several decisions a
// second) and all within one 30 s window: run alone.
// Admission blocks across a hard restart: an isolate admits from a block
// its key object granted, then the runtime is killed (SIGKILL, isolate and
// object at once, the block never reported) and started again on the same
// persisted state. The object read its block back and still counts it in
// full, so the key admits no more than its limit in the window; a key
// whose blocks were forgotten would admit their admissions twice.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir, API_TOKEN } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const ADMIN_TOKEN = "blocks-restart-admin-token-0123456789";
const LIMIT = 40;
const WINDOW_MS = 30_000;

test("a block outstanding across a hard restart is still counted", { timeout: 120_000 }, async () => {
  const { dir, remove } = tempDir();
  const secrets = { ADMIN_TOKEN, API_TOKEN };
  let current = null;
  const decide = async (key) => {
    const response = await fetch(`${current.url}/_sluice/v1/limit`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${API_TOKEN}` },
      body: JSON.stringify({ key, limit: LIMIT, window_ms: WINDOW_MS }),
    });
    assert.equal(response.status, 200);
    return (await response.json()).allowed;
  };
  const blocks = async () => {
    const response = await fetch(`${current.url}/_sluice/admin/stats`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
    return (await response.json()).isolate.blocks;
  };
  try {
    current = await runtime(dir, { secrets });
    const key = "flash";
    const started = Date.now();
    let before = 0;
    let sent = 0;
    let held = await blocks();
    // Hot: bursts of 5 at once (the fifth decision within a second asks for
    // a block, however slow the machine) until the isolate admitted from a
    // block and holds one.
    while (sent < 25 && !(held.admitted > 0 && held.held > 0)) {
      const burst = await Promise.all(Array.from({ length: 5 }, () => decide(key)));
      before += burst.filter(Boolean).length;
      sent += burst.length;
      held = await blocks();
    }
    assert.equal(before, sent, "far from the limit, all admitted");
    assert.ok(held.admitted > 0 && held.held > 0, `admitted from a block, one still held: ${JSON.stringify(held)}`);

    await current.kill();
    current = await runtime(dir, { secrets });

    let after = 0;
    for (let i = 0; i < LIMIT + 10; i++) after += (await decide(key)) ? 1 : 0;
    const elapsed = Date.now() - started;
    assert.ok(elapsed < WINDOW_MS, `all within one window (${elapsed} ms)`);
    assert.ok(before + after <= LIMIT, `${before} + ${after} admitted in one window of ${LIMIT}`);
    assert.ok(after > 0, "the key still admits what is left");
  } finally {
    await current?.kill();
    remove();
  }
});

// Reservations from a block across a hard restart: a hot login rule that
// counts only failures takes each request as a reservation pending in the
// isolate's block; three requests the origin holds for seconds are still
// pending when their block lapses, so its report, sent with the isolate's
// next request, carries them and the object stores them as reservations.
// The runtime is killed before the origin answers them (their settles
// never come) and started again: they still count, exactly. Lost, the key
// would admit three more; a report lost, the whole block would count.
test("reservations a block's report carried pending still count after a hard restart", { timeout: 120_000 }, async () => {
  const { dir, remove } = tempDir();
  const secrets = { ADMIN_TOKEN };
  const config = {
    origin: "demo",
    rules: [{ id: "login", match: { path: "/login" }, key: "header:x-user", limit: LIMIT, window: "30s", count: { status: [401] } }],
  };
  let current = null;
  const attempt = (query = "") =>
    fetch(`${current.url}/login?status=401${query}`, { headers: { "x-user": "mallory" } });
  const blocks = async () => {
    const response = await fetch(`${current.url}/_sluice/admin/stats`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
    return (await response.json()).isolate.blocks;
  };
  try {
    current = await runtime(dir, { secrets, sluice: config });
    const started = Date.now();
    // Hot: the fifth attempt within a second asks for a block.
    for (let i = 0; i < 5; i++) assert.equal((await attempt()).status, 401);
    assert.equal((await blocks()).held, 1, "a block held");
    // Three held at the origin: pending in the block, never answered.
    const held = [0, 1, 2].map(() => attempt("&hold_ms=10000").catch(() => null));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const during = await blocks();
    assert.equal(during.admitted, 3, `the three came from the block: ${JSON.stringify(during)}`);
    // The block lapses (its lease is at most 1 s, and the key is no longer
    // hot: no new one); the next attempt reports it, the three pending.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    assert.equal((await attempt()).status, 401);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await blocks()).held, 0, "reported, and none granted since");

    await current.kill();
    await Promise.all(held);
    current = await runtime(dir, { secrets, sluice: config });

    let after = 0;
    for (let i = 0; i < LIMIT + 10; i++) {
      const response = await attempt();
      await response.arrayBuffer();
      if (response.status === 401) after += 1;
    }
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 30_000, `all within one window (${elapsed} ms)`);
    assert.equal(after, LIMIT - 5 - 3 - 1, "the three pending reservations still count, and only they");
  } finally {
    await current?.kill();
    remove();
  }
});
