// The suites are hermetic: what a developer has in the repository (a
// .dev.vars or .env with Sluice's secret names, or garbage; a leftover
// .wrangler/state from `npm run dev`), in the environment (CLOUDFLARE_*
// variables, the secrets themselves) or on port 8787 changes nothing.
//
// The test builds a temporary copy of what the suites need (wrangler.toml,
// build/, bench/, tests/e2e, tests/reliability, node_modules linked), makes it as
// hostile as a developer's tree can be, and runs the harness and the suites
// that secrets, state or the runtime's output could affect in it. The
// developer's own tree is never touched.
// Heavy: it runs five suites again in a copy of the tree, the restart
// suite's hard restarts under load among them.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";

const root = new URL("../../", import.meta.url).pathname;

/** What a developer may hold: every secret name Sluice uses, with values no
 * test passes, and lines dotenv makes nothing of. */
const HOSTILE_VARS = [
  'ADMIN_TOKEN="from-the-developers-dev-vars"',
  "API_TOKEN=from-the-developers-dev-vars",
  "JWT_SECRET='from-the-developers-dev-vars'",
  'SLUICE="{not json"',
  "this line is garbage ===",
  "\u0000\uFFFD export",
  "",
].join("\n");

/** What a developer's shell may hold. CLOUDFLARE_INCLUDE_PROCESS_ENV makes
 * wrangler turn every environment variable into a secret binding, and
 * CLOUDFLARE_ENV selects an [env.*] section the config does not have. */
const HOSTILE_ENV = {
  ADMIN_TOKEN: "from-the-developers-environment",
  API_TOKEN: "from-the-developers-environment",
  JWT_SECRET: "from-the-developers-environment",
  CLOUDFLARE_INCLUDE_PROCESS_ENV: "true",
  CLOUDFLARE_ENV: "hostile",
};

let copy;
let port8787;

before(async () => {
  copy = mkdtempSync(join(tmpdir(), "sluice-hermetic-"));
  for (const part of ["wrangler.toml", "package.json", "build", "bench", "tests/e2e", "tests/reliability"]) {
    cpSync(join(root, part), join(copy, part), { recursive: true });
  }
  symlinkSync(join(root, "node_modules"), join(copy, "node_modules"), "dir");

  // A leftover .wrangler/state from `npm run dev`, written the way wrangler
  // dev writes it, in which key "leftover" has used its one admission.
  const { Sluice, API_TOKEN } = await import(pathToFileURL(join(copy, "tests/e2e/harness.mjs")));
  const dev = await Sluice.start({ persist: join(copy, ".wrangler/state/v3/do"), secrets: { API_TOKEN } });
  try {
    const seeded = await (await dev.post("/_sluice/v1/limit", { key: "leftover", limit: 1, window_ms: 3_600_000 })).json();
    assert.equal(seeded.allowed, true);
  } finally {
    await dev.stop();
  }
  writeFileSync(join(copy, ".dev.vars"), HOSTILE_VARS);

  // `npm run dev` serving on 8787: hold the port if nothing else does.
  port8787 = await new Promise((resolve) => {
    const server = createServer((socket) => socket.end("HTTP/1.1 418 I am npm run dev\r\n\r\n"));
    server.once("error", () => resolve(null));
    server.listen(8787, "127.0.0.1", () => resolve(server));
  });
});

after(() => {
  port8787?.close();
  if (copy) rmSync(copy, { recursive: true, force: true });
});

/** Every file under `dir` with its size and modification time. */
function snapshot(dir) {
  const out = {};
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else {
        const { size, mtimeMs } = statSync(path);
        out[relative(dir, path)] = `${size}@${mtimeMs}`;
      }
    }
  };
  walk(dir);
  return out;
}

