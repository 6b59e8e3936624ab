// A ban of one key on one rule lives in that key's object: killed the hard
// way (SIGKILL, persisted state) and started again, the runtime still
// refuses the key, shows the ban, and a lift after another restart stays
// lifted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const TOKEN = "key-bans-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };
const options = {
  secrets: { ADMIN_TOKEN: TOKEN },
  sluice: { rules: [{ id: "search", match: { path: "/search" }, key: "header:x-api-key", limit: 100, window: "1m" }] },
};

test("a key's ban on its rule survives a restart, and so does its lift", { timeout: 120_000 }, async () => {
  const { dir, remove } = tempDir();
  let current = await runtime(dir, options);
  const search = (key) => fetch(`${current.url}/search`, { headers: { "x-api-key": key, "CF-Connecting-IP": "198.51.100.5" } });
  const call = (method, body) =>
    fetch(`${current.url}/_sluice/admin/keys/search/stolen-key/ban`, {
      method,
      headers: { ...admin, "content-type": "application/json" },
      body: body && JSON.stringify(body),
    });
  try {
    assert.equal((await call("PUT", { for: "1h", reason: "leaked" })).status, 200);
    assert.equal((await search("stolen-key")).status, 429);

    await current.kill();
    current = await runtime(dir, options);
    const refused = await search("stolen-key");
    assert.equal(refused.status, 429, "refused by the key's object after a restart");
    const problem = await refused.json();
    assert.equal(problem.code, "banned");
    assert.match(problem.detail, /leaked/);
    assert.equal((await search("another-key")).status, 200);
    const state = await (await fetch(`${current.url}/_sluice/admin/keys/search/stolen-key`, { headers: admin })).json();
    assert.equal(state.ban.reason, "leaked");

    assert.equal((await call("DELETE")).status, 200);
    await current.kill();
    current = await runtime(dir, options);
    assert.equal((await search("stolen-key")).status, 200, "the lift was kept");
  } finally {
    await current.kill();
    remove();
  }
});
