// Retries that do not stampede (issue 28, item 3). 300 refusals on a full
// key of 10 per 10 s used to be told 277 × `Retry-After: 10` and 15 × `9`;
// now each is told a moment one of the key's places frees that no earlier
// refusal was told. Counted by the second each client would come back
// (the moment it was answered plus its Retry-After): at most 10, plus a
// little slack, in any one second, and never before a place really frees,
// compared with the times the 10 admissions were sent. The same in proxy
// mode (most refusals answered by the isolate's cache), through the
// decision API (every refusal decided by the key's object), from two
// isolates answering for one key, for the fixed window and GCRA, and for a
// split global quota sold out. Only the last test waits for real time, a
// window of 2 s.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice, anotherIsolate, freshKey, sleepUntil, API_TOKEN } from "./harness.mjs";

const W = 10_000;
const config = {
  rules: [
    { id: "log", match: { path: "/log" }, limit: 10, window: "10s" },
    { id: "fixed", match: { path: "/fixed" }, limit: 10, window: "10s", algorithm: "fixed_window" },
    { id: "cell", match: { path: "/cell" }, limit: 10, window: "10s", algorithm: "gcra" },
    { id: "short", match: { path: "/short" }, limit: 3, window: "2s" },
    { id: "sale", match: { path: "/sale" }, scope: "global", split: 2, limit: 20, window: "10s" },
  ],
};

let sluice;
let isolateB;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { API_TOKEN }, workers: [anotherIsolate("sluice-b", { SLUICE: { origin: "demo", ...config }, API_TOKEN })] });
  isolateB = await sluice.worker("sluice-b");
});
after(() => sluice?.stop());

let ipCounter = 0;
const freshIp = () => {
  ipCounter += 1;
  return `198.51.100.${ipCounter}`;
};

/** Sends `n` requests one after another with `send`; each answer as
 * {status, sent, received, retryAfter (s), t (s), body}. */
async function sequence(n, send) {
  const answers = [];
  for (let i = 0; i < n; i++) {
    const sent = Date.now();
    const response = await send(i);
    const received = Date.now();
    const ratelimit = response.headers.get("ratelimit");
    const body = await response.json().catch(() => null);
    answers.push({
      status: response.status,
      sent,
      received,
      retryAfter: Number(response.headers.get("retry-after")),
      t: ratelimit === null ? null : Number(/;t=(\d+)/.exec(ratelimit)?.[1]),
      body,
    });
  }
  return answers;
}

/** When a refused client comes back as told: answered, plus Retry-After. */
const comesBack = (answer) => answer.received + answer.retryAfter * 1000;

/** How many come back in each whole second, the busiest first. */
function perSecond(moments) {
  const counts = new Map();
  for (const at of moments) counts.set(Math.floor(at / 1000), (counts.get(Math.floor(at / 1000)) ?? 0) + 1);
  return [...counts.values()].sort((a, b) => b - a);
}

/** A lap of the schedule: a place frees again a window after it is
 * retaken, plus the second of jitter its client may come back later. */
const LAP = W + 1_000;

/** Checks a full key of 10 per 10 s: the admissions' send times and the
 * refusals' return moments. The j-th earliest return is no sooner than
 * the (j mod 10)-th admission leaves the window, (j / 10) windows later:
 * each place frees once per window at most. And the last is no later than
 * `laps` laps after the last place frees, give or take its jitter, the
 * rounding to seconds and the answers' latency (3 s). */
function checkSpread(admitted, moments, { slack = 2, laps, label }) {
  const sorted = [...moments].sort((a, b) => a - b);
  sorted.forEach((at, j) => {
    const frees = admitted[j % 10] + W * (1 + Math.floor(j / 10));
    assert.ok(at >= frees, `${label}: return ${j} at ${at}, before its place frees at ${frees}`);
  });
  const counts = perSecond(moments);
  assert.ok(counts[0] <= 10 + slack, `${label}: ${counts[0]} told to come back in one second: ${counts.slice(0, 5)}`);
  assert.ok(counts.length >= moments.length / 10, `${label}: spread over ${counts.length} seconds`);
  const latest = sorted.at(-1) - admitted.at(-1) - W;
  assert.ok(latest <= laps * LAP + 3_000, `${label}: the last comes back ${latest} ms after the last place frees`);
}

test("proxy mode: 300 refusals on a full key of 10 per 10 s come back at most 10 a second, none early", async () => {
  const ip = freshIp();
  const send = () => sluice.fetch("/log", { headers: { "CF-Connecting-IP": ip } });
  const admissions = await sequence(10, send);
  assert.deepEqual(admissions.map((a) => a.status), Array(10).fill(200));
  const refusals = await sequence(300, send);
  assert.ok(refusals.every((r) => r.status === 429));
  for (const refusal of refusals) assert.equal(refusal.t, refusal.retryAfter, "t is Retry-After");
  checkSpread(admissions.map((a) => a.sent), refusals.map(comesBack), { laps: 29, label: "proxy" });
  // Most were answered by the isolate's cache, from batches the object
  // handed out: the key's object saw a few calls, not 300.
  const { checks } = await sluice.inspect(`rule:log:${ip}`);
  assert.ok(checks <= 10 + 20, `${checks} calls reached the key's object`);
});

