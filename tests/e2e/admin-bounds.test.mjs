// Every admin answer is bounded and every admin input validated, over HTTP
// on workerd: query parameters, a ban's reason, paged ban lists and top
// refused keys, stats that carry counts.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Sluice, tempDir, withEarlierVersion } from "./harness.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const TOKEN = "bounds-admin-token-for-e2e-0123456789-abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

const config = {
  rules: [
    { id: "api", match: { path: "/api/*" }, limit: 1, window: "1m" },
  ],
};

let sluice;
before(async () => {
  sluice = await Sluice.start({ sluice: config, secrets: { ADMIN_TOKEN: TOKEN } });
});
after(() => sluice?.stop());

const get = (path) => sluice.fetch(`/_sluice/admin${path}`, { headers: admin });
const put = (path, body) =>
  sluice.fetch(`/_sluice/admin${path}`, {
    method: "PUT",
    headers: { ...admin, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function refusedNaming(response, field, what) {
  assert.equal(response.status, 400, what);
  assert.match(response.headers.get("content-type"), /^application\/problem\+json/, what);
  const problem = await response.json();
  assert.equal(problem.code, "invalid-request", what);
  assert.equal(problem.field, field, what);
  return problem;
}

describe("admin query parameters", () => {
  test("a bad top_minutes is a 400 naming it, like a bad since", async () => {
    for (const value of ["0", "61", "x", "-3", "", "1.5", "+5"]) {
      await refusedNaming(await get(`/top?rule=api&top_minutes=${encodeURIComponent(value)}`), "top_minutes", value);
    }
    await refusedNaming(await get("/stats?since=x"), "since", "since");
    for (const value of ["1", "60"]) {
      assert.equal((await get(`/top?rule=api&top_minutes=${value}`)).status, 200, value);
    }
  });

  test("a bad limit or cursor is a 400 naming it", async () => {
    for (const value of ["0", "101", "x", "-1"]) {
      await refusedNaming(await get(`/bans?limit=${value}`), "limit", `bans ${value}`);
    }
    for (const value of ["0", "33", "x"]) {
      await refusedNaming(await get(`/top?rule=api&limit=${value}`), "limit", `top ${value}`);
    }
    for (const value of ["zz", "abc", "7b7d"]) {
      await refusedNaming(await get(`/bans?cursor=${value}`), "cursor", `bans ${value}`);
      await refusedNaming(await get(`/top?rule=api&cursor=${value}`), "cursor", `top ${value}`);
    }
    await refusedNaming(await get("/top"), "rule", "top needs a rule");
    const unknown = await get("/top?rule=nope");
    assert.equal(unknown.status, 404);
    assert.equal((await unknown.json()).field, "rule");
  });

  test("an unknown or repeated parameter is a 400 naming it", async () => {
    await refusedNaming(await get("/stats?sinse=5"), "sinse", "misspelt");
    await refusedNaming(await get("/stats?top_minutes=5"), "top_minutes", "stats carry no top keys");
    await refusedNaming(await get("/stats?since=1&since=2"), "since", "repeated");
    await refusedNaming(await get("/rules?x=1"), "x", "rules takes none");
  });
});

describe("a manual ban's reason", () => {
  test("is at most 200 bytes, as an override's", async () => {
    const problem = await refusedNaming(await put("/bans/192.0.2.44", { for: "1m", reason: "r".repeat(201) }), "reason", "201");
    assert.match(problem.detail, /200/);
    const ok = await put("/bans/192.0.2.44", { for: "1m", reason: "r".repeat(200) });
    assert.equal(ok.status, 200);
  });
});

describe("bounded answers", () => {
  let fresh;
  before(async () => {
    fresh = await Sluice.start({
      sluice: { rules: [...config.rules, { id: "search", match: { path: "/search" }, key: "header:x-api-key", limit: 1, window: "1m" }] },
      secrets: { ADMIN_TOKEN: TOKEN },
    });
  });
  after(() => fresh?.stop());
  const call = (method, path, body) =>
    fresh.fetch(`/_sluice/admin${path}`, {
      method,
      headers: { ...admin, ...(body ? { "content-type": "application/json" } : {}) },
      body: body && JSON.stringify(body),
    });
  const json = async (path) => {
    const response = await call("GET", path);
    assert.equal(response.status, 200, path);
    return response.json();
  };
  /** Every page of `path`, following `next`. */
  async function pages(path, items) {
    const all = [];
    let cursor = null;
    for (let n = 0; n < 100; n++) {
      const page = await json(`${path}${cursor ? `&cursor=${cursor}` : ""}`);
      all.push(page[items]);
      cursor = page.next;
      if (cursor === null) return all;
    }
    throw new Error("no last page");
  }

  test("GET /bans is paged: limit and cursor, newest first, each ban once", async () => {
    const keys = [];
    for (let i = 0; i < 7; i++) {
      keys.push(`paged-${i}`);
      assert.equal((await call("PUT", `/bans/paged-${i}`, { for: "10m", reason: `r${i}` })).status, 200);
      await sleep(5);
    }
    const found = await pages("/bans?limit=3", "bans");
    assert.deepEqual(found.map((page) => page.length), [3, 3, 1]);
    const listed = found.flat();
    assert.deepEqual(listed.map((b) => b.key), [...keys].reverse(), "newest first");
    for (const ban of listed) {
      assert.equal(typeof ban.started_ms, "number");
      assert.equal(ban.started, new Date(ban.started_ms).toISOString());
    }
    assert.ok(listed[0].started_ms > listed[6].started_ms);
  });

  test("a page holds at most 100 bans", async () => {
    const puts = [];
    for (let i = 0; i < 105; i++) puts.push(`many-${String(i).padStart(3, "0")}`);
    for (let i = 0; i < puts.length; i += 15) {
      await Promise.all(puts.slice(i, i + 15).map((key) => call("PUT", `/bans/${key}`, { for: "10m" })));
    }
    const first = await json("/bans");
    assert.equal(first.bans.length, 100);
    assert.equal(typeof first.next, "string");
    const all = (await pages("/bans?limit=100", "bans")).flat();
    assert.equal(new Set(all.map((b) => b.key)).size, all.length, "no ban twice");
    for (const key of puts) assert.ok(all.some((b) => b.key === key), key);
  });

  test("stats carry counts, not lists of keys or bans", async () => {
    const long = "k".repeat(512);
    for (let i = 0; i < 40; i++) {
      const key = `${long.slice(0, 500)}-${String(i).padStart(3, "0")}`;
      for (let j = 0; j < 2; j++) await fresh.fetch("/search", { headers: { "x-api-key": key } });
    }
    const response = await call("GET", "/stats");
    const text = await response.text();
    const stats = JSON.parse(text);
    assert.ok(!text.includes("kkkkkkkk"), "no key in the stats");
    const search = stats.rules.find((r) => r.rule === "search");
    assert.deepEqual([search.admitted, search.refused], [40, 40]);
    assert.equal(search.top_refused, undefined);
    assert.ok(search.per_minute.length <= 61);
    assert.ok(stats.bans.manual >= 7, JSON.stringify(stats.bans));
    assert.equal(stats.bans.rule, 0);
    assert.ok(text.length < 20_000, `${text.length} bytes`);
  });

  test("top refused keys are paged, largest first, each at most once", async () => {
    for (const [ip, times] of [["192.0.2.1", 4], ["192.0.2.2", 3], ["192.0.2.3", 2]]) {
      for (let i = 0; i < times; i++) await fresh.fetch("/api/x", { headers: { "CF-Connecting-IP": ip } });
    }
    const found = await pages("/top?rule=api&limit=2", "keys");
    assert.deepEqual(found.map((page) => page.length), [2, 1]);
    assert.deepEqual(found.flat().map((k) => [k.key, k.count]), [["192.0.2.1", 3], ["192.0.2.2", 2], ["192.0.2.3", 1]]);
    const top = await json("/top?rule=api&top_minutes=5");
    assert.equal(top.rule, "api");
    assert.equal(top.top_minutes, 5);
    const search = await json("/top?rule=search");
    assert.equal(search.keys.length, 10, "10 by default");
    assert.ok(search.keys.every((k) => k.key.length === 504));
  });
});

test("bans a hub of an earlier version listed are still listed, and paged", async () => {
  const { dir, remove } = tempDir();
  const now = Date.now();
  try {
    const hubs = { HUB: { className: "Hub", useSQLite: true } };
    await withEarlierVersion(dir, "hub-layout.mjs", hubs, async (fetch) => {
      const written = await fetch("/?hub=hub-3", { method: "POST", body: JSON.stringify({ now }) });
      assert.equal(await written.text(), "written");
    });

    const sluice = await Sluice.start({ sluice: config, persist: dir, secrets: { ADMIN_TOKEN: TOKEN } });
    try {
      const call = (path, init = {}) => sluice.fetch(`/_sluice/admin${path}`, { ...init, headers: { ...admin, ...init.headers } });
      await call("/bans/fresh-key", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ for: "1m" }) });
      const first = await (await call("/bans?limit=1")).json();
      assert.deepEqual(first.bans.map((b) => b.key), ["fresh-key"], "the newest first");
      const rest = await (await call(`/bans?limit=10&cursor=${first.next}`)).json();
      const old = rest.bans.map((b) => [b.key, b.source, b.reason]).sort();
      assert.deepEqual(old, [["203.0.113.50", "manual", "from the old layout"], ["old-key", "rule:api", "2 refusals"]]);
      for (const ban of rest.bans) assert.deepEqual([ban.started_ms, ban.started], [null, null], "unknown, so the oldest");
      const stats = await (await call("/stats")).json();
      assert.deepEqual(stats.bans, { manual: 2, rule: 1 });
      const counted = stats.rules.find((r) => r.rule === "old-rule");
      assert.deepEqual([counted.admitted, counted.refused, counted.near_limit, counted.shadow], [7, 2, 0, 0], "minutes counted before near-limit and shadow were");
      const metrics = await (await call("/metrics")).text();
      assert.match(metrics, /^sluice_decisions_total\{rule="old-rule",outcome="admitted"\} 7$/m);
    } finally {
      await sluice.stop();
    }
  } finally {
    remove();
  }
});
