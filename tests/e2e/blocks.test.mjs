// Timing: the origin's clock judges every 3 s window, and issue 40's burst
// lands half a second after its first decisions: run alone.
// Admission blocks (issue 30): four isolates on one hot key, each admitting
// from the blocks its key object grants it. The origin's own clock is the
// judge: no 3 s window may hold more than the limit's 150 admissions. The
// answers' RateLimit fields must parse and never overstate `r`, and the
// isolates must have asked the key object far less than once per decision.
//
// An admission is decided somewhere between the moment its request was
// sent and the moment the origin saw it; forwarding takes a variable time
// on a loaded machine (arrivals alone put 336 in a 3 s window with blocks
// off, every decision made by the object: the decisions were 3 s apart,
// their arrivals not). So the judge brackets each decision: 151 admissions
// certainly fell in one window when the last arrival came less than 3 s
// after the first send.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { parseList } from "structured-headers";
import { API_TOKEN, certainlyInOneWindow, isolates as startIsolates, isolateStats, okOrigin, sleepUntil } from "./harness.mjs";

const ADMIN_TOKEN = "admin-token-for-admission-blocks-0123456789";
const LIMIT = 150;
const WINDOW_MS = 3_000;
const RUN_MS = 9_000;
const CLIENTS = 50;

let sluice;
let origin;
/** Each request's id, by the origin's clock. */
const arrivals = new Map();
let isolates;

before(async () => {
  let url;
  ({ server: origin, url } = await okOrigin((req) => arrivals.set(req.headers["x-request"], Date.now())));
  const config = {
    origin: url,
    rules: [
      { id: "hot", match: { path: "/hot" }, key: "header:x-user", limit: LIMIT, window: "3s" },
      { id: "gcra", match: { path: "/gcra" }, key: "header:x-user", algorithm: "gcra", limit: 100, window: "10s", burst: 49 },
      { id: "fixed", match: { path: "/fixed" }, key: "header:x-user", algorithm: "fixed_window", limit: 100, window: "10s" },
    ],
  };
  ({ sluice, fetchers: isolates } = await startIsolates(4, { config, secrets: { ADMIN_TOKEN, API_TOKEN } }));
});
after(async () => {
  await sluice?.stop();
  origin?.close();
});

const stats = (fetcher) => isolateStats(fetcher, ADMIN_TOKEN);

test("4 isolates on one hot key: exact by the origin's clock, r a lower bound, few object calls", async () => {
  const before = await Promise.all(isolates.map(stats));
  const answers = [];
  // RUN_MS at least, and on until the key is past its limit, however few
  // decisions a loaded machine makes in a second.
  const end = Date.now() + RUN_MS;
  let next = 0;
  let past = false;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (Date.now() < end || (!past && Date.now() < end + 2 * RUN_MS)) {
        const id = String(next++);
        const isolate = isolates[Number(id) % isolates.length];
        const headers = { "x-user": "flash-sale", "x-request": id, "CF-Connecting-IP": "192.0.2.7" };
        const sent = Date.now();
        const response = await isolate("/hot", { headers });
        await response.arrayBuffer();
        const ratelimit = response.headers.get("ratelimit");
        answers.push({ id, sent, answered: Date.now(), status: response.status, ratelimit });
        past ||= response.status === 429;
      }
    }),
  );
  const after = await Promise.all(isolates.map(stats));

  // No 3 s window holds more than the limit: no 151 admissions whose
  // first send and last arrival at the origin lie less than 3 s apart.
  const admitted = answers.filter((a) => a.status === 200);
  assert.equal(arrivals.size, admitted.length, "every admission reached the origin, once");
  for (const a of admitted) a.arrived = arrivals.get(a.id);
  assert.ok(admitted.every((a) => a.arrived >= a.sent), "each admission's arrival is known");
  const most = certainlyInOneWindow(admitted, WINDOW_MS);
  const times = admitted.map((a) => a.arrived).sort((a, b) => a - b);
  let byArrival = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[j] <= times[i] - WINDOW_MS) j++;
    byArrival = Math.max(byArrival, i - j + 1);
  }
  assert.ok(most <= LIMIT, `${most} admissions certainly fell in one 3 s window`);
  assert.ok(admitted.length >= LIMIT, `only ${admitted.length} admitted in ${RUN_MS} ms`);
  assert.ok(answers.some((a) => a.status === 429), "the key was driven past its limit");

  // Every answer's RateLimit parses, and `r` never says more remain than
  // could: an admission that reached the origin before this request was
  // sent was decided before it, and one sent less than 3 s before this
  // answer still counted in its window.
  for (const answer of admitted) {
    assert.ok(answer.ratelimit, "an admitted answer carries RateLimit");
    const [[name, params]] = parseList(answer.ratelimit);
    assert.equal(name, "hot");
    const r = params.get("r");
    assert.ok(Number.isInteger(r) && r >= 0 && r < LIMIT, answer.ratelimit);
    const counted = admitted.filter((a) => a.arrived < answer.sent && a.sent > answer.answered - WINDOW_MS).length;
    assert.ok(r <= LIMIT - counted - 1, `r=${r} with ${counted} admitted in the window already`);
  }

  // Object calls per 1 000 decisions, over the four isolates.
  const calls = after.reduce((n, s, i) => n + (s.object_calls.LIMITER ?? 0) - (before[i].object_calls.LIMITER ?? 0), 0);
  const local = after.reduce((n, s, i) => n + s.blocks.admitted - before[i].blocks.admitted, 0);
  const perThousand = Math.round((calls * 1000) / answers.length);
  console.log(
    `blocks e2e: ${answers.length} decisions, ${admitted.length} admitted (at most ${most} certainly in one 3 s window; ` +
      `${byArrival} by arrival alone), ` +
      `${local} admitted from blocks, ${calls} key-object calls = ${perThousand} per 1000 decisions`,
  );
  assert.ok(local > 0, "some admissions came from blocks");
  // Fewer calls than decisions, however fast the machine: refusals past
  // the limit are answered from the isolates' refusal caches and some
  // admissions from blocks (the figure itself is BENCHMARKS.md's).
  assert.ok(calls < answers.length, `${perThousand} object calls per 1000 decisions`);
});

