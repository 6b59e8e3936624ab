// Timing: each test judges answers against the moments they were sent, to tens of
// milliseconds; run alone, after the others, so no other runtime shares the cores.
// The window boundary, in real time, through the decision API: the case the
// design documents start from, and the fixed window's 2N across its edge.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, sleepUntil, API_TOKEN } from "./harness.mjs";

let sluice;
before(async () => {
  sluice = await Sluice.start({ secrets: { API_TOKEN } });
});
after(() => sluice?.stop());

const limit = (body) => sluice.post("/_sluice/v1/limit", body);

// The boundary case from the design documents, with real time: limit 10 per
// second; 3 requests in [0, 0.5 s), 7 in [0.5, 1 s), 7 in [1, 1.5 s), 3 in
// [1.5, 2 s). A fixed-window counter would admit all 14 of [0.5, 1.5 s).
// Every expected outcome is at least 50 ms away from the moment it flips.
test("the window boundary case, in real time", async () => {
  const key = freshKey("boundary");
  const schedule = [
    [0, true], [100, true], [200, true],
    [520, true], [580, true], [640, true], [700, true], [760, true], [820, true], [880, true],
    [1050, true], [1150, true], [1250, true], [1300, false], [1350, false], [1400, false], [1450, false],
    [1600, true], [1750, true], [1900, true],
  ];
  // A run whose answers come more than 40 ms after their moment cannot be
  // judged against the schedule (a loaded machine, a cold object): it is
  // run again on a fresh key, up to three times.
  const run = async (key) => {
    // Warm the key's object so the first timed request is not a cold start.
    await limit({ key, limit: 10, window_ms: 1000, cost: 0 });
    const start = Date.now() + 50;
    const seen = [];
    for (const [offset, expected] of schedule) {
      await sleepUntil(start + offset);
      const sent = Date.now() - start;
      const body = await (await limit({ key, limit: 10, window_ms: 1000 })).json();
      seen.push({ offset, sent, received: Date.now() - start, allowed: body.allowed, expected });
    }
    return seen;
  };
  let seen = await run(key);
  let late = seen.filter((s) => s.received - s.offset > 40);
  for (let attempt = 1; attempt < 3 && late.length > 0; attempt++) {
    seen = await run(`${key}-${attempt}`);
    late = seen.filter((s) => s.received - s.offset > 40);
  }
  assert.equal(late.length, 0, `requests too late to judge, three runs in a row: ${JSON.stringify(late)}`);
  assert.deepEqual(seen.map((s) => s.allowed), schedule.map(([, expected]) => expected));
  const middle = seen.filter((s) => s.offset >= 500 && s.offset < 1500 && s.allowed).length;
  assert.equal(middle, 10, "a fixed window would have admitted 14 here");
});

test("a fixed window lets up to 2N through across its boundary; the sliding log does not", async () => {
  const ask = (key, algorithm) =>
    limit({ key, limit: 10, window_ms: 1000, algorithm }).then((r) => r.json());
  // One request opens each window at t = 0; then nine near its end and ten
  // just after it, all within [700 ms, 1700 ms): one interval of length W.
  // On a loaded machine the nine may not all be answered before the
  // boundary; such a run proves nothing either way, and is run again on
  // fresh keys.
  const run = async () => {
    const fixedKey = freshKey("fixed");
    const logKey = freshKey("log");
    const start = Date.now();
    const late = { fixed_window: 0, sliding_log: 0 };
    const round = async (count) => {
      for (let i = 0; i < count; i++) {
        late.fixed_window += (await ask(fixedKey, "fixed_window")).allowed ? 1 : 0;
        late.sliding_log += (await ask(logKey, "sliding_log")).allowed ? 1 : 0;
      }
    };
    await ask(fixedKey, "fixed_window");
    await ask(logKey, "sliding_log");
    await sleepUntil(start + 700);
    await round(9);
    const beforeBoundary = Date.now() - start < 980;
    await sleepUntil(start + 1050);
    await round(10);
    return { late, judged: beforeBoundary && Date.now() - start < 1650 };
  };
  let result = await run();
  for (let attempt = 1; attempt < 3 && !result.judged; attempt++) result = await run();
  assert.ok(result.judged, "three runs in a row were too slow to fall on both sides of the boundary");
  assert.equal(result.late.fixed_window, 19, "nine before the boundary and ten after it");
  assert.equal(result.late.sliding_log, 10, "never more than ten in any second");
});
