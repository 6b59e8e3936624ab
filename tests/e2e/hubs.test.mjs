// The hubs are off every request's path: with the hubs hanging or failing,
// a new runtime answers its first request at once, and decisions, proxying
// and the bans decisions start are unaffected; new keys cause no request to
// any shared object.
import { test, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, eventually, fetchAlone, API_TOKEN } from "./harness.mjs";

const ADMIN_TOKEN = "hubs-test-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${ADMIN_TOKEN}` };
const rules = [
  { id: "api", match: { path: "/api/*" }, key: "ip", limit: 2, window: "1m" },
  {
    id: "guarded",
    match: { path: "/guarded" },
    key: "ip",
    limit: 1,
    window: "1m",
    ban: { after: 2, within: "1m", for: "10m" },
  },
];

let n = 0;
const ip = () => `198.18.7.${++n}`;

for (const hubFault of ["hang", "throw"]) {
  describe(`with every hub ${hubFault === "hang" ? "hanging" : "failing"}`, () => {
    let sluice;
    after(() => sluice?.stop());

    test("the first request of a new runtime is answered at normal latency, and limits hold", async () => {
      sluice = await Sluice.start({ faults: true, secrets: { ADMIN_TOKEN, API_TOKEN }, sluice: { origin: "demo", timeout: "2s", rules } });
      await sluice.fault(hubFault, "hub");
      const started = Date.now();
      const first = await sluice.fetch("/api/x", { headers: { "CF-Connecting-IP": "198.18.6.1" } });
      const elapsed = Date.now() - started;
      assert.equal(first.status, 200);
      assert.ok(elapsed < 1000, `the first answer took ${elapsed} ms`);
      assert.equal((await sluice.fetch("/api/x", { headers: { "CF-Connecting-IP": "198.18.6.1" } })).status, 200);
      assert.equal((await sluice.fetch("/api/x", { headers: { "CF-Connecting-IP": "198.18.6.1" } })).status, 429);
      const decided = await sluice.post("/_sluice/v1/limit", { key: freshKey(), limit: 1, window_ms: 60_000 });
      assert.equal((await decided.json()).allowed, true);
      assert.equal((await sluice.fetch("/elsewhere")).status, 200, "unmatched paths pass through");
    });

    test("bans that decisions start hold, without any hub", async () => {
      const client = ip();
      const send = () => sluice.fetch("/guarded", { headers: { "CF-Connecting-IP": client } });
      assert.equal((await send()).status, 200);
      assert.equal((await send()).status, 429);
      const third = await send();
      assert.equal(third.status, 429);
      assert.equal((await third.json()).code, "banned");
      const later = await send();
      assert.equal((await later.json()).code, "banned");
      const { hubCalls } = await sluice.faultCounts();
      assert.ok(hubCalls <= 1, `${hubCalls} calls reached the hubs (one background report at most)`);
    });
  });
}

// New keys, by the decision API and through a rule: the hubs hear of them
// only in the isolate's periodic report. (The hostile suite floods 5 000
// keys and counts what the hubs received.)
test("new keys send nothing to a shared object", async () => {
  const sluice = await Sluice.start({ faults: true, secrets: { ADMIN_TOKEN, API_TOKEN }, sluice: { origin: "demo", rules } });
  try {
    await sluice.fetch("/api/warm", { headers: { "CF-Connecting-IP": ip() } });
    const before = await sluice.faultCounts();
    const started = Date.now();
    const KEYS = 200;
    // Each request on a connection of its own: none is sent twice (each
    // counts), and the runtime may close a kept-alive one as it is reused.
    for (let i = 0; i < KEYS / 2; i++) {
      const decided = await fetchAlone(`${sluice.base}/_sluice/v1/limit`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${API_TOKEN}` },
        body: JSON.stringify({ key: freshKey("new"), limit: 1, window_ms: 1000 }),
      });
      assert.equal(decided.status, 200);
      const proxied = await fetchAlone(`${sluice.base}/api/x`, { headers: { "CF-Connecting-IP": `10.9.0.${i}` } });
      assert.equal(proxied.status, 200);
    }
    const after = await sluice.faultCounts();
    const seconds = (Date.now() - started) / 1000;
    const reports = after.hubCalls - before.hubCalls;
    assert.ok(reports <= Math.ceil(seconds / 10) + 1, `${reports} hub calls in ${seconds} s for ${KEYS} new keys`);
    assert.equal(after.calls - before.calls, KEYS, "each key touched its own object once");
    const stats = await (await sluice.fetch("/_sluice/admin/stats", { headers: admin })).json();
    assert.equal(Object.keys(stats.shared).length, 16);
  } finally {
    await sluice.stop();
  }
});

test("a failed report keeps the manual bans it had, and automatic bans never reach isolates", async () => {
  const sluice = await Sluice.start({ faults: true, secrets: { ADMIN_TOKEN }, sluice: { origin: "demo", rules }, intervalMs: 200 });
  try {
    const banned = "198.18.9.9";
    const put = await sluice.fetch(`/_sluice/admin/bans/${banned}`, {
      method: "PUT",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify({ for: "10m", reason: "abuse" }),
    });
    assert.equal(put.status, 200);
    // Automatic bans on many long keys: the hubs list them, isolates do not
    // hold them.
    for (let i = 0; i < 20; i++) {
      const client = `198.18.10.${i + 1}`;
      for (let j = 0; j < 3; j++) await sluice.fetch("/guarded", { headers: { "CF-Connecting-IP": client } });
    }
    const listed = await (await sluice.fetch("/_sluice/admin/bans", { headers: admin })).json();
    assert.equal(listed.bans.filter((b) => b.source === "rule:guarded").length, 20);
    await sluice.fault("throw", "hub");
    // Requests start the next report once it is due (200 ms after the
    // last here, 10 s deployed); it fails.
    const { hubCalls: before } = await sluice.faultCounts();
    await eventually(async () => {
      await (await sluice.fetch("/elsewhere")).arrayBuffer();
      return (await sluice.faultCounts()).hubCalls > before;
    }, 5000);
    const refused = await sluice.fetch("/api/x", { headers: { "CF-Connecting-IP": banned } });
    assert.equal(refused.status, 429, "the manual ban still applies");
    assert.equal((await refused.json()).code, "banned");
    await sluice.fault("pass", "hub");
    const figures = (await (await sluice.fetch("/_sluice/admin/stats", { headers: admin })).json()).isolate;
    assert.equal(figures.manual_bans, 1, "only the manual ban is held by the isolate");
  } finally {
    await sluice.stop();
  }
});
