// `npm run sale` (scripts/sale.mjs) run small, so that the rehearsals the
// docs rely on cannot rot: it starts Sluice through `npm run dev`, sells
// exactly the stock, prints every figure, and stops every process it
// started; a whole drop by default, the sizing load with --sizing.
// Heavy: starts npm run dev (wrangler and workerd) twice, and loads it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";

const root = new URL("../../", import.meta.url).pathname;

function sale(args) {
  return new Promise((resolve) => {
    execFile("node", ["scripts/sale.mjs", ...args], { cwd: root, timeout: 240_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A printed figure: the number after `label: `. */
function figure(stdout, label) {
  const line = stdout.split("\n").find((l) => l.startsWith(`${label}: `));
  assert.ok(line, `no line "${label}: …" in:\n${stdout}`);
  const value = line.slice(label.length + 2).match(/^[\d,]+(\.\d+)?/);
  assert.ok(value, `"${line}" does not start with a number`);
  return Number(value[0].replaceAll(",", ""));
}

test("a small sale through npm run dev: 200 buyers, a quota of 50 in 4 parts, exactly 50 admitted", { timeout: 300_000 }, async () => {
  const { code, stdout, stderr } = await sale(["--sizing", "--buyers", "200", "--quota", "50", "--split", "4", "--connections", "8"]);
  assert.equal(code, 0, `${stdout}\n${stderr}`);
  assert.equal(figure(stdout, "requests"), 600);
  assert.equal(figure(stdout, "admitted, by the quota's parts"), 50);
  assert.equal(figure(stdout, "buyers admitted more than 1"), 0);
  const lost = figure(stdout, "answers lost by the local runtime");
  const admitted = figure(stdout, "admitted");
  assert.ok(admitted <= 50 && admitted >= 50 - lost, `admitted ${admitted}, ${lost} answers lost`);
  const perUser = figure(stdout, "refused by the per-user layer (checkout)");
  const global = figure(stdout, "refused by the global layer (checkout.all)");
  const other = figure(stdout, "other answers");
  assert.equal(admitted + perUser + global + other + lost, 600, "every request is accounted for");
  // Each buyer's 3 attempts go back to back: its own layer refuses some.
  assert.ok(perUser > 0, "the per-user layer refused a buyer's repeats");
  const room = stdout.match(/^refused by the global layer with room left: (\d+) certain, (\d+) at most$/m);
  assert.ok(room, stdout);
  assert.ok(Number(room[1]) <= Number(room[2]) && Number(room[2]) <= global);
  for (const label of ["latency p50", "latency p99", "requests per second", "duration", "key object calls", "key object calls per 1,000 requests"]) {
    assert.ok(figure(stdout, label) >= 0, label);
  }
  assert.ok(figure(stdout, "latency p50") <= figure(stdout, "latency p99"));
  // An admitted request costs at least its two layers' calls.
  assert.ok(figure(stdout, "key object calls") >= 2 * 50, stdout);

  // Every process it started is gone: npm run dev ran in a process group
  // of its own, which it stopped by its id.
  const group = Number(stderr.match(/process group (\d+)/)?.[1]);
  assert.ok(group > 0, stderr);
  assert.match(stderr, new RegExp(`stopped npm run dev \\(process group ${group}\\)`));
  assert.throws(() => process.kill(-group, 0), { code: "ESRCH" });
});

test("a sale that cannot sell out is refused before anything starts", async () => {
  const { code, stderr } = await sale(["--sizing", "--buyers", "10", "--quota", "50"]);
  assert.equal(code, 1);
  assert.match(stderr, /--buyers 10 at --per-user 1 cannot buy the --quota 50/);
  assert.doesNotMatch(stderr, /starting npm run dev/);
});

test("a small drop through npm run dev: a room with a pre-queue, a stock of 20 sold to 20 buyers once each", { timeout: 300_000 }, async () => {
  const { code, stdout, stderr } = await sale(["--visitors", "60", "--stock", "20", "--active", "8", "--lead", "40"]);
  assert.equal(code, 0, `${stdout}\n${stderr}`);
  assert.equal(figure(stdout, "sold"), 20);
  assert.equal(figure(stdout, "sold, by the stock's parts"), 20);
  assert.equal(figure(stdout, "distinct buyers"), 20);
  assert.equal(figure(stdout, "buyers who bought more than 1"), 0);
  const letIn = stdout.match(/^let in: (\d+) \((\d+) from the pre-queue, drawn at the opening; (\d+) who came after\)$/m);
  assert.ok(letIn && Number(letIn[2]) > 0 && Number(letIn[3]) > 0, stdout);
  assert.ok(figure(stdout, "left while waiting") + Number(letIn[1]) <= 60, stdout);
  assert.ok(figure(stdout, "let in and never ended their session") > 0, stdout);
  assert.match(stdout, /^order of those who came after the opening: \d+ of \d+ pairs/m);
  assert.match(stdout, /^wait estimates \(each visitor's first in line\): \d+; median estimate [\d.]+ s, median actual [\d.]+ s/m);
  // Everyone let in after the stock was gone met the close; every buyer's
  // second press met their own limit.
  const refusals = stdout.match(/^refusals at checkout[^:]*: (.*)$/m)[1];
  assert.match(refusals, /410 closed: \d+/);
  assert.match(refusals, /429 quota-exceeded \(checkout\): \d+/);
  assert.equal(figure(stdout, "room answers other than waiting or in"), 0);
  assert.match(stdout, /^straight to checkout without the room: 5, answered 503, none sold$/m, "put in line, never sold to");
  const group = Number(stderr.match(/process group (\d+)/)?.[1]);
  assert.throws(() => process.kill(-group, 0), { code: "ESRCH" });
});
