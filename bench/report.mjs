// Writes the figures of one `npm run bench` into BENCHMARKS.md, between the
// markers `<!-- bench:start -->` and `<!-- bench:end -->`; the hand-written
// history around them (before and after of each change) stays.
//   node bench/report.mjs <criterion log> <workerd JSON> <split table> <room order table>
import { readFileSync, writeFileSync, readdirSync, existsSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { cpus } from "node:os";

const root = new URL("../", import.meta.url).pathname;
const [criterionLog, workerdJson, splitTable, roomOrder] = process.argv.slice(2).map((p) => readFileSync(p, "utf8"));
const workerd = JSON.parse(workerdJson);

/** Criterion's median for group/case/N, in a readable unit. */
function median(group, name, n) {
  const path = `${root}target/criterion/${group}/${name}/${n}/new/estimates.json`;
  if (!existsSync(path)) return null;
  return JSON.parse(readFileSync(path, "utf8")).median.point_estimate;
}
const time = (ns) => {
  if (ns === null) return "–";
  if (ns < 1_000) return `${ns.toFixed(1)} ns`;
  if (ns < 1_000_000) return `${(ns / 1_000).toFixed(1)} µs`;
  return `${(ns / 1_000_000).toFixed(2)} ms`;
};

const sizes = readdirSync(`${root}target/criterion/sliding_log/admit_steady`)
  .filter((d) => /^\d+$/.test(d))
  .map(Number)
  .sort((a, b) => a - b);
const groups = ["sliding_log", "fixed_window", "gcra", "governor_keyed"];
const header = `| check | ${sizes.map((n) => `N = ${n.toLocaleString("en-US")}`).join(" | ")} |`;
const rule = `|---|${sizes.map(() => "---").join("|")}|`;
const criterionRows = [];
for (const name of ["admit_steady", "refuse_full"]) {
  for (const group of groups) {
    criterionRows.push(`| \`${group}\` ${name} | ${sizes.map((n) => time(median(group, name, n))).join(" | ")} |`);
  }
}
criterionRows.push(`| \`sliding_log\` burst_same_ms (N checks) | ${sizes.map((n) => time(median("sliding_log", "burst_same_ms", n))).join(" | ")} |`);
const ratios = sizes.map((n) => {
  const ours = median("sliding_log", "admit_steady", n);
  const reference = median("governor_keyed", "admit_steady", n);
  return ours && reference ? (ours / reference).toFixed(2) : "–";
});
criterionRows.push(`| sliding_log admit ÷ governor admit | ${ratios.join(" | ")} |`);

const stateBytes = criterionLog
  .split("\n")
  .filter((line) => line.startsWith("  "))
  .filter((line) => /^\s+(sliding_log|fixed_window|gcra|governor)/.test(line))
  .map((line) => `- ${line.trim()}`)
  .join("\n");

const date = new Date().toISOString().slice(0, 10);
const machine = `${cpus().length} × ${cpus()[0].model.trim()}`;
const wrkVersion = execFileSync("sh", ["-c", "wrk -v 2>&1 | head -1"], { encoding: "utf8" }).trim();
const generated = `<!-- bench:start -->
## Latest run

Written by \`npm run bench\` (\`scripts/bench.sh\`) on ${date}, on ${machine}.
Every figure in this section comes from that one run.

### The algorithms on the host (criterion)

\`\`\`sh
cargo bench --bench algorithms -- --warm-up-time 1 --measurement-time 2
\`\`\`

Median time per check at limit N. governor's keyed GCRA, measured in the same
run, is the reference for what an in-memory check can cost; its figure
includes finding the key in its map, while Sluice's is the check on a key's
state alone (the key object finds the key in a hash map first).

${header}
${rule}
${criterionRows.join("\n")}

State per key:

${stateBytes}

### The worker on local workerd (wrk)

\`\`\`sh
taskset -c 0 node bench/workerd.mjs workerd.json   # wrk runs pinned to core 1
\`\`\`

${wrkVersion.replace(/ Copyright.*/, "")}; 1 thread, ${process.env.BENCH_CONNECTIONS ?? 32} connections, ${process.env.BENCH_SECONDS ?? 6} s per target
and round, ${process.env.BENCH_ROUNDS ?? 3} rounds that load every target in turn, each target in a
runtime of its own (all stay up),
each figure the median of its rounds; the runtime (Node and workerd) on core 0,
wrk on core 1. Runs of the same target can differ several-fold from one
round to the next on this shared machine; the last column shows each round.
The workerd CPU per request is the runtime's CPU time (user + system, from
\`/proc\`) during the target's rounds divided by the requests it answered:
time spent waiting for a core is not in it, so it is the steadier figure.
The baseline that frees idle keys is \`bench/js-sliding-log.mjs\` with
\`SWEEP\` set: it sets one alarm per key, as Sluice's key object must so
that an idle key costs 0 bytes; the committed baseline keeps every key's
rows forever. Keys ask for a ten-minute window, so no sweep fires inside
the run: what differs is arming the alarm. A runtime's CPU is counted over
its target's rounds, and no runtime serves two targets, so work one target
leaves behind (evicting its objects, collecting its garbage) is not booked
to another.

${workerd.load}

### Cost per decision

Counted by the key objects' isolate-wide meter (the \`inspect\` call to any Limiter
object; SQLite rows are the runtime's \`rowsRead\` and \`rowsWritten\`, which is
what Cloudflare bills), over 200 decisions each. Creating a table in a new
object's database is counted as two rows written; a key's life sends nothing
to any shared object.

${workerd.costs}

### Several isolates on one hot key

Sluice's worker as four isolates bound to the same key objects (Miniflare
runs each worker in an isolate of its own), with 50 clients in node sending
decisions for one key through the proxy, spread over the isolates. The
origin records each admission's arrival: an admission was decided between
its send and its arrival, so the last column counts the admissions that
certainly fell in one 3 s window, which must never exceed the limit.

${workerd.isolates}

### Shared objects

The hubs sit behind the fault fixture (\`tests/e2e/fixtures/faulty-limiter.mjs\`),
which counts the calls that reach them. Before the hubs, every new key cost
two requests to the single registry (live, then empty): about 2 000 per
1 000 keys.

| | |
|---|---|
${workerd.shared}

### Cold start and size

| | |
|---|---|
${workerd.cold}

| release build | raw | gzip -9 |
|---|---|---|
${workerd.wasm}

### Waiting rooms

Waiting visitors' refreshes are answered from the isolate's view of their
shard (fresh for 2 s; while one request asks a shard, the others use the
view they have), so only one call per shard per 2 s reaches a shard
whatever the number of refreshes; the shards count the calls they serve
(\`GET {prefix}/admin/rooms/{rule}\`, \`calls\`), read before and after
each round.

${workerd.room}

How far from arrival order the shards call visitors (seeded, so every run
prints the same table; see docs/algorithms.md, "Waiting rooms"):

\`\`\`sh
cargo run --release --example room_order
\`\`\`

${roomOrder.trim()}

### The price of splitting a global quota

\`\`\`sh
cargo run --release --example split_price
\`\`\`

${splitTable.trim()}
<!-- bench:end -->`;

const path = `${root}BENCHMARKS.md`;
const current = readFileSync(path, "utf8");
const start = current.indexOf("<!-- bench:start -->");
const end = current.indexOf("<!-- bench:end -->");
const next =
  start >= 0 && end > start
    ? current.slice(0, start) + generated + current.slice(end + "<!-- bench:end -->".length)
    : `${current.trimEnd()}\n\n${generated}\n`;
writeFileSync(path, next);
process.stderr.write(`bench: wrote ${path}\n`);
