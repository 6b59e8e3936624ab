// The client against a fake binding: what it sends, how it reads answers,
// its timeout, the fail choices, typed errors, and withLease's release.
// The same calls against the real worker are in tests/e2e/client.test.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sluice, SluiceError, SluiceUnavailableError, LeaseUnavailableError, durationMs } from "../index.js";

/** A binding that records calls and answers with `handler(url, init, body)`. */
function fake(handler) {
  const calls = [];
  const binding = {
    async fetch(url, init) {
      const body = init.body === undefined ? undefined : JSON.parse(init.body);
      calls.push({ url, method: init.method, headers: init.headers, body });
      return handler(url, init, body);
    },
  };
  return { binding, calls };
}

const json = (value, status = 200, type = "application/json") =>
  new Response(JSON.stringify(value), { status, headers: { "content-type": type } });
const problem = (status, code, extra = {}) =>
  json({ type: "about:blank", title: "t", status, detail: `detail of ${code}`, code, ...extra }, status, "application/problem+json");

test("limit sends the decision body with the token and reads Upstash's shape", async () => {
  const { binding, calls } = fake(() => json({ allowed: true, limit: 10, remaining: 9, reset_ms: 10_000, retry_after_ms: 0 }));
  const sluice = new Sluice({ binding, token: "t".repeat(32) });
  const before = Date.now();
  const result = await sluice.limit({ key: "user:42", limit: 10, window: "10s", cost: 1 });
  assert.deepEqual(calls[0].body, { key: "user:42", limit: 10, window_ms: 10_000, cost: 1 });
  assert.equal(calls[0].url, "https://sluice/_sluice/v1/limit");
  assert.equal(calls[0].method, "POST");
  assert.equal(calls[0].headers.authorization, `Bearer ${"t".repeat(32)}`);
  assert.equal(result.success, true);
  assert.equal(result.remaining, 9);
  assert.ok(result.reset >= before + 10_000 && result.reset <= Date.now() + 10_000);
  assert.equal(result.retryAfter, 0);
  assert.equal(result.reason, undefined);
});

test("limit(identifier) uses the constructor's policy, like Upstash's limit(id)", async () => {
  const { binding, calls } = fake(() => json({ allowed: false, limit: 5, remaining: 0, reset_ms: 900, retry_after_ms: 900 }));
  const sluice = new Sluice({ binding, limit: 5, window: "1 m", prefix: "/limits" });
  const result = await sluice.limit("ip:1.2.3.4");
  assert.deepEqual(calls[0].body, { key: "ip:1.2.3.4", limit: 5, window_ms: 60_000 });
  assert.equal(calls[0].url, "https://sluice/limits/v1/limit");
  assert.equal(calls[0].headers.authorization, undefined, "no token, no header");
  assert.deepEqual([result.success, result.retryAfter], [false, 900]);
  await assert.rejects(new Sluice({ binding }).limit("x"), TypeError, "no policy anywhere");
});

test("durations: ms, units, Upstash's spacing; nonsense refused", () => {
  assert.equal(durationMs(250), 250);
  assert.equal(durationMs("500ms"), 500);
  assert.equal(durationMs("10 s"), 10_000);
  assert.equal(durationMs("2h"), 7_200_000);
  assert.equal(durationMs("1d"), 86_400_000);
  for (const bad of [0, -1, 1.5, "0s", "10", "ten s", "1w", null, undefined]) {
    assert.throws(() => durationMs(bad), TypeError, String(bad));
  }
});

test("a problem answer is a SluiceError with status, code and field, whatever fail says", async () => {
  const { binding } = fake(() => problem(400, "invalid-request", { field: "limit" }));
  const sluice = new Sluice({ binding, fail: "open" });
  const error = await sluice.limit({ key: "k", limit: 10, window: 1000 }).catch((e) => e);
  assert.ok(error instanceof SluiceError && !(error instanceof SluiceUnavailableError));
  assert.deepEqual([error.status, error.code, error.field], [400, "invalid-request", "limit"]);
  assert.equal(error.message, "detail of invalid-request");
  const unauthorized = await new Sluice({ binding: fake(() => problem(401, "unauthorized")).binding, fail: "open" })
    .limit({ key: "k", limit: 1, window: 1000 })
    .catch((e) => e);
  assert.equal(unauthorized.code, "unauthorized", "a wrong token never fails open");
});