test("GCRA and fixed-window rules are decided from blocks too, within their bounds", async () => {
  for (const [path, most] of [
    // A burst of 50, then one every 100 ms.
    ["/gcra", (elapsed) => 50 + Math.ceil(elapsed / 100)],
    // At most the limit in each of the (at most two) windows the run meets.
    ["/fixed", () => 200],
  ]) {
    const before = (await stats(isolates[0])).blocks.admitted;
    const started = Date.now();
    let admitted = 0;
    for (let i = 0; i < 150; i++) {
      const response = await isolates[0](path, { headers: { "x-user": `solo${path}`, "x-request": `${path}-${i}` } });
      await response.arrayBuffer();
      if (response.status === 200) admitted += 1;
    }
    const elapsed = Date.now() - started;
    const local = (await stats(isolates[0])).blocks.admitted - before;
    console.log(`blocks e2e ${path}: 150 sequential, ${admitted} admitted (${local} from blocks) in ${elapsed} ms`);
    assert.ok(local > 0, `${path}: some admissions came from blocks`);
    assert.ok(admitted <= most(elapsed), `${path}: ${admitted} admitted in ${elapsed} ms`);
    // Blocks may cost refusals, never admissions: a GCRA block is charged
    // as if its units came at its lease's end.
    assert.ok(admitted >= 25, `${path}: ${admitted} admitted`);
  }
});

// Issue 40: the seed articles' boundary scenario on fresh keys of 10 per
// second, through the decision API of one isolate (as `npm run dev` runs
// it): 3 decisions, then 7 at once half a second later. The key turns hot
// during the burst, so one of the 7 asks for a block while the others are
// on their way to the object; a block must never refuse its own
// isolate's requests, so every trial admits all 10.
test("a burst on a fresh key of 10 a second admits all 10, trial after trial", async () => {
  const decide = async (key) => {
    const body = JSON.stringify({ key, limit: 10, window_ms: 1_000 });
    const response = await isolates[0]("/_sluice/v1/limit", { method: "POST", headers: { "content-type": "application/json" }, body });
    assert.equal(response.status, 200);
    return (await response.json()).allowed;
  };
  const trials = [];
  for (let trial = 0; trial < 12; trial++) {
    const key = `burst-${trial}`;
    let admitted = 0;
    const started = Date.now();
    for (let i = 0; i < 3; i++) admitted += (await decide(key)) ? 1 : 0;
    await sleepUntil(started + 500);
    const burst = await Promise.all(Array.from({ length: 7 }, () => decide(key)));
    admitted += burst.filter(Boolean).length;
    trials.push(admitted);
  }
  assert.deepEqual(trials, Array(12).fill(10), `admitted per trial: ${trials.join(", ")}`);
});
