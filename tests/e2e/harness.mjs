// Runs the built worker (build/index.js) on workerd through Miniflare and
// talks HTTP to it. Bindings, Durable Objects and compatibility settings come
// from wrangler.toml, so the tests cannot drift from the deployed config; a
// test may replace the SLUICE var to exercise other rules.
//
// Hermetic: the worker gets the vars wrangler.toml declares and the secrets
// the test passes, nothing else. Not the developer's .dev.vars or .env files
// (wrangler reads them next to wrangler.toml and announces them on stdout),
// not process.env (CLOUDFLARE_INCLUDE_PROCESS_ENV), not an [env.*] section
// (CLOUDFLARE_ENV); state is in memory or in a directory the test made, and
// the runtime listens on a port the OS picks.
import { Miniflare } from "miniflare";
import { unstable_getMiniflareWorkerOptions, unstable_readConfig } from "wrangler";
import { mkdtempSync, rmSync } from "node:fs";
import { devNull, tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { createServer, request as httpRequest } from "node:http";

const root = new URL("../../", import.meta.url).pathname;

/** A decision-API token for tests that pass it as the `API_TOKEN` secret
 * (`secrets: { API_TOKEN }`). */
export const API_TOKEN = "sluice-e2e-api-token-0123456789abcdef";

/** The var that shortens an isolate's report and state-read intervals
 * (10 s deployed; src/isolate/report.rs) for a test that would otherwise
 * wait one out: `Sluice.start({ intervalMs })` sets it, and a test passes
 * it to `anotherIsolate` itself. */
export const INTERVAL_VAR = "SLUICE_TEST_INTERVAL_MS";

/** wrangler's settings from the environment, as the harness needs them while
 * it reads the config: no environment section, no process.env as secrets,
 * no .env files as secrets. */
const WRANGLER_ENV = {
  CLOUDFLARE_ENV: undefined,
  CLOUDFLARE_INCLUDE_PROCESS_ENV: undefined,
  CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "false",
};

/** The worker options wrangler.toml gives, and nothing from elsewhere. */
function workerOptionsFromConfig() {
  const saved = Object.fromEntries(Object.keys(WRANGLER_ENV).map((name) => [name, process.env[name]]));
  try {
    for (const [name, value] of Object.entries(WRANGLER_ENV)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    const config = unstable_readConfig({ config: join(root, "wrangler.toml") });
    // A non-empty envFiles makes wrangler skip .dev.vars; with .env loading
    // off above it reads none of them (and the one named is empty anyway).
    const { workerOptions } = unstable_getMiniflareWorkerOptions(config, undefined, { envFiles: [devNull] });
    // Whatever a future wrangler adds on its own, only declared vars pass.
    const declared = new Set(Object.keys(config.vars ?? {}));
    const bindings = Object.fromEntries(Object.entries(workerOptions.bindings ?? {}).filter(([name]) => declared.has(name)));
    return { ...workerOptions, bindings };
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** Sluice's built worker as Miniflare runs it: wrangler.toml's options, the
 * built script, and `extra` bindings (secrets, a SLUICE config) beside the
 * declared vars. The bench's profiler starts the same worker. */
export function sluiceWorkerOptions(extra = {}) {
  const workerOptions = workerOptionsFromConfig();
  return {
    ...workerOptions,
    name: "sluice",
    rootPath: root,
    // Module names are paths relative to modulesRoot, which would default
    // to the working directory: the runtime would fail to start when the
    // tests are run from anywhere but the repository root.
    modulesRoot: root,
    scriptPath: join(root, "build/index.js"),
    modules: true,
    bindings: { ...workerOptions.bindings, ...extra },
  };
}

/** How a kept-alive connection the local runtime closed shows to the
 * client that reused it: "other side closed", or a reset while reading. */
const CLOSED_UNDER_US = new Set(["UND_ERR_SOCKET", "ECONNRESET"]);

/** Another isolate of Sluice's worker, named `name`, with `extra`
 * bindings: every Durable Object binding points at the first worker's
 * classes (`sluice`), so both decide with the same objects, while
 * Miniflare runs each worker in an isolate of its own (its own refusal
 * cache, ban list and states). Pass it in `Sluice.start({ workers })`. */
export function anotherIsolate(name, extra = {}) {
  const options = sluiceWorkerOptions(extra);
  const durableObjects = Object.fromEntries(
    Object.entries(options.durableObjects).map(([binding, target]) => [binding, { ...target, scriptName: "sluice" }]),
  );
  delete options.assets;
  return { ...options, name, durableObjects };
}

/** `fetch`, with a GET or HEAD sent again once when the local runtime had
 * closed the kept-alive connection the client reused (it closes idle ones,
 * and one after an answer whose request body was never read), as HTTP lets
 * a client resend an idempotent request and browsers do: the runtime closed
 * that connection without reading the request on it. Fresh-clone runs hit
 * it under load (admin reads, a room's visitors, a flood). Anything else
 * fails as it did. */
function once(url, init) {
  const method = (init.method ?? "GET").toUpperCase();
  return method === "GET" || method === "HEAD" ? resending(() => fetch(url, init)) : fetch(url, init);
}

/** Runs `call`, and again (up to `times` more) when the local runtime had
 * closed the kept-alive connection the client reused; `onResend` is told
 * each time. Only for a call that may run twice: the first may have been
 * counted before the connection closed. */
export async function resending(call, times = 1, onResend = () => {}) {
  for (let tries = 0; ; tries += 1) {
    try {
      return await call();
    } catch (e) {
      // fetch's error has the socket's as its cause; fetchAlone's is it.
      if (tries >= times || !CLOSED_UNDER_US.has(e.cause?.code ?? e.code)) throw e;
      onResend();
    }
  }
}

/** `fetch` over a connection of its own, closed once answered. For calls
 * the local runtime answers without reading their body (a 401): it then
 * closes the connection, and a kept-alive one may be reused by the next
 * call just as it closes. A connection nobody reuses cannot be. */
export function fetchAlone(url, { method = "GET", headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const sent = httpRequest(url, { method, headers: { ...headers, connection: "close" }, agent: false }, (answer) => {
      const chunks = [];
      answer.on("data", (chunk) => chunks.push(chunk));
      answer.on("error", reject);
      answer.on("end", () => {
        const fields = new Headers();
        for (const [name, value] of Object.entries(answer.headers)) {
          for (const one of [value].flat()) fields.append(name, one);
        }
        const bodyless = [101, 204, 205, 304].includes(answer.statusCode);
        resolve(new Response(bodyless ? null : Buffer.concat(chunks), { status: answer.statusCode, headers: fields }));
      });
    });
    sent.on("error", reject);
    sent.end(body);
  });
}

export class Sluice {
  /**
   * @param {{sluice?: object, persist?: string, secrets?: object, faults?: boolean, workers?: object[], port?: number, assetRouter?: boolean, intervalMs?: number}} options
   * When `secrets` holds `API_TOKEN`, `fetch` and `post` send it as a bearer
   * token on calls under `/v1/` that carry no `Authorization` of their own,
   * as a client of the decision API would. `workers` adds Workers of the
   * test's own (Miniflare worker options) next to Sluice, e.g. one with a
   * service binding to it (`serviceBindings: { SLUICE: "sluice" }`);
   * `worker(name)` reaches them. `faults` binds LIMITER, HUB and ROOM to tests/e2e/fixtures/faulty-limiter.mjs,
   * which passes calls through to the real objects or injects failures.
   * `assetRouter: false` leaves out the dashboard's static assets, and with
   * them the two JavaScript workers Miniflare puts in front of Sluice to
   * route requests as the platform does (the benchmarks measure Sluice
   * without them, as they measure the baselines: see BENCHMARKS.md).
   * `intervalMs` shortens the isolate's report and state-read intervals
   * ([`INTERVAL_VAR`]); without it they are the deployed 10 s.
   * `serviceBindings` adds bindings to workers of `workers` (a stand-in
   * for a binding the local runtime only simulates).
   */
  static async start(options = {}) {
    const extra = { ...(options.secrets ?? {}) };
    if (options.intervalMs !== undefined) extra[INTERVAL_VAR] = String(options.intervalMs);
    if (options.sluice !== undefined) extra.SLUICE = withOrigin(options.sluice);
    const sluiceWorker = sluiceWorkerOptions(extra);
    if (options.assetRouter === false) delete sluiceWorker.assets;
    if (options.serviceBindings) sluiceWorker.serviceBindings = { ...sluiceWorker.serviceBindings, ...options.serviceBindings };
    const workers = [sluiceWorker];
    if (options.faults) {
      sluiceWorker.durableObjects = {
        ...sluiceWorker.durableObjects,
        LIMITER: { className: "FaultyLimiter", scriptName: "faults" },
        HUB: { className: "FaultyHub", scriptName: "faults" },
        ROOM: { className: "FaultyRoom", scriptName: "faults" },
      };
      workers.push({
        name: "faults",
        modules: true,
        modulesRoot: root,
        scriptPath: join(root, "tests/e2e/fixtures/faulty-limiter.mjs"),
        compatibilityDate: sluiceWorker.compatibilityDate,
        durableObjects: {
          REAL: { className: "Limiter", scriptName: "sluice", useSQLite: true },
          REAL_HUB: { className: "Hub", scriptName: "sluice", useSQLite: true },
          REAL_ROOM: { className: "Room", scriptName: "sluice", useSQLite: true },
        },
      });
    }
    workers.push(...(options.workers ?? []));
    const logs = [];
    const mf = new Miniflare({
      workers,
      durableObjectsPersist: options.persist ?? false,
      // The rule states' KV namespace, persisted beside the objects.
      kvPersist: options.persist ?? false,
      host: "127.0.0.1",
      port: options.port ?? 0,
      handleRuntimeStdio(stdout, stderr) {
        for (const stream of [stdout, stderr]) stream.on("data", (chunk) => logs.push(chunk.toString()));
      },
    });
    const url = await mf.ready;
    return new Sluice(mf, url, logs, options.secrets?.API_TOKEN);
  }

  constructor(mf, url, logs, apiToken) {
    this.mf = mf;
    this.base = url.toString().replace(/\/$/, "");
    this.logs = logs;
    this.apiToken = apiToken;
  }

  /** Everything the runtime printed (console.log and console.error). */
  output() {
    return this.logs.join("");
  }

  /** Sets the fault fixture's mode for the key objects (or, with target
   * "hub", for the hubs; "room", for waiting rooms' shards): pass, throw,
   * error, hang or garbage; with `only`, for the key objects (or shards)
   * whose calls hold that text (an object's name; a shard's terms).
   * Answers the modes and the calls each binding has received. */
  async fault(mode, target = "limiter", only = null) {
    const worker = await this.mf.getWorker("faults");
    const filter = only === null ? "" : `&only=${encodeURIComponent(only)}`;
    const response = await worker.fetch(`http://faults/mode?set=${mode}&target=${target}${filter}`);
    return response.json();
  }

  /** A Worker the test added with `workers`, to `fetch` from. */
  worker(name) {
    return this.mf.getWorker(name);
  }

  /** The fault fixture's modes and call counts, changing nothing. */
  async faultCounts() {
    const worker = await this.mf.getWorker("faults");
    return (await worker.fetch("http://faults/mode")).json();
  }

  /** An HTTP request to the worker, with the API token on `/v1/` calls
   * (see `start`). */
  fetch(path, init = {}) {
    if (this.apiToken === undefined || !path.includes("/v1/")) return once(this.base + path, init);
    const headers = new Headers(init.headers);
    if (!headers.has("authorization")) headers.set("authorization", `Bearer ${this.apiToken}`);
    return once(this.base + path, { ...init, headers });
  }

  /** POST a JSON body to one of Sluice's endpoints. */
  post(path, body, headers = {}) {
    return this.fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  }

  /** What a key object holds, read with its internal `inspect` call. */
  async inspect(objectName) {
    const ns = await this.mf.getDurableObjectNamespace("LIMITER");
    const stub = ns.get(ns.idFromName(objectName));
    const response = await stub.fetch("https://object/", { method: "POST", body: JSON.stringify("inspect") });
    const reply = await response.json();
    if (!reply?.inspection) throw new Error(`inspecting ${objectName} answered ${JSON.stringify(reply)}`);
    return reply.inspection;
  }

  stop() {
    return this.mf.dispose();
  }
}

/** Every config must name its origin; a test's config given as an object
 * without one runs in front of the demo origin, which is what nearly every
 * test wants. A config given as a JSON string is passed as it is, so a test
 * can check what happens without an origin. */
function withOrigin(sluice) {
  const object = typeof sluice === "object" && sluice !== null && !Array.isArray(sluice);
  return object && !("origin" in sluice) ? { origin: "demo", ...sluice } : sluice;
}

/** Sluice's worker as `count` isolates bound to the same objects, each run
 * with `config` and `secrets`: the runtime (the first isolate's), and a
 * fetch per isolate (`(path, init) => Response`). */
export async function isolates(count, { config, secrets }) {
  const names = Array.from({ length: count - 1 }, (_, i) => `sluice-${i + 2}`);
  const sluice = await Sluice.start({
    sluice: config,
    secrets,
    workers: names.map((name) => anotherIsolate(name, { ...secrets, SLUICE: config })),
  });
  const others = await Promise.all(names.map((name) => sluice.worker(name)));
  const fetchers = [
    (path, init) => sluice.fetch(path, init),
    ...others.map((worker, i) => (path, init) => worker.fetch(`http://${names[i]}${path}`, init)),
  ];
  return { sluice, fetchers };
}

/** The most admissions that certainly fell in one window of `windowMs`,
 * by the origin's clock. Each admission (`{ sent, arrived }`, the client's
 * send and the origin's arrival, in ms) was decided between the two, and
 * forwarding takes a variable time on a loaded machine: so `k` admissions
 * certainly share a window when the last arrival came less than `windowMs`
 * after the first send. */
export function certainlyInOneWindow(admitted, windowMs) {
  const bySent = [...admitted].sort((a, b) => a.sent - b.sent);
  let most = 0;
  for (let i = 0; i < bySent.length; i++) {
    const from = bySent[i].sent;
    most = Math.max(most, bySent.slice(i).filter((a) => a.arrived < from + windowMs).length);
  }
  return most;
}

/** An origin on 127.0.0.1 that answers every request `200 ok` after
 * `seen(req)`, `holdMs` later: the server and its URL. */
export async function okOrigin(seen, holdMs = 0) {
  const server = createServer((req, res) => {
    seen(req);
    res.writeHead(200, { "content-type": "text/plain" });
    if (holdMs > 0) setTimeout(() => res.end("ok"), holdMs);
    else res.end("ok");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

/** What an isolate says of itself (`isolate` in `GET /admin/stats`). */
export async function isolateStats(fetcher, adminToken) {
  const response = await fetcher("/_sluice/admin/stats", { headers: { Authorization: `Bearer ${adminToken}` } });
  if (response.status !== 200) throw new Error(`admin stats answered ${response.status}`);
  return (await response.json()).isolate;
}

/** A key no other test (or earlier run) has used. */
export function freshKey(label = "k") {
  return `${label}-${randomUUID()}`;
}

/** A temporary directory for persisted Durable Object state. */
export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), "sluice-e2e-"));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Polls `probe` until it returns a truthy value or `ms` pass. Used only to
 * wait for a real Durable Object alarm, which has no deterministic hook when
 * the worker runs over HTTP. */
export async function eventually(probe, ms = 10_000, every = 50) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}

export const sleepUntil = (t) => new Promise((resolve) => setTimeout(resolve, Math.max(0, t - Date.now())));

/** Runs `use` against `fixture` (a script in tests/e2e/fixtures/ that
 * stands in for an earlier version's objects), started under Sluice's
 * worker name and the class names `durableObjects` binds, on the persisted
 * state in `dir`, so that it reaches the very objects Sluice will. `use`
 * gets a fetch to it (`(path, init) => Response`). */
export async function withEarlierVersion(dir, fixture, durableObjects, use) {
  const sluice = sluiceWorkerOptions();
  const mf = new Miniflare({
    workers: [{
      name: sluice.name,
      modules: true,
      modulesRoot: sluice.modulesRoot,
      scriptPath: join(root, "tests/e2e/fixtures", fixture),
      compatibilityDate: sluice.compatibilityDate,
      durableObjects,
    }],
    durableObjectsPersist: dir,
    host: "127.0.0.1",
    port: 0,
  });
  try {
    await mf.ready;
    return await use((path, init) => mf.dispatchFetch(`http://fixture${path}`, init));
  } finally {
    await mf.dispose();
  }
}
