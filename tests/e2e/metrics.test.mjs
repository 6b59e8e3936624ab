// GET {prefix}/admin/metrics on workerd: Prometheus's text format, behind
// the admin token, with decisions by outcome, near-limit and shadow
// counts, bans, a room's gauges and a global quota's whole, labelled by
// rule and never by key; and each decision written to the Analytics
// Engine dataset bound as ANALYTICS (here a stand-in worker that records
// what it is given: the local runtime's own dataset discards points).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, eventually } from "./harness.mjs";

const ADMIN_TOKEN = "metrics-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${ADMIN_TOKEN}` };
const SECRET = "metrics-room-secret-0123456789abcdef";

const config = {
  rules: [
    { id: "api", match: { path: "/api/*" }, key: "header:x-user", limit: 5, window: "1m", ban: { after: 2, within: "1m", for: "10m" } },
    { id: "trial", match: { path: "/trial" }, key: "header:x-user", limit: 1, window: "1m", shadow: true },
    { id: "stock", match: { path: "/stock" }, scope: "global", split: 2, limit: 10, window: "30d" },
    { id: "shop", match: { path: "/shop/*" }, waiting_room: { active: 1, per_minute: 60, shards: 1, refresh: "2s" } },
  ],
};

const recorder = `
import { WorkerEntrypoint } from "cloudflare:workers";
const points = [];
export default class extends WorkerEntrypoint {
  writeDataPoint(point) { points.push(point); }
  fetch() { return Response.json(points); }
}`;

describe("metrics", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({
      sluice: config,
      secrets: { ADMIN_TOKEN, ROOM_SECRET: SECRET },
      workers: [{ name: "dataset", modules: true, script: recorder, compatibilityDate: "2026-04-01" }],
      serviceBindings: { ANALYTICS: "dataset" },
    });
  });
  after(() => sluice?.stop());

  const scrape = () => sluice.fetch("/_sluice/admin/metrics", { headers: admin });
  const get = (path, user) => sluice.fetch(path, { headers: { "x-user": user } });

  test("needs the admin token", async () => {
    assert.equal((await sluice.fetch("/_sluice/admin/metrics")).status, 401);
    const wrong = await sluice.fetch("/_sluice/admin/metrics", { headers: { Authorization: "Bearer nope" } });
    assert.equal(wrong.status, 401);
    assert.equal((await sluice.fetch("/_sluice/admin/metrics", { method: "POST", headers: admin })).status, 405);
  });

  test("counts every decision by rule and outcome, never by key", async () => {
    const secretKey = "user-who-must-not-appear";
    for (let i = 0; i < 8; i++) await get("/api/x", secretKey); // 5 admitted (the last two near the limit), 3 refused: banned
    for (let i = 0; i < 3; i++) assert.equal((await get("/trial", secretKey)).status, 200); // 1 admitted, 2 shadow
    for (let i = 0; i < 3; i++) assert.equal((await get("/stock", "s")).status, 200);
    assert.equal((await get("/shop/a", "v")).status, 200); // the room's one active session
    const answer = await scrape();
    assert.equal(answer.status, 200);
    assert.match(answer.headers.get("content-type"), /^text\/plain; version=0\.0\.4/);
    const text = await answer.text();
    const lines = new Set(text.split("\n"));
    for (const line of [
      "# TYPE sluice_decisions_total counter",
      'sluice_decisions_total{rule="api",outcome="admitted"} 5',
      'sluice_decisions_total{rule="api",outcome="refused"} 3',
      'sluice_near_limit_total{rule="api"} 2',
      'sluice_decisions_total{rule="trial",outcome="refused"} 2',
      'sluice_shadow_refusals_total{rule="trial"} 2',
      'sluice_bans{source="rule"} 1',
      'sluice_room_active{rule="shop"} 1',
      'sluice_room_waiting{rule="shop"} 0',
      'sluice_quota_limit{rule="stock",policy="stock"} 10',
      'sluice_quota_used{rule="stock",policy="stock"} 3',
      'sluice_quota_remaining{rule="stock",policy="stock"} 7',
    ]) {
      assert.ok(lines.has(line), `${line} in\n${text}`);
    }
    assert.ok(!text.includes(secretKey), "a key is never a label");
    // Counters never go down between scrapes.
    await get("/api/x", "another");
    const again = new Set((await (await scrape()).text()).split("\n"));
    assert.ok(again.has('sluice_decisions_total{rule="api",outcome="admitted"} 6'));
  });

  test("each decision is a data point in the Analytics Engine dataset", async () => {
    const dataset = await sluice.worker("dataset");
    await get("/api/y", "ae-user");
    const points = await eventually(async () => {
      const all = await (await dataset.fetch("http://dataset/")).json();
      const mine = all.filter((p) => p.blobs?.[2] === "ae-user");
      return mine.length === 1 && mine;
    });
    assert.deepEqual(points[0], { indexes: ["api"], blobs: ["api", "admitted", "ae-user"], doubles: [1, 0, 0] });
    const all = await (await dataset.fetch("http://dataset/")).json();
    const shadow = all.filter((p) => p.indexes[0] === "trial" && p.doubles[2] === 1);
    assert.equal(shadow.length, 2, "the shadow refusals are flagged");
  });
});
