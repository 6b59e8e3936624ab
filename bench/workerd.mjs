// The worker benchmarks on local workerd (through Miniflare), with wrk as
// the load generator: every target in one run, on one machine, so the
// ratios compare like with like. Writes Markdown sections for
// BENCHMARKS.md, as JSON, to the file it is given (not stdout, which
// belongs to wrangler, Miniflare and workerd and their chatter).
//   taskset -c 0 node bench/workerd.mjs <out.json>   (the runtime on core 0)
// wrk is pinned to the other core when the machine has two.
// BENCH_SECTIONS=load,costs,isolates,cold,wasm picks sections (default: all).
import { Miniflare } from "miniflare";
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { statSync, writeFileSync } from "node:fs";
import { Sluice, API_TOKEN, anotherIsolate, certainlyInOneWindow, isolateStats, okOrigin } from "../tests/e2e/harness.mjs";
import { baselineWorker } from "./baseline.mjs";
import { cpuMs, tracked } from "./cpu.mjs";

const here = new URL("./", import.meta.url).pathname;
const root = new URL("../", import.meta.url).pathname;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const COMPAT = "2026-04-01";
const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
// Every decision-API call carries the token, as a real client's does; the
// JavaScript baseline ignores it.
const API_AUTH = `Authorization: Bearer ${API_TOKEN}`;

const BANNED_RULES = {
  rules: [
    {
      id: "banned",
      match: { path: "/banned" },
      key: "header:x-key",
      limit: 1,
      window: "10m",
      ban: { after: 1, within: "1m", for: "1h" },
    },
  ],
};

/** Runs wrk against `url`; answers requests per second, p50 and p99 in ms. */
function wrk(url, { script, headers = [], args: scriptArgs = [], seconds = SECONDS } = {}) {
  const args = ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "--timeout", "10s"];
  for (const header of headers) args.push("-H", header);
  if (script) args.push("-s", here + script);
  args.push(url);
  if (scriptArgs.length > 0) args.push("--", ...scriptArgs);
  const pinned = availableParallelism() > 1 ? ["taskset", ["-c", "1", "wrk", ...args]] : ["wrk", args];
  const out = execFileSync(pinned[0], pinned[1], { encoding: "utf8" });
  const ms = (text) => {
    const [, value, unit] = text.match(/([\d.]+)(us|ms|s)/);
    return Number(value) * { us: 0.001, ms: 1, s: 1000 }[unit];
  };
  const non2xx = Number(out.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0);
  const errors = out.match(/Socket errors: .*/)?.[0] ?? "";
  const count = (kind) => Number(errors.match(new RegExp(`${kind} (\\d+)`))?.[1] ?? 0);
  // A kept-alive connection the runtime closes shows as one read error:
  // at most one per connection is the runtime tidying up, not a failure.
  const failed = count("connect") + count("write") + count("timeout") > 0 || count("read") > CONNECTIONS;
  return {
    requests: Number(out.match(/(\d+) requests in/)[1]),
    rps: Number(out.match(/Requests\/sec:\s+([\d.]+)/)[1]),
    p50: ms(out.match(/\n\s+50%\s+(\S+)/)[1]),
    p99: ms(out.match(/\n\s+99%\s+(\S+)/)[1]),
    non2xx,
    errors: failed ? errors : "",
  };
}

/** A JavaScript worker (the ceiling or a baseline) in a runtime of its own. */
async function jsWorker(workerOptions) {
  const mf = new Miniflare({ workers: [workerOptions], host: "127.0.0.1", port: 0 });
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { url, stop: () => mf.dispose() };
}

const fmt = (n, digits = 2) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Every target up at once, each in a runtime of its own, then
 * BENCH_ROUNDS rounds that load each in turn, so slow and fast moments of
 * a shared machine fall on all of them; each figure is the median of its
 * rounds. A runtime of its own per target, because a runtime's CPU time is
 * read around each target's rounds: work one target leaves behind
 * (evicting its objects, collecting its garbage) would otherwise be booked
 * to the next target on the same runtime. */
