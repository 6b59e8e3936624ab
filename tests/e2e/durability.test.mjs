// State that must outlive an instance: admissions across a runtime restart,
// state stored by an earlier version, and the alarm sweep that frees an
// idle key's storage.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, tempDir, eventually, withEarlierVersion, API_TOKEN } from "./harness.mjs";

const ADMIN_TOKEN = "sluice-e2e-admin-token-0123456789abcdef";

test("admissions survive a restart of the runtime with persisted state", async () => {
  const { dir, remove } = tempDir();
  const key = freshKey("restart");
  const ask = (s) => s.post("/_sluice/v1/limit", { key, limit: 3, window_ms: 600_000 }).then((r) => r.json());
  try {
    let sluice = await Sluice.start({ persist: dir, secrets: { API_TOKEN } });
    for (let i = 0; i < 3; i++) assert.equal((await ask(sluice)).allowed, true);
    await sluice.stop();

    sluice = await Sluice.start({ persist: dir, secrets: { API_TOKEN } });
    try {
      const answer = await ask(sluice);
      assert.equal(answer.allowed, false, "the key is still full after the restart");
      assert.equal(answer.remaining, 0);
      assert.ok(answer.retry_after_ms > 590_000);
      const state = await sluice.inspect(`api:${key}`);
      assert.equal(state.held, true, "the ledger is read back from storage");
      assert.equal(state.stored_rows > 0, true);
    } finally {
      await sluice.stop();
    }
  } finally {
    remove();
  }
});

/** Runs `use` against tests/e2e/fixtures/keyed-layout.mjs on the persisted
 * state in `dir`. */
const withKeyedLayout = (dir, use) =>
  withEarlierVersion(dir, "keyed-layout.mjs", { LIMITER: { className: "Limiter", useSQLite: true } }, use);

