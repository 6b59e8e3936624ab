// What a restart does to spread retries (issue 28, item 3): a refusal
// writes nothing, so the cursor that tells successive refusals successive
// moments lives in the key object's memory only. After a hard kill of the
// runtime (SIGKILL, persisted state) the admissions are all there, and the
// next refusal is invited from the first moment a place frees again: up to
// one more client is told each moment already handed out before.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir, freshKey, API_TOKEN } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const options = { secrets: { API_TOKEN } };

/** When the decision API tells a request on `key` to come back, as the
 * moments between which it lies: its wait added to when the request was
 * sent and to when its answer came (the object decided in between). */
async function ask(url, key) {
  const sent = Date.now();
  const response = await fetch(`${url}/_sluice/v1/limit`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${API_TOKEN}` },
    body: JSON.stringify({ key, limit: 3, window_ms: 600_000 }),
  });
  const body = await response.json();
  const received = Date.now();
  const wait = body.retry_after_ms;
  return { allowed: body.allowed, remaining: body.remaining, from: sent + wait, to: received + wait };
}

test("after a restart the admissions hold and refusals are invited from the first moment again", { timeout: 120_000 }, async () => {
  const { dir, remove } = tempDir();
  let current = await runtime(dir, options);
  try {
    const key = freshKey("spread");
    for (let i = 0; i < 3; i++) assert.equal((await ask(current.url, key)).allowed, true);
    const before = [];
    for (let i = 0; i < 5; i++) before.push(await ask(current.url, key));
    // Three places, within a second of each other with their jitter, then
    // the first place's next lap a window (and a second) later.
    for (const later of before.slice(1, 3)) assert.ok(later.to >= before[0].from && later.from < before[0].to + 1_000);
    assert.ok(before[3].from - before[0].to >= 600_000, "the fourth is the first place's next lap");

    await current.kill();
    current = await runtime(dir, options);

    const first = await ask(current.url, key);
    assert.equal(first.allowed, false, "the admissions outlived the restart");
    assert.equal(first.remaining, 0);
    assert.ok(first.to >= before[0].from, "never before the first place frees");
    assert.ok(first.from <= before[0].to, `told the first place's moment again, not the sixth refusal's: ${first.from - before[0].to} ms later`);
  } finally {
    await current.kill();
    remove();
  }
});