async function load() {
  // Each runtime's workerd processes, so that every round also measures
  // the CPU time each target costs per request (bench/cpu.mjs).
  const passthrough = () =>
    tracked(() => jsWorker({ name: "passthrough", modules: true, scriptPath: here + "passthrough.mjs", compatibilityDate: COMPAT }));
  // Sluice without the dashboard's assets: for them Miniflare puts two
  // JavaScript workers (its emulation of the platform's asset router) in
  // front of every request, which the baselines do not have and which a
  // deployment does not run in the worker. The routed target measures
  // Sluice behind them, as `wrangler dev` runs it.
  const sluice = async ({ assetRouter = false } = {}) => {
    const runtime = await tracked(() => Sluice.start({ sluice: BANNED_RULES, secrets: { API_TOKEN }, assetRouter }));
    return Object.assign(runtime, { url: runtime.base });
  };
  const js = (sweep = false) => tracked(() => jsWorker(baselineWorker({ compatibilityDate: COMPAT, sweep })));
  const banned = await sluice();
  for (let i = 0; i < 3; i++) await (await banned.fetch("/banned", { headers: { "X-Key": "villain" } })).arrayBuffer();
  const refusal = await banned.fetch("/banned", { headers: { "X-Key": "villain" } });
  if (refusal.status !== 429 || !(await refusal.text()).includes("banned")) throw new Error("the bench key is not banned");

  const decide = (script) => ({ path: "/_sluice/v1/limit", script, headers: [API_AUTH] });
  const targets = [
    ["pass-through worker, no limiter (the ceiling)", await passthrough(), { path: "" }],
    ["Sluice, decision API, a new key per request", await sluice(), decide("many-keys.lua")],
    ["Sluice, decision API, one hot key", await sluice(), decide("hot-key.lua")],
    ["Sluice, proxy rule, a banned key (isolate cache; 429s)", banned, { path: "/banned", headers: ["X-Key: villain"], refusals: true }],
    ["JavaScript Durable Object baseline, a new key per request", await js(), decide("many-keys.lua")],
    ["JavaScript Durable Object baseline, one hot key", await js(), decide("hot-key.lua")],
    ["JavaScript baseline that also frees an idle key's storage (one alarm per key), a new key per request", await js(true), decide("many-keys.lua")],
    ["Sluice behind Miniflare's asset router (as `wrangler dev` runs it), decision API, one hot key", await sluice({ assetRouter: true }), decide("hot-key.lua")],
    ["Sluice, decision API, one hot key, one object call per decision (`\"local\": false`)", await sluice(), decide("hot-key-per-call.lua")],
  ];
  // A second of each target's load before the rounds, not counted: a new
  // runtime compiles the wasm and makes its first objects on its first
  // requests.
  for (const [, runtime, { path, ...options }] of targets) wrk(runtime.url + path, { ...options, args: ["warm-up"], seconds: 1 });
  const results = targets.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    targets.forEach(([name, runtime, { path, ...options }], i) => {
      const before = cpuMs(runtime.pids);
      const result = wrk(runtime.url + path, { ...options, args: [`${round}`] });
      result.cpu = (cpuMs(runtime.pids) - before) / result.requests;
      // Every answer must be the one the target exists to measure: 200s,
      // or for the banned key, 429s only.
      if (result.errors || (options.refusals ? result.non2xx === 0 : result.non2xx > 0)) {
        throw new Error(`${name}: ${result.non2xx} non-2xx answers ${result.errors}`);
      }
      results[i].push(result);
      process.stderr.write(`bench: round ${round + 1}: ${name}: ${fmt(result.rps, 0)} req/s, ${fmt(result.cpu)} ms CPU per request\n`);
    });
  }
  await Promise.all(targets.map(([, runtime]) => runtime.stop()));

  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const rows = targets.map(([name], i) => ({
    name,
    rps: median(results[i].map((r) => r.rps)),
    p50: median(results[i].map((r) => r.p50)),
    p99: median(results[i].map((r) => r.p99)),
    cpu: median(results[i].map((r) => r.cpu)),
    spread: results[i].map((r) => fmt(r.rps, 0)).join(", "),
  }));
  const ceiling = rows[0];
  const lines = [
    "| target | requests/s | p50 | p99 | requests/s ÷ ceiling | p50 ÷ ceiling | p99 ÷ ceiling | workerd CPU per request | requests/s in each round |",
    "|---|---|---|---|---|---|---|---|---|",
  ];
  for (const row of rows) {
    const ratios = [row.rps / ceiling.rps, row.p50 / ceiling.p50, row.p99 / ceiling.p99].map((r) => fmt(r));
    lines.push(`| ${row.name} | ${fmt(row.rps, 0)} | ${fmt(row.p50)} ms | ${fmt(row.p99)} ms | ${ratios.join(" | ")} | ${fmt(row.cpu)} ms | ${row.spread} |`);
  }
  // Sluice against each baseline, from the medians above: requests per
  // second as measured, and the same from CPU time (baseline CPU ÷ Sluice
  // CPU), which a busy neighbour disturbs less.
  const [, newKey, hotKey, , jsNewKey, jsHotKey, sweptNewKey, routedHotKey, perCallHotKey] = rows;
  const versus = (ours, theirs) => `${fmt(ours.rps / theirs.rps)} | ${fmt(theirs.cpu / ours.cpu)}`;
  lines.push(
    "",
    "| Sluice ÷ baseline, same run | requests/s | by CPU per request |",
    "|---|---|---|",
    `| a new key per request ÷ the JavaScript baseline | ${versus(newKey, jsNewKey)} |`,
    `| a new key per request ÷ the baseline that frees idle keys | ${versus(newKey, sweptNewKey)} |`,
    `| one hot key (admission blocks) ÷ the JavaScript baseline | ${versus(hotKey, jsHotKey)} |`,
    `| one hot key, one object call per decision (\`"local": false\`) ÷ the JavaScript baseline | ${versus(perCallHotKey, jsHotKey)} |`,
    `| one hot key behind the asset router ÷ the JavaScript baseline | ${versus(routedHotKey, jsHotKey)} |`,
  );
  return lines.join("\n");
}

