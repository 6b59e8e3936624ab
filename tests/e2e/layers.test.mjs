// Stacked limits end to end on workerd (issue 28, item 1): a per-user limit
// under a global ceiling, in proxy mode through two isolates and in the
// decision API, all or nothing, with nothing counted for a refused request
// once its refunds land and nothing lost for an admitted one.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, anotherIsolate, freshKey, eventually, API_TOKEN } from "./harness.mjs";

const ADMIN_TOKEN = "admin-token-for-layers-0123456789-abcdef";
const admin = { Authorization: `Bearer ${ADMIN_TOKEN}` };

/** 1 per user per minute under `total` a minute in all, split in `split`. */
const sale = (id, total, split = 2) => ({
  id,
  match: { path: `/${id}`, methods: ["POST"] },
  key: "header:x-user",
  limit: 1,
  window: "1m",
  also: [{ id: "all", scope: "global", split, limit: total, window: "1m" }],
});

const config = {
  origin: "demo",
  rules: [
    sale("checkout", 3),
    sale("flood", 2),
    sale("again", 1, 1),
    sale("cost", 10, 1),
    // Failed logins: 2 per user and IP, 3 per IP, only 401s count (the IP
    // layer inherits the rule's count).
    {
      id: "signin",
      match: { path: "/signin", methods: ["POST"] },
      key: "ip+header:x-user",
      limit: 2,
      window: "15m",
      count: { status: [401] },
      also: [{ id: "ip", key: "ip", limit: 3, window: "15m" }],
    },
    // A global quota that counts only server errors.
    {
      id: "errors",
      match: { path: "/errors" },
      scope: "global",
      split: 2,
      limit: 4,
      window: "15m",
      count: { status: ["5xx"] },
    },
  ],
};

/** A second isolate: Sluice's worker again under another name, bound to
 * the same Durable Object classes. */
const secondIsolate = () => anotherIsolate("sluice-b", { SLUICE: config, ADMIN_TOKEN, API_TOKEN });

let sluice;
let other;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN, API_TOKEN }, workers: [secondIsolate()] });
  other = await sluice.worker("sluice-b");
});
after(() => sluice?.stop());

/** A buyer's POST to `/{path}`, through the first isolate or the second. */
function buy(path, user, { isolate = 0, query = "" } = {}) {
  const init = { method: "POST", headers: { "X-User": user, "CF-Connecting-IP": "198.51.100.7" } };
  if (isolate === 0) return sluice.fetch(`/${path}${query}`, init);
  return other.fetch(`http://sluice/${path}${query}`, init);
}

/** What the admin API says one key of a rule (or `rule.layer`) uses. */
async function used(rule, key) {
  const response = await sluice.fetch(`/_sluice/admin/keys/${rule}/${encodeURIComponent(key)}`, { headers: admin });
  assert.equal(response.status, 200, `${rule}/${key}`);
  const state = await response.json();
  return state.slots.reduce((sum, slot) => sum + slot.used, 0);
}

/** Units a split layer's parts use together. */
async function usedByParts(rule, parts) {
  let total = 0;
  for (let i = 0; i < parts; i++) total += await used(rule, `*#${i}`);
  return total;
}