test("fail: closed refuses, open admits, throw throws; each when Sluice cannot decide", async () => {
  const answers = [
    () => problem(503, "unavailable"),
    () => new Response("<html>bad gateway</html>", { status: 502 }),
    () => new Response("not json", { status: 200 }),
    () => Promise.reject(new TypeError("connection refused")),
  ];
  for (const answer of answers) {
    const sluice = new Sluice({ binding: fake(answer).binding });
    const closed = await sluice.limit({ key: "k", limit: 7, window: 1000 });
    assert.deepEqual([closed.success, closed.limit, closed.remaining, closed.retryAfter, closed.reason], [false, 7, 0, 1000, "error"]);
    assert.ok(closed.error instanceof SluiceUnavailableError);
    const open = await sluice.limit({ key: "k", limit: 7, window: 1000, fail: "open" });
    assert.deepEqual([open.success, open.retryAfter, open.reason], [true, 0, "error"]);
    await assert.rejects(sluice.limit({ key: "k", limit: 7, window: 1000, fail: "throw" }), SluiceUnavailableError);
  }
  const open = new Sluice({ binding: fake(answers[0]).binding, fail: "open" });
  assert.equal((await open.limit({ key: "k", limit: 1, window: 1000 })).success, true, "the client's default");
  assert.equal((await open.limit({ key: "k", limit: 1, window: 1000, fail: "closed" })).success, false, "a call's choice wins");
  assert.throws(() => new Sluice({ binding: fake(answers[0]).binding, fail: "maybe" }), TypeError);
});

test("a call that takes longer than its timeout gives up and takes the fail choice", async () => {
  let aborted = 0;
  const { binding } = fake(
    (url, init) =>
      new Promise((resolve, reject) => {
        init.signal.addEventListener("abort", () => {
          aborted += 1;
          reject(init.signal.reason);
        });
      }),
  );
  const sluice = new Sluice({ binding, timeout: 50 });
  const started = Date.now();
  const closed = await sluice.limit({ key: "k", limit: 1, window: 1000 });
  const took = Date.now() - started;
  assert.ok(took >= 45 && took < 1000, `gave up after ${took} ms`);
  assert.deepEqual([closed.success, closed.reason, closed.error.code], [false, "timeout", "timeout"]);
  const open = await sluice.limit({ key: "k", limit: 1, window: 1000, fail: "open", timeout: 20 });
  assert.deepEqual([open.success, open.reason], [true, "timeout"]);
  assert.equal(aborted, 2, "the request itself is aborted");
  const error = await sluice.acquire({ key: "k", limit: 1, fail: "throw", timeout: 10 }).catch((e) => e);
  assert.equal(error.code, "timeout");
});

test("policies, throttle, acquire, renew and release map both ways", async () => {
  const { binding, calls } = fake((url, init, body) => {
    if (url.endsWith("/v1/limit")) {
      return json({
        allowed: false,
        violated: ["day"],
        retry_after_ms: 5000,
        policies: [
          { name: "second", allowed: true, limit: 10, window_ms: 1000, remaining: 9, reset_ms: 0, retry_after_ms: 0 },
          { name: "day", allowed: false, limit: 100, window_ms: 86_400_000, remaining: 0, reset_ms: 5000, retry_after_ms: 5000 },
        ],
      });
    }
    if (url.endsWith("/v1/throttle")) {
      return json({ limited: true, limit: 16, remaining: 0, retry_after_s: 2, reset_after_s: 60, retry_after_ms: 1500, reset_after_ms: 60_000 });
    }
    if (url.endsWith("/v1/leases")) {
      return json({ granted: true, lease_id: "abc", fence: 7, expires_ms: 1e12, holds: 1, in_flight: 1, retry_after_ms: 0 });
    }
    return json({ lease_id: "abc", fence: 7, expires_ms: 2e12, holds: 0, released: init.method === "DELETE" });
  });
  const sluice = new Sluice({ binding });
  const many = await sluice.limit({
    key: "u",
    policies: [
      { name: "second", limit: 10, window: "1s" },
      { name: "day", limit: 100, window: "1d", algorithm: "fixed_window" },
    ],
  });
  assert.deepEqual(calls[0].body.policies[1], { name: "day", limit: 100, window_ms: 86_400_000, algorithm: "fixed_window" });
  assert.deepEqual([many.success, many.violated, many.limit, many.remaining, many.retryAfter], [false, ["day"], 100, 0, 5000]);
  assert.equal(many.policies[0].window, 1000);

  const cell = await sluice.throttle({ key: "u", maxBurst: 15, count: 30, period: "60s", quantity: 1 });
  assert.deepEqual(calls[1].body, { key: "u", max_burst: 15, count: 30, period_s: 60, quantity: 1 });
  assert.deepEqual([cell.success, cell.limit, cell.retryAfter], [false, 16, 1500]);
  await assert.rejects(sluice.throttle({ key: "u", maxBurst: 1, count: 1, period: 1500 }), TypeError);

  const lease = await sluice.acquire({ key: "job", limit: 2, ttl: "1m", owner: "w1" });
  assert.deepEqual(calls[2].body, { key: "job", limit: 2, ttl_ms: 60_000, owner: "w1" });
  assert.deepEqual([lease.granted, lease.key, lease.leaseId, lease.fence, lease.inFlight], [true, "job", "abc", 7, 1]);
  await sluice.acquire({ key: "job", limit: 2, leaseId: "abc" });
  assert.equal(calls[3].body.lease_id, "abc");

  const renewed = await sluice.renew(lease, { ttl: 5000 });
  assert.equal(calls[4].url, "https://sluice/_sluice/v1/leases/abc/renew?key=job");
  assert.deepEqual(calls[4].body, { ttl_ms: 5000 });
  assert.equal(renewed.expires, 2e12);
  const released = await sluice.release({ key: "job", leaseId: "abc" });
  assert.deepEqual([calls[5].method, calls[5].url], ["DELETE", "https://sluice/_sluice/v1/leases/abc?key=job"]);
  assert.equal(released.released, true);
  assert.throws(() => new Sluice({}), TypeError);
});