/** What one decision costs the key objects: the isolate-wide meter that
 * `inspect` call reports, read before and after each phase. */
async function costs() {
  const sluice = await Sluice.start({ sluice: BANNED_RULES, secrets: { ADMIN_TOKEN, API_TOKEN } });
  const meter = async () => (await sluice.inspect("bench:probe")).meter;
  const phase = async (name, n, send) => {
    const before = await meter();
    for (let i = 0; i < n; i++) await send(i);
    const after = await meter();
    const per = (field) => (after[field] - before[field] - (field === "requests" ? 1 : 0)) / n;
    return { name, requests: per("requests"), read: per("rows_read"), written: per("rows_written") };
  };
  const decide = async (key, limit, window_ms, local = false) => {
    const response = await sluice.post("/_sluice/v1/limit", { key, limit, window_ms, local });
    return response.json();
  };
  const N = 200;
  const rows = [];
  rows.push(await phase("admitted, a new key (creates its tables)", N, (i) => decide(`new-${i}`, 10, 60_000)));
  await decide("busy", 1_000_000, 60_000);
  rows.push(await phase("admitted, a busy key, one call each (`\"local\": false`)", N, () => decide("busy", 1_000_000, 60_000)));
  // A hot key far from its limit: decided from the isolate's admission
  // blocks, their grants and reports included (the reports of the blocks
  // still held are counted once they are sent, at most one lease later).
  await decide("hot", 1_000_000, 60_000, true);
  const hotStarted = performance.now();
  const fromBlocks = await phase("admitted from a block, a hot key (grants and reports included)", 1_000, () => decide("hot", 1_000_000, 60_000, true));
  // A block lasts at most a lease (1 s), so its cost per decision depends
  // on how fast this host sends them: the rate goes with the figures.
  const hotRate = 1_000 / ((performance.now() - hotStarted) / 1_000);
  rows.push(fromBlocks);
  await decide("full", 5, 600_000);
  for (let i = 0; i < 5; i++) await decide("full", 5, 600_000);
  rows.push(await phase("refused, a full key", N, () => decide("full", 5, 600_000)));
  const reserve = async (key, keep) => {
    const answer = await (await sluice.post("/_sluice/v1/limit", { key, limit: 1_000_000, window_ms: 60_000, reserve: true })).json();
    await (await sluice.post("/_sluice/v1/limit/settle", { key, reservation: answer.reservation, keep })).arrayBuffer();
  };
  await decide("reserved", 1_000_000, 60_000);
  rows.push(await phase("reserved then kept, a busy key (two calls)", N, () => reserve("reserved", true)));
  rows.push(await phase("reserved then refunded, a busy key (two calls)", N, () => reserve("reserved", false)));
  for (let i = 0; i < 3; i++) await (await sluice.fetch("/banned", { headers: { "X-Key": "villain" } })).arrayBuffer();
  rows.push(
    await phase("refused, a banned key (isolate cache)", N, async () => {
      await (await sluice.fetch("/banned", { headers: { "X-Key": "villain" } })).arrayBuffer();
    }),
  );

  // Alarm invocations per idle key: K keys admitted once with a short
  // window, then left alone until their objects have freed their storage.
  const K = 50;
  const before = await meter();
  for (let i = 0; i < K; i++) await decide(`idle-${i}`, 5, 300);
  const deadline = Date.now() + 30_000;
  for (let i = 0; i < K; i++) {
    while ((await sluice.inspect(`api:idle-${i}`)).has_storage) {
      if (Date.now() > deadline) throw new Error("idle keys were not swept");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const after = await meter();
  await sluice.stop();

  const lines = [
    "| decision | key object requests | SQLite rows read | SQLite rows written |",
    "|---|---|---|---|",
  ];
  for (const row of rows) lines.push(`| ${row.name} | ${fmt(row.requests)} | ${fmt(row.read)} | ${fmt(row.written)} |`);
  lines.push("");
  lines.push(
    `Admitted from a block, per 1 000 decisions sent one after another (${fmt(hotRate, 0)} a second, the key cold before): ` +
      `${fmt(fromBlocks.requests * 1_000, 0)} key-object requests, ${fmt(fromBlocks.written * 1_000, 0)} SQLite rows written.`,
  );
  lines.push("");
  lines.push(
    `Alarm invocations per idle key (${K} keys admitted once, 300 ms window, left until their storage was freed): ${fmt((after.alarms - before.alarms) / K)}.`,
  );
  return lines.join("\n");
}

/** Four isolates of Sluice's worker deciding for one key (issue 30), 50
 * clients for BENCH_SECONDS per phase: far from its limit, where the
 * isolates admit from blocks, and at its limit (300 per 3 s), where the
 * origin's clock judges exactness,
 * with blocks and without (`local = false`). The key-object calls are the
 * isolates' own counters (`GET /admin/stats`), read before and after each
 * phase. A refusal certainly had room left (issue 40) when fewer than
 * the limit of the admissions could have fallen in any window ending
 * between its send and its answer. */
async function severalIsolates() {
  const LIMIT = 300;
  const WINDOW_MS = 3_000;
  const CLIENTS = 50;
  const arrivals = new Map();
  const { server, url } = await okOrigin((req) => arrivals.set(req.headers["x-request"], Date.now()));
  const config = {
    origin: url,
    rules: [
      { id: "far", match: { path: "/far" }, key: "header:x-user", limit: 1_000_000, window: "10m" },
      { id: "hot", match: { path: "/hot" }, key: "header:x-user", limit: LIMIT, window: "3s" },
      { id: "off", match: { path: "/off" }, key: "header:x-user", limit: LIMIT, window: "3s", local: false },
    ],
  };
  // Four isolates beside the one that runs the objects, each on a socket
  // of its own (not through Miniflare's entry worker), as a deployment's
  // isolates call the objects' isolate.
  const names = ["isolate-1", "isolate-2", "isolate-3", "isolate-4"];
  const direct = { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] };
  const sluice = await Sluice.start({
    sluice: config,
    assetRouter: false,
    workers: names.map((name) => ({ ...anotherIsolate(name, { ADMIN_TOKEN, SLUICE: config }), ...direct })),
  });
  const urls = await Promise.all(names.map(async (name) => (await sluice.mf.unsafeGetDirectURL(name)).toString().replace(/\/$/, "")));
  const fetchers = urls.map((base) => (path, init) => fetch(base + path, init));
  const totals = async () => {
    const stats = await Promise.all(fetchers.map((fetcher) => isolateStats(fetcher, ADMIN_TOKEN)));
    return {
      calls: stats.reduce((n, s) => n + (s.object_calls.LIMITER ?? 0), 0),
      local: stats.reduce((n, s) => n + s.blocks.admitted, 0),
    };
  };
  let next = 0;
  const phase = async (path) => {
    const before = await totals();
    const answers = [];
    const started = Date.now();
    const end = started + SECONDS * 1_000;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (Date.now() < end) {
          const id = String(next++);
          const sent = Date.now();
          const response = await fetchers[Number(id) % fetchers.length](path, { headers: { "x-user": "flash-sale", "x-request": id } });
          await response.arrayBuffer();
          answers.push({ sent, answered: Date.now(), status: response.status, arrived: arrivals.get(id) });
        }
      }),
    );
    const seconds = (Date.now() - started) / 1_000;
    const after = await totals();
    const admitted = answers.filter((a) => a.status === 200);
    if (admitted.some((a) => a.arrived === undefined)) throw new Error(`${path}: an admission never reached the origin`);
    return { answers, admitted, seconds, calls: after.calls - before.calls, local: after.local - before.local };
  };
  const far = await phase("/far");
  const hot = await phase("/hot");
  const off = await phase("/off");
  await sluice.stop();
  server.close();

  const roomLeft = ({ answers, admitted }) => {
    const refused = answers.filter((a) => a.status === 429);
    const room = refused.filter((r) => admitted.filter((a) => a.arrived > r.sent - WINDOW_MS && a.sent <= r.answered).length < LIMIT);
    return fmt((room.length * 1_000) / answers.length, 1);
  };
  const row = (name, { answers, admitted, seconds, calls, local }, most, room) =>
    `| ${name} | ${answers.length.toLocaleString("en-US")} (${fmt(answers.length / seconds, 0)} a second) | ` +
    `${admitted.length.toLocaleString("en-US")} (${local.toLocaleString("en-US")} from blocks) | ${fmt((calls * 1_000) / answers.length, 0)} | ${most} | ${room} |`;
  const exact = (phase) => `${certainlyInOneWindow(phase.admitted, WINDOW_MS)} of ${LIMIT}`;
  return [
    `| one key, 4 isolates, ${CLIENTS} clients, ${SECONDS} s | decisions | admitted | key-object calls per 1 000 decisions | most admissions certainly in one window | refused with room left per 1 000 decisions |`,
    "|---|---|---|---|---|---|",
    row("far from its limit (1 000 000 per 10 min)", far, "–", "–"),
    row(`at its limit (${LIMIT} per 3 s)`, hot, exact(hot), roomLeft(hot)),
    row(`at its limit, no blocks (\`local = false\`)`, off, exact(off), roomLeft(off)),
  ].join("\n");
}

