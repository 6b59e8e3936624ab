// A flash sale decided from admission blocks (issue 30): "1 per user, 200
// in total", the total a global layer split into 2 parts, served by two
// isolates whose hot global layer is admitted from the blocks its parts
// grant them. (Two: each buyer is a new key object, which the local
// runtime makes slowly, and a part is hot in an isolate from 5 decisions a
// second.) The origin is the judge: never more than 200 admissions in
// all, no user admitted twice; a measurable share of the global layer's
// decisions came from blocks, and the key-object calls per 1 000
// decisions are counted the way `blocks.test.mjs` counts them. Once every
// block is reported, the sale's view counts exactly what the origin saw.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { eventually, isolates as startIsolates, isolateStats, okOrigin } from "./harness.mjs";

const ADMIN_TOKEN = "admin-token-for-the-flash-sale-blocks-0123456789";
const TOTAL = 200;
/** Users come back: 300 of them make every request, at random. */
const BUYERS = 300;
/** Requests sent once the sale sold out, which must all be refused. */
const AFTER = 100;
const RUN_MS = 30_000;
const CLIENTS = 20;

let sluice;
let origin;
/** The user of each admission the origin saw. */
const bought = [];
let isolates;

before(async () => {
  let url;
  ({ server: origin, url } = await okOrigin((req) => bought.push(req.headers["x-user"])));
  const config = {
    origin: url,
    rules: [
      {
        id: "checkout", match: { path: "/checkout" }, key: "header:x-user", limit: 1, window: "1m",
        also: [{ id: "all", scope: "global", split: 2, limit: TOTAL, window: "1m" }],
      },
    ],
  };
  ({ sluice, fetchers: isolates } = await startIsolates(2, { config, secrets: { ADMIN_TOKEN } }));
});
after(async () => {
  await sluice?.stop();
  origin?.close();
});

const admin = { Authorization: `Bearer ${ADMIN_TOKEN}` };
const stats = (fetcher) => isolateStats(fetcher, ADMIN_TOKEN);

test("1 per user, 200 in total, 2 isolates: exact, the global layer from blocks", async () => {
  const before = await Promise.all(isolates.map(stats));
  const answers = [];
  const end = Date.now() + RUN_MS;
  let next = 0;
  let extra = AFTER;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (Date.now() < end && (bought.length < TOTAL || extra-- > 0)) {
        const n = next++;
        const user = `u${Math.floor(Math.random() * BUYERS)}`;
        const headers = { "x-user": user, "CF-Connecting-IP": "192.0.2.9" };
        const response = await isolates[n % isolates.length]("/checkout", { headers });
        await response.arrayBuffer();
        answers.push(response.status);
      }
    }),
  );
  const after = await Promise.all(isolates.map(stats));

  const admitted = answers.filter((s) => s === 200).length;
  assert.equal(bought.length, admitted, "every admission reached the origin, once");
  assert.ok(admitted <= TOTAL, `${admitted} admitted of ${TOTAL}`);
  assert.equal(new Set(bought).size, bought.length, "no user admitted twice");
  assert.ok(answers.every((s) => s === 200 || s === 429), `statuses: ${[...new Set(answers)]}`);

  const calls = after.reduce((n, s, i) => n + (s.object_calls.LIMITER ?? 0) - (before[i].object_calls.LIMITER ?? 0), 0);
  const local = after.reduce((n, s, i) => n + s.blocks.admitted - before[i].blocks.admitted, 0);
  const perThousand = Math.round((calls * 1000) / answers.length);
  console.log(
    `flash-sale blocks e2e: ${answers.length} decisions, ${admitted} admitted (${new Set(bought).size} users), ` +
      `${local} global-layer admissions from blocks (${Math.round((100 * local) / admitted)}%), ` +
      `${calls} key-object calls = ${perThousand} per 1000 decisions`,
  );
  assert.ok(admitted >= TOTAL / 2, `only ${admitted} admitted in ${RUN_MS} ms`);
  // Each admission still costs its user's layer a reservation and a keep;
  // the global layer's call is the one a block saves. How many come from
  // blocks depends on how hot the layer runs in each isolate (5 decisions
  // a second for one part makes it hot), so on this machine's speed.
  assert.ok(local > 0, "some global-layer admissions came from blocks");

  // Blocks lapse within a second; each isolate's next request reports
  // what it held. Then the parts count exactly what the origin saw, and
  // the sale's view counts the admissions from blocks too.
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  for (const isolate of isolates) {
    const response = await isolate("/checkout", { headers: { "x-user": "late", "CF-Connecting-IP": "192.0.2.9" } });
    await response.arrayBuffer();
    if (response.status === 200) bought.push("late");
  }
  // The reports go in the background: read until they have all landed.
  const read = async () => (await sluice.fetch("/_sluice/admin/rules/checkout.all", { headers: admin })).json();
  await eventually(async () => (await read()).quota[0].used === bought.length, 5_000, 100).catch(() => {});
  const view = await read();
  assert.equal(view.quota[0].used, bought.length, "the parts count what was admitted, no more");
  assert.equal(view.admitted, bought.length, "the sale's view counts admissions from blocks");
});