test("limit with layers sends every key's limits and reads each layer, the whole as its tightest", async () => {
  const { binding, calls } = fake(() =>
    json({
      allowed: false,
      violated: ["sale"],
      retry_after_ms: 40_000,
      layers: [
        { name: "user:42", key: "user:42", allowed: true, limit: 1, remaining: 0, reset_ms: 60_000, retry_after_ms: 0 },
        { name: "sale", key: "sale:1", allowed: false, limit: 3, remaining: 0, reset_ms: 40_000, retry_after_ms: 40_000 },
      ],
    }),
  );
  const sluice = new Sluice({ binding, limit: 5, window: "1s" });
  const result = await sluice.limit({
    layers: [
      { key: "user:42", limit: 1, window: "1m" },
      { key: "sale:1", name: "sale", policies: [{ name: "minute", limit: 3, window: "1m", algorithm: "fixed_window" }] },
    ],
    cost: 1,
  });
  assert.deepEqual(calls[0].body, {
    layers: [
      { key: "user:42", limit: 1, window_ms: 60_000 },
      { key: "sale:1", name: "sale", policies: [{ name: "minute", limit: 3, window_ms: 60_000, algorithm: "fixed_window" }] },
    ],
    cost: 1,
  });
  assert.deepEqual([result.success, result.violated, result.limit, result.retryAfter], [false, ["sale"], 3, 40_000]);
  assert.deepEqual(
    result.layers.map((l) => [l.name, l.key, l.success, l.remaining]),
    [
      ["user:42", "user:42", true, 0],
      ["sale", "sale:1", false, 0],
    ],
  );
  assert.equal(result.reservation, null);
  // A layer needs its own limits (the constructor's policy is for limit(identifier)),
  // and a layered call takes no key, limits or reservation of its own.
  for (const bad of [
    { layers: [{ key: "a" }] },
    { layers: [] },
    { key: "a", layers: [{ key: "b", limit: 1, window: "1s" }] },
    { reserve: true, layers: [{ key: "b", limit: 1, window: "1s" }] },
    { layers: [{ key: "b", limit: 1, window: "1s", cost: 2 }] },
  ]) {
    await assert.rejects(sluice.limit(bad), TypeError, JSON.stringify(bad));
  }
  assert.equal(calls.length, 1, "nothing was sent for a bad call");
  const down = new Sluice({ binding: fake(() => json({}, 503)).binding, fail: "open" });
  const open = await down.limit({ layers: [{ key: "a", limit: 2, window: "1s" }, { key: "b", limit: 9, window: "1s" }] });
  assert.deepEqual([open.success, open.limit, open.layers, open.reason], [true, 2, [], "error"]);
});