/** Sets `vars` in this process's environment while `fn` runs. */
async function withEnv(vars, fn) {
  const saved = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** What the harness in the copy starts: no secret but those passed (here
 * the decision API's token), none of the leftover state. */
async function probe() {
  const { Sluice, API_TOKEN } = await import(pathToFileURL(join(copy, "tests/e2e/harness.mjs")));
  const found = {};
  const bare = await Sluice.start({ secrets: { API_TOKEN } });
  try {
    const admin = await bare.fetch("/_sluice/admin/bans", { headers: { Authorization: "Bearer from-the-developers-dev-vars" } });
    found.admin = admin.status;
    await admin.arrayBuffer();
    const leftover = await (await bare.post("/_sluice/v1/limit", { key: "leftover", limit: 1, window_ms: 3_600_000 })).json();
    found.leftover = leftover.allowed;
  } finally {
    await bare.stop();
  }
  const jwt = await Sluice.start({ sluice: { rules: [], jwt: { secret: "JWT_SECRET" } } });
  try {
    const response = await jwt.fetch("/anything");
    found.jwt = `${response.status} ${(await response.json()).field}`;
  } finally {
    await jwt.stop();
  }
  const passed = await Sluice.start({ secrets: { ADMIN_TOKEN: "passed-by-the-test-0123456789abcdef" } });
  try {
    const response = await passed.fetch("/_sluice/admin/bans", { headers: { Authorization: "Bearer passed-by-the-test-0123456789abcdef" } });
    found.passed = response.status;
    await response.arrayBuffer();
  } finally {
    await passed.stop();
  }
  return found;
}

const EXPECTED = {
  admin: 404, // no ADMIN_TOKEN: the admin API does not exist
  leftover: true, // a fresh key, not the one the leftover state exhausted
  jwt: "500 SLUICE.jwt.secret", // no JWT_SECRET: the config names a missing secret
  passed: 200, // what the test passes does reach the worker
};

test("the harness takes no secret, setting or state from the developer's tree or environment", async () => {
  const state = snapshot(join(copy, ".wrangler"));
  await withEnv(HOSTILE_ENV, async () => {
    assert.deepEqual(await probe(), EXPECTED, "with a hostile .dev.vars");
    // wrangler reads .env files for secrets only when there is no .dev.vars.
    renameSync(join(copy, ".dev.vars"), join(copy, "dev.vars.aside"));
    writeFileSync(join(copy, ".env"), HOSTILE_VARS);
    writeFileSync(join(copy, ".env.local"), HOSTILE_VARS);
    try {
      assert.deepEqual(await probe(), EXPECTED, "with a hostile .env and .env.local");
    } finally {
      rmSync(join(copy, ".env"));
      rmSync(join(copy, ".env.local"));
      renameSync(join(copy, "dev.vars.aside"), join(copy, ".dev.vars"));
    }
  });
  assert.deepEqual(snapshot(join(copy, ".wrangler")), state, "the leftover state is left as it was");
});

test("the suites pass unchanged in a hostile tree", { timeout: 600_000 }, async () => {
  const state = snapshot(join(copy, ".wrangler"));
  const files = [
    "tests/e2e/admin.test.mjs", // the admin API with and without ADMIN_TOKEN
    "tests/e2e/policies.test.mjs", // JWT tiers, and a JWT_SECRET that is not set
    "tests/e2e/durability.test.mjs", // persisted state in temporary directories
    "tests/reliability/protocol.test.mjs", // the runtime child's control channel
    "tests/reliability/restart.test.mjs", // the runtime child, restarted under load
  ];
  // NODE_TEST_CONTEXT would make the inner node --test skip every file.
  const { NODE_TEST_CONTEXT, ...env } = { ...process.env, ...HOSTILE_ENV };
  const child = spawn(process.execPath, ["--test", "--test-concurrency=1", "--test-reporter=spec", ...files], {
    cwd: copy,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  // A suite that hangs (a child it never stopped) must not hang npm test.
  const limit = setTimeout(() => process.kill(-child.pid, "SIGKILL"), 540_000);
  const code = await exited;
  clearTimeout(limit);
  assert.equal(code, 0, `the suites failed in the hostile tree:\n${output.slice(-8000)}`);
  assert.match(output, /(#|ℹ) fail 0/);
  assert.match(output, /(#|ℹ) pass [1-9]/);
  assert.doesNotMatch(output, /(#|ℹ) (skipped|cancelled) [1-9]/);
  assert.doesNotMatch(output, /^\W*Using secrets defined in/m, "wrangler read secrets from the tree or the environment");
  assert.deepEqual(snapshot(join(copy, ".wrangler")), state, "the leftover state is left as it was");
  assert.equal(readFileSync(join(copy, ".dev.vars"), "utf8"), HOSTILE_VARS);
});

test("the workerd benchmark's figures come through in a hostile tree", { timeout: 300_000 }, async () => {
  // The load phases need wrk and minutes; the cold start and the wasm size
  // start the same harness and write the same file.
  const out = join(copy, "workerd.json");
  const { NODE_TEST_CONTEXT, ...env } = { ...process.env, ...HOSTILE_ENV, BENCH_SECTIONS: "cold,wasm" };
  const child = spawn(process.execPath, ["bench/workerd.mjs", out], { cwd: copy, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const code = await new Promise((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, output);
  const sections = JSON.parse(readFileSync(out, "utf8"));
  assert.deepEqual(Object.keys(sections), ["cold", "wasm"]);
  assert.match(sections.cold, /to the first response/);
  assert.match(sections.wasm, /index_bg\.wasm/);
  assert.doesNotMatch(output, /^\W*Using secrets defined in/m, "wrangler read secrets from the tree or the environment");
});