/** Milliseconds from starting the runtime to the first answer, best of 3. */
async function coldStart() {
  const health = [];
  const decision = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    const sluice = await Sluice.start({ secrets: { API_TOKEN } });
    const response = await sluice.fetch("/_sluice/health");
    await response.arrayBuffer();
    health.push(performance.now() - started);
    const first = performance.now();
    await (await sluice.post("/_sluice/v1/limit", { key: "cold", limit: 5, window_ms: 1000 })).json();
    decision.push(performance.now() - first);
    await sluice.stop();
  }
  const best = (xs) => Math.min(...xs);
  return [
    `| to the first response (\`GET /_sluice/health\`), from starting the runtime | ${fmt(best(health), 0)} ms |`,
    `| then the first decision (a new Durable Object and its SQLite) | ${fmt(best(decision), 1)} ms |`,
  ].join("\n");
}

/** Requests received by shared objects (the hubs) while 1 000 new keys are
 * decided, counted by the fault fixture standing in front of the hubs, and
 * the first answers of a new runtime while every hub hangs. */
async function shared() {
  const N = 1_000;
  const sluice = await Sluice.start({ faults: true, sluice: BANNED_RULES, secrets: { API_TOKEN } });
  await (await sluice.fetch("/_sluice/health")).arrayBuffer();
  const before = await sluice.faultCounts();
  const started = performance.now();
  for (let i = 0; i < N; i++) {
    await (await sluice.post("/_sluice/v1/limit", { key: `shared-${i}`, limit: 5, window_ms: 60_000 })).arrayBuffer();
  }
  const seconds = (performance.now() - started) / 1000;
  const after = await sluice.faultCounts();
  await sluice.stop();

  const hung = await Sluice.start({ faults: true, sluice: BANNED_RULES, secrets: { API_TOKEN } });
  await hung.fault("hang", "hub");
  const first = performance.now();
  await (await hung.post("/_sluice/v1/limit", { key: "cold-hung", limit: 5, window_ms: 1000 })).arrayBuffer();
  const firstMs = performance.now() - first;
  const next = performance.now();
  await (await hung.post("/_sluice/v1/limit", { key: "cold-hung", limit: 5, window_ms: 1000 })).arrayBuffer();
  const nextMs = performance.now() - next;
  await hung.stop();
  return [
    `| requests received by shared objects while ${N.toLocaleString("en-US")} new keys were decided (${fmt(seconds, 1)} s) | ${after.hubCalls - before.hubCalls} |`,
    `| the same, by the key objects | ${(after.calls - before.calls).toLocaleString("en-US")} |`,
    `| a new runtime's first decision while every hub hangs | ${fmt(firstMs, 1)} ms |`,
    `| its second decision | ${fmt(nextMs, 1)} ms |`,
  ].join("\n");
}