test("state stored in the keyed layout of earlier versions is kept and moved to one key's layout", async () => {
  const { dir, remove } = tempDir();
  const now = Date.now();
  // The layout as last written, and an older one (leases without their
  // limit column) whose move was cut short in two tables.
  const variants = [{}, { without_lim: true, interrupted: true }].map((options) => {
    const key = freshKey("keyed");
    return { key, object: `api:${key}`, at: `?object=${encodeURIComponent(`api:${key}`)}`, options };
  });
  try {
    await withKeyedLayout(dir, async (fetch) => {
      for (const { object, at, options } of variants) {
        const written = await fetch(`/${at}`, { method: "POST", body: JSON.stringify({ key: object, now, ...options }) });
        assert.equal(await written.text(), "written");
      }
    });

    const sluice = await Sluice.start({ persist: dir, secrets: { API_TOKEN, ADMIN_TOKEN } });
    try {
      for (const { key, object, options } of variants) {
        const what = JSON.stringify(options);
        const route = `/_sluice/admin/keys/_api/${encodeURIComponent(key)}`;
        const state = await (await sluice.fetch(route, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json();
        assert.deepEqual(state.slots.map((s) => [s.policy, s.used, s.remaining]), [["default", 3, 0]], what);
        assert.deepEqual([state.ban.until_ms, state.ban.offences, state.ban.reason], [now + 600_000, 1, "from the keyed layout"]);
        assert.deepEqual(state.leases.map((l) => [l.id, l.owner, l.fence, l.holds]), [["lease-old", "worker-1", 7, 1]]);
        assert.equal(state.override.reason, "kept");
        const answer = await (await sluice.post("/_sluice/v1/limit", { key, limit: 3, window_ms: 600_000 })).json();
        assert.equal(answer.allowed, false, `the admissions and the ban still hold: ${what}`);
        const inspected = await sluice.inspect(object);
        assert.equal(inspected.stored_rows, 1 + 2 + 1 + 1 + 1 + 1, `a row for each row written before: ${what}`);
      }
    } finally {
      await sluice.stop();
    }

    await withKeyedLayout(dir, async (fetch) => {
      for (const { at, options } of variants) {
        const tables = await (await fetch(`/schema${at}`)).json();
        const names = tables.map((t) => t.name).sort();
        assert.deepEqual(names, ["bans", "fence_floors", "hits", "leases", "overrides", "slots"], JSON.stringify(options));
        for (const table of tables) assert.doesNotMatch(table.sql, /\bkey TEXT/, `${table.name}: ${table.sql}`);
        assert.match(tables.find((t) => t.name === "leases").sql, /\blim INTEGER/);
        assert.deepEqual(await (await fetch(`/floor${at}`)).json(), [{ fence: 5 }], "the fence floor is kept");
      }
    });
  } finally {
    remove();
  }
});

test("the alarm sweeps an idle key and frees its storage", async () => {
  const sluice = await Sluice.start({ secrets: { API_TOKEN } });
  try {
    const key = freshKey("sweep");
    const object = `api:${key}`;
    const before = await sluice.inspect(object);
    assert.equal(before.has_storage, false, "reading a new object creates no storage");
    const started = Date.now();
    for (let i = 0; i < 3; i++) {
      await sluice.post("/_sluice/v1/limit", { key, limit: 5, window_ms: 300 });
    }
    const full = await sluice.inspect(object);
    assert.equal(full.has_storage, true);
    assert.equal(full.held, true);
    assert.ok(full.stored_rows >= 2, "a slot row and at least one hit row");
    assert.ok(full.alarm_ms >= started + 300 && full.alarm_ms <= Date.now() + 300, `alarm at ${full.alarm_ms}`);

    const empty = await eventually(async () => {
      const state = await sluice.inspect(object);
      return state.has_storage ? null : state;
    });
    assert.equal(empty.held, false, "the ledger holds nothing once swept");
    assert.equal(empty.stored_rows, 0);
    assert.equal(empty.alarm_ms, null, "no alarm once nothing remains");

    const again = await (await sluice.post("/_sluice/v1/limit", { key, limit: 5, window_ms: 300 })).json();
    assert.equal(again.allowed, true);
    assert.equal(again.remaining, 4, "the swept key starts afresh");
  } finally {
    await sluice.stop();
  }
});

test("an admission on a busy key writes one row, a refusal writes none", async () => {
  const sluice = await Sluice.start({ secrets: { API_TOKEN } });
  try {
    const key = freshKey("cost");
    // The meter is the isolate's; read it through an object with no
    // tables, whose inspection reads no rows.
    const meter = async () => (await sluice.inspect(`probe:${key}`)).meter;
    const ask = () => sluice.post("/_sluice/v1/limit", { key, limit: 4, window_ms: 600_000 }).then((r) => r.json());
    assert.equal((await ask()).allowed, true, "the first admission creates the slots table");
    assert.equal((await ask()).allowed, true, "the second creates the log's hits table");
    const before = await meter();
    for (let i = 0; i < 2; i++) assert.equal((await ask()).allowed, true);
    const admitted = await meter();
    for (let i = 0; i < 5; i++) assert.equal((await ask()).allowed, false);
    const refused = await meter();
    assert.equal(admitted.rows_written - before.rows_written, 2, "one row per admission");
    assert.equal(refused.rows_written - admitted.rows_written, 0, "refusals write nothing");
    assert.equal(refused.rows_read - admitted.rows_read, 0, "and read nothing");
    assert.equal(refused.requests - admitted.requests, 5 + 1, "one key object request per decision, and the inspection");
  } finally {
    await sluice.stop();
  }
});

// Creating a table in a new object's database is reported as two rows
// written, and every new key is a new object, so a first admission costs at
// least three: the slot row carries the log's first run, and only the one
// table it needs is created (the earlier layout created five).
test("a new key's first admission writes three rows: its table and one row", async () => {
  const sluice = await Sluice.start({ secrets: { API_TOKEN } });
  try {
    const meter = async () => (await sluice.inspect(`probe:${freshKey()}`)).meter;
    for (const body of [
      { key: freshKey("new"), limit: 4, window_ms: 600_000 },
      { key: freshKey("new"), limit: 4, window_ms: 600_000, algorithm: "fixed_window" },
    ]) {
      const before = await meter();
      assert.equal((await (await sluice.post("/_sluice/v1/limit", body)).json()).allowed, true);
      const after = await meter();
      assert.equal(after.rows_written - before.rows_written, 3, `rows written for ${body.algorithm ?? "sliding_log"}`);
    }
  } finally {
    await sluice.stop();
  }
});
