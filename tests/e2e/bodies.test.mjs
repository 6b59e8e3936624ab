// Request bodies, end to end on workerd: a chunked body larger than any
// endpoint needs is refused with 413 as soon as the limit is passed, and the
// runtime's memory does not grow with what the client keeps sending. A
// body of a declared length (read in one call) and a chunked one (read as
// a stream) meet the same answers, and a decision from an admission block
// carries the same fields as one from the key's object, sent the same way.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { request } from "node:http";
import { readdirSync, readFileSync } from "node:fs";
import { parseList } from "structured-headers";
import { Sluice, API_TOKEN, freshKey, isolateStats } from "./harness.mjs";

const ADMIN_TOKEN = "bodies-test-admin-token-0123456789abcdef";
const MiB = 1024 * 1024;
/** The most any endpoint reads (src/http/api.rs MAX_BODY_BYTES). */
const LIMIT = 64 * 1024;

let sluice;
before(async () => {
  sluice = await Sluice.start({ sluice: { origin: "demo", rules: [] }, secrets: { ADMIN_TOKEN, API_TOKEN } });
});
after(() => sluice?.stop());

/** Resident memory of the workerd processes this test file started, in bytes. */
function runtimeRss() {
  const processes = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, "utf8");
      processes.push({
        pid: Number(entry),
        ppid: Number(/^PPid:\s*(\d+)/m.exec(status)[1]),
        workerd: /^Name:\s*workerd/m.test(status),
        rss: Number(/^VmRSS:\s*(\d+)/m.exec(status)?.[1] ?? 0) * 1024,
      });
    } catch {
      // The process ended between listing and reading.
    }
  }
  const ours = new Set([process.pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of processes) {
      if (!ours.has(p.pid) && ours.has(p.ppid)) grew = ours.add(p.pid) && true;
    }
  }
  return processes.filter((p) => p.workerd && ours.has(p.pid)).reduce((sum, p) => sum + p.rss, 0);
}

/** Sends `size` bytes chunked (no Content-Length) over a plain socket and
 * resolves with the answer (`status` and `body`, or `status: null` when the
 * connection ended without one) and how many bytes had been sent by then.
 * A plain socket, because the runtime closes the connection once it has
 * answered without reading the rest: an HTTP client reports the failed
 * write and drops the answer, and a socket can lose it to the reset that
 * closing with unread data sends (workerd does not linger). */
function chunked(path, size, headers = {}) {
  const url = new URL(sluice.base);
  const chunk = Buffer.alloc(64 * 1024, "a");
  const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")]);
  const method = path.includes("/admin/") ? "PUT" : "POST";
  const head = [
    `${method} ${path} HTTP/1.1`,
    `host: ${url.host}`,
    "content-type: application/json",
    "transfer-encoding: chunked",
    "connection: close",
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    "",
    "",
  ].join("\r\n");
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let received = "";
    let written = 0;
    let writtenWhenAnswered = null;
    socket.setEncoding("latin1");
    socket.on("data", (data) => {
      received += data;
      writtenWhenAnswered ??= written;
    });
    socket.on("error", () => socket.destroy());
    socket.on("close", () => {
      const match = /^HTTP\/1\.1 (\d{3})[^\r]*\r\n[\s\S]*?\r\n\r\n([\s\S]*)$/.exec(received);
      if (!match && received) return reject(new Error(`a malformed answer: ${JSON.stringify(received)}`));
      resolve({ status: match ? Number(match[1]) : null, body: match?.[2], written: writtenWhenAnswered ?? written });
    });
    socket.write(head);
    // Past the limit, each further chunk waits a little for the answer:
    // a runtime that stopped reading answers then, and closes with nothing
    // unread, so its answer is not lost to a reset.
    let answered = () => {};
    socket.on("data", () => answered());
    const answerOrPause = () =>
      new Promise((resolve) => {
        answered = resolve;
        setTimeout(resolve, 200);
      });
    const pump = async () => {
      while (writtenWhenAnswered === null && written < size && !socket.destroyed) {
        written += chunk.length;
        if (!socket.write(frame)) await new Promise((resolve) => socket.once("drain", resolve));
        if (written > LIMIT) await answerOrPause();
      }
      if (!socket.destroyed && writtenWhenAnswered === null) socket.end("0\r\n\r\n");
    };
    pump().catch(() => socket.destroy());
  });
}

