// Each kind of state live control adds survives a hard restart of the
// runtime (SIGKILL, persisted state): a global quota's state and override,
// held in its parts' SQLite; a per-key rule's state, held in KV. The
// admissions made before are kept too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tempDir } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const TOKEN = "controls-restart-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };
const options = {
  secrets: { ADMIN_TOKEN: TOKEN },
  sluice: {
    rules: [
      { id: "sale", match: { path: "/buy" }, scope: "global", split: 2, limit: 4, window: "1h" },
      { id: "api", match: { path: "/api/*" }, limit: 100, window: "1m" },
    ],
  },
};

test("states, an override and the admissions before them survive restarts", { timeout: 180_000 }, async () => {
  const { dir, remove } = tempDir();
  let current = await runtime(dir, options);
  const request = (ip, path) => fetch(`${current.url}${path}`, { headers: { "CF-Connecting-IP": ip } });
  const call = async (method, path, body) => {
    const response = await fetch(`${current.url}/_sluice/admin${path}`, {
      method,
      headers: { ...admin, ...(body ? { "content-type": "application/json" } : {}) },
      body: body && JSON.stringify(body),
    });
    assert.equal(response.status, 200, `${method} ${path}: ${await response.clone().text()}`);
    return response.json();
  };
  const restart = async () => {
    await current.kill();
    current = await runtime(dir, options);
  };
  try {
    for (const ip of ["198.51.100.1", "198.51.100.2", "198.51.100.3"]) assert.equal((await request(ip, "/buy")).status, 200);
    await call("PUT", "/rules/sale/override", { limit: 6, reason: "more stock" });
    await call("PUT", "/rules/sale/state", { state: "closed", reason: "sold out" });
    await call("PUT", "/rules/api/state", { state: "paused", reason: "deploy" });

    await restart();
    const closed = await request("198.51.100.4", "/buy");
    assert.equal(closed.status, 410, "the parts keep their state");
    assert.equal((await closed.json()).reason, "sold out");
    // A new isolate reads the KV states in the background from its first
    // request: the ones after it are paused.
    await request("203.0.113.1", "/api/x");
    let paused;
    for (let i = 0; i < 50 && paused?.status !== 503; i += 1) {
      paused = await request("203.0.113.1", "/api/x");
      if (paused.status !== 503) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(paused.status, 503, "KV keeps the per-key rule's state");
    const view = await call("GET", "/rules/sale");
    assert.equal(view.state.state, "closed");
    assert.deepEqual(view.override.policies.map((p) => p.limit), [6]);
    assert.deepEqual([view.quota[0].limit, view.quota[0].used], [6, 3], "the admissions were kept");

    await call("PUT", "/rules/sale/state", { state: "open" });
    await call("PUT", "/rules/api/state", { state: "open" });
    await restart();
    const statuses = [];
    for (let i = 0; i < 5; i += 1) statuses.push((await request(`198.51.100.${10 + i}`, "/buy")).status);
    assert.deepEqual(statuses, [200, 200, 200, 429, 429], "open, with the override's 6 of which 3 were taken");
    await request("203.0.113.2", "/api/x");
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await request("203.0.113.2", "/api/x")).status, 200, "opened for good");
  } finally {
    await current.kill();
    remove();
  }
});