test("limit reserves: reserve and reservationTtl are sent, the reservation id and pending come back", async () => {
  const answers = [
    { allowed: true, limit: 2, remaining: 1, reset_ms: 1000, retry_after_ms: 0, reservation: "r1" },
    { allowed: false, limit: 2, remaining: 0, reset_ms: 1000, retry_after_ms: 1000, pending: true },
    { allowed: false, limit: 2, remaining: 0, reset_ms: 9000, retry_after_ms: 9000 },
  ];
  const { binding, calls } = fake(() => json(answers[calls.length - 1]));
  const sluice = new Sluice({ binding });
  const reserved = await sluice.limit({ key: "login:ann", limit: 2, window: "15m", reserve: true, reservationTtl: "2s" });
  assert.deepEqual(calls[0].body, { key: "login:ann", limit: 2, window_ms: 900_000, reserve: true, reservation_ttl_ms: 2000 });
  assert.deepEqual([reserved.success, reserved.reservation, reserved.pending], [true, "r1", false]);
  const pending = await sluice.limit("login:ann", { limit: 2, window: "15m", reserve: true });
  assert.deepEqual(calls[1].body, { key: "login:ann", limit: 2, window_ms: 900_000, reserve: true });
  assert.deepEqual([pending.success, pending.reservation, pending.pending, pending.retryAfter], [false, null, true, 1000]);
  const full = await sluice.limit({ key: "login:ann", limit: 2, window: "15m" });
  assert.deepEqual([full.success, full.reservation, full.pending], [false, null, false]);
});

test("settle keeps or refunds a reservation; an unknown one is a typed error", async () => {
  const { binding, calls } = fake((url, init, body) =>
    body.reservation === "gone"
      ? problem(404, "no-such-reservation", { field: "reservation" })
      : json({ kept: body.keep, repeated: false }),
  );
  const sluice = new Sluice({ binding, token: "t".repeat(32) });
  assert.deepEqual(await sluice.settle({ key: "login:ann", reservation: "r1", keep: false }), { kept: false, repeated: false });
  assert.deepEqual([calls[0].url, calls[0].method, calls[0].body], [
    "https://sluice/_sluice/v1/limit/settle",
    "POST",
    { key: "login:ann", reservation: "r1", keep: false },
  ]);
  const gone = await sluice.settle({ key: "login:ann", reservation: "gone", keep: true }).catch((e) => e);
  assert.ok(gone instanceof SluiceError);
  assert.deepEqual([gone.status, gone.code, gone.field], [404, "no-such-reservation", "reservation"]);
  const made = await sluice.settle({ key: "login:ann", reservation: null, keep: true });
  assert.deepEqual(made, { kept: false, repeated: false }, "a fail-open decision holds no reservation: nothing to settle");
  assert.equal(calls.length, 2);
  for (const [input, name] of [
    [{ key: "k", reservation: "r1" }, "keep"],
    [{ key: "k", reservation: "r1", keep: "yes" }, "keep"],
    [{ key: "k", reservation: 7, keep: true }, "reservation"],
  ]) {
    await assert.rejects(sluice.settle(input), (e) => e instanceof TypeError && e.message.includes(`"${name}"`), JSON.stringify(input));
  }
});

test("an unknown option is refused, naming it, before anything is sent", async () => {
  const { binding, calls } = fake(() => json({}));
  const sluice = new Sluice({ binding });
  const refused = [
    () => new Sluice({ binding, timout: 5 }),
    () => sluice.limit({ key: "k", limit: 1, window: "1s", reserv: true }),
    () => sluice.limit("k", { limit: 1, windw: "1s" }),
    () => sluice.limit({ key: "k", policies: [{ name: "a", limit: 1, window: "1s", algo: "fixed_window" }] }),
    () => sluice.limit({ key: "k", limit: 1, window: "1s", reserve: "yes" }),
    () => sluice.limit({ key: "k", limit: 1, window: "1s", reservationTtl: "1s" }),
    () => sluice.throttle({ key: "k", maxBurst: 1, count: 1, period: "1s", burst: 2 }),
    () => sluice.acquire({ key: "k", limit: 1, ttl_ms: 5 }),
    () => sluice.renew({ key: "k", leaseId: "l" }, { tll: "1s" }),
    () => sluice.release({ key: "k", leaseId: "l" }, { force: true }),
    () => sluice.settle({ key: "k", reservation: "r", keep: true, kept: true }),
    () => sluice.withLease("k", { limit: 1, wiat: 100 }, () => {}),
    () => sluice.withLock("k", { limit: 2 }, () => {}),
  ];
  const names = ["timout", "reserv", "windw", "algo", "reserve", "reservationTtl", "burst", "ttl_ms", "tll", "force", "kept", "wiat", "limit"];
  for (const [i, call] of refused.entries()) {
    const error = await (async () => call())().then(
      () => null,
      (e) => e,
    );
    assert.ok(error instanceof TypeError, `${names[i]}: ${error}`);
    assert.ok(error.message.includes(`"${names[i]}"`), `${names[i]}: ${error.message}`);
  }
  assert.equal(calls.length, 0, "nothing was sent");
});

