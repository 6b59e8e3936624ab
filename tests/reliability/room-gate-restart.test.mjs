// What a waiting room keeps against abuse, through hard restarts (SIGKILL,
// persisted state): the join counts of its join limit and of its
// pre-queue's cap, the puzzles its challenge has seen spent, and the
// sessions a rule behind the room lets through with a Sluice-Room-Pass the
// origin can still verify (the pass is signed from the session's cookie,
// so nothing of it is stored).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createHash } from "node:crypto";
import { tempDir } from "../e2e/harness.mjs";
import { runtime } from "./support.mjs";

const SECRET = "room-secret-for-the-gate-restart-0123456";
let origin;
const seen = [];
before(async () => {
  origin = createServer((req, res) => {
    seen.push({ url: req.url, pass: req.headers["sluice-room-pass"] });
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
  await new Promise((resolve) => origin.listen(0, "127.0.0.1", resolve));
});
after(() => origin?.close());

const options = () => ({
  sluice: {
    origin: `http://127.0.0.1:${origin.address().port}`,
    rules: [
      { id: "shop", match: { path: "/shop/*" }, waiting_room: { active: 1, per_minute: 100, shards: 1, join: { limit: 2, window: "1h" } } },
      { id: "buy", match: { path: "/checkout", methods: ["POST"] }, room: "shop", limit: 10, window: "1h" },
      {
        id: "drop", match: { path: "/drop/*" },
        waiting_room: { active: 1, per_minute: 100, shards: 1, opens_at: new Date(Date.now() + 3_600_000).toISOString(), join: { limit: 2, window: "1s" } },
      },
      { id: "work", match: { path: "/work/*" }, waiting_room: { active: 5, per_minute: 100, shards: 1, challenge: { work: 8 } } },
    ],
  },
  secrets: { ROOM_SECRET: SECRET },
});

async function withRuntime(use) {
  const { dir, remove } = tempDir();
  let current = null;
  const send = (path, { ip, cookie, method = "GET" } = {}) =>
    fetch(current.url + path, { method, headers: { accept: "application/json", "cf-connecting-ip": ip, ...(cookie ? { cookie } : {}) } });
  const restart = async () => {
    await current.kill();
    current = await runtime(dir, options());
  };
  try {
    current = await runtime(dir, options());
    await use({ send, restart });
  } finally {
    await current?.kill();
    remove();
  }
}

const cookieOf = (response) => response.headers.getSetCookie().map((line) => line.split(";")[0]).find((pair) => !pair.endsWith("=")) ?? null;

test("join counts, spent puzzles and passes survive hard restarts", { timeout: 180_000 }, () => withRuntime(async ({ send, restart }) => {
  // The join limit: two joins an hour from one address.
  const first = await send("/shop/", { ip: "203.0.113.1" });
  assert.equal(first.status, 200);
  const session = cookieOf(first);
  assert.equal((await send("/shop/", { ip: "203.0.113.1" })).status, 503);
  assert.equal((await send("/shop/", { ip: "203.0.113.1" })).status, 429);
  // The pre-queue's cap: two entries, whatever the window.
  for (let i = 0; i < 2; i++) assert.equal((await send("/drop/", { ip: "203.0.113.2" })).status, 503);
  // A puzzle solved and spent.
  const { puzzle } = await (await send("/work/", { ip: "203.0.113.3" })).json();
  let n = 0;
  while (createHash("sha256").update(`${puzzle}.${n}`).digest()[0] !== 0) n += 1;
  const solved = `sluice_work_work=${puzzle}.${n}`;
  assert.equal((await send("/work/", { ip: "203.0.113.3", cookie: solved })).status, 200);
  const bought = await send("/checkout", { method: "POST", ip: "203.0.113.1", cookie: session });
  assert.equal(bought.status, 200);
  const pass = seen.at(-1).pass;
  assert.match(pass, /^v1\.pass\.shop\.0-0\.\d+\.[A-Za-z0-9_-]{43}$/);

  await restart();
  assert.equal((await send("/shop/", { ip: "203.0.113.1" })).status, 429, "the join count survived");
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const capped = await send("/drop/", { ip: "203.0.113.2" });
  assert.equal(capped.status, 429, "the pre-queue's cap survived, past its join window");
  assert.deepEqual((await capped.json())["violated-policies"], ["drop.pre-queue"]);
  const copy = await send("/work/", { ip: "203.0.113.4", cookie: solved });
  assert.equal(copy.status, 400);
  assert.equal((await copy.json()).field, "sluice_work_work", "a spent puzzle stays spent");
  const again = await send("/checkout", { method: "POST", ip: "203.0.113.1", cookie: session });
  assert.equal(again.status, 200, "the session passes on its signature");
  assert.equal(seen.at(-1).pass, pass, "the same pass, signed anew from the cookie");
  assert.match(again.headers.get("ratelimit"), /^"buy";r=8;/, "the rule's own count survived too");
}));