for (const size of [1 * MiB, 100 * MiB]) {
  test(`a ${size / MiB} MiB chunked body is refused with 413 before it is read whole`, { timeout: 60_000 }, async () => {
    const before = runtimeRss();
    const started = Date.now();
    for (const [path, headers] of [
      ["/_sluice/v1/limit", { authorization: `Bearer ${API_TOKEN}` }],
      ["/_sluice/v1/leases", { authorization: `Bearer ${API_TOKEN}` }],
      ["/_sluice/admin/bans/203.0.113.9", { authorization: `Bearer ${ADMIN_TOKEN}` }],
    ]) {
      const answer = await chunked(path, size, headers);
      assert.equal(answer.status, 413, `${path}: ${answer.body}`);
      assert.equal(JSON.parse(answer.body).status, 413);
      assert.ok(answer.written <= LIMIT + 4 * 64 * 1024, `${path}: ${answer.written} bytes were sent before the answer`);
    }
    assert.ok(before > 0, "the runtime's memory can be read");
    const grew = runtimeRss() - before;
    assert.ok(grew < 32 * MiB, `the runtime grew by ${Math.round(grew / MiB)} MiB`);
    assert.ok(Date.now() - started < 10_000, "answered quickly");
    const ok = await sluice.post("/_sluice/v1/limit", { key: "after-large-body", limit: 1, window_ms: 1000 });
    assert.equal(ok.status, 200, "the isolate still serves");
  });
}

test("a key twice in one object is refused with 400 naming it, and changes nothing", async () => {
  const api = { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" };
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" };
  const key = `dup-${Date.now()}`;
  for (const [method, path, headers, body, field] of [
    ["POST", "/_sluice/v1/limit", api, `{"key":"${key}","key":"other","limit":1,"window_ms":60000}`, "key"],
    ["POST", "/_sluice/v1/limit", api, `{"key":"${key}","limit":1,"window_ms":60000,"cost":0,"cost":1}`, "cost"],
    ["POST", "/_sluice/v1/limit", api, `{"key":"other","k\\u0065y":"${key}","limit":1,"window_ms":60000}`, "key"],
    [
      "POST",
      "/_sluice/v1/limit",
      api,
      `{"key":"${key}","policies":[{"name":"a","limit":1,"window_ms":60000},{"name":"b","name":"c","limit":1,"window_ms":60000}]}`,
      "policies[1].name",
    ],
    ["POST", "/_sluice/v1/throttle", api, `{"key":"${key}","max_burst":0,"count":1,"period_s":60,"quantity":0,"quantity":1}`, "quantity"],
    ["POST", "/_sluice/v1/leases", api, `{"key":"${key}","limit":1,"limit":5,"ttl_ms":1000}`, "limit"],
    ["PUT", "/_sluice/admin/bans/198.51.100.77", admin, `{"for":"1m","reason":"a","reason":"b"}`, "reason"],
  ]) {
    const response = await sluice.fetch(path, { method, headers, body });
    assert.equal(response.status, 400, body);
    assert.equal(response.headers.get("content-type"), "application/problem+json");
    const problem = await response.json();
    assert.equal(problem.code, "invalid-request");
    assert.equal(problem.field, field, body);
    assert.match(problem.detail, /more than once/);
  }
  const peek = await (await sluice.post("/_sluice/v1/limit", { key, limit: 1, window_ms: 60_000, cost: 0 })).json();
  assert.equal(peek.remaining, 1, "no duplicate-key call took a unit");
  const bans = await (await sluice.fetch("/_sluice/admin/bans", { headers: admin })).json();
  assert.ok(!JSON.stringify(bans).includes("198.51.100.77"), "nor set a ban");
});

/** A problem+json answer's status and the field it names. */
async function problem(response) {
  assert.equal(response.headers.get("content-type"), "application/problem+json");
  const body = await response.json();
  assert.equal(body.status, response.status);
  return { status: response.status, field: body.field, detail: body.detail };
}

/** A body sent chunked (no Content-Length), as a stream of `parts`. */
function streamed(parts) {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(typeof part === "string" ? encoder.encode(part) : part);
      controller.close();
    },
  });
}

