// The README's quick start on a fresh copy of the repository: `npm run dev`
// (scripts/dev.sh) writes .dev.vars with new tokens and says so once, serves
// on the port it is given, and the README's own curl commands work against
// it, reading the tokens from that .dev.vars. The copy holds the working
// tree's files (tracked and new, not ignored ones), with node_modules linked
// and Cargo's target directory shared so that the build is incremental; it
// never touches the repository's own .dev.vars.
// Heavy: `npm run dev` in a fresh copy builds the release worker again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const root = new URL("../../", import.meta.url).pathname;

function freshCopy() {
  const dir = mkdtempSync(join(tmpdir(), "sluice-quickstart-"));
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: root, encoding: "utf8" })
    .split("\0")
    .filter((file) => file !== "" && statSync(join(root, file), { throwIfNoEntry: false })?.isFile());
  for (const file of files) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    // Timestamps kept: setup.sh compares package-lock.json with node_modules.
    cpSync(join(root, file), join(dir, file), { preserveTimestamps: true });
  }
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"));
  return dir;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Starts `npm run dev`'s script in `dir`; resolves once it answers. */
async function dev(dir) {
  const port = await freePort();
  const inspector = await freePort();
  const child = spawn("bash", ["scripts/dev.sh", "--inspector-port", String(inspector)], {
    cwd: dir,
    detached: true,
    env: { ...process.env, PORT: String(port), CARGO_TARGET_DIR: join(root, "target") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 480_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`npm run dev exited:\n${output}`);
    try {
      if ((await fetch(`${base}/_sluice/health`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      process.kill(-child.pid, "SIGKILL");
      throw new Error(`npm run dev did not answer within 8 minutes:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return {
    port,
    base,
    output: () => output,
    /** Stops wrangler and its workerd: the whole process group of the
     * script this test started, by its PID. */
    async stop() {
      process.kill(-child.pid, "SIGTERM");
      const timer = setTimeout(() => process.kill(-child.pid, "SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The README's quick-start commands, pointed at `port`. */
function readmeCommands(port) {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const start = readme.indexOf("```sh\n", readme.indexOf("With `npm run dev` running"));
  const block = readme.slice(start + "```sh\n".length, readme.indexOf("```\n", start + 6));
  assert.match(block, /\.dev\.vars/, "the README reads the tokens from .dev.vars");
  return block.replaceAll("127.0.0.1:8787", `127.0.0.1:${port}`);
}

const tokens = (dir) =>
  Object.fromEntries(
    readFileSync(join(dir, ".dev.vars"), "utf8")
      .trim()
      .split("\n")
      .map((line) => line.split("=")),
  );

test("npm run dev on a fresh clone: tokens written once, the README's commands work", { timeout: 900_000 }, async () => {
  const dir = freshCopy();
  try {
    const first = await dev(dir);
    let secrets;
    // A decision on a key whose window outlasts a restart of npm run dev.
    const decide = async (base) => {
      const response = await fetch(`${base}/_sluice/v1/limit`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${secrets.API_TOKEN}` },
        body: JSON.stringify({ key: "user:kept", limit: 5, window_ms: 3_600_000 }),
      });
      return response.json();
    };
    try {
      const said = first.output().match(/wrote \.dev\.vars/g) ?? [];
      assert.equal(said.length, 1, `says once that it wrote .dev.vars:\n${first.output()}`);
      secrets = tokens(dir);
      assert.deepEqual(Object.keys(secrets).sort(), ["ADMIN_TOKEN", "API_TOKEN", "ROOM_SECRET"]);
      for (const value of Object.values(secrets)) assert.match(value, /^[0-9a-f]{64}$/);
      assert.equal(new Set(Object.values(secrets)).size, 3);
      assert.equal(statSync(join(dir, ".dev.vars")).mode & 0o077, 0, "only the owner can read it");

      const out = execFileSync("bash", ["-c", readmeCommands(first.port)], {
        cwd: dir,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
      assert.match(out, /^HTTP\/1\.1 200/m, "GET /api/hello");
      assert.match(out, /^ratelimit: "api";r=\d+;t=\d+/im);
      assert.match(out, /"peak_in_flight"/, "the demo origin answered /api/slow");
      assert.match(out, /(200 ){8}(429 ){3}\n/, "the 11 requests: 10 a minute, counting the two before, as the README says");
      assert.match(out, /\{"allowed":true,"limit":5,"remaining":4,/, "the decision API, with the token");
      assert.match(out, /"isolate":/, "the admin API, with its token");

      const limit = (authorization) =>
        fetch(`${first.base}/_sluice/v1/limit`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
          body: JSON.stringify({ key: "user:43", limit: 5, window_ms: 10_000 }),
        });
      assert.equal((await limit()).status, 401, "and not without it");
      assert.equal((await limit(`Bearer ${secrets.ADMIN_TOKEN}`)).status, 401, "nor with the admin token");
      assert.equal((await decide(first.base)).remaining, 4);
    } finally {
      await first.stop();
    }

    const second = await dev(dir);
    try {
      assert.doesNotMatch(second.output(), /wrote \.dev\.vars/, "a second run says nothing");
      assert.deepEqual(tokens(dir), secrets, "and keeps the tokens");
      assert.equal((await decide(second.base)).remaining, 3, "and the state, as the README says");
      const response = await fetch(`${second.base}/_sluice/v1/limit`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${secrets.API_TOKEN}` },
        body: JSON.stringify({ key: "user:44", limit: 5, window_ms: 10_000 }),
      });
      assert.equal(response.status, 200);
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the README names every input the build's up-to-date check reads, as its log line does", () => {
  const script = readFileSync(join(root, "scripts/build.sh"), "utf8");
  const inputs = /find (.+?) -newer/.exec(script)[1].split(" ");
  assert.ok(inputs.length >= 5, inputs.join(" "));
  const logged = /echo "build: build\/ is up to date with ([^"]+)"/.exec(script)[1];
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const note = readme.slice(readme.indexOf("`npm run dev` builds once"), readme.indexOf("Other scripts:"));
  for (const input of inputs) {
    const named = ["src", "dashboard"].includes(input) ? `${input}/` : input;
    assert.ok(logged.includes(named), `the log line names ${named}`);
    assert.ok(note.includes(`\`${named}\``), `the README names ${named}`);
  }
});
