// What a new key costs the runtime, Sluice against the JavaScript baseline:
// workerd's CPU time (user + system, from /proc) per decision while wrk
// sends a new key per request, and the requests per second beside it.
// CPU time per request is the steadier figure on a shared machine
// (bench/cpu.mjs).
//   taskset -c 0 node bench/new-key-cpu.mjs [build dir ...]   (default: build)
// Several build directories (each a copy of build/, from scripts/build.sh)
// run side by side, each in its own runtime, with the baseline in a third:
// every round loads each in turn, so an A/B comparison shares the machine's
// slow and fast moments. BENCH_ROUNDS (6) and BENCH_SECONDS (5) as in
// bench/workerd.mjs. BENCH_SCRIPT=hot-key.lua measures one hot key
// instead of new keys: what every decision costs beyond making an object.
// The baseline runs twice: as committed, and with SWEEP, freeing an idle
// key's storage with one alarm as Sluice's key object does. Linux only.
import { Miniflare } from "miniflare";
import { unstable_getMiniflareWorkerOptions, unstable_readConfig } from "wrangler";
import { execFileSync } from "node:child_process";
import { availableParallelism, devNull } from "node:os";
import { join, resolve } from "node:path";
import { API_TOKEN } from "../tests/e2e/harness.mjs";
import { baselineWorker } from "./baseline.mjs";
import { cpuMs, tracked } from "./cpu.mjs";

const here = new URL("./", import.meta.url).pathname;
const root = new URL("../", import.meta.url).pathname;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const SCRIPT = process.env.BENCH_SCRIPT ?? "many-keys.lua";
const builds = process.argv.slice(2).length > 0 ? process.argv.slice(2) : [join(root, "build")];

/** Starts a runtime with `workerOptions`; answers its URL, its workerd pids and how to stop it. */
function start(workerOptions) {
  return tracked(async () => {
    const mf = new Miniflare({ workers: [workerOptions], host: "127.0.0.1", port: 0 });
    const url = (await mf.ready).toString().replace(/\/$/, "");
    return { url, stop: () => mf.dispose() };
  });
}

const config = unstable_readConfig({ config: join(root, "wrangler.toml") });
const { workerOptions } = unstable_getMiniflareWorkerOptions(config, undefined, { envFiles: [devNull] });
// Without the dashboard's assets, as bench/workerd.mjs measures Sluice:
// they put Miniflare's asset router in front of every request.
delete workerOptions.assets;
const declared = new Set(Object.keys(config.vars ?? {}));
const bindings = Object.fromEntries(Object.entries(workerOptions.bindings ?? {}).filter(([name]) => declared.has(name)));
const targets = [];
for (const dir of builds) {
  const build = resolve(dir);
  const runtime = await start({
    ...workerOptions,
    name: "sluice",
    rootPath: root,
    modulesRoot: build,
    scriptPath: join(build, "index.js"),
    modules: true,
    bindings: { ...bindings, API_TOKEN, SLUICE: { origin: "demo", rules: [] } },
  });
  targets.push({ name: `Sluice (${dir})`, ...runtime });
}
const { compatibilityDate } = workerOptions;
targets.push({ name: "JavaScript baseline", ...(await start(baselineWorker({ compatibilityDate }))) });
targets.push({
  name: "JavaScript baseline that frees idle keys (one alarm per key)",
  ...(await start(baselineWorker({ compatibilityDate, sweep: true }))),
});
if (process.env.BENCH_FLOOR === "1") {
  const floor = { name: "floor", modules: true, scriptPath: here + "floor.mjs", compatibilityDate, bindings: { API_TOKEN } };
  targets.push({ name: "floor: the answer, no decision (bench/floor.mjs)", ...(await start(floor)) });
}

for (const target of targets) {
  const probe = await fetch(`${target.url}/_sluice/v1/limit`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${API_TOKEN}` },
    body: JSON.stringify({ key: "probe", limit: 100, window_ms: 60000 }),
  });
  if (probe.status !== 200) throw new Error(`${target.name} answered ${probe.status}: ${await probe.text()}`);
}

const pinned = availableParallelism() > 1 ? ["taskset", "-c", "1", "wrk"] : ["wrk"];
const results = targets.map(() => []);
for (let round = 0; round < ROUNDS; round++) {
  targets.forEach((target, i) => {
    const before = cpuMs(target.pids);
    const args = ["-t1", "-c32", `-d${SECONDS}s`, "-H", `Authorization: Bearer ${API_TOKEN}`, "-s", here + SCRIPT];
    const out = execFileSync(pinned[0], [...pinned.slice(1), ...args, `${target.url}/_sluice/v1/limit`, "--", `cpu-${process.pid}-${round}`], { encoding: "utf8" });
    const requests = Number(out.match(/(\d+) requests in/)[1]);
    const non2xx = Number(out.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0);
    if (non2xx > 0) throw new Error(`${target.name}: ${non2xx} non-2xx answers`);
    const result = { rps: requests / SECONDS, cpu: (cpuMs(target.pids) - before) / requests };
    results[i].push(result);
    process.stderr.write(`new-key-cpu: round ${round + 1}: ${target.name}: ${result.rps.toFixed(0)} req/s, ${result.cpu.toFixed(2)} ms CPU per request\n`);
  });
}
await Promise.all(targets.map((target) => target.stop()));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
// The table goes to stderr: stdout belongs to Miniflare and workerd.
const table = ["| target | workerd CPU per request (median) | requests/s (median) | CPU per request in each round |", "|---|---|---|---|"];
targets.forEach((target, i) => {
  const cpu = median(results[i].map((r) => r.cpu));
  const rps = median(results[i].map((r) => r.rps));
  const rounds = results[i].map((r) => r.cpu.toFixed(2)).join(", ");
  table.push(`| ${target.name} | ${cpu.toFixed(2)} ms | ${rps.toFixed(0)} | ${rounds} ms |`);
});
process.stderr.write(`${table.join("\n")}\n`);
