// The decision API, end to end on workerd.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Sluice, freshKey, API_TOKEN } from "./harness.mjs";

let sluice;
before(async () => {
  sluice = await Sluice.start({ secrets: { API_TOKEN } });
});
after(() => sluice?.stop());

const limit = (body) => sluice.post("/_sluice/v1/limit", body);

test("health answers 200", async () => {
  const response = await sluice.fetch("/_sluice/health");
  assert.equal(response.status, 200);
  assert.deepEqual(await response.json(), { status: "ok" });
});

test("admits while the window has room, then refuses, with every field", async () => {
  const key = freshKey("seq");
  for (let i = 0; i < 3; i++) {
    const response = await limit({ key, limit: 3, window_ms: 60_000 });
    assert.equal(response.status, 200);
    const body = await response.json();
    assert.equal(body.allowed, true);
    assert.equal(body.limit, 3);
    assert.equal(body.remaining, 2 - i);
    assert.equal(body.retry_after_ms, 0);
    assert.ok(body.reset_ms > 59_000 && body.reset_ms <= 60_000, `reset_ms ${body.reset_ms}`);
    assert.equal(response.headers.get("ratelimit-policy"), '"default";q=3;w=60');
    assert.equal(response.headers.get("ratelimit"), `"default";r=${2 - i};t=60`);
  }
  const refused = await limit({ key, limit: 3, window_ms: 60_000 });
  assert.equal(refused.status, 200);
  const body = await refused.json();
  assert.equal(body.allowed, false);
  assert.equal(body.remaining, 0);
  assert.ok(body.retry_after_ms > 59_000 && body.retry_after_ms <= 60_000);
  assert.equal(body.retry_after_ms, body.reset_ms);
  assert.match(refused.headers.get("ratelimit"), /^"default";r=0;t=60$/);
});

test("cost takes several units and cost 0 only peeks", async () => {
  const key = freshKey("cost");
  let body = await (await limit({ key, limit: 5, window_ms: 60_000, cost: 4 })).json();
  assert.deepEqual([body.allowed, body.remaining], [true, 1]);
  body = await (await limit({ key, limit: 5, window_ms: 60_000, cost: 2 })).json();
  assert.deepEqual([body.allowed, body.remaining], [false, 1]);
  body = await (await limit({ key, limit: 5, window_ms: 60_000, cost: 0 })).json();
  assert.deepEqual([body.allowed, body.remaining], [true, 1]);
  body = await (await limit({ key, limit: 5, window_ms: 60_000, cost: 1 })).json();
  assert.deepEqual([body.allowed, body.remaining], [true, 0]);
});

test("50 concurrent requests on one key with limit 20 admit exactly 20", async () => {
  // Call by call ("local": false), each admission is told its own slot;
  // with admission blocks (the default) a hot key's answers may come from
  // the isolate, whose `remaining` is a lower bound: never above the slot.
  for (const local of [false, true]) {
    const key = freshKey(`burst-${local}`);
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => limit({ key, limit: 20, window_ms: 60_000, local }).then((r) => r.json())),
    );
    assert.equal(answers.filter((a) => a.allowed).length, 20, `local: ${local}`);
    const remaining = answers.filter((a) => a.allowed).map((a) => a.remaining).sort((a, b) => a - b);
    if (local) {
      remaining.forEach((r, i) => assert.ok(r <= i, `remaining ${r} overstates slot ${i}: ${remaining}`));
    } else {
      assert.deepEqual(remaining, Array.from({ length: 20 }, (_, i) => i), "each admission saw its own slot");
    }
  }
});

test("keys are independent", async () => {
  const a = freshKey("a");
  const b = freshKey("b");
  assert.equal((await (await limit({ key: a, limit: 1, window_ms: 60_000 })).json()).allowed, true);
  assert.equal((await (await limit({ key: a, limit: 1, window_ms: 60_000 })).json()).allowed, false);
  assert.equal((await (await limit({ key: b, limit: 1, window_ms: 60_000 })).json()).allowed, true);
});

test("several policies admit all together or not at all", async () => {
  const key = freshKey("multi");
  const policies = [
    { name: "burst", limit: 2, window_ms: 60_000 },
    { name: "daily", limit: 3, window_ms: 86_400_000 },
  ];
  const ask = async () => {
    const response = await limit({ key, policies });
    return { body: await response.json(), headers: response.headers };
  };
  await ask();
  await ask();
  const { body, headers } = await ask();
  assert.equal(body.allowed, false);
  assert.deepEqual(body.violated, ["burst"]);
  assert.equal(body.policies[1].remaining, 1, "the refused request was not logged in daily");
  assert.equal(headers.get("ratelimit-policy"), '"burst";q=2;w=60, "daily";q=3;w=86400');
  assert.match(headers.get("ratelimit"), /^"burst";r=0;t=\d+, "daily";r=1;t=\d+$/);
});

