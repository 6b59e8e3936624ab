// `npm run sale`: Sluice started as `npm run dev` starts it
// (scripts/dev.sh: wrangler dev, the same build, the demo origin) with a
// sale's rules, and a rehearsal against it. It checks the promise: exactly
// the stock is sold, and nobody gets more than their limit; otherwise it
// exits non-zero. docs/flash-sale.md turns the figures into a recipe.
//
// By default a whole drop (scripts/drop.mjs): visitors with cookie jars
// through a waiting room with a pre-queue, to a checkout with its stock.
// With --sizing, the load a split is sized with: one stacked rule, "1 per
// buyer per window under a global quota split into K parts", and
// autocannon (from npm) sending every buyer's attempts.
//
//   npm run sale [-- --visitors 300 --stock 100 ...]
//   npm run sale -- --sizing [--buyers 2000 --attempts 3 --quota 500 --split 8 ...]
//
// Every process it starts (wrangler and the workerd it runs) is in one
// process group, stopped by its id when the sale is over.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { dropConfig, dropOptions, rehearse, summary } from "./drop.mjs";

const root = new URL("../", import.meta.url).pathname;
const PREFIX = "/_sluice";
const RULE = "checkout";
const LAYER = "all";

const OPTIONS = {
  buyers: { default: "2000", help: "distinct buyers (x-user)" },
  attempts: { default: "3", help: "requests each buyer sends, back to back" },
  quota: { default: "500", help: "the global quota: what the sale has to sell" },
  split: { default: "8", help: "K, the parts the global quota is split into" },
  "per-user": { default: "1", help: "what one buyer may buy in a window" },
  window: { default: "10m", help: "both layers' window; the sale must end within it" },
  connections: { default: "16", help: "concurrent connections (autocannon)" },
  "start-timeout": { default: "180", help: "seconds to wait for npm run dev to answer (it may build first)" },
};

function usage(options = OPTIONS, command = "npm run sale -- --sizing [options]") {
  const lines = Object.entries(options).map(([name, { default: d, help }]) => `  --${name} <n>`.padEnd(26) + `${help} (${d})`);
  return `usage: ${command}\n${lines.join("\n")}\n`;
}

