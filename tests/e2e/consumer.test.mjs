// examples/consumer-worker calling Sluice through a service binding, both
// Workers on workerd. The consumer is bundled as `wrangler deploy` bundles
// it (sluice-client resolved to client/), and its binding comes from its own
// wrangler.toml, so the test cannot drift from the example.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { build } from "esbuild";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { join } from "node:path";
import { Sluice, API_TOKEN } from "./harness.mjs";

const root = new URL("../../", import.meta.url).pathname;
const example = join(root, "examples/consumer-worker");

async function consumer(bindings) {
  const bundle = await build({
    entryPoints: [join(example, "src/index.js")],
    bundle: true,
    format: "esm",
    write: false,
    alias: { "sluice-client": join(root, "client/index.js") },
  });
  const { workerOptions } = unstable_getMiniflareWorkerOptions(join(example, "wrangler.toml"));
  return {
    name: "consumer",
    modules: true,
    script: bundle.outputFiles[0].text,
    compatibilityDate: workerOptions.compatibilityDate,
    serviceBindings: workerOptions.serviceBindings,
    bindings,
  };
}

const call = async (sluice, path, init = {}) => {
  const worker = await sluice.worker("consumer");
  const response = await worker.fetch(`http://consumer${path}`, init);
  return { status: response.status, headers: response.headers, body: await response.json() };
};
const hello = (sluice, ip) => call(sluice, "/hello", { headers: { "cf-connecting-ip": ip } });

describe("with the API token on both sides", () => {
  let sluice;
  before(async () => {
    sluice = await Sluice.start({
      sluice: { rules: [] },
      secrets: { API_TOKEN },
      workers: [await consumer({ SLUICE_API_TOKEN: API_TOKEN })],
    });
  });
  after(() => sluice?.stop());

  test("the binding carries the decisions: 5 per 10 s per address, then 429", async () => {
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await hello(sluice, "192.0.2.10")).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
    const refused = await hello(sluice, "192.0.2.10");
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    // The second refusal is told the second place's moment: within the
    // window and the second of jitter spread retries add.
    assert.ok(refused.body.retryAfter > 0 && refused.body.retryAfter <= 11_000, `${refused.body.retryAfter}`);
    const other = await hello(sluice, "192.0.2.11");
    assert.deepEqual([other.status, other.body.remaining], [200, 4], "another address has its own key");
    const direct = await sluice.post("/_sluice/v1/limit", { key: "hello:192.0.2.10", limit: 5, window_ms: 10_000, cost: 0 });
    assert.equal((await direct.json()).remaining, 0, "the same key, seen directly in Sluice");
  });

  test("one report at a time, and the lock is released after each", async () => {
    const [a, b] = await Promise.all([
      call(sluice, "/report?hold_ms=400", { method: "POST" }),
      new Promise((resolve) => setTimeout(resolve, 100)).then(() => call(sluice, "/report", { method: "POST" })),
    ]);
    assert.equal(a.status, 200);
    assert.equal(b.status, 409);
    assert.equal(b.body.error, "report-running");
    const c = await call(sluice, "/report", { method: "POST" });
    assert.equal(c.status, 200, "released when the first report ended");
    assert.ok(c.body.fence > a.body.fence);
  });
});

test("a consumer with the wrong token gets an error, never a silent pass", async () => {
  const sluice = await Sluice.start({
    sluice: { rules: [] },
    secrets: { API_TOKEN },
    workers: [await consumer({ SLUICE_API_TOKEN: `${API_TOKEN}-old` })],
  });
  try {
    const answer = await hello(sluice, "192.0.2.20");
    assert.deepEqual([answer.status, answer.body.code], [500, "unauthorized"]);
  } finally {
    await sluice.stop();
  }
});

test('Sluice with api = "open" serves a consumer without a token', async () => {
  const sluice = await Sluice.start({ sluice: { api: "open", rules: [] }, workers: [await consumer({})] });
  try {
    assert.equal((await hello(sluice, "192.0.2.30")).status, 200);
    assert.equal((await call(sluice, "/report", { method: "POST" })).status, 200);
  } finally {
    await sluice.stop();
  }
});
