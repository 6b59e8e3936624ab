// Sends the same requests to two builds of the worker, one after the other,
// and compares what they answer (status, content type, body) and the rows
// their objects stored, byte for byte with digits masked (times, and the
// random reservation and lease ids, differ from run to run):
//
//   node scripts/compare-builds.mjs <build dir> <other build dir>
//
// Each build dir holds index.js and index_bg.wasm (`bash scripts/build.sh`
// writes build/). Prints each difference and exits 1 if there is any.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { Miniflare } from "miniflare";
import { sluiceWorkerOptions, API_TOKEN } from "../tests/e2e/harness.mjs";

const ADMIN_TOKEN = "admin-token-for-compare-0123456789-abcdef";
const config = {
  origin: "demo",
  rules: [
    { id: "api", match: { path: "/api/*" }, limit: 3, window: "1m" },
    { id: "login", match: { path: "/login" }, limit: 1, window: "1m", ban: { after: 2, within: "1m", for: "1m" } },
    { id: "fixed", match: { path: "/fixed" }, limit: 2, window: "1m", algorithm: "fixed_window" },
    { id: "cell", match: { path: "/cell" }, limit: 2, window: "1m", algorithm: "gcra" },
  ],
};
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const api = { authorization: `Bearer ${API_TOKEN}` };
const JSON_TYPE = { "content-type": "application/json" };
const ip = (n) => ({ "cf-connecting-ip": `198.51.100.${n}` });

/** [method, path, headers, body]: the decision API's, the admin API's, and
 * the proxied rules', good and bad. */
const requests = [
  ["GET", "/_sluice/health"],
  ["POST", "/_sluice/health"],
  ["GET", "/_sluice/nothing"],
  ["POST", "/_sluice/v1/limit", {}, { key: "k", limit: 2, window_ms: 60000 }],
  ...Array.from({ length: 3 }, () => ["POST", "/_sluice/v1/limit", api, { key: "k", limit: 2, window_ms: 60000 }]),
  ["POST", "/_sluice/v1/limit", api, { key: "k", limit: 2 }],
  ["POST", "/_sluice/v1/limit", api, "{not json"],
  ["POST", "/_sluice/v1/limit", api, '{"key": "k",\n "limit": 2, "window_ms": }'],
  ["POST", "/_sluice/v1/limit", api, '{"key": "k"} trailing'],
  ["POST", "/_sluice/v1/limit", api, "[1, 2"],
  ["POST", "/_sluice/v1/limit", api, '"just a string"'],
  ["POST", "/_sluice/v1/limit", api, '{"key":"a","key":"b","limit":1,"window_ms":1000}'],
  ["POST", "/_sluice/v1/limit", api, { key: "r", limit: 5, window_ms: 60000, cost: 2, reserve_ms: 5000 }],
  ["POST", "/_sluice/v1/limit", api, { layers: [{ name: "a", key: "l1", limit: 2, window_ms: 60000 }, { name: "b", key: "l2", limit: 1, window_ms: 60000 }] }],
  ["POST", "/_sluice/v1/limit", api, { layers: [{ name: "a", key: "l1", limit: 2, window_ms: 60000 }, { name: "b", key: "l2", limit: 1, window_ms: 60000 }] }],
  ["POST", "/_sluice/v1/limit", api, { key: "g", policies: [{ name: "p", algorithm: "gcra", limit: 3, window_ms: 60000 }] }],
  ["POST", "/_sluice/v1/limit/settle", api, { key: "r", reservation: "nope", keep: true }],
  ["POST", "/_sluice/v1/limit/settle", api, { key: "r" }],
  ["POST", "/_sluice/v1/throttle", api, { key: "t", max_burst: 2, count: 30, period_s: 60, quantity: 1 }],
  ["POST", "/_sluice/v1/throttle", api, { key: "t", max_burst: 2, count: 30, period_s: 60, quantity: 9 }],
  ["POST", "/_sluice/v1/throttle", api, { key: "t", max_burst: -1 }],
  ["POST", "/_sluice/v1/leases", api, { key: "c", limit: 1, ttl_ms: 60000 }],
  ["POST", "/_sluice/v1/leases", api, { key: "c", limit: 1, ttl_ms: 60000 }],
  ["POST", "/_sluice/v1/leases", api, { key: "c" }],
  ["POST", "/_sluice/v1/leases/nope/renew?key=c", api, { ttl_ms: 1000 }],
  ["DELETE", "/_sluice/v1/leases/nope?key=c", api],
  ["GET", "/_sluice/v1/leases/nope?key=c", api],
  ...Array.from({ length: 4 }, () => ["GET", "/api/x", ip(1)]),
  ...Array.from({ length: 4 }, () => ["GET", "/login", ip(2)]),
  ...Array.from({ length: 3 }, () => ["GET", "/fixed", ip(3)]),
  ...Array.from({ length: 3 }, () => ["GET", "/cell", ip(4)]),
  ["GET", "/_sluice/admin/rules"],
  ["GET", "/_sluice/admin/rules", { authorization: "Bearer wrong" }],
  ["GET", "/_sluice/admin/rules", admin],
  ["POST", "/_sluice/admin/rules", admin],
  ["GET", "/_sluice/admin/keys/api/198.51.100.1", admin],
  ["GET", "/_sluice/admin/keys/nope/198.51.100.1", admin],
  ["POST", "/_sluice/admin/keys/api/198.51.100.1", admin],
  ["PUT", "/_sluice/admin/keys/api/198.51.100.9/override", admin, { limit: 10, window: "1m", for: "1h", reason: "vip" }],
  ["PUT", "/_sluice/admin/keys/api/198.51.100.9/override", admin, { limit: "x" }],
  ["GET", "/_sluice/admin/keys/api/198.51.100.9", admin],
  ["DELETE", "/_sluice/admin/keys/api/198.51.100.9/override", admin],
  ["DELETE", "/_sluice/admin/keys/api/198.51.100.9/override", admin],
  ["PUT", "/_sluice/admin/keys/login/198.51.100.7/ban", admin, { for: "10m", reason: "abuse" }],
  ["PUT", "/_sluice/admin/keys/login/198.51.100.7/ban", admin, { for: "forever" }],
  ["DELETE", "/_sluice/admin/keys/login/198.51.100.7/ban", admin],
  ["DELETE", "/_sluice/admin/keys/login/198.51.100.7/ban", admin],
  ["DELETE", "/_sluice/admin/keys/api/198.51.100.1", admin],
  ["PUT", "/_sluice/admin/bans/203.0.113.5", admin, { for: "10m" }],
  ["PUT", "/_sluice/admin/bans/10.0.0.1%2F8", admin, { for: "10m" }],
  ["GET", "/_sluice/admin/bans", admin],
  ["GET", "/_sluice/admin/bans?limit=0", admin],
  ["GET", "/_sluice/admin/bans?nope=1", admin],
  ["DELETE", "/_sluice/admin/bans/203.0.113.5", admin],
  ["DELETE", "/_sluice/admin/bans/203.0.113.5", admin],
  ["PATCH", "/_sluice/admin/bans/203.0.113.5", admin],
  ["GET", "/_sluice/admin/stats?since=x", admin],
  ["GET", "/_sluice/admin/top", admin],
  ["GET", "/_sluice/admin/top?rule=api&top_minutes=90", admin],
  ["GET", "/_sluice/admin/top?rule=nope", admin],
  ["GET", "/_sluice/admin/top?rule=login", admin],
  ["GET", "/_sluice/admin/rules/api", admin],
  ["GET", "/_sluice/admin/rules/nope", admin],
  ["PUT", "/_sluice/admin/rules/api/state", admin, { state: "sleepy" }],
  ["GET", "/_sluice/admin/rules/api/state", admin],
  ["DELETE", "/_sluice/admin/rules/api/state", admin],
  ["GET", "/_sluice/admin/rules/api/override", admin],
  ["GET", "/_sluice/admin/rules/api.x", admin],
  ["GET", "/_sluice/admin/rooms", admin],
  ["GET", "/_sluice/admin/nothing", admin],
];

