// Global ceilings: a rule with scope = "global" has one quota for every
// caller, and split = K divides it across K objects whose shares sum to the
// limit. Whatever the routing, the parts never admit more than the limit,
// and the fallback to a second part fills the quota.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice } from "./harness.mjs";

const TOKEN = "scale-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

let sluice;
before(async () => {
  sluice = await Sluice.start({
    secrets: { ADMIN_TOKEN: TOKEN },
    sluice: {
      rules: [
        { id: "sale", match: { path: "/sale" }, scope: "global", split: 4, limit: 22, window: "10m" },
        { id: "shared", match: { path: "/shared" }, scope: "global", limit: 3, window: "10m" },
      ],
    },
  });
});
after(() => sluice?.stop());

let n = 0;
const from = (path) => {
  n += 1;
  return sluice.fetch(path, { headers: { "CF-Connecting-IP": `198.18.${n >> 8}.${n & 255}` } });
};

const part = async (key) => {
  const response = await sluice.fetch(`/_sluice/admin/keys/sale/${encodeURIComponent(key)}`, { headers: admin });
  assert.equal(response.status, 200);
  return (await response.json()).slots[0];
};

test("a split quota admits exactly its limit across all parts, and no more", async () => {
  const statuses = [];
  const policies = new Set();
  for (let wave = 0; wave < 16; wave++) {
    const responses = await Promise.all(Array.from({ length: 10 }, () => from("/sale")));
    for (const response of responses) {
      statuses.push(response.status);
      policies.add(response.headers.get("ratelimit-policy"));
      await response.arrayBuffer();
    }
  }
  const admitted = statuses.filter((s) => s === 200).length;
  assert.equal(statuses.filter((s) => s !== 200 && s !== 429).length, 0);
  assert.ok(admitted <= 22, `${admitted} admitted with a limit of 22`);
  assert.deepEqual([...policies], ['"sale";q=22;w=600'], "the headers announce the whole quota");

  const shares = [];
  for (let i = 0; i < 4; i++) shares.push(await part(`*#${i}`));
  assert.deepEqual(shares.map((s) => s.limit), [6, 6, 5, 5], "shares sum to the limit");
  assert.equal(shares.reduce((sum, s) => sum + s.used, 0), admitted, "every admission is in one part");
  // 160 requests, a random part each and a second when it is full: every
  // part is tried at least 6 times (the chance it is not is below 1e-12).
  assert.equal(admitted, 22, "the fallback to a second part fills the whole quota");

  const late = await from("/sale");
  assert.equal(late.status, 429);
  assert.equal(late.headers.get("ratelimit"), '"sale";r=0;t=' + late.headers.get("ratelimit").split("t=")[1]);
  const problem = await late.json();
  assert.deepEqual(problem["violated-policies"], ["sale"]);
  assert.ok(Number(late.headers.get("retry-after")) > 500);
});

test("a global quota without a split is one object every caller shares", async () => {
  const statuses = [];
  for (let i = 0; i < 5; i++) statuses.push((await from("/shared")).status);
  assert.deepEqual(statuses, [200, 200, 200, 429, 429], "five callers, one quota of 3");
  const response = await sluice.fetch(`/_sluice/admin/keys/shared/${encodeURIComponent("*")}`, { headers: admin });
  assert.equal((await response.json()).slots[0].used, 3);
});

test("a global quota needs no client address", async () => {
  const response = await sluice.fetch("/shared");
  assert.equal(response.status, 429, "keyed by nothing, refused by the full quota, not 400");
});