test("withLease releases when fn returns and when it throws, and passes the lease", async () => {
  const released = [];
  const { binding } = fake((url, init) => {
    if (init.method === "DELETE") {
      released.push(url);
      return json({ lease_id: "L", fence: 1, expires_ms: 1, holds: 0, released: true });
    }
    return json({ granted: true, lease_id: "L", fence: 1, expires_ms: 1e12, holds: 1, in_flight: 1, retry_after_ms: 0 });
  });
  const sluice = new Sluice({ binding });
  assert.equal(await sluice.withLock("k", (lease) => lease.fence + 41), 42);
  const boom = new Error("boom");
  await assert.rejects(sluice.withLease("k", { limit: 3 }, async () => { throw boom; }), (e) => e === boom);
  assert.equal(released.length, 2);
});

test("withLease keeps a long job's lease alive, and says when it is lost", async () => {
  let renewals = 0;
  const { binding } = fake((url, init) => {
    if (url.includes("/renew")) {
      renewals += 1;
      return renewals < 3 ? json({ lease_id: "L", fence: 1, expires_ms: 1, holds: 1 }) : problem(404, "no-such-lease", { field: "lease_id" });
    }
    if (init.method === "DELETE") return problem(404, "no-such-lease");
    return json({ granted: true, lease_id: "L", fence: 1, expires_ms: 1, holds: 1, in_flight: 1, retry_after_ms: 0 });
  });
  const sluice = new Sluice({ binding });
  const releaseErrors = [];
  const reason = await sluice.withLock("k", { ttl: 60, onReleaseError: (e) => releaseErrors.push(e.code) }, (lease, lost) =>
    new Promise((resolve) => lost.addEventListener("abort", () => resolve(lost.reason.code))),
  );
  assert.equal(reason, "no-such-lease");
  assert.equal(renewals, 3);
  assert.deepEqual(releaseErrors, ["no-such-lease"], "a failed release is reported, not thrown");
});

test("withLease waits for a lease up to `wait`, then throws LeaseUnavailableError", async () => {
  let tries = 0;
  const { binding } = fake(() => {
    tries += 1;
    return json({ granted: false, lease_id: null, fence: null, expires_ms: null, holds: null, in_flight: 1, retry_after_ms: 20 });
  });
  const sluice = new Sluice({ binding });
  let ran = false;
  const error = await sluice.withLock("k", { wait: 100 }, () => (ran = true)).catch((e) => e);
  assert.ok(error instanceof LeaseUnavailableError);
  assert.equal(error.retryAfter, 20);
  assert.ok(tries >= 3, `tried ${tries} times`);
  assert.equal(ran, false);
  const down = new Sluice({ binding: fake(() => problem(503, "unavailable")).binding });
  await assert.rejects(down.withLock("k", () => {}), SluiceUnavailableError, "fail closed: the outage, not a busy lock");
  let openRan = false;
  await down.withLock("k", { fail: "open" }, (lease) => {
    openRan = lease.leaseId === null;
  });
  assert.equal(openRan, true, "fail open runs fn without a lease");
});

test("npm pack makes a package with the code, the types and the README, and it imports", async () => {
  const { execFileSync } = await import("node:child_process");
  const { mkdtempSync, rmSync, readFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const here = new URL("../", import.meta.url).pathname;
  const dir = mkdtempSync(join(tmpdir(), "sluice-client-pack-"));
  try {
    const [packed] = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: here, encoding: "utf8" }));
    assert.deepEqual(packed.files.map((f) => f.path).sort(), ["README.md", "index.d.ts", "index.js", "package.json"]);
    execFileSync("tar", ["-xzf", join(dir, packed.filename), "-C", dir]);
    const manifest = JSON.parse(readFileSync(join(dir, "package/package.json"), "utf8"));
    assert.deepEqual(manifest.dependencies ?? {}, {}, "no runtime dependencies");
    assert.equal(manifest.exports["."].types, "./index.d.ts");
    const module = await import(join(dir, "package", manifest.exports["."].default));
    assert.equal(typeof module.Sluice, "function");
    assert.equal(typeof module.SluiceError, "function");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
