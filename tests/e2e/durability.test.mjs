// State that must outlive an instance: admissions across a runtime restart,
// and the alarm sweep that frees an idle key's storage.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, tempDir, eventually, API_TOKEN } from "./harness.mjs";

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
      assert.deepEqual(state.keys, [`api:${key}`]);
      assert.equal(state.stored_rows > 0, true);
    } finally {
      await sluice.stop();
    }
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
    assert.deepEqual(full.keys, [object]);
    assert.ok(full.stored_rows >= 2, "a slot row and at least one hit row");
    assert.ok(full.alarm_ms >= started + 300 && full.alarm_ms <= Date.now() + 300, `alarm at ${full.alarm_ms}`);

    const empty = await eventually(async () => {
      const state = await sluice.inspect(object);
      return state.has_storage ? null : state;
    });
    assert.deepEqual(empty.keys, []);
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