describe("proxy mode", () => {
  test("1 per user under a global 3: five users × 3 requests through two isolates → exactly 3 admitted, no user twice, nothing left behind", async () => {
    const users = Array.from({ length: 5 }, (_, i) => `buyer-${i}-${freshKey("u")}`);
    const sent = users.flatMap((user, u) => [0, 1, 2].map((i) => ({ user, isolate: (u + i) % 2 })));
    const answers = await Promise.all(sent.map(({ user, isolate }) => buy("checkout", user, { isolate })));
    const admitted = sent.filter((_, i) => answers[i].status === 200).map(({ user }) => user);
    assert.equal(admitted.length, 3, answers.map((r) => r.status).join(","));
    assert.equal(new Set(admitted).size, 3, "no user more than once");
    const violated = new Set();
    for (const [i, response] of answers.entries()) {
      if (response.status === 200) {
        assert.equal(response.headers.get("ratelimit-policy"), '"checkout";q=1;w=60, "checkout.all";q=3;w=60');
        await response.body?.cancel();
        continue;
      }
      assert.equal(response.status, 429, `request ${i}`);
      const problem = await response.json();
      for (const name of problem["violated-policies"]) violated.add(name);
    }
    assert.deepEqual([...violated].sort(), ["checkout", "checkout.all"], "both layers refused someone");
    assert.equal(await usedByParts("checkout.all", 2), 3, "the global layer holds exactly the admitted");
    for (const user of users) {
      const expected = admitted.includes(user) ? 1 : 0;
      // A refusal's refund is sent in the background: poll until it lands.
      await eventually(async () => (await used("checkout", user)) === expected);
      if (expected === 1) {
        // Kept, not pending: the reservation's own row is gone.
        await eventually(async () => (await sluice.inspect(`rule:checkout:${user}`)).stored_rows === 1);
      } else {
        await eventually(async () => (await sluice.inspect(`rule:checkout:${user}`)).has_storage === false);
      }
    }
    // The global parts see only what passed the per-user layer.
    const checks = async () => (await sluice.inspect("rule:checkout.all:*#0")).checks + (await sluice.inspect("rule:checkout.all:*#1")).checks;
    // The admitted requests' reservations in the global parts are kept by
    // calls sent once the origin answered, in the background: wait until
    // the parts' count stands still before counting.
    let before = await checks();
    await eventually(async () => {
      const now = await checks();
      const still = now === before;
      before = now;
      return still;
    }, 10_000, 300);
    for (let i = 0; i < 5; i++) assert.equal((await buy("checkout", admitted[0])).status, 429);
    assert.equal(await checks(), before, "a user over its own limit never reaches the global quota");
  });

  test("once an isolate knows the global quota is sold out, a flood never asks the per-user objects, and the parts once per batch", async () => {
    const first = [freshKey("a"), freshKey("b")];
    for (const user of first) assert.equal((await buy("flood", user)).status, 200);
    const late = freshKey("late");
    const refused = await buy("flood", late);
    assert.equal(refused.status, 429);
    assert.deepEqual((await refused.json())["violated-policies"], ["flood.all"]);
    const parts = async () => (await sluice.inspect("rule:flood.all:*#0")).checks + (await sluice.inspect("rule:flood.all:*#1")).checks;
    const before = await parts();
    for (let i = 0; i < 16; i++) {
      const user = `flood-${i}-${freshKey("u")}`;
      const response = await buy("flood", user);
      assert.equal(response.status, 429);
      assert.deepEqual((await response.json())["violated-policies"], ["flood.all"]);
      const object = await sluice.inspect(`rule:flood:${user}`);
      assert.equal(object.checks, 0, "the user's own object was never asked");
    }
    // Each batch the parts hand out is twice the last (1, 2, 4, 8 moments
    // each), so 16 refusals reach them in a handful of calls, not 16 × 2.
    const asked = (await parts()) - before;
    assert.ok(asked <= 10, `the parts were asked ${asked} times`);
  });

  test("a user refused by the global layer is not counted in its own", async () => {
    const [winner, loser] = [freshKey("w"), freshKey("l")];
    assert.equal((await buy("again", winner)).status, 200);
    const refused = await buy("again", loser, { isolate: 1 });
    assert.equal(refused.status, 429);
    assert.deepEqual((await refused.json())["violated-policies"], ["again.all"]);
    assert.ok(Number(refused.headers.get("retry-after")) > 50, "the global window's wait");
    assert.match(refused.headers.get("ratelimit-policy"), /^"again\.all";q=1;w=60$/);
    await eventually(async () => (await used("again", loser)) === 0);
    assert.equal(await used("again", winner), 1);
    assert.equal(await used("again.all", "*"), 1);
  });

  test("what it costs: an admitted request makes 3 object calls (2 on its path, the keep after), a refusal by the user layer 1, the next 1 for a batch, then none", async () => {
    // Every key object of the local runtime shares one isolate and its meter;
    // each inspection is a call too, and is subtracted.
    let inspections = 0;
    const meter = async () => {
      inspections += 1;
      return (await sluice.inspect("rule:cost:meter")).meter.requests;
    };
    const calls = async (act) => {
      const before = await meter();
      inspections = 0;
      await act();
      return (await meter()) - before - inspections;
    };
    const user = freshKey("c");
    const admitted = await calls(async () => {
      assert.equal((await buy("cost", user)).status, 200);
      await eventually(async () => {
        inspections += 1;
        return (await sluice.inspect(`rule:cost:${user}`)).stored_rows === 1;
      });
    });
    assert.equal(admitted, 3);
    const refused = await calls(async () => assert.equal((await buy("cost", user)).status, 429));
    assert.equal(refused, 1);
    // The first refusal brought one moment, its own; the second asks for
    // two, and the third is told the second from the isolate's memory.
    const batch = await calls(async () => assert.equal((await buy("cost", user)).status, 429));
    assert.equal(batch, 1, "the object hands out a batch of moments");
    const cached = await calls(async () => assert.equal((await buy("cost", user)).status, 429));
    assert.equal(cached, 0, "the isolate remembers the refusal");
  });

  test("layers that count by answer: successes count nowhere, failures in every layer", async () => {
    const ip = "198.18.40.9";
    const signin = (user, status) =>
      sluice.fetch(`/signin?status=${status}`, { method: "POST", headers: { "X-User": user, "CF-Connecting-IP": ip } });
    for (let i = 0; i < 6; i++) assert.equal((await signin("ann", 200)).status, 200, `success ${i + 1}`);
    await eventually(async () => (await used("signin.ip", ip)) === 0);
    for (let i = 0; i < 2; i++) assert.equal((await signin("ann", 401)).status, 401);
    const third = await signin("ann", 200);
    assert.equal(third.status, 429);
    assert.deepEqual((await third.json())["violated-policies"], ["signin"]);
    assert.equal((await signin("bob", 401)).status, 401, "bob's first failure: the IP's third");
    await eventually(async () => (await used("signin.ip", ip)) === 3);
    const ipFull = await signin("cat", 200);
    assert.equal(ipFull.status, 429);
    assert.deepEqual((await ipFull.json())["violated-policies"], ["signin.ip"]);
    await eventually(async () => (await used("signin", `${ip}|cat`)) === 0);
  });

  test("a global quota counts by answer: each part settles its own reservations", async () => {
    for (let i = 0; i < 8; i++) assert.equal((await sluice.fetch("/errors?status=200")).status, 200, `success ${i + 1}`);
    await eventually(async () => (await usedByParts("errors", 2)) === 0);
    for (let i = 0; i < 4; i++) assert.equal((await sluice.fetch("/errors?status=503")).status, 503);
    await eventually(async () => (await usedByParts("errors", 2)) === 4);
    assert.equal((await sluice.fetch("/errors?status=200")).status, 429);
  });
});