/** What one build answers to `requests`, and its stored rows. */
async function answers(build) {
  const persist = mkdtempSync(join(tmpdir(), "sluice-compare-"));
  const options = sluiceWorkerOptions({ SLUICE: JSON.stringify(config), ADMIN_TOKEN, API_TOKEN });
  delete options.assets;
  const mf = new Miniflare({
    workers: [{ ...options, modulesRoot: dirname(build), scriptPath: join(build, "index.js") }],
    durableObjectsPersist: persist,
    kvPersist: persist,
    host: "127.0.0.1",
    port: 0,
  });
  const url = await mf.ready;
  const out = [];
  try {
    for (const [method, path, headers = {}, body] of requests) {
      const init = { method, headers: { ...headers, ...(body === undefined ? {} : JSON_TYPE) } };
      if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
      const response = await fetch(new URL(path, url), init);
      const text = await response.text();
      out.push(`${method} ${path} -> ${response.status} ${response.headers.get("content-type")} ${masked(text)}`);
    }
  } finally {
    await mf.dispose();
  }
  out.push(...rows(persist).map(masked));
  rmSync(persist, { recursive: true, force: true });
  return out;
}

/** Random ids (reservations', leases') and then every number masked. */
const masked = (text) => text.replace(/\b[0-9a-f-]{12,}\b/g, "<id>").replace(/\d+/g, "0");

/** Every stored row of every object, as `file table: values`, files in order. */
function rows(dir) {
  const files = [];
  const walk = (at) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".sqlite")) files.push(path);
    }
  };
  walk(dir);
  const dump = `
import sqlite3, sys
for path in sys.argv[1:]:
    db = sqlite3.connect(path)
    tables = [t for (t,) in db.execute("select name from sqlite_master where type='table' and name not like '\\\\_%' escape '\\\\' and name not like 'sqlite%' order by name")]
    for t in tables:
        for row in db.execute(f'select * from "{t}" order by 1'):
            print(t, repr(row))
`;
  const per = files.map((file) => execFileSync("python3", ["-c", dump, file], { encoding: "utf8" }).trim());
  return per.sort().flatMap((text) => text.split("\n").filter(Boolean).map((line) => `row ${line}`));
}

const [a, b] = process.argv.slice(2).map((dir) => resolve(dir));
if (!a || !b) {
  console.error("usage: node scripts/compare-builds.mjs <build dir> <other build dir>");
  process.exit(2);
}
const [left, right] = [await answers(a), await answers(b)];
let differ = 0;
for (let i = 0; i < Math.max(left.length, right.length); i += 1) {
  if (left[i] !== right[i]) {
    differ += 1;
    console.log(`- ${left[i]}\n+ ${right[i]}`);
  }
}
const stored = left.filter((line) => line.startsWith("row ")).length;
console.log(`${requests.length} requests and ${stored} stored rows: ${differ} differ`);
process.exit(differ ? 1 : 0);