test("a body of a declared length and a chunked one meet the same answers at the limit and when malformed", async () => {
  const call = { key: freshKey("edge"), limit: 5, window_ms: 60_000 };
  const text = JSON.stringify(call);
  const atLimit = text + " ".repeat(LIMIT - text.length);
  const limit = (body, init = {}) => sluice.fetch("/_sluice/v1/limit", { method: "POST", headers: { "content-type": "application/json" }, body, ...init });

  for (const [label, send] of [
    ["declared", (body) => limit(body)],
    ["chunked", (body) => limit(streamed([body]), { duplex: "half" })],
  ]) {
    const ok = await send(atLimit);
    assert.equal(ok.status, 200, `${label}: a body of exactly the limit is read`);
    assert.equal((await ok.json()).allowed, true);
    const tooLarge = await problem(await send(atLimit + " "));
    assert.equal(tooLarge.status, 413, `${label}: one byte over the limit`);
    assert.match(tooLarge.detail, new RegExp(`at most ${LIMIT} bytes`));
    const empty = await problem(await send(""));
    assert.deepEqual([empty.status, empty.field], [400, "body"], `${label}: empty`);
    assert.equal((await problem(await send('{"key":'))).field, "body", `${label}: not JSON`);
    assert.equal((await problem(await send("[1]"))).field, "body", `${label}: not an object`);
    // Bytes that are not UTF-8 inside a string: read as bytes, not as text
    // (which would replace them and admit the call), so not JSON.
    const notUtf8 = new Uint8Array([...new TextEncoder().encode('{"key":"'), 0xff, 0xfe, ...new TextEncoder().encode('","limit":5,"window_ms":60000}')]);
    const refused = await problem(await send(notUtf8));
    assert.deepEqual([refused.status, refused.field], [400, "body"], `${label}: not UTF-8`);
    assert.equal((await problem(await send('{"key":"a","limit":"5","window_ms":1000}'))).field, "limit", `${label}: a field of the wrong type`);
  }
  const declaredOver = await problem(await limit(atLimit + "x".repeat(10 * LIMIT)));
  assert.equal(declaredOver.status, 413, "a declared length over the limit");
  const untyped = await problem(await limit(text, { headers: {} }));
  assert.deepEqual([untyped.status, untyped.field], [400, "content-type"]);
  const noToken = await sluice.fetch("/_sluice/v1/limit", { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer wrong" }, body: text });
  assert.equal(noToken.status, 401);
  const peek = await sluice.post("/_sluice/v1/limit", { ...call, cost: 0 });
  assert.equal((await peek.json()).remaining, 3, "the two bodies at the limit were the only calls counted");
});

test("decisions from a block and from the key's object carry valid RateLimit fields, r never above the truth", async () => {
  const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const stats = () => isolateStats((path, init) => sluice.fetch(path, { ...init, headers: ADMIN }), ADMIN_TOKEN);
  const before = (await stats()).blocks.admitted;
  const LIMIT_CALLS = 1_000;
  const key = freshKey("fields");
  let admitted = 0;
  for (let i = 0; i < 40; i++) {
    const local = i % 4 !== 3;
    const response = await sluice.post("/_sluice/v1/limit", { key, limit: LIMIT_CALLS, window_ms: 600_000, ...(local ? {} : { local: false }) });
    assert.equal(response.status, 200);
    assert.equal((await response.json()).allowed, true);
    admitted += 1;
    const [[policy, policyParams]] = parseList(response.headers.get("ratelimit-policy")).map(([name, params]) => [name, Object.fromEntries(params)]);
    const [[name, params]] = parseList(response.headers.get("ratelimit")).map(([name, params]) => [name, Object.fromEntries(params)]);
    assert.equal(name, policy);
    assert.deepEqual([policyParams.q, policyParams.w], [LIMIT_CALLS, 600]);
    assert.ok(Number.isInteger(params.r) && params.r <= LIMIT_CALLS - admitted, `call ${i} (local ${local}): r=${params.r} after ${admitted} admitted`);
  }
  assert.ok((await stats()).blocks.admitted > before, "some of the decisions came from a block");
});

/** POSTs `call` to the decision API with node's own client, which asks for
 * no compression and keeps the header fields as the runtime sent them:
 * answers the status, the fields as `[name, value]` in order (but `Date`)
 * and the body's text. */
function rawDecision(call) {
  const url = new URL("/_sluice/v1/limit", sluice.base);
  const headers = { "content-type": "application/json", authorization: `Bearer ${API_TOKEN}` };
  return new Promise((resolve, reject) => {
    const sent = request(url, { method: "POST", headers }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk) => (body += chunk));
      response.on("end", () => {
        const fields = [];
        for (let i = 0; i < response.rawHeaders.length; i += 2) fields.push([response.rawHeaders[i], response.rawHeaders[i + 1]]);
        resolve({ status: response.statusCode, fields: fields.filter(([name]) => name.toLowerCase() !== "date"), body });
      });
    });
    sent.on("error", reject);
    sent.end(JSON.stringify(call));
  });
}

test("an answer from a block is sent as one from the key's object: the same fields in the same order, the same framing and body", async () => {
  const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const admitted = async () => (await isolateStats((path, init) => sluice.fetch(path, { ...init, headers: ADMIN }), ADMIN_TOKEN)).blocks.admitted;
  const key = freshKey("sent");
  const call = { key, limit: 1_000, window_ms: 600_000 };
  const fromObject = await rawDecision({ ...call, local: false });
  let fromBlock;
  for (let i = 0; i < 40 && !fromBlock; i++) {
    const before = await admitted();
    const answer = await rawDecision(call);
    if ((await admitted()) > before) fromBlock = answer;
  }
  assert.ok(fromBlock, "a decision came from a block");
  // `r` (what remains) differs between the two, and with it the body's
  // length: everything else is the same, byte for byte.
  const same = ({ status, fields, body }) => ({
    status,
    fields: fields.map(([name, value]) => [name, name === "Content-Length" ? "(length)" : value.replace(/;r=\d+;/, ";r=(r);")]),
    body: body.replace(/"remaining":\d+/, '"remaining":(r)'),
  });
  assert.deepEqual(same(fromBlock), same(fromObject));
  assert.deepEqual(
    fromObject.fields.map(([name]) => name),
    ["Content-Length", "Content-Type", "ratelimit", "ratelimit-policy"],
  );
  for (const { fields, body } of [fromBlock, fromObject]) {
    assert.equal(Number(new Map(fields).get("Content-Length")), Buffer.byteLength(body), "the length is declared, not chunked");
    assert.equal(new Map(fields).get("Content-Type"), "application/json");
  }
});