/** Waiting visitors refreshing the page: what a refresh costs and how
 * many of them reach a shard (the rest are answered from the isolate's
 * view of its shard, fresh for 2 s). Eight visitors hold the room's eight
 * places, one a shard; 64 wait, spread over the shards, and wrk sends
 * their tickets in turn. */
async function room() {
  const SHARDS = 8;
  const ADMIN = { Authorization: `Bearer ${ADMIN_TOKEN}` };
  const sluice = await tracked(() =>
    Sluice.start({
      sluice: { rules: [{ id: "shop", match: { path: "/shop/*" }, waiting_room: { active: SHARDS, per_minute: 600, shards: SHARDS, refresh: "20s", session: "1h" } }] },
      secrets: { ROOM_SECRET: `${ADMIN_TOKEN}-room`, ADMIN_TOKEN },
      assetRouter: false,
    }),
  );
  const tickets = [];
  for (let joined = 0; tickets.length < 64; joined++) {
    // Each from an address of its own: a room lets one address join 5
    // times a minute.
    const ip = `10.0.${joined >> 8}.${joined & 255}`;
    const response = await sluice.fetch("/shop/item", { headers: { accept: "application/json", "cf-connecting-ip": ip } });
    await response.arrayBuffer();
    if (response.status === 503) tickets.push(response.headers.getSetCookie()[0].split(";")[0]);
    else if (response.status !== 200) throw new Error(`joining the room answered ${response.status}`);
  }
  const calls = async () => {
    const report = await (await sluice.fetch("/_sluice/admin/rooms/shop", { headers: ADMIN })).json();
    if (report.unanswered > 0) throw new Error("a shard did not answer");
    return report.shards.reduce((sum, shard) => sum + shard.calls, 0);
  };
  const runs = [];
  for (let round = 0; round < ROUNDS; round++) {
    const before = await calls();
    const cpuBefore = cpuMs(sluice.pids);
    const result = wrk(`${sluice.base}/shop/item`, { script: "room-refresh.lua", args: tickets });
    result.cpu = (cpuMs(sluice.pids) - cpuBefore) / result.requests;
    // Each read of the figures is a call to every shard.
    result.calls = (await calls()) - before - SHARDS;
    if (result.errors || result.non2xx !== result.requests) {
      throw new Error(`room refreshes: ${result.non2xx} of ${result.requests} were waiting pages ${result.errors}`);
    }
    runs.push(result);
    process.stderr.write(`bench: round ${round + 1}: room refreshes: ${fmt(result.rps, 0)} req/s, ${result.calls} shard calls\n`);
  }
  await sluice.stop();
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const requests = runs.reduce((sum, r) => sum + r.requests, 0);
  const shardCalls = runs.reduce((sum, r) => sum + r.calls, 0);
  return [
    "| waiting visitors refreshing the page (64 tickets over 8 shards, one isolate) | |",
    "|---|---|",
    `| refreshes per second | ${fmt(median(runs.map((r) => r.rps)), 0)} (each round: ${runs.map((r) => fmt(r.rps, 0)).join(", ")}) |`,
    `| p50 / p99 | ${fmt(median(runs.map((r) => r.p50)))} ms / ${fmt(median(runs.map((r) => r.p99)))} ms |`,
    `| workerd CPU per refresh | ${fmt(median(runs.map((r) => r.cpu)))} ms |`,
    `| shard calls per 1,000 refreshes | ${fmt((1000 * shardCalls) / requests)} (${shardCalls} calls, ${requests.toLocaleString("en-US")} refreshes) |`,
  ].join("\n");
}

function wasmSize() {
  const path = root + "build/index_bg.wasm";
  const raw = statSync(path).size;
  const gzip = Number(execFileSync("sh", ["-c", `gzip -9 -c ${path} | wc -c`], { encoding: "utf8" }).trim());
  return `| \`build/index_bg.wasm\` | ${raw.toLocaleString("en-US")} B | ${gzip.toLocaleString("en-US")} B |`;
}

const [out] = process.argv.slice(2);
if (!out) {
  process.stderr.write("usage: node bench/workerd.mjs <out.json>\n");
  process.exit(2);
}
const all = { load, costs, isolates: severalIsolates, cold: coldStart, shared, room, wasm: wasmSize };
const chosen = (process.env.BENCH_SECTIONS ?? Object.keys(all).join(",")).split(",");
const unknown = chosen.filter((name) => !(name in all));
if (unknown.length > 0) throw new Error(`BENCH_SECTIONS: no section ${unknown.join(", ")}; there are ${Object.keys(all).join(", ")}`);
const sections = {};
for (const name of chosen) sections[name] = await all[name]();
writeFileSync(out, JSON.stringify(sections));
