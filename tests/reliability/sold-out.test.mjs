// A sold-out quota's stock through hard restarts (SIGKILL, persisted
// state), the runtime down longer than a part waits before it tells its
// siblings again: a part's word on its stock, told or still owed, is kept
// and told after the restart, the close it made is kept, and an override
// that adds stock opens it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const TOKEN = "sold-out-restart-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
const options = {
  secrets: { ADMIN_TOKEN: TOKEN },
  sluice: {
    rules: [{ id: "drop", match: { path: "/buy" }, scope: "global", split: 2, limit: 2, window: "30d", sold_out: "close" }],
  },
};

test("what a part sold, told and closed survives restarts and a long outage", { timeout: 180_000 }, async () => {
  const { dir, remove } = tempDir();
  let current = await runtime(dir, options);
  const buy = async () => (await fetch(`${current.url}/buy`)).status;
  const state = async () => (await (await fetch(`${current.url}/_sluice/admin/rules/drop`, { headers: admin })).json()).state;
  const until = async (probe) => {
    for (let i = 0; i < 100; i += 1) {
      if (await probe()) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.fail("never came");
  };
  const restart = async (downMs) => {
    await current.kill();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    current = await runtime(dir, options);
  };
  try {
    // One part's share sold; killed at once, its word to the other part
    // maybe told, maybe still owed.
    let sold = 0;
    while (sold < 1) sold += (await buy()) === 200 ? 1 : 0;
    await restart(2_500);
    assert.equal((await state()).state, "open", "one share is left");
    while (sold < 2) {
      const status = await buy();
      assert.notEqual(status, 410, "no close while a share is left");
      sold += status === 200 ? 1 : 0;
    }
    await until(async () => (await state()).state === "closed");
    await restart(2_500);
    const closed = await fetch(`${current.url}/buy`);
    assert.equal(closed.status, 410);
    assert.equal((await closed.json()).reason, "sold out");
    const put = await fetch(`${current.url}/_sluice/admin/rules/drop/override`, { method: "PUT", headers: admin, body: JSON.stringify({ limit: 4 }) });
    assert.equal(put.status, 200);
    await until(async () => (await buy()) === 200);
  } finally {
    await current.kill();
    remove();
  }
});
