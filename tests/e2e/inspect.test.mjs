// The key view of a split global quota over HTTP on workerd: `*` shows the
// whole quota (every part, summed) and each part; `*#i` one part. The rule
// makes one call per decision (`local: false`), so that what the view
// counts is what was admitted: with admission blocks a part also counts a
// block outstanding at its worst, which the blocks tests check.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice } from "./harness.mjs";

const TOKEN = "inspect-admin-token-for-e2e-0123456789-abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

let sluice;
before(async () => {
  sluice = await Sluice.start({
    sluice: { rules: [{ id: "sale", match: { path: "/sale" }, scope: "global", split: 4, limit: 40, window: "1m", local: false }] },
    secrets: { ADMIN_TOKEN: TOKEN },
  });
});
after(() => sluice?.stop());

const view = async (key, method = "GET") => {
  const response = await sluice.fetch(`/_sluice/admin/keys/sale/${encodeURIComponent(key)}`, { method, headers: admin });
  assert.equal(response.status, 200, key);
  return response.json();
};

test("a split quota's `*` shows the whole quota and each part", async () => {
  for (let i = 0; i < 7; i++) assert.equal((await sluice.fetch("/sale")).status, 200);
  const whole = await view("*");
  assert.equal(whole.rule, "sale");
  assert.equal(whole.key, "*");
  assert.deepEqual(
    whole.slots.map((s) => [s.policy, s.limit, s.used, s.remaining, s.window_ms]),
    [["sale", 40, 7, 33, 60_000]],
  );
  assert.ok(whole.slots[0].reset_ms > 50_000 && whole.slots[0].reset_ms <= 60_000);
  assert.deepEqual(whole.parts.map((p) => p.key), ["*#0", "*#1", "*#2", "*#3"]);
  assert.deepEqual(whole.parts.map((p) => p.object), ["rule:sale:*#0", "rule:sale:*#1", "rule:sale:*#2", "rule:sale:*#3"]);
  const used = whole.parts.reduce((sum, p) => sum + (p.slots[0]?.used ?? 0), 0);
  assert.equal(used, 7, "the parts add up to the whole");
  for (const part of whole.parts) {
    for (const slot of part.slots) assert.equal(slot.limit, 10, "each part holds a quarter");
  }

  const busiest = whole.parts.findIndex((p) => (p.slots[0]?.used ?? 0) > 0);
  const one = await view(`*#${busiest}`);
  assert.equal(one.object, `rule:sale:*#${busiest}`);
  assert.equal(one.parts, undefined);

  const reset = await view("*", "DELETE");
  assert.equal(reset.parts.length, 4);
  const after = await view("*");
  assert.deepEqual(after.slots.map((s) => [s.used, s.remaining]), [[0, 40]], "every part was reset");
});