test("decision API: the same 300 refusals, each decided by the key's object, in seconds and in ms", async () => {
  const key = freshKey("spread");
  const send = () => sluice.post("/_sluice/v1/limit", { key, limit: 10, window_ms: W });
  const admissions = await sequence(10, send);
  assert.ok(admissions.every((a) => a.body.allowed));
  const refusals = await sequence(300, send);
  assert.ok(refusals.every((r) => r.status === 200 && r.body.allowed === false));
  for (const refusal of refusals) {
    assert.equal(refusal.retryAfter, Math.ceil(refusal.body.retry_after_ms / 1000), "Retry-After is the body's wait");
    assert.equal(refusal.body.reset_ms, refusal.body.retry_after_ms, "the policy's reset is its invitation");
  }
  const sent = admissions.map((a) => a.sent);
  checkSpread(sent, refusals.map(comesBack), { laps: 29, label: "API, Retry-After" });
  // In ms, counted from when each answer came (the object decided a little
  // earlier, so no moment is counted sooner than it was told).
  checkSpread(sent, refusals.map((r) => r.received + r.body.retry_after_ms), { slack: 0, laps: 29, label: "API, retry_after_ms" });
});

test("two isolates answering for one key tell moments of the one schedule", async () => {
  const ip = freshIp();
  const headers = { "CF-Connecting-IP": ip };
  const admissions = await sequence(10, () => sluice.fetch("/log", { headers }));
  assert.deepEqual(admissions.map((a) => a.status), Array(10).fill(200));
  const refusals = await sequence(300, (i) =>
    i % 2 === 0 ? sluice.fetch("/log", { headers }) : isolateB.fetch(`http://sluice/log`, { headers }),
  );
  assert.ok(refusals.every((r) => r.status === 429));
  // Two isolates each spreading on their own would invite 20 a second.
  // An isolate may be handed moments it never tells (the rest of its last
  // batch), no more than it tells: at most twice the laps.
  checkSpread(admissions.map((a) => a.sent), refusals.map(comesBack), { laps: 2 * 30, label: "two isolates" });
});

test("GCRA is spread by its emission interval, the fixed window over the next window", async () => {
  for (const [path, first] of [["/cell", 1_000], ["/fixed", W]]) {
    // The 100 refusals must all be sent before the first place frees
    // (GCRA's T, 1 s): a run slower than that on a loaded machine proves
    // nothing, and is run again on a fresh address, up to three times.
    let admissions, refusals;
    for (let attempt = 0; attempt < 3; attempt++) {
      const ip = freshIp();
      const send = () => sluice.fetch(path, { headers: { "CF-Connecting-IP": ip } });
      admissions = await sequence(10, send);
      assert.deepEqual(admissions.map((a) => a.status), Array(10).fill(200), path);
      refusals = await sequence(100, send);
      if (Date.now() - admissions[0].sent < first) break;
    }
    assert.ok(refusals.every((r) => r.status === 429), path);
    const moments = refusals.map(comesBack).sort((a, b) => a - b);
    // One place a second (GCRA: T = 1 s; the fixed window: W / N).
    const counts = perSecond(moments);
    assert.ok(counts[0] <= 3, `${path}: ${counts[0]} in one second`);
    assert.ok(moments[0] >= admissions[0].sent + first, `${path}: ${moments[0] - admissions[0].sent} ms`);
    assert.ok(moments[99] - moments[0] >= 90_000, `${path}: 100 places take at least 100 s`);
  }
});

test("a split global quota: each part spreads its own places, the whole sold out comes back 20 a second", async () => {
  const send = () => sluice.fetch("/sale", { headers: { "CF-Connecting-IP": freshIp() } });
  const answers = await sequence(140, send);
  const admitted = answers.filter((a) => a.status === 200);
  assert.equal(admitted.length, 20, "exactly the quota");
  const refusals = answers.filter((a) => a.status === 429);
  const moments = refusals.map(comesBack).sort((a, b) => a - b);
  const firstFree = admitted[0].sent + W;
  assert.ok(moments[0] >= firstFree, "none before the first place frees");
  // Twenty places, each once a lap: a second holds at most 20 of them.
  const counts = perSecond(moments);
  assert.ok(counts[0] <= 20 + 2, `${counts[0]} in one second`);
  assert.ok(moments.at(-1) - firstFree >= 4 * W, `${refusals.length} refusals over ${moments.at(-1) - firstFree} ms`);
});

test("clients that come back when told are admitted", async () => {
  const ip = freshIp();
  const send = () => sluice.fetch("/short", { headers: { "CF-Connecting-IP": ip } });
  const admissions = await sequence(3, send);
  assert.deepEqual(admissions.map((a) => a.status), [200, 200, 200]);
  const refusals = await sequence(3, send);
  assert.deepEqual(refusals.map((r) => r.status), [429, 429, 429]);
  const back = [];
  for (const refusal of refusals) {
    await sleepUntil(comesBack(refusal));
    back.push((await send()).status);
  }
  assert.deepEqual(back, [200, 200, 200], "each found the place it was told of free");
});