describe("the decision API", () => {
  const limit = (body) => sluice.post("/_sluice/v1/limit", body);

  test("five users × 3 calls with layers under a global 3 → exactly 3 allowed, and the refused leave nothing behind", async () => {
    const saleKey = freshKey("sale");
    const users = Array.from({ length: 5 }, (_, i) => `user:${i}-${freshKey("u")}`);
    const calls = users.flatMap((user) => [0, 1, 2].map(() => user));
    const body = (user) => ({
      layers: [
        { key: user, limit: 1, window_ms: 60_000 },
        { key: saleKey, name: "sale", limit: 3, window_ms: 60_000 },
      ],
    });
    const responses = await Promise.all(calls.map((user) => limit(body(user))));
    const answers = await Promise.all(responses.map((r) => r.json()));
    const allowed = calls.filter((_, i) => answers[i].allowed);
    assert.equal(allowed.length, 3, JSON.stringify(answers.map((a) => a.violated)));
    assert.equal(new Set(allowed).size, 3);
    const admittedAt = answers.findIndex((a) => a.allowed);
    assert.equal(responses[admittedAt].headers.get("ratelimit-policy"), `"${calls[admittedAt]}";q=1;w=60, "sale";q=3;w=60`);
    assert.deepEqual(
      answers[admittedAt].layers.map((l) => [l.name, l.key, l.allowed]),
      [[calls[admittedAt], calls[admittedAt], true], ["sale", saleKey, true]],
    );
    const refusedBySale = answers.find((a) => a.violated[0] === "sale");
    assert.ok(refusedBySale, "two users passed their own layer and found the sale full");
    assert.ok(refusedBySale.retry_after_ms > 50_000);
    assert.equal(await used("_api", saleKey), 3);
    for (const user of users) {
      await eventually(async () => (await used("_api", user)) === (allowed.includes(user) ? 1 : 0));
    }
  });

  test("every bad layered body is a 400 problem naming its field", async () => {
    const layer = { key: "k", limit: 1, window_ms: 1000 };
    const cases = [
      [{ layers: [] }, "layers"],
      [{ layers: [layer, { ...layer, key: "other", window_ms: 0 }] }, "layers[1].window_ms"],
      [{ layers: [layer, layer] }, "layers[1].key"],
      [{ layers: [{ ...layer, extra: true }] }, "layers[0].extra"],
      [{ key: "k", layers: [layer] }, "key"],
      [{ reserve: true, layers: [layer] }, "reserve"],
      [{ cost: 2, layers: [layer] }, "cost"],
    ];
    for (const [body, field] of cases) {
      const response = await limit(body);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.equal(response.headers.get("content-type"), "application/problem+json");
      assert.equal((await response.json()).field, field, JSON.stringify(body));
    }
  });
});

test("a bad also layer is a configuration error naming its field", async () => {
  const broken = await Sluice.start({
    sluice: { rules: [{ ...sale("x", 3), also: [{ id: "all", limit: 3, window: "1m" }] }] },
  });
  try {
    const response = await broken.fetch("/x", { method: "POST" });
    assert.equal(response.status, 500);
    const problem = await response.json();
    assert.equal(problem.code, "invalid-config");
    assert.equal(problem.field, "SLUICE.rules[0].also[0].key");
  } finally {
    await broken.stop();
  }
});
