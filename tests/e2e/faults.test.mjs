// Failure policies with injected faults: LIMITER is bound to a fixture that
// passes calls through to the real key object or fails them (exception, a storage error,
// hang past the timeout, a garbled answer). on_error = "allow" fails open,
// "deny" fails closed; every failure is logged and counted; the worker
// recovers when the fault stops, and no fault ever panics the wasm instance.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice } from "./harness.mjs";

const TOKEN = "faults-admin-token-0123456789abcdef";
const FAULTS = ["throw", "error", "hang", "garbage"];
let sluice;
before(async () => {
  sluice = await Sluice.start({
    faults: true,
    secrets: { ADMIN_TOKEN: TOKEN },
    sluice: {
      timeout: "300ms",
      rules: [
        { id: "open", match: { path: "/open" }, limit: 2, window: "1m", on_error: "allow" },
        { id: "closed", match: { path: "/closed" }, limit: 2, window: "1m", on_error: "deny" },
      ],
    },
  });
});
after(() => sluice?.stop());

let n = 0;
const get = (path) => {
  n += 1;
  return sluice.fetch(path, { headers: { "CF-Connecting-IP": `198.19.0.${n}` } });
};

for (const fault of FAULTS) {
  test(`${fault}: fail open and fail closed, logged`, async () => {
    await sluice.fault(fault);
    const started = Date.now();
    const open = await get("/open");
    assert.equal(open.status, 200, "on_error = allow forwards the request");
    assert.equal(open.headers.get("sluice-degraded"), "fail-open");
    assert.equal(open.headers.get("ratelimit"), null);
    const closed = await get("/closed");
    assert.equal(closed.status, 503, "on_error = deny refuses it");
    assert.equal(closed.headers.get("retry-after"), "1");
    assert.equal((await closed.json()).code, "unavailable");
    assert.ok(Date.now() - started < 3000, "a hang is cut off by the timeout");
    assert.match(sluice.output(), /rule open could not decide/);
    assert.match(sluice.output(), /rule closed could not decide/);
  });
}

test("the worker recovers when the fault stops", async () => {
  await sluice.fault("throw");
  assert.equal((await get("/closed")).status, 503);
  await sluice.fault("pass");
  const ip = "198.19.1.1";
  const send = () => sluice.fetch("/closed", { headers: { "CF-Connecting-IP": ip } });
  const first = await send();
  assert.equal(first.status, 200);
  assert.equal(first.headers.get("ratelimit"), '"closed";r=1;t=60', "limits apply again");
  assert.equal((await send()).status, 200);
  assert.equal((await send()).status, 429);
});

test("every failure is counted, and none reached the runtime as a panic", async () => {
  const response = await sluice.fetch("/_sluice/admin/stats", { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(response.status, 200);
  const { rules } = await response.json();
  const failed = Object.fromEntries(rules.map((r) => [r.rule, r.failed]));
  assert.equal(failed.open, FAULTS.length, "one fail-open per fault");
  assert.equal(failed.closed, FAULTS.length + 1, "one fail-closed per fault, and one more before recovery");
  const output = sluice.output();
  assert.doesNotMatch(output, /panicked/);
  assert.doesNotMatch(output, /Reinitializing/i);
});
