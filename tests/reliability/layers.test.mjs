// Stacked limits outlive the runtime (issue 28, item 1): layered requests in
// flight when the runtime is killed (SIGKILL, persisted state), their keeps
// and refunds lost with it. After a start on the same state no layer counts
// more than its limit, and every request that was admitted is counted in
// every layer: a reservation nobody settled is kept, never lost.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const ADMIN_TOKEN = "admin-token-for-layer-restarts-0123456789";
const options = {
  secrets: { ADMIN_TOKEN },
  sluice: {
    rules: [
      {
        id: "checkout",
        match: { path: "/checkout", methods: ["POST"] },
        key: "header:x-user",
        limit: 1,
        window: "1h",
        also: [{ id: "all", scope: "global", split: 2, limit: 8, window: "1h" }],
      },
    ],
  },
};

/** What one key of a layer uses, through the admin API. */
async function used(current, rule, key) {
  const response = await fetch(`${current.url}/_sluice/admin/keys/${rule}/${encodeURIComponent(key)}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  assert.equal(response.status, 200);
  return (await response.json()).slots.reduce((sum, slot) => sum + slot.used, 0);
}

test("a hard kill with layered requests in flight loses no admission and breaks no limit", { timeout: 120_000 }, async () => {
  const { dir, remove } = tempDir();
  let current = await runtime(dir, options);
  try {
    const users = Array.from({ length: 10 }, (_, i) => `buyer-${i}`);
    const buy = (user) =>
      fetch(`${current.url}/checkout`, { method: "POST", headers: { "x-user": user } }).then(
        (response) => response.status,
        () => "lost",
      );
    // Two rounds: the first answered in full (5 of 8 places), the second
    // racing for the last 3 and cut by the kill while its requests, keeps
    // and refunds are on their way.
    const first = await Promise.all(users.slice(0, 5).map(buy));
    const cut = users.slice(5).flatMap((user) => [buy(user), buy(user)]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await current.kill();
    const second = await Promise.all(cut);
    const admitted = [
      ...users.slice(0, 5).filter((_, i) => first[i] === 200),
      ...users.slice(5).filter((_, i) => second[2 * i] === 200 || second[2 * i + 1] === 200),
    ];
    assert.deepEqual(first, [200, 200, 200, 200, 200], "the first round is admitted");

    current = await runtime(dir, options);
    let global = 0;
    for (const part of ["*#0", "*#1"]) global += await used(current, "checkout.all", part);
    assert.ok(global <= 8, `the global layer counts ${global}`);
    assert.ok(global >= admitted.length, `every admission counts in the global layer: ${global} < ${admitted.length}`);
    for (const user of users) {
      const own = await used(current, "checkout", user);
      assert.ok(own <= 1, `${user} counts ${own}`);
      if (admitted.includes(user)) assert.equal(own, 1, `${user} was admitted and is counted`);
    }
  } finally {
    await current?.kill();
    remove();
  }
});