test("every invalid input answers 400 naming the field, and the next request is served", async () => {
  const cases = [
    [{ limit: 10, window_ms: 1000 }, "key"],
    [{ key: "", limit: 10, window_ms: 1000 }, "key"],
    [{ key: "x".repeat(513), limit: 10, window_ms: 1000 }, "key"],
    [{ key: "k", limit: 0, window_ms: 1000 }, "limit"],
    [{ key: "k", limit: -1, window_ms: 1000 }, "limit"],
    [{ key: "k", limit: 1.5, window_ms: 1000 }, "limit"],
    [{ key: "k", limit: 10, window_ms: 0 }, "window_ms"],
    [{ key: "k", limit: 10, window_ms: 30 * 86_400_000 + 1 }, "window_ms"],
    [{ key: "k", limit: 10, window_ms: 1000, cost: 11 }, "cost"],
    [{ key: "k", limit: 10, window_ms: 1000, local: "no" }, "local"],
    ['{"key": "k", "limit": 10,', "body"],
  ];
  for (const [body, field] of cases) {
    const response = await limit(body);
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal(response.headers.get("content-type"), "application/problem+json");
    const problem = await response.json();
    assert.equal(problem.field, field, JSON.stringify(body));
    assert.equal(problem.status, 400);
    assert.ok(problem.detail.length > 0);
  }
  const negative = await (await limit({ key: "k", limit: 10, window_ms: 1000, cost: -1 })).json();
  assert.equal(negative.detail, "cost: expected a non-negative whole number, got the number -1");
  const wrongType = await sluice.fetch("/_sluice/v1/limit", {
    method: "POST",
    headers: { "content-type": "text/plain" },
    body: JSON.stringify({ key: "k", limit: 1, window_ms: 1 }),
  });
  assert.equal(wrongType.status, 400);
  assert.equal((await wrongType.json()).field, "content-type");
  const tooLarge = await limit(JSON.stringify({ key: "k", pad: "x".repeat(1 << 20) }));
  assert.equal(tooLarge.status, 413);
  const next = await limit({ key: freshKey("after"), limit: 1, window_ms: 1000 });
  assert.equal(next.status, 200);
  assert.equal((await next.json()).allowed, true);
});

test("unknown endpoints and methods answer problems", async () => {
  const missing = await sluice.fetch("/_sluice/v2/nothing");
  assert.equal(missing.status, 404);
  assert.equal(missing.headers.get("content-type"), "application/problem+json");
  const wrongMethod = await sluice.fetch("/_sluice/v1/limit");
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.headers.get("allow"), "POST");
});

test("no call can wipe another's history: peeks, other windows and other algorithms get 409", async () => {
  const key = freshKey("user");
  const day = { key, limit: 1, window_ms: 86_400_000 };
  assert.equal((await (await limit(day)).json()).allowed, true);
  assert.equal((await (await limit(day)).json()).allowed, false);
  for (const attempt of [
    { ...day, algorithm: "fixed_window", cost: 0 },
    { ...day, window_ms: 1, cost: 0 },
    { ...day, window_ms: 1 },
    { ...day, algorithm: "fixed_window" },
  ]) {
    const answer = await limit(attempt);
    assert.equal(answer.status, 409, JSON.stringify(attempt));
    const problem = await answer.json();
    assert.equal(problem.policy, "default");
    assert.equal(problem.code, "policy-conflict");
    assert.equal((await (await limit(day)).json()).allowed, false, `still refused after ${JSON.stringify(attempt)}`);
  }
  const peek = await (await limit({ ...day, cost: 0 })).json();
  assert.deepEqual([peek.allowed, peek.remaining], [true, 0], "a peek with the same policy reads the state");
  const raised = await (await limit({ ...day, limit: 2 })).json();
  assert.deepEqual([raised.allowed, raised.remaining], [true, 0], "a higher limit counts the earlier admission");
  assert.equal((await (await limit(day)).json()).allowed, false);
});

test("the decision API cannot reach /v1/throttle's state", async () => {
  const key = freshKey("throttled");
  const throttle = () => sluice.post("/_sluice/v1/throttle", { key, max_burst: 0, count: 1, period_s: 3600 });
  assert.equal((await (await throttle()).json()).limited, false);
  assert.equal((await (await throttle()).json()).limited, true);
  const named = await limit({ key, policies: [{ name: "throttle", limit: 1, window_ms: 1000 }], cost: 0 });
  assert.equal(named.status, 400);
  assert.equal((await named.json()).field, "policies[0].name");
  assert.equal((await (await throttle()).json()).limited, true, "still limited");
});
