// The isolate's count of the object calls it makes (GET /admin/stats,
// isolate.object_calls), which `npm run sale` divides by its requests: it
// must agree with what the key objects themselves were asked (their meter),
// and reading it must cost no key object call.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, eventually } from "./harness.mjs";

const ADMIN_TOKEN = "admin-token-for-object-calls-0123456789";

let sluice;
before(async () => {
  sluice = await Sluice.start({
    sluice: {
      rules: [
        {
          id: "checkout",
          match: { path: "/checkout", methods: ["POST"] },
          key: "header:x-user",
          limit: 1,
          window: "1m",
          also: [{ id: "all", scope: "global", split: 2, limit: 10, window: "1m" }],
        },
      ],
    },
    secrets: { ADMIN_TOKEN },
  });
});
after(() => sluice?.stop());

async function objectCalls() {
  const response = await sluice.fetch("/_sluice/admin/stats", { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(response.status, 200);
  return (await response.json()).isolate.object_calls;
}

/** Key-object calls as the objects count them (the runtime's key objects
 * share one isolate and its meter); the inspection itself is one. */
async function asked() {
  return (await sluice.inspect("meter")).meter.requests;
}

const buy = (user) => sluice.fetch("/checkout", { method: "POST", headers: { "X-User": user } });

test("the isolate counts each object call it makes, as the objects count them", async () => {
  const first = await objectCalls();
  const second = await objectCalls();
  assert.equal(second.LIMITER ?? 0, first.LIMITER ?? 0, "reading the stats asks no key object");
  assert.ok(second.HUB >= first.HUB + 16, "it reads the 16 hubs, and counts them");

  // Both counts move together: the isolate's, and the objects' own less
  // the inspections that read it (each one a call).
  const user = freshKey("buyer");
  const objects0 = await asked();
  const isolate0 = (await objectCalls()).LIMITER ?? 0;
  let inspections = 0;
  const moved = async () => {
    inspections += 1;
    const objects = (await asked()) - objects0 - inspections;
    return [(await objectCalls()).LIMITER - isolate0, objects];
  };
  assert.equal((await buy(user)).status, 200);
  // 2 on the request's path, and the per-user layer's keep after it.
  const settled = await eventually(async () => {
    const [isolate, objects] = await moved();
    return isolate === 3 && objects === 3;
  });
  assert.ok(settled);
  assert.equal((await buy(user)).status, 429, "refused by its own layer: one call");
  assert.deepEqual(await moved(), [4, 4]);
});
