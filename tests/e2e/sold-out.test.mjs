// sold_out = "close" on workerd: a global quota (split or not, a rule's
// own or a global `also` layer) closes its rule once the whole quota is
// used (410 `closed`, reason "sold out", in the rule's state), never
// while a part still has stock; an override that adds stock opens it,
// and it closes again once that is sold; it all survives a restart.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, eventually, tempDir } from "./harness.mjs";

const ADMIN_TOKEN = "sold-out-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };

const config = {
  rules: [
    { id: "drop", match: { path: "/drop" }, scope: "global", split: 4, limit: 8, window: "30d", sold_out: "close" },
    { id: "one", match: { path: "/one" }, scope: "global", limit: 2, window: "30d", sold_out: "close", local: false },
    {
      id: "checkout",
      match: { path: "/checkout", methods: ["POST"] },
      key: "header:x-user",
      limit: 1,
      window: "1h",
      also: [{ id: "all", scope: "global", split: 2, limit: 4, window: "30d", sold_out: "close" }],
    },
  ],
};

describe("sold out", () => {
  let sluice;
  let persisted;
  before(async () => {
    persisted = tempDir();
    sluice = await Sluice.start({ sluice: config, persist: persisted.dir, secrets: { ADMIN_TOKEN } });
  });
  after(async () => {
    await sluice?.stop();
    persisted?.remove();
  });

  const state = async (rule) => (await sluice.fetch(`/_sluice/admin/rules/${rule}/state`, { headers: admin })).json();
  const sale = async (rule) => (await sluice.fetch(`/_sluice/admin/rules/${rule}`, { headers: admin })).json();
  /** A rule's state: a global quota's view nests it, a rule's with a
   * global layer does not. */
  const held = async (rule) => {
    const view = await state(rule);
    return { ...(typeof view.state === "object" ? view.state : view), agree: view.agree };
  };
  const closed = async (rule) => {
    const view = await held(rule);
    return view.state === "closed" && view.agree && view.reason === "sold out";
  };

  /** Buys at `path` until `count` were admitted; the refusals it met. */
  async function buy(path, count, init = () => ({})) {
    const refusals = [];
    let bought = 0;
    for (let tries = 0; bought < count; tries++) {
      assert.ok(tries < 400, `only ${bought} of ${count} bought`);
      const answer = await sluice.fetch(path, init(tries));
      if (answer.status === 200) bought += 1;
      else refusals.push({ status: answer.status, body: await answer.json() });
    }
    return refusals;
  }

  test("a split quota closes once every part's share is sold, and not before", async () => {
    await buy("/drop", 7);
    // Seven of eight: some part still has its unit, so the rule stays open
    // once its parts have told each other what they sold (a part's alarm
    // tells them, then waits for its window's sweep, 30 days away).
    const told = async () => {
      const parts = await Promise.all([0, 1, 2, 3].map((p) => sluice.inspect(`rule:drop:*#${p}`)));
      return parts.every((p) => p.alarm_ms === null || p.alarm_ms > Date.now() + 3_600_000);
    };
    await eventually(told);
    const view = await sale("drop");
    assert.equal(view.quota[0].used, 7);
    assert.equal((await held("drop")).state, "open");
    const refusals = await buy("/drop", 1);
    assert.ok(refusals.every((r) => r.status === 429), "refused with room left is a 429, never a close");
    await eventually(() => closed("drop"));
    // An isolate that remembers a part's refusal answers it a second more.
    const answer = await eventually(async () => {
      const answer = await sluice.fetch("/drop");
      return answer.status === 410 ? answer : null;
    }, 3_000);
    const problem = await answer.json();
    assert.equal(problem.code, "closed");
    assert.equal(problem.reason, "sold out");
    assert.equal(answer.headers.get("retry-after"), null);
    const sold = await sale("drop");
    assert.deepEqual([sold.quota[0].used, sold.quota[0].remaining, sold.state.reason], [8, 0, "sold out"]);
  });

  test("an override that adds stock opens it, and it closes again once that is sold", async () => {
    await eventually(() => closed("drop"));
    const put = await sluice.fetch("/_sluice/admin/rules/drop/override", { method: "PUT", headers: admin, body: JSON.stringify({ limit: 12, reason: "restock" }) });
    assert.equal(put.status, 200);
    await eventually(async () => (await held("drop")).state === "open");
    await buy("/drop", 4);
    await eventually(() => closed("drop"));
    assert.equal((await sale("drop")).quota[0].used, 12);
  });

  test("one part closes at its last unit", async () => {
    assert.equal((await sluice.fetch("/one")).status, 200);
    assert.equal((await held("one")).state, "open");
    assert.equal((await sluice.fetch("/one")).status, 200);
    assert.ok(await closed("one"), "closed by the call that sold the last unit");
    assert.equal((await sluice.fetch("/one")).status, 410);
  });

  test("a global layer sold out closes its rule: a buyer gets 410 and keeps the per-user unit", async () => {
    const user = (i) => ({ method: "POST", headers: { "X-User": `u${i}` } });
    await buy("/checkout", 4, (i) => user(i));
    await eventually(() => closed("checkout"));
    const late = await sluice.fetch("/checkout", user(1000));
    assert.equal(late.status, 410);
    assert.equal((await late.json()).reason, "sold out");
    const key = await (await sluice.fetch("/_sluice/admin/keys/checkout/u1000", { headers: admin })).json();
    assert.equal(key.slots[0].used, 0, "the per-user layer gave its unit back");
  });

  test("a restart keeps it sold out, the words the parts had told each other, and the sale's figures", async () => {
    const figures = (view) => [view.quota[0].used, view.admitted, view.per_second.reduce((sum, s) => sum + s[1], 0)];
    const before = figures(await sale("drop"));
    assert.deepEqual(before, [12, 12, 12]);
    await sluice.stop();
    sluice = await Sluice.start({ sluice: config, persist: persisted.dir, secrets: { ADMIN_TOKEN } });
    // Every part restarted, its memory empty: the figures are its log's.
    assert.deepEqual(figures(await sale("drop")), before);
    assert.ok(await closed("drop"));
    assert.equal((await sluice.fetch("/drop")).status, 410);
    const put = await sluice.fetch("/_sluice/admin/rules/drop/override", { method: "PUT", headers: admin, body: JSON.stringify({ limit: 13 }) });
    assert.equal(put.status, 200);
    await buy("/drop", 1);
    await eventually(() => closed("drop"));
  });

  test("sold_out is refused where it means nothing", async () => {
    const bad = await Sluice.start({
      sluice: { rules: [{ id: "api", match: { path: "/api/*" }, limit: 1, window: "1m", sold_out: "close" }] },
      secrets: { ADMIN_TOKEN },
    });
    try {
      const answer = await bad.fetch("/api/x");
      assert.equal(answer.status, 500);
      assert.equal((await answer.json()).field, "SLUICE.rules[0].sold_out");
    } finally {
      await bad.stop();
    }
  });
});
