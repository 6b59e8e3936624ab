// The restart suite's runtime child reports its URL on a channel of its own
// (fd 3), so whatever wrangler, Miniflare or workerd print on stdout cannot
// be mistaken for it, and a child that breaks the protocol fails with a
// message that says so.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { tempDir } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const fake = new URL("./fixtures/fake-runtime.mjs", import.meta.url).pathname;
const real = new URL("./runtime.mjs", import.meta.url).pathname;

// The stand-ins persist nothing; a directory of their own all the same.
let scratch;
let removeScratch;
before(() => ({ dir: scratch, remove: removeScratch } = tempDir()));
after(() => removeScratch());

test("chatter on the child's stdout is not read as its answer", async () => {
  const child = await runtime(scratch, { mode: "chatty" }, fake);
  try {
    assert.equal(child.url, "http://127.0.0.1:9");
  } finally {
    await child.kill();
  }
});

test("anything but the hello on the control channel fails clearly", async () => {
  await assert.rejects(runtime(scratch, { mode: "garbage" }, fake), (error) => {
    assert.match(error.message, /broke the control protocol on fd 3/);
    assert.match(error.message, /Using secrets defined in \.dev\.vars/);
    return true;
  });
  await assert.rejects(runtime(scratch, { mode: "no-url" }, fake), /broke the control protocol on fd 3.*port/s);
});

test("a child that exits before its hello fails clearly", async () => {
  await assert.rejects(runtime(scratch, { mode: "exit" }, fake), /exited \(code 3\) before it served/);
});

test("runtime.mjs refuses to start without its control channel", () => {
  const { dir, remove } = tempDir();
  try {
    const run = spawnSync(process.execPath, [real, dir, "{}"], { encoding: "utf8", timeout: 60_000 });
    assert.notEqual(run.status, 0, "it must not serve with nowhere to report");
    assert.match(run.stderr, /fd 3/);
    assert.equal(run.stdout, "");
  } finally {
    remove();
  }
});