function options(args) {
  const { values } = parseArgs({
    args,
    options: { ...Object.fromEntries(Object.entries(OPTIONS).map(([name, { default: d }]) => [name, { type: "string", default: d }])), help: { type: "boolean" } },
  });
  if (values.help) {
    process.stdout.write(usage());
    process.exit(0);
  }
  const whole = (name, min) => {
    const value = Number(values[name]);
    if (!Number.isInteger(value) || value < min) throw new Error(`--${name}: ${values[name]} is not a whole number of at least ${min}\n${usage()}`);
    return value;
  };
  const o = {
    buyers: whole("buyers", 1),
    attempts: whole("attempts", 1),
    quota: whole("quota", 1),
    split: whole("split", 1),
    perUser: whole("per-user", 1),
    connections: whole("connections", 1),
    startTimeoutS: whole("start-timeout", 1),
    window: values.window,
  };
  const ms = /^(\d+)(s|m|h)$/.exec(o.window);
  if (!ms) throw new Error(`--window: ${o.window} is not a duration such as 90s, 1m or 1h`);
  o.windowMs = Number(ms[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[ms[2]];
  return o;
}

/** The rule a flash sale needs, as a config would say it (README's tour). */
function config(o) {
  return {
    prefix: PREFIX,
    origin: "demo",
    rules: [
      {
        id: RULE,
        match: { path: "/checkout", methods: ["POST"] },
        key: "header:x-user",
        limit: o.perUser,
        window: o.window,
        also: [{ id: LAYER, scope: "global", split: o.split, limit: o.quota, window: o.window }],
      },
    ],
  };
}

/** A port nobody listens on now (the OS picks it). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** `npm run dev`'s script with the sale's config, tokens and state of its
 * own: `--var SLUICE:<json>` replaces wrangler.toml's rules, `--env-file`
 * gives the admin token (and keeps the developer's .dev.vars out), and
 * `--persist-to` a fresh directory, so no earlier run's admissions count. */
async function launch(sluice, dir) {
  const token = randomBytes(32).toString("hex");
  const envFile = join(dir, "sale.env");
  writeFileSync(envFile, `ADMIN_TOKEN=${token}\nROOM_SECRET=${randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
  const [port, inspector] = [await freePort(), await freePort()];
  const log = join(dir, "dev.log");
  const args = [
    join(root, "scripts/dev.sh"),
    "--env-file", envFile,
    "--var", `SLUICE:${JSON.stringify(sluice)}`,
    "--persist-to", join(dir, "state"),
    "--inspector-port", String(inspector),
    "--show-interactive-dev-session=false",
  ];
  const out = openSync(log, "w");
  const child = spawn("bash", args, {
    cwd: root,
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", out, out],
    // Its own process group: wrangler, npx and workerd stop with it.
    detached: true,
  });
  const dev = {
    base: `http://127.0.0.1:${port}`,
    token,
    pid: child.pid,
    exited: null,
    log: () => readFileSync(log, "utf8"),
    /** Stops the process group by its id (SIGTERM, then SIGKILL after
     * 5 s) and waits until none of its processes is left. */
    async stop() {
      const alive = () => {
        try {
          process.kill(-child.pid, 0);
          return true;
        } catch (e) {
          if (e.code === "ESRCH") return false;
          throw e;
        }
      };
      for (const signal of ["SIGTERM", "SIGKILL"]) {
        if (!alive()) return;
        process.kill(-child.pid, signal);
        const deadline = Date.now() + 5000;
        while (alive() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
  };
  child.on("exit", (code, signal) => (dev.exited = { code, signal }));
  return dev;
}

/** Waits until `npm run dev` serves the sale, or fails with its log. */
async function ready(dev, o) {
  const deadline = Date.now() + o.startTimeoutS * 1000;
  for (;;) {
    if (dev.exited) throw new Error(`npm run dev exited (${JSON.stringify(dev.exited)}) before answering:\n${tail(dev.log())}`);
    // Once its watcher on src/ is ready, wrangler runs the build again
    // (README), and if the server had started by then it reloads the
    // worker: a new isolate, and requests in flight answered 503. So the
    // server is ready for the sale once it started after that build, or
    // reloaded after it; wrangler's log is the only place that says so.
    if (/restarting build[\s\S]*(Starting local server|Local server updated and ready)/.test(dev.log())) {
      try {
        const health = await fetch(`${dev.base}${PREFIX}/health`);
        await health.arrayBuffer();
        if (health.ok) return dev;
      } catch {
        // not listening yet
      }
    }
    if (Date.now() > deadline) throw new Error(`npm run dev did not answer within ${o.startTimeoutS} s:\n${tail(dev.log())}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The last lines of a log, leaving out wrangler's line per request. */
function tail(log, lines = 40) {
  return log.split("\n").filter((line) => !/^\[wrangler:info\] (GET|POST) /.test(line)).slice(-lines).join("\n");
}

async function admin(dev, path) {
  const response = await fetch(`${dev.base}${PREFIX}/admin${path}`, { headers: { authorization: `Bearer ${dev.token}` } });
  const body = await response.json();
  if (!response.ok) throw new Error(`GET ${PREFIX}/admin${path} answered ${response.status}: ${JSON.stringify(body)}`);
  return body;
}

/** Key-object calls the isolate has made since it started
 * (`/admin/stats`, `isolate.object_calls`). `wrangler dev` runs one
 * isolate, so this is every call the sale cost. */
async function limiterCalls(dev) {
  return (await admin(dev, "/stats")).isolate.object_calls.LIMITER ?? 0;
}

/** The calls the requests started in the background (a per-user layer's
 * keep or refund lands after its answer) have all been made once the count
 * stops moving. */
async function settledCalls(dev) {
  let last = await limiterCalls(dev);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const now = await limiterCalls(dev);
    if (now === last) return now;
    last = now;
  }
}

/** Every buyer's attempts, back to back (a buyer pressing "buy" again
 * while the first press is in flight), buyer after buyer: request i is
 * buyer i / attempts's. */
async function load(dev, o) {
  const total = o.buyers * o.attempts;
  const answers = [];
  let next = 0;
  const result = await autocannon({
    url: `${dev.base}/checkout`,
    connections: Math.min(o.connections, total),
    amount: total,
    timeout: 30,
    requests: [
      {
        method: "POST",
        setupRequest(request, context) {
          const i = next++;
          context.buyer = `buyer-${Math.floor(i / o.attempts)}`;
          context.sent = performance.now();
          return { ...request, headers: { ...request.headers, "x-user": context.buyer } };
        },
        onResponse(status, body, context) {
          answers.push({ buyer: context.buyer, sent: context.sent, received: performance.now(), status, body });
        },
      },
    ],
  });
  return { result, answers, sent: next };
}

/** What each answer was: admitted, refused by which layer, lost by the
 * local runtime, or something else. */
function classify(answer) {
  if (answer.status === 200) return "admitted";
  // wrangler's proxy gives up on a request when its connection to the
  // worker's runtime fails (it happens here when the machine is
  // overloaded); the request may or may not have been decided.
  if (answer.status === 503 && answer.body.startsWith("Your worker restarted mid-request")) return "lost";
  if (answer.status === 429) {
    try {
      const violated = JSON.parse(answer.body)["violated-policies"] ?? [];
      if (violated.length === 1 && violated[0] === RULE) return "per-user";
      if (violated.length === 1 && violated[0] === `${RULE}.${LAYER}`) return "global";
    } catch {
      // not a problem body: something else
    }
  }
  return "other";
}

/** "503 unavailable: 2, 500: 1" */
function breakdown(answers) {
  const counts = new Map();
  for (const { status, body } of answers) {
    let code = "";
    try {
      code = JSON.parse(body).code ?? "";
    } catch {
      // not a problem body
    }
    const label = `${status}${code ? ` ${code}` : ""}`;
    counts.set(label, (counts.get(label) ?? 0) + 1);
  }
  return [...counts].map(([label, n]) => `${label}: ${n}`).join(", ");
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
const fmt = (n, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Prints the figures, one `name: value` a line, and answers what failed. */
function report(o, { result, answers, sent }, calls, sold) {
  const kinds = { admitted: [], "per-user": [], global: [], lost: [], other: [] };
  for (const answer of answers) kinds[classify(answer)].push(answer);
  // A request whose connection the runtime dropped is sent again by
  // autocannon as a new one; it was never answered.
  const lost = kinds.lost.length + (sent - answers.length);
  const admitted = kinds.admitted;
  const perBuyer = new Map();
  for (const a of admitted) perBuyer.set(a.buyer, (perBuyer.get(a.buyer) ?? 0) + 1);
  const overLimit = [...perBuyer.values()].filter((n) => n > o.perUser).length;
  // The sale ends within the window, so the quota only fills: a refusal
  // had room left if an admission was decided after it. One certainly
  // was if the refusal was answered before that admission was even sent;
  // none was once the last admission had been answered. Refusals in
  // between raced the last admissions.
  const lastAdmissionSent = Math.max(...admitted.map((a) => a.sent));
  const lastAdmissionAnswered = Math.max(...admitted.map((a) => a.received));
  const roomCertain = kinds.global.filter((r) => r.received < lastAdmissionSent).length;
  const roomAtMost = kinds.global.filter((r) => r.sent < lastAdmissionAnswered).length;
  const latencies = answers.map((a) => a.received - a.sent).sort((x, y) => x - y);
  const seconds = result.duration;
  const lines = [
    `sale: ${fmt(o.buyers)} buyers x ${o.attempts} attempts, quota ${fmt(o.quota)} split ${o.split}, ${o.perUser} per buyer per ${o.window}, ${o.connections} connections, through npm run dev (wrangler dev)`,
    `requests: ${sent}`,
    `admitted: ${admitted.length}`,
    `admitted, by the quota's parts: ${sold}`,
    `buyers admitted more than ${o.perUser}: ${overLimit}`,
    `refused by the per-user layer (${RULE}): ${kinds["per-user"].length}`,
    `refused by the global layer (${RULE}.${LAYER}): ${kinds.global.length}`,
    `refused by the global layer with room left: ${roomCertain} certain, ${roomAtMost} at most`,
    `other answers: ${kinds.other.length}${kinds.other.length > 0 ? ` (${breakdown(kinds.other)})` : ""}`,
    `answers lost by the local runtime: ${lost}`,
    `latency p50: ${fmt(percentile(latencies, 50), 2)} ms`,
    `latency p99: ${fmt(percentile(latencies, 99), 2)} ms`,
    `requests per second: ${fmt(answers.length / seconds, 0)}`,
    `duration: ${fmt(seconds, 1)} s`,
    `key object calls: ${calls}`,
    `key object calls per 1,000 requests: ${fmt((1000 * calls) / sent, 0)}`,
  ];
  process.stdout.write(lines.join("\n") + "\n");

  const failures = [];
  if (sold !== o.quota) failures.push(`the quota's parts admitted ${sold}, not the quota ${o.quota}`);
  // An admission whose answer was lost is in the parts' count only.
  if (admitted.length > sold || admitted.length < sold - lost) {
    failures.push(`the buyers were answered ${admitted.length} admissions, the quota's parts hold ${sold} (${lost} answers lost)`);
  }
  if (overLimit > 0) failures.push(`${overLimit} buyers were admitted more than ${o.perUser}`);
  if (seconds * 1000 >= o.windowMs) failures.push(`the sale took ${fmt(seconds, 1)} s, not less than the window (${o.window}): give it a longer --window`);
  return failures;
}

/** The sizing load: every buyer's attempts through autocannon. */
async function sizing(args, dir, started) {
  const o = options(args);
  if (o.buyers * o.perUser < o.quota) throw new Error(`--buyers ${o.buyers} at --per-user ${o.perUser} cannot buy the --quota ${o.quota}: nothing would sell out`);
  const dev = await started(config(o), o);
  const before = await settledCalls(dev);
  process.stderr.write(`sale: ${o.buyers * o.attempts} requests from ${o.buyers} buyers...\n`);
  const run = await load(dev, o);
  const calls = (await settledCalls(dev)) - before;
  // The whole quota, its parts added up (read after the calls above:
  // reading it calls each part).
  const whole = await admin(dev, `/keys/${RULE}.${LAYER}/*`);
  return report(o, run, calls, whole.slots[0].used);
}

/** A whole drop: the room opens `--lead` seconds after npm run dev is
 * started, and the visitors who come early wait in its pre-queue. */
async function drop(args, dir, started) {
  const o = dropOptions(args, usage);
  const opensAt = Date.now() + o.leadS * 1000;
  const dev = await started(dropConfig(o, opensAt), o);
  if (Date.now() > opensAt - 2000) throw new Error(`npm run dev took longer to start than --lead ${o.leadS}: give it a longer --lead`);
  process.stderr.write(`sale: ${o.visitors} visitors; the room opens at ${new Date(opensAt).toISOString()}...\n`);
  const logs = await rehearse(o, dev.base, opensAt);
  const whole = await admin(dev, "/keys/checkout.stock/*");
  const { lines, failures } = summary(o, logs, whole.slots[0].used, opensAt);
  process.stdout.write(lines.join("\n") + "\n");
  return failures;
}

async function main() {
  const args = process.argv.slice(2);
  const run = args.includes("--sizing") ? sizing : drop;
  const dir = mkdtempSync(join(tmpdir(), "sluice-sale-"));
  let dev;
  const stop = async () => {
    if (dev) {
      await dev.stop();
      process.stderr.write(`sale: stopped npm run dev (process group ${dev.pid})\n`);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("SIGINT", async () => {
    await stop();
    process.exit(130);
  });
  const started = async (sluice, o) => {
    process.stderr.write("sale: starting npm run dev with the sale's rules...\n");
    dev = await launch(sluice, dir);
    await ready(dev, o);
    process.stderr.write(`sale: npm run dev answers on ${dev.base}, process group ${dev.pid}\n`);
    return dev;
  };
  try {
    const failures = await run(args.filter((a) => a !== "--sizing"), dir, started);
    for (const failure of failures) process.stderr.write(`sale: FAILED: ${failure}\n`);
    if (failures.length > 0 && dev) process.stderr.write(`sale: the end of npm run dev's log:\n${tail(dev.log())}\n`);
    process.exitCode = failures.length > 0 ? 1 : 0;
  } finally {
    await stop();
  }
}

main().catch((e) => {
  process.stderr.write(`sale: ${e.message}\n`);
  process.exit(1);
});
